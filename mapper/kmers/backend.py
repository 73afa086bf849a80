"""Which sort + run-length encoding a count uses: the cpu one (count.py) or the cuda one (gpu.py).

Both are `sort_count(keys uint64 [C, n], weights uint64 [n] or None) -> (distinct sorted keys, counts)`,
so the rest of the pipeline does not know where it runs. pycuda is imported only when cuda is asked
for (or probed by auto), never when this module loads.
"""
from mapper.errors import UsageError
from mapper.kmers.count import sort_count as cpu_sort_count


def select(device):
    """(sort_count, name) for --device cpu, cuda or auto (cuda when a GPU and pycuda are present)."""
    if device == "cpu":
        return cpu_sort_count, "cpu"
    from mapper.kmers import gpu

    problem = gpu.unavailable()
    if problem is None:
        return gpu.CudaSorter().sort_count, "cuda"
    if device == "cuda":
        raise UsageError(f"--device cuda: {problem}")
    return cpu_sort_count, "cpu"
