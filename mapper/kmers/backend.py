"""Which sort + run-length encoding a count uses: the cpu one (count.py) or the cuda one (gpu.py).

Both are `sort_count(keys uint64 [C, n], weights uint64 [n] or None) -> (distinct sorted keys, counts)`,
so the rest of the pipeline does not know where it runs. pycuda is imported only when cuda is chosen
(mapper.backends.cuda), never when this module loads.
"""
from mapper.backends.base import cuda_available
from mapper.errors import UsageError
from mapper.kmers.count import sort_count as cpu_sort_count


def select(device):
    """(sort_count, name) for --device cpu, cuda or auto (cuda when a GPU and pycuda are present)."""
    if device == "cpu" or (device == "auto" and not cuda_available()):
        return cpu_sort_count, "cpu"
    if not cuda_available():
        raise UsageError("--device cuda: no CUDA GPU or no pycuda here (install gkmap[gpu]); use --device cpu")
    from mapper.kmers.gpu import CudaSorter
    return CudaSorter().sort_count, "cuda"
