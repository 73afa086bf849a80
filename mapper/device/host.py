"""The device layer on the host: kernels/*.cu compiled as C++ with OpenMP, "device" buffers as numpy arrays.

It offers what mapper/device/cuda.py offers (function, launch, buffers, copies, Timer), so the cuda
mapping backend's own code runs unchanged on a machine without a GPU: that is the cpu backend (one kernel
source, two targets: the cpu and cuda backends cannot drift, and the SAM is the same byte for byte by
construction). Each kernel source is compiled on first use with g++ (-O3 -fopenmp) into the kernel cache
(cuda.cached_build, keyed by the sources, defines and compiler). `SHIM`, put before the source, turns
CUDA's keywords into C++; after every `extern "C" __global__` kernel a grid entry point
`NAME__grid(n, threads, block, args...)` is generated
that runs the kernel body for thread indices 0..n-1 in an OpenMP loop over blocks (one block an
iteration, its threads in order), each OpenMP thread with its own blockIdx/threadIdx (blocks of BLOCK
threads, as on the GPU): no division per item, and thread-locals read without a call. The kernels are
written one thread per item with no block cooperation (tests/host_cuda.py has always run them one
thread at a time), and their atomicAdd is a real atomic on the host (kernels/common.cuh).
"""
import ctypes
import functools
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mapper.cores import usable_cores
from mapper.device import signatures
from mapper.device.cuda import BLOCK, KERNEL_DIR, cached_build, code_defines
from mapper.errors import ToolchainError

WARP = 1  # a lane kernel's item runs as one thread here (kernels/common.cuh LANES)
SEED_BY_ROW = True  # seeding merges each row's lists (seed.cu seed_place_rows): few threads, big caches
# Hit slots of a seeding launch per OpenMP thread, at most. A launch's per-slot buffers (33 bytes a slot) are
# fresh memory when they are large, and a fresh page costs its first touch (the kernel zeroes it; in a
# virtual machine the hypervisor backs it too); a smaller launch's buffers are memory the allocator hands
# back to the next launch. Human chr20, 10,000 reads (5 M slots), one core, development VM: seeding
# 0.65-0.80 s in one launch, 0.44-0.49 s in launches of 256 K or 512 K slots (the clearing of fresh pages was
# 29 % of the run's samples).
SEED_SLOTS = 1 << 19
HOST_MEMORY = True  # buffers are host memory: upload() hands back the array itself, the host's one copy

SHIM = """
#include <algorithm>
using std::min;
struct Dim { int x; };
/* initial-exec: a plain load per access, not a __tls_get_addr call (the shared library is small) */
#define GKMAP_TLS static thread_local __attribute__((tls_model("initial-exec")))
GKMAP_TLS Dim blockDim{1};
GKMAP_TLS Dim blockIdx{0};
GKMAP_TLS Dim threadIdx{0};
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
"""
_threads = [0]  # 0: every core this process may use
# OpenMP threads that find no work sleep instead of spinning (libgomp reads this when the first kernel
# library loads it; a user's own setting wins): spinning between launches burnt 13.6 CPU-s where 5.4 did the
# work, and slowed the work itself (BAM writer, 2 M records, 16 threads, one H100 host: 1.28 -> 0.85 s)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# -fno-semantic-interposition: an exported kernel may be inlined into its grid entry point (else each item
# is a call through the PLT)
FLAGS = ("-O3", "-fopenmp", "-shared", "-fPIC", "-fno-semantic-interposition")


def set_threads(n):
    """OpenMP threads per launch (`-t`); 0 for every core this process may use."""
    _threads[0] = max(0, int(n or 0))


def threads():
    if _threads[0]:
        return _threads[0]
    return usable_cores()


def available():
    """Whether kernels can be built here (a C++ compiler)."""
    return shutil.which("g++") is not None


def with_grid_entries(source_text):
    """The source with a grid entry point (see the module docstring) after every kernel, inside the same
    preprocessor branches as the kernel itself (a source may compile some kernels only under a -D)."""
    out, done = [], 0
    for match in signatures.KERNEL.finditer(source_text):
        name, params = match.groups()
        depth, at = 0, source_text.index("{", match.end())
        while True:  # to the brace closing the kernel's body
            depth += {"{": 1, "}": -1}.get(source_text[at], 0)
            if depth == 0:
                break
            at += 1
        names = [name for _, name in signatures.parameters(params, source_text)]
        out.append(source_text[done:at + 1])
        out.append(f'\nextern "C" void {name}__grid(long long gkmap_n, int gkmap_threads, int gkmap_block, {params}) {{\n'
                   f"    long long gkmap_blocks = (gkmap_n + gkmap_block - 1) / gkmap_block;\n"
                   f"#pragma omp parallel for num_threads(gkmap_threads) schedule(dynamic, 1)\n"
                   f"    for (long long gkmap_b = 0; gkmap_b < gkmap_blocks; ++gkmap_b) {{\n"
                   f"        blockDim.x = gkmap_block;\n        blockIdx.x = (int)gkmap_b;\n"
                   f"        long long gkmap_end = std::min(gkmap_n, (gkmap_b + 1) * gkmap_block);\n"
                   f"        for (long long gkmap_t = gkmap_b * gkmap_block; gkmap_t < gkmap_end; ++gkmap_t) {{\n"
                   f"            threadIdx.x = (int)(gkmap_t - gkmap_b * gkmap_block);\n"
                   f"            {name}({', '.join(names)});\n        }}\n    }}\n}}\n")
        done = at + 1
    out.append(source_text[done:])
    return "".join(out)


@functools.lru_cache(maxsize=None)
def _source_text(source):
    return (KERNEL_DIR / source).read_text()


@functools.lru_cache(maxsize=None)
def _generator():
    """This module's text and the kernel parser's: the C++ a kernel is compiled from is its source (which
    cached_build hashes) put through SHIM and with_grid_entries (which finds kernels with signatures.py), so
    the cache key holds these instead of the generated text, which is then made only on a cache miss
    (generating it took ~6 ms a run)."""
    return Path(__file__).read_text() + Path(signatures.__file__).read_text()


@functools.lru_cache(maxsize=None)
def _library(source, defines):
    compiler = shutil.which("g++")
    if compiler is None:
        raise ToolchainError("no C++ compiler (g++) to build the cpu backend's kernels")
    shim = SHIM.replace("BLOCK_SIZE", str(BLOCK))
    with tempfile.TemporaryDirectory(prefix="gkmap-host-") as tmp:
        cpp = Path(tmp) / f"{Path(source).stem}.cpp"

        def command(out):
            cpp.write_text(shim + with_grid_entries(_source_text(source)))
            return [compiler, *FLAGS, f"-I{KERNEL_DIR}", *(f"-D{k}={v}" for k, v in defines), "-o", out, str(cpp)]

        binary = cached_build(source, defines, ("host", compiler, os.stat(compiler).st_mtime_ns, FLAGS, shim,
                                                _generator()), ".so", command)
        built = Path(tmp) / "lib.so"
        built.write_bytes(binary)
        return ctypes.CDLL(str(built))  # dlopen keeps the mapping after the file is removed


_CTYPES = {"P": ctypes.c_void_p, "i": ctypes.c_int, "I": ctypes.c_uint, "q": ctypes.c_longlong,
           "Q": ctypes.c_ulonglong}


class HostKernel:
    """A kernel's grid entry point, its argument types from the kernel's signature; called by `launch`."""

    def __init__(self, lib, name, kinds):
        self.name, self.kinds = name, kinds
        self.entry = getattr(lib, f"{name}__grid")
        self.entry.argtypes = [ctypes.c_longlong, ctypes.c_int, ctypes.c_int] + [_CTYPES[k] for k in kinds]
        self.entry.restype = None


def function(source, name, **defines):
    """Kernel `name` of kernels/`source` built for the host with `defines` (and the code constants)."""
    return HostKernel(_library(source, tuple(sorted({**code_defines(), **defines}.items()))), name,
                      signatures.signature(_source_text(source), name))


def launch(kernel, n, *args, block=BLOCK, workers=None):
    """Run the kernel for thread indices 0..n-1 (blocks of `block`) over `workers` OpenMP threads (default
    `threads()`); a numpy array argument passes its data pointer. The arrays are held by this frame for
    the call."""
    if n:
        plain = [a.ctypes.data if isinstance(a, np.ndarray) else a for a in args]  # `args` keeps the arrays alive
        kernel.entry(int(n), workers or threads(), block, *signatures.values(kernel.kinds, plain, kernel.name))


def to_device(array):
    return np.ascontiguousarray(array).view(np.uint8).reshape(-1).copy()


def empty(nbytes):
    return np.empty(max(int(nbytes), 1), dtype=np.uint8)


def memset(buffer, value, nbytes):
    buffer[:nbytes] = value


scratch, scratch_copy = empty, to_device  # the device's pooled buffers: plain arrays here


def trim_pool(limit):
    """No pool to trim: host buffers go back to the allocator when they are dropped."""


def limit_pool(nbytes):
    """No pool to bound (trim_pool)."""


def copy_into(buffer, array):
    data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    buffer[:len(data)] = data


def upload(array):
    """The array itself as a byte buffer, no copy (an index's memory map stays one copy in the page cache):
    kernels only read what is uploaded."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def shifted(buffer, by):
    return np.intp(buffer.ctypes.data - int(by))


def start():
    """Nothing to start on the host (cuda.start's counterpart)."""


def free_memory():
    return 1 << 50  # host memory is the page cache's: the index is never cut into parts here


def from_device(buffer, shape, dtype):
    count = int(np.prod(shape))
    if count == 0:
        return np.empty(shape, dtype=dtype)
    return buffer.view(np.dtype(dtype))[:count].reshape(shape).copy()


def item(buffer, index, dtype):
    """cuda.item's counterpart: item `index` of the buffer viewed as `dtype`."""
    return buffer.view(np.dtype(dtype))[int(index)]


class _Fetched(NamedTuple):
    value: np.ndarray

    def get(self):
        return self.value


def fetch_later(buffer, shape, dtype):
    """from_device at once (cuda.fetch_later's counterpart): a host launch has finished when it returns."""
    return _Fetched(from_device(buffer, shape, dtype))


def copy_out(array, buffer):
    array.reshape(-1).view(np.uint8)[:] = buffer[:array.nbytes]


def exclusive_scan(data, n, wide=False):
    """cuda.exclusive_scan's counterpart: numpy's cumsum over the n uint32 (uint64 if wide) items at `data`
    (a buffer, or a pointer from `shifted`)."""
    if not n:
        return
    dtype = np.dtype(np.uint64 if wide else np.uint32)
    address = data.ctypes.data if isinstance(data, np.ndarray) else int(data)
    items = np.ctypeslib.as_array((ctypes.c_uint8 * (dtype.itemsize * int(n))).from_address(address)).view(dtype)
    total = np.cumsum(items, dtype=dtype)
    items[1:] = total[:-1]
    items[0] = 0


class Timer:
    """Wall time of the block (the GPU layer times with CUDA events)."""

    def __enter__(self):
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self._start
        return False
