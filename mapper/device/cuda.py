"""The PyCUDA layer: one context, the kernels of kernels/*.cu compiled at run time with -D constants and cached,
device buffers (plain, or pooled for per-batch scratch), launches and event timing.

This is the only module that imports pycuda, and it does so inside its functions, on first use: `import mapper`
works on a machine without a GPU. Kernels are compiled per set of constants (READ_LEN, MAX_E, ...) plus the
2-bit code of mapper/alphabet.py (CODE_A .. CODE_N), so numpy and CUDA cannot disagree on the code; the
binaries are kept in an on-disk cache (`cubin`). Memory is plain device memory (cuMemAlloc, directly or through
PyCUDA's pool), never managed memory.
"""
import contextlib
import functools
import hashlib
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from mapper.alphabet import BASES, CODE_N
from mapper.cores import usable_cores
from mapper.device import signatures
from mapper.errors import ToolchainError

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"  # a link to ../kernels in a checkout
BLOCK = 256  # threads per block of every one-thread-per-item launch
WARP = 32  # threads per item of a lane kernel (kernels/common.cuh LANES: a warp)
SEED_BY_ROW = False  # seeding: a thread per 4 hits, placed by look-ups in each other chosen list (host.py merges rows)
SEED_SLOTS = None  # hit slots of a seeding launch per thread, at most (None: the working budget's bound only)
HOST_MEMORY = False  # buffers are device memory: upload() copies (host.py: the array itself)
CONTEXT = 1 << 29  # device memory a process's CUDA context and kernels' code take, beside its buffers (a bound
                   # such as --gpu-memory counts it)


def driver():
    """pycuda.driver, with the default context created on first call (pycuda.autoinit pops it at exit)."""
    import pycuda.autoinit  # noqa: F401
    import pycuda.driver as drv
    return drv


def start():
    """The process's CUDA context made now (the first driver() call), not by the first buffer or kernel."""
    driver()


def code_defines():
    """The -D constants of the 2-bit code (kernels/common.cuh)."""
    return {**{f"CODE_{b}": i for i, b in enumerate(BASES)}, "CODE_N": CODE_N}


def _cache_dir():
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gkmap" / "kernels"


@functools.lru_cache(maxsize=None)
def cubin(source, defines, arch):
    """The binary of kernels/`source` compiled with `defines` (sorted (name, value) pairs) for `arch`
    (e.g. "sm_90"), from the on-disk cache (`cached_build`). PyCUDA's own cache asks nvcc for its version and
    runs the preprocessor on every look-up, which costs about half a second per run; this one costs a hash
    and a file read."""
    nvcc = shutil.which("nvcc") or "nvcc"
    return cached_build(source, defines, (arch, nvcc, _mtime(nvcc)), ".cubin",
                        lambda out: [nvcc, "-cubin", f"-arch={arch}", f"-I{KERNEL_DIR}",
                                     *(f"-D{k}={v}" for k, v in defines), "-o", out, str(KERNEL_DIR / source)])


_BUILT = [0.0]  # seconds this process has spent compiling kernels (build_seconds)


def build_seconds():
    """Seconds this process has spent compiling kernels so far (cache misses of `cached_build`, either layer):
    a run's stage timer leaves them out of the stage that happened to compile first (pipeline.Counters),
    so that a fresh machine's first run reports its stages as a warm run would, and the compiling apart."""
    return _BUILT[0]


def cached_build(source, defines, tool, suffix, command):
    """The bytes built from kernels/`source` by `command(output path)` (a compiler's argv), kept in an on-disk
    cache keyed by the sources (the .cu and every .cuh), the defines and `tool` (the compiler, its target),
    so a changed kernel or compiler is never served a stale binary. Each entry ends with the SHA-256 of
    its binary, checked before use: a damaged entry (a disk error, a partial copy of the cache) is built
    again, never loaded. Written by rename: concurrent runs never see a partial file."""
    digest = hashlib.sha256(repr((source, defines, tool)).encode())
    for path in sorted(KERNEL_DIR.glob("*.cuh")) + [KERNEL_DIR / source]:
        digest.update(path.read_bytes())
    cached = _cache_dir() / f"{Path(source).stem}-{digest.hexdigest()[:32]}{suffix}"
    with contextlib.suppress(OSError):
        stored = cached.read_bytes()
        if len(stored) > 32 and hashlib.sha256(stored[:-32]).digest() == stored[-32:]:
            return stored[:-32]
    with tempfile.TemporaryDirectory(prefix="gkmap-build-") as tmp:
        out = Path(tmp) / f"k{suffix}"
        argv = command(str(out))
        compiler = os.path.basename(argv[0])
        started = time.perf_counter()
        try:
            done = subprocess.run(argv, capture_output=True, text=True)
        except FileNotFoundError:
            raise ToolchainError(f"{compiler} not found: it compiles kernels/{source}") from None
        except OSError as error:  # not executable, and the like
            raise ToolchainError(f"{compiler} could not be run for kernels/{source}: {error.strerror}") from None
        _BUILT[0] += time.perf_counter() - started
        if done.returncode:
            raise ToolchainError(f"{compiler} could not compile kernels/{source}: {_first_error(done.stderr)}")
        try:
            binary = out.read_bytes()
        except OSError:
            raise ToolchainError(f"{compiler} wrote nothing for kernels/{source}") from None
    with contextlib.suppress(OSError):  # an unwritable cache only costs the next run a compile
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(binary + hashlib.sha256(binary).digest())
        os.replace(partial, cached)
    return binary


def _first_error(text):
    """The compiler's first line that reports an error (else its first line), for a one-line message. The
    driver's closing summary (`collect2: error: ld returned 1 exit status`) is no cause: a link error's cause
    is the linker's line before it (`ld: cannot find -lgomp`), which is then the first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() and not line.startswith("collect2")]
    return (errors or lines or ["no message"])[0]


def _mtime(program):
    with contextlib.suppress(OSError):
        return os.stat(program).st_mtime_ns
    return None


@functools.lru_cache(maxsize=None)
def _module(source, defines):
    drv = driver()
    return drv.module_from_buffer(cubin(source, defines, "sm_%d%d" % drv.Context.get_device().compute_capability()))


class Kernel:
    """A compiled kernel, prepared with its argument types (device/signatures.py): called as PyCUDA's
    functions are, `kernel(*args, block=, grid=[, stream=])`, with plain ints and device buffers."""

    def __init__(self, function, name, kinds):
        self.name, self.kinds = name, kinds
        self._function = function
        function.prepare(kinds)

    def __call__(self, *args, block, grid, stream=None):
        args = signatures.values(self.kinds, args, self.name)
        if stream is None:
            self._function.prepared_call(grid, block, *args)
        else:
            self._function.prepared_async_call(grid, block, stream, *args)


@functools.lru_cache(maxsize=None)
def _source_text(source):
    return (KERNEL_DIR / source).read_text()


@functools.lru_cache(maxsize=None)
def _kernel(source, defines, name):
    return Kernel(_module(source, defines).get_function(name), name, signatures.signature(_source_text(source), name))


def function(source, name, **defines):
    """Kernel `name` of kernels/`source` compiled with `defines` (and the code constants); cached per defines."""
    return _kernel(source, tuple(sorted({**code_defines(), **defines}.items())), name)


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


_POOL_LIMIT = [None]  # limit_pool's bound on the pool's bytes (None: the device's memory)


def scratch(nbytes):
    """A device buffer of nbytes from the pool: for the per-batch buffers of the mapping stages, whose
    cuMemAlloc / cuMemFree (which waits for the device) per batch cost more than the kernels that use them.
    Freed buffers stay in the pool for the next batch; the pool gives held memory back when an allocation
    would not fit, or would take it past limit_pool's bound."""
    pool, nbytes = _pool(), max(int(nbytes), 1)
    if _POOL_LIMIT[0] is not None and pool.managed_bytes + nbytes > _POOL_LIMIT[0]:
        pool.free_held()
    return pool.allocate(nbytes)


def limit_pool(nbytes):
    """Keep the blocks the pool holds for reuse within `nbytes` of pool memory in all (None: no bound but
    the device's): before an allocation would take the pool past it, the held blocks go back to the device.
    What is in use is the caller's budget (`gkmap kmers count --gpu-memory`); this bounds what the pool
    keeps beside it, which otherwise grows with every size asked for."""
    _POOL_LIMIT[0] = None if nbytes is None else int(nbytes)


def trim_pool(limit):
    """Give the pool's held blocks back to the device when it manages more than `limit` bytes: a run
    within --gpu-memory keeps the buffers that earlier batches freed only while they fit its budget."""
    pool = _pool()
    if pool.managed_bytes > limit:
        pool.free_held()


def scratch_copy(array):
    """A pooled device copy of a host array."""
    array = np.ascontiguousarray(array)
    buffer = scratch(array.nbytes)
    driver().memcpy_htod(buffer, array)
    return buffer


def pagelocked(nbytes):
    """A page-locked (pinned) host buffer of nbytes uint8: the device copies it without the driver's staging."""
    return driver().pagelocked_empty(max(int(nbytes), 1), np.uint8)


def memset(buffer, value, nbytes):
    """Set nbytes of a device buffer to the byte value (in stream order with the launches)."""
    driver().memset_d8(buffer, value, nbytes)


STAGE = 64 << 20  # bytes of the pinned buffer big uploads go through


@functools.lru_cache(maxsize=None)
def _stages():
    """Two pinned buffers of STAGE bytes, the stream their copies run on and an event per buffer."""
    drv = driver()
    return [drv.pagelocked_empty(STAGE, np.uint8) for _ in range(2)], drv.Stream(), [drv.Event(), drv.Event()]


def copy_into(buffer, array):
    """Copy a host array (e.g. an index's memory map) to the start of an existing device buffer, through two
    pinned buffers of STAGE bytes in turn: the array is read once, straight from the page cache, with no
    second host copy and no driver faulting its pages in one by one (which took a second for chr20's
    index), and while the host fills one buffer the other's copy to the device runs (a human index is 13 GB:
    the host's reading and the transfers overlap instead of adding up)."""
    data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    if len(data) <= STAGE // 16:  # small: one plain copy
        if len(data):
            driver().memcpy_htod(buffer, data)
        return
    stages, stream, copied = _stages()
    address = int(buffer)
    with _copiers(len(data)) as copy:
        for k, begin in enumerate(range(0, len(data), STAGE)):
            stage, done = stages[k % 2], copied[k % 2]
            done.synchronize()  # the copy that last read this buffer has finished (an unrecorded event: at once)
            piece = data[begin:begin + STAGE]
            copy(stage[:len(piece)], piece)
            driver().memcpy_htod_async(address + begin, stage[:len(piece)], stream)
            done.record(stream)
        stream.synchronize()


COPY_SLICE = 4 << 20  # bytes of a pinned buffer one host thread fills or empties at a time


@contextlib.contextmanager
def _copiers(nbytes):
    """Yield copy(dst, src) that copies between host arrays of bytes on every usable core, COPY_SLICE bytes a
    thread (inline for a copy of one stage or less). Why: one thread reading an index's memory map into
    the pinned buffers moved 4.4-4.8 GB/s on the H200 host (a 3.1 Gbp index's 11.8 GB of positions: 2.5-2.7
    s), well below what the bus takes; the threads also fault the map's pages in side by side."""
    if nbytes <= STAGE or usable_cores() == 1:
        def copy(dst, src):
            dst[:] = src
        yield copy
        return
    with ThreadPoolExecutor(min(usable_cores(), STAGE // COPY_SLICE)) as pool:
        def copy(dst, src):
            def part(begin):
                dst[begin:begin + COPY_SLICE] = src[begin:begin + COPY_SLICE]
            list(pool.map(part, range(0, len(src), COPY_SLICE)))
        yield copy


def upload(array):
    """A device copy of a big host array (copy_into a new plain allocation)."""
    buffer = empty(array.nbytes)
    copy_into(buffer, array)
    return buffer


def shifted(buffer, by):
    """A kernel pointer argument p with p[i] = buffer[i - by] (bytes): global reference positions index a
    buffer holding the bases from position `by` on (an index part's). Only positions >= by are read."""
    return np.intp(int(buffer) - int(by))


def free_memory():
    """Bytes of device memory free now (cuMemGetInfo), once the pool has given back the blocks it keeps for
    reuse: an earlier run in this process (the API, a benchmark) may have left gigabytes there, and an index
    load that did not count them would map a genome in parts that fits whole."""
    _pool().free_held()
    return driver().mem_get_info()[0]


def from_device(buffer, shape, dtype):
    return driver().from_device(buffer, shape, np.dtype(dtype))


def item(buffer, index, dtype):
    """Item `index` of a device array of `dtype`, copied alone (a count at the end of a scan, say); waits for
    the launches queued before it."""
    out = np.empty(1, np.dtype(dtype))
    driver().memcpy_dtoh(out, int(buffer) + int(index) * out.itemsize)
    return out[0]


FETCH_BYTES = 64   # bytes a fetch_later may copy (a launch's few sums)
FETCH_SLOTS = 64   # fetches that may be outstanding at once: a slot is reused FETCH_SLOTS fetches later


@functools.lru_cache(maxsize=None)
def _fetch_slots():
    """FETCH_SLOTS page-locked slots of FETCH_BYTES, an event each, and the count of fetches made (whose
    next value, modulo FETCH_SLOTS, is the next slot): allocating page-locked memory for every small copy
    would cost more than the copy."""
    drv = driver()
    return (drv.pagelocked_empty(FETCH_SLOTS * FETCH_BYTES, np.uint8), [drv.Event() for _ in range(FETCH_SLOTS)],
            itertools.count())


class _Fetch:
    """A small device buffer's copy to the host, queued in stream order behind the launches before it."""

    def __init__(self, buffer, shape, dtype):
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if nbytes > FETCH_BYTES:
            raise ValueError(f"fetch_later copies at most {FETCH_BYTES} bytes, not {nbytes}")
        pinned, events, fetches = _fetch_slots()
        k = next(fetches) % FETCH_SLOTS
        self._host = pinned[k * FETCH_BYTES:k * FETCH_BYTES + nbytes].view(dtype).reshape(shape)
        self._done = events[k]
        if nbytes:
            driver().memcpy_dtoh_async(self._host, buffer)
        self._done.record()

    def get(self):
        """The values, once the copy is done: waits for the launches queued before the fetch, not after."""
        self._done.synchronize()
        return self._host.copy()


def fetch_later(buffer, shape, dtype):
    """A copy of a small device array (at most FETCH_BYTES) that comes back while the launches queued after
    it run: `.get()` waits for it alone (from_device waits for every launch queued so far). Get it before
    FETCH_SLOTS more fetches are made: its page-locked slot is then reused."""
    return _Fetch(buffer, shape, dtype)


def copy_out(array, buffer):
    """Copy the start of a device buffer into an existing host array (contiguous: e.g. a slice of a bigger
    array), through copy_into's two pinned buffers in turn: while the host copies one into the array, the
    device fills the other (a plain copy into pageable memory ran at 2.2 GB/s: 5.6 s for a human index's
    positions)."""
    if not array.flags.c_contiguous:
        raise ValueError("copy_out needs a contiguous host array")
    data = array.reshape(-1).view(np.uint8)
    if len(data) <= STAGE // 16:
        if len(data):
            driver().memcpy_dtoh(data, int(buffer))
        return
    stages, stream, copied = _stages()
    address, begins = int(buffer), range(0, len(data), STAGE)

    def start(k):
        size = min(STAGE, len(data) - begins[k])
        driver().memcpy_dtoh_async(stages[k % 2][:size], address + begins[k], stream)
        copied[k % 2].record(stream)

    start(0)
    with _copiers(len(data)) as copy:
        for k, begin in enumerate(begins):
            if k + 1 < len(begins):
                start(k + 1)  # its buffer's previous piece was copied out in the round before
            copied[k % 2].synchronize()
            piece = data[begin:begin + STAGE]
            copy(piece, stages[k % 2][:len(piece)])


def launch(kernel, n, *args, block=BLOCK):
    """Run `kernel(*args)` with one thread per item of n, in blocks of `block` threads (the kernels check
    tid < n); the same call as host.launch, whose `block` is the items a host thread takes at a time."""
    if n:
        kernel(*args, block=(block, 1, 1), grid=(-(-int(n) // block), 1))


SCAN_ITEMS = 8  # items a thread of scan.cu takes (a tile: BLOCK x SCAN_ITEMS items)


def exclusive_scan(data, n, wide=False):
    """Exclusive prefix sum, in place, of n uint32 (uint64 if wide) items at device pointer `data`
    (kernels/scan.cu: each tile scanned, the tiles' totals scanned by recursion, then added)."""
    if not n:
        return
    suffix, size = ("u64", 8) if wide else ("u32", 4)
    tiles = -(-int(n) // (BLOCK * SCAN_ITEMS))
    sums = scratch(size * tiles)
    kernel = lambda name: function("scan.cu", f"{name}_{suffix}", ITEMS=SCAN_ITEMS)
    launch(kernel("scan_tiles"), tiles * BLOCK, data, np.uint32(n), sums)
    if tiles > 1:
        exclusive_scan(sums, tiles, wide)
        launch(kernel("scan_add"), tiles * BLOCK, data, np.uint32(n), sums)


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
