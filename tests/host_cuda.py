"""A stand-in for mapper.backends.cuda that runs kernels/*.cu on the CPU, for CI (which has no GPU).

Each kernel source is compiled as host C++ (g++, which nvcc needs anyway) with the cpu backend's shim for the
CUDA keywords (mapper/backends/host.py); a launch calls the kernel once per thread index. Device buffers are numpy byte arrays. With it,
the cuda backend's own Python code (chunking, prefix sums, compaction, result assembly) and its kernels run
unchanged in CI; on a GPU the same tests run against the real device (tests marked `gpu`).
"""
import ctypes
import functools
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from mapper.backends.cuda import KERNEL_DIR, code_defines
from mapper.backends.host import SHIM

_BUILD = Path(tempfile.mkdtemp(prefix="gkmap-host-cuda-"))


@functools.lru_cache(maxsize=None)
def _library(source, defines):
    compiler = shutil.which("g++")
    if compiler is None:
        raise RuntimeError("g++ is needed to run kernels on the host (nvcc needs it too)")
    stem = f"{Path(source).stem}_{abs(hash(defines))}"
    shim = _BUILD / f"{stem}.cpp"
    shim.write_text(SHIM.replace("SOURCE", source))
    lib = _BUILD / f"lib{stem}.so"
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", f"-I{KERNEL_DIR}", *(f"-D{k}={v}" for k, v in defines),
                    "-o", str(lib), str(shim)], check=True)
    return ctypes.CDLL(str(lib))


class HostKernel:
    def __init__(self, lib, name):
        self._set_thread = lib.gkmap_set_thread
        self._fn = getattr(lib, name)

    def run(self, n, args):
        converted = []
        for a in args:
            if isinstance(a, np.ndarray):
                converted.append(ctypes.c_void_p(a.ctypes.data))
            elif isinstance(a, np.int64):
                converted.append(ctypes.c_longlong(int(a)))
            elif isinstance(a, (np.int32, int)):
                converted.append(ctypes.c_int(int(a)))
            else:
                raise TypeError(f"unsupported kernel argument {type(a)}")
        for i in range(n):
            self._set_thread(i)
            self._fn(*converted)


def function(source, name, **defines):
    return HostKernel(_library(source, tuple(sorted({**code_defines(), **defines}.items()))), name)


def to_device(array):
    return np.ascontiguousarray(array).view(np.uint8).reshape(-1).copy()


def empty(nbytes):
    return np.full(max(int(nbytes), 1), 0xA5, dtype=np.uint8)  # poisoned: unwritten output shows


def memset(buffer, value, nbytes):
    buffer[:nbytes] = value


scratch, scratch_copy = empty, to_device  # the device's pooled buffers: plain arrays here too


def copy_into(buffer, array):
    data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    buffer[:len(data)] = data


upload = to_device


def shifted(buffer, by):
    return np.intp(buffer.ctypes.data - int(by))


def free_memory():
    return 1 << 40  # the host has "room" for any test index; tests pass a budget to force parts


def from_device(buffer, shape, dtype):
    count = int(np.prod(shape))
    if count == 0:
        return np.empty(shape, dtype=dtype)
    return buffer.view(np.dtype(dtype))[:count].reshape(shape).copy()


def launch(kernel, n, *args):
    kernel.run(n, args)


class Timer:
    """Wall time of the block (the device layer times with CUDA events)."""

    def __enter__(self):
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self._start
        return False
