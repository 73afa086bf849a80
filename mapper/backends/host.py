"""Kernels of kernels/*.cu compiled as host C++ with OpenMP: the cpu backend's compiled core.

One source, two targets: the cpu backend runs the very kernel the GPU runs, so the two cannot drift (the
SAM is the same byte for byte by construction, not by a second implementation kept in step). A kernel
source opts in with a host entry point under `#ifdef GKMAP_HOST` that runs the kernel body for every
"thread" index in an OpenMP loop; `SHIM` turns CUDA's keywords into C++ and gives each OpenMP thread its own
`threadIdx`. The library is built on first use with g++ (-O3 -fopenmp) into the kernel cache
(cuda.cached_build, keyed by the sources, defines and compiler). Without a compiler the cpu backend uses its
numpy twin (mapper/myers.py) and says so once on stderr.
"""
import ctypes
import functools
import logging
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from mapper.backends.cuda import KERNEL_DIR, cached_build, code_defines

log = logging.getLogger("gkmap")

SHIM = """
#include <algorithm>
using std::min;
struct Dim { int x; };
static Dim blockIdx{0}, blockDim{1};
static thread_local Dim threadIdx{0};
extern "C" void gkmap_set_thread(int i) { threadIdx.x = i; }
#define GKMAP_HOST 1
#define __global__
#define __host__
#define __device__
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline unsigned int __brev(unsigned int x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  x = ((x >> 8) & 0x00FF00FFu) | ((x & 0x00FF00FFu) << 8);
  return (x >> 16) | (x << 16);
}
#define __forceinline__ inline
#define __restrict__
#include "SOURCE"
"""


def threads():
    """Cores this process may use (its CPU affinity, e.g. a cluster job's share)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@functools.lru_cache(maxsize=None)
def library(source, **defines):
    """ctypes library of kernels/`source` built for the host, or None (said once) when no compiler works."""
    compiler = shutil.which("g++")
    if compiler is None:
        log.warning("no C++ compiler (g++): the cpu backend runs its numpy fallback, several times slower")
        return None
    merged = tuple(sorted({**code_defines(), **defines}.items()))
    with tempfile.TemporaryDirectory(prefix="gkmap-host-") as tmp:
        shim = Path(tmp) / f"{Path(source).stem}.cpp"
        shim.write_text(SHIM.replace("SOURCE", str(KERNEL_DIR / source)))
        try:
            binary = cached_build(source, merged, ("host", compiler, os.stat(compiler).st_mtime_ns), ".so",
                                  lambda out: [compiler, "-O3", "-fopenmp", "-shared", "-fPIC", f"-I{KERNEL_DIR}",
                                               *(f"-D{k}={v}" for k, v in merged), "-o", out, str(shim)])
        except (RuntimeError, OSError) as error:
            log.warning("the cpu backend's compiled core could not be built (%s): numpy fallback", error)
            return None
        built = Path(tmp) / "lib.so"
        built.write_bytes(binary)
        return ctypes.CDLL(str(built))  # dlopen keeps the mapping after the file is removed


def call(entry, *values):
    """Call a host entry point: arrays by address (kept alive by this frame for the call), np.int64 as long
    long, other numbers as int."""
    converted = []
    for value in values:
        if isinstance(value, np.ndarray):
            if not value.flags.c_contiguous:
                raise ValueError("host kernels take contiguous arrays")
            converted.append(ctypes.c_void_p(value.ctypes.data))
        elif isinstance(value, np.int64):
            converted.append(ctypes.c_longlong(int(value)))
        else:
            converted.append(ctypes.c_int(int(value)))
    entry(*converted)
