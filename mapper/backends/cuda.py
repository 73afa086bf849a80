"""The PyCUDA layer: one context, the kernels of kernels/*.cu compiled at run time with -D constants and cached,
device buffers (plain, or pooled for per-batch scratch), launches and event timing.

This is the only module that imports pycuda, and it does so inside its functions, on first use: `import mapper`
works on a machine without a GPU. Kernels are compiled per set of constants (READ_LEN, MAX_E, ...) plus the
2-bit code of mapper/alphabet.py (CODE_A .. CODE_N), so numpy and CUDA cannot disagree on the code; PyCUDA
also keeps the binaries in its on-disk cache. Memory is plain device memory (cuMemAlloc, directly or through
PyCUDA's pool), never managed memory.
"""
import functools
from pathlib import Path

import numpy as np

from mapper.alphabet import BASES, CODE_N

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"  # a link to ../kernels in a checkout
BLOCK = 256  # threads per block of every one-thread-per-item launch


def driver():
    """pycuda.driver, with the default context created on first call (pycuda.autoinit pops it at exit)."""
    import pycuda.autoinit  # noqa: F401
    import pycuda.driver as drv
    return drv


def code_defines():
    """The -D constants of the 2-bit code (kernels/common.cuh)."""
    return {**{f"CODE_{b}": i for i, b in enumerate(BASES)}, "CODE_N": CODE_N}


@functools.lru_cache(maxsize=None)
def _module(source, defines):
    driver()
    from pycuda.compiler import SourceModule
    text = (KERNEL_DIR / source).read_text()
    return SourceModule(text, options=[f"-D{k}={v}" for k, v in defines], include_dirs=[str(KERNEL_DIR)],
                        no_extern_c=True)


def function(source, name, **defines):
    """Kernel `name` of kernels/`source` compiled with `defines` (and the code constants); cached per defines."""
    return _module(source, tuple(sorted({**code_defines(), **defines}.items()))).get_function(name)


def to_device(array):
    """A device copy of a host array (contiguous)."""
    return driver().to_device(np.ascontiguousarray(array))


def empty(nbytes):
    """An uninitialised device buffer of nbytes (at least 1)."""
    return driver().mem_alloc(max(int(nbytes), 1))


@functools.lru_cache(maxsize=None)
def _pool():
    """The process's device memory pool (PyCUDA's, over plain cuMemAlloc). Emptied at exit, before the
    context is popped (atexit runs hooks in reverse order of registration, autoinit's first)."""
    import atexit
    driver()
    from pycuda.tools import DeviceMemoryPool
    pool = DeviceMemoryPool()
    atexit.register(pool.stop_holding)
    return pool


def scratch(nbytes):
    """A device buffer of nbytes from the pool: for the per-batch buffers of the mapping stages, whose
    cuMemAlloc / cuMemFree (which waits for the device) per batch cost more than the kernels that use them.
    Freed buffers stay in the pool for the next batch; the pool gives held memory back when an allocation
    would not fit."""
    return _pool().allocate(max(int(nbytes), 1))


def scratch_copy(array):
    """A pooled device copy of a host array."""
    array = np.ascontiguousarray(array)
    buffer = scratch(array.nbytes)
    driver().memcpy_htod(buffer, array)
    return buffer


def memset(buffer, value, nbytes):
    """Set nbytes of a device buffer to the byte value (in stream order with the launches)."""
    driver().memset_d8(buffer, value, nbytes)


def from_device(buffer, shape, dtype):
    return driver().from_device(buffer, shape, np.dtype(dtype))


def launch(kernel, n, *args):
    """Run `kernel(*args)` with one thread per item of n, in blocks of BLOCK (the kernels check tid < n)."""
    if n:
        kernel(*args, block=(BLOCK, 1, 1), grid=(-(-n // BLOCK), 1))


class Timer:
    """`with Timer() as t:` ... then t.seconds: GPU time between two events around the block."""

    def __enter__(self):
        drv = driver()
        self._start, self._end = drv.Event(), drv.Event()
        self._start.record()
        return self

    def __exit__(self, *exc):
        self._end.record()
        self._end.synchronize()
        self.seconds = self._start.time_till(self._end) / 1000.0
        return False
