"""Backends run the pipeline's heavy stages (base.py: the interface); `get_backend` picks one. It sits
here, above the backends it chooses among, which import base.py but never this dispatcher."""
import importlib.util

from mapper.device import cuda_available
from mapper.errors import UsageError

__all__ = ["get_backend"]


def get_backend(device, threads=None):
    """'cpu', 'cuda' or 'auto' (cuda when a GPU and the cuda mapping backend are there, else cpu); `threads`:
    the cpu backend's mapping threads (None: every core the process may use)."""
    from mapper.backends.cpu import cpu_backend
    if device == "cpu":
        return cpu_backend(threads)
    if device in ("cuda", "auto"):
        if device == "cuda" and not cuda_available():
            raise UsageError("--device cuda: no CUDA GPU or no pycuda here (install gkmap[gpu]); use --device cpu")
        if importlib.util.find_spec("mapper.backends.cuda_mapping") is not None and cuda_available():
            from mapper.backends.cuda_mapping import CudaBackend
            return CudaBackend()
        if device == "cuda":
            raise UsageError("--device cuda: the cuda mapping backend is not part of this version yet; use --device cpu")
        return cpu_backend(threads)
    raise UsageError(f"--device must be auto, cpu or cuda, not {device!r}")
