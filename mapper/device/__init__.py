"""The device seam: the device layers (cuda.py: PyCUDA on a GPU; host.py: the same kernels compiled as C++
with OpenMP), and which of them the GPU-style code (backends/cuda_mapping.py, filters/_gpu.py) runs on.

`layer` stands for a device layer module (mapper/device/cuda.py, PyCUDA on a GPU; mapper/device/host.py,
the same kernels compiled for the host): every attribute read is forwarded to the layer active in the
current context, by default the GPU's. The cpu backend runs the cuda backend's code inside `using(host)`,
so one body of code drives both targets and tests inject a layer the same way, with no monkeypatching.
"""
import contextlib
import contextvars
import importlib.util
import os
import shutil
import subprocess

from mapper.device import cuda as gpu  # the default layer
from mapper.errors import UsageError

DEVICES = ("auto", "cpu", "cuda")   # every command's --device

_active = contextvars.ContextVar("gkmap_device_layer", default=gpu)


def current():
    """The active layer module."""
    return _active.get()


@contextlib.contextmanager
def using(module):
    """Make `module` the active layer for the block (in this context: threads start with the default)."""
    token = _active.set(module)
    try:
        yield module
    finally:
        _active.reset(token)


class _Layer:
    def __getattr__(self, name):
        return getattr(_active.get(), name)


layer = _Layer()


def cuda_available():
    """True when pycuda is importable and a CUDA device answers."""
    if importlib.util.find_spec("pycuda") is None:
        return False
    try:
        import pycuda.driver as drv
        drv.init()
        return drv.Device.count() > 0
    except Exception:  # any driver failure means "no usable GPU"
        return False


def resolve_device(device):
    """'cpu' or 'cuda' for --device auto|cpu|cuda (auto: cuda when pycuda and a GPU are there); the one
    UsageError every command gives for a GPU asked for and absent."""
    if device not in DEVICES:
        raise UsageError(f"--device must be one of {', '.join(DEVICES)}, not {device!r}")
    if device == "auto":
        return "cuda" if cuda_available() else "cpu"
    if device == "cuda" and not cuda_available():
        raise UsageError("--device cuda: no CUDA GPU or no pycuda here (install gkmap[gpu]); use --device cpu")
    return device


def visible_gpus():
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries: that variable's list when it is set,
    else every GPU `nvidia-smi -L` lists. No CUDA call: a Dask run's client needs no GPU context of its own."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [entry.strip() for entry in listed.split(",") if entry.strip()]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    out = subprocess.run([smi, "-L"], capture_output=True, text=True, check=False)
    gpus = [line for line in out.stdout.splitlines() if line.startswith("GPU ")] if out.returncode == 0 else []
    return [str(i) for i in range(len(gpus))]
