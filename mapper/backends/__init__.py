"""Backends run the pipeline's heavy stages (base.py: the interface); `get_backend` picks one. It sits
here, above the backends it chooses among, which import base.py but never this dispatcher."""
from mapper.device import resolve_device

__all__ = ["get_backend"]


def get_backend(device, threads=None, memory=None):
    """'cpu', 'cuda' or 'auto' (device.resolve_device); `threads`: the cpu backend's mapping threads (None:
    every core the process may use); `memory`: the cpu backend's working budget in bytes (--memory)."""
    from mapper.backends.cpu import cpu_backend
    if resolve_device(device) == "cpu":
        return cpu_backend(threads, memory)
    from mapper.backends.cuda_mapping import CudaBackend
    return CudaBackend()
