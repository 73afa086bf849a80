"""The cuda backend of `gkmap kmers` without a GPU: its Python (gpu.py: buffers, offsets, layouts, spills) and the
element-wise kernels of kernels/kmer_extract.cu and kernels/kmer_codec.cu run on the host, and its tables must
be the cpu backend's bytes.

The kernels of kernels/kmer_sort.cu and scan.cu need a GPU (shared memory, warp votes); here each is replaced
by a numpy twin of its documented contract (the host layer's scan, digit-major radix counts, stable scatter,
run heads...), so that what is checked is everything around them. The real kernels are checked against the
cpu backend on a GPU (tests/kmers/test_kmers_gpu.py). "Device" memory is host memory here: a buffer's int() is
its address, so the pointer arithmetic of gpu.py works unchanged and the compiled kernels
(mapper/device/host.py builds them with g++) read and write it.
"""
import ctypes
import gzip
import weakref

import numpy as np
import pytest

from kmer_reads import half_repeated_fasta
from mapper.device import cuda as real_cuda
from mapper.device import host, using
from mapper.kmers import backend as backend_module
from mapper.kmers import gpu, layout
from mapper.kmers.count import sort_count
from mapper.kmers.counter import count_kmers
from mapper.kmers.store import KmerTable


class Buffer(np.ndarray):
    """A "device" allocation: host bytes whose int() is their address."""

    def __int__(self):
        return self.ctypes.data


def _memory(pointer, dtype, count):
    """A numpy view of `count` items at a raw address."""
    size = np.dtype(dtype).itemsize * count
    if not count:
        return np.empty(0, dtype=dtype)
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(int(pointer))).view(dtype)


def _argument(value):
    if isinstance(value, (Buffer, np.uintp)):
        return ctypes.c_void_p(int(value))
    if isinstance(value, np.uint32):
        return ctypes.c_uint32(int(value))
    if isinstance(value, np.uint64):
        return ctypes.c_uint64(int(value))
    raise TypeError(f"unsupported kernel argument {type(value)}")


class CompiledKernel:
    """A kernel of kmer_extract.cu / kmer_codec.cu built as host C++ (its grid entry point, on one thread)."""

    def __init__(self, lib, name):
        self.fn = getattr(lib, f"{name}__grid")

    def run(self, n, args):
        self.fn(ctypes.c_longlong(int(n)), ctypes.c_int(1), ctypes.c_int(real_cuda.BLOCK), *(_argument(a) for a in args))


class Twin:
    """A numpy stand-in for a kernel of kmer_sort.cu, launched per item (cuda.launch) or per tile (grid)."""

    def __init__(self, body):
        self.body = body

    def run(self, n, args):
        self.body(*args)

    def __call__(self, *args, block, grid):
        self.body(*args)


TILE = real_cuda.BLOCK * gpu.ITEMS
RADIX = 1 << gpu.RADIX_BITS


def _tiles(n):
    return -(-int(n) // TILE)


def _digits(keys, n, shift):
    return ((_memory(keys, np.uint64, int(n)) >> np.uint64(int(shift))) & np.uint64(RADIX - 1)).astype(np.int64)


def _radix_histogram(keys, n, shift, counts):
    n = int(n)
    group = _digits(keys, n, shift) * _tiles(n) + np.arange(n) // TILE
    _memory(counts, np.uint32, RADIX * _tiles(n))[:] = np.bincount(group, minlength=RADIX * _tiles(n))


def _scatter_slots(keys, n, shift, offsets):
    """Each key's output slot: its (digit, tile)'s first slot + its rank among the keys of the same
    (digit, tile), in input order (stability)."""
    n = int(n)
    group = _digits(keys, n, shift) * _tiles(n) + np.arange(n) // TILE
    order = np.argsort(group, kind="stable")
    first = np.searchsorted(group[order], group[order])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - first
    return _memory(offsets, np.uint32, RADIX * _tiles(n))[group].astype(np.int64) + rank


def _radix_scatter_keys(keys_in, keys_out, n, shift, offsets):
    slots = _scatter_slots(keys_in, n, shift, offsets)
    _memory(keys_out, np.uint64, int(n))[slots] = _memory(keys_in, np.uint64, int(n))


def _radix_scatter_pairs(keys_in, values_in, keys_out, values_out, n, shift, offsets):
    slots = _scatter_slots(keys_in, n, shift, offsets)
    _memory(keys_out, np.uint64, int(n))[slots] = _memory(keys_in, np.uint64, int(n))
    _memory(values_out, np.uint32, int(n))[slots] = _memory(values_in, np.uint32, int(n))


def _channels(sorted_keys, stride, channels, n):
    return [_memory(int(sorted_keys) + 8 * c * int(stride), np.uint64, int(n)) for c in range(int(channels))]


def _run_heads(sorted_keys, stride, channels, n, flags):
    head = np.zeros(int(n), dtype=bool)
    head[:1] = True
    for channel in _channels(sorted_keys, stride, channels, n):
        head[1:] |= channel[1:] != channel[:-1]
    _memory(flags, np.uint32, int(n))[:] = head


def _run_compact(sorted_keys, stride, channels, n, flags, run_of, runs, keys_out, starts):
    heads = np.flatnonzero(_memory(flags, np.uint32, int(n)))
    at = _memory(run_of, np.uint32, int(n))[heads]
    _memory(starts, np.uint32, int(runs))[at] = heads
    for c, channel in enumerate(_channels(sorted_keys, stride, channels, n)):
        _memory(int(keys_out) + 8 * c * int(runs), np.uint64, int(runs))[at] = channel[heads]


def _run_lengths(starts, runs, n, counts):
    first = _memory(starts, np.uint32, int(runs)).astype(np.int64)
    _memory(counts, np.uint64, int(runs))[:] = np.diff(np.append(first, int(n)))


def _run_weights(weights, perm, flags, run_of, n, counts):
    n = int(n)
    run = _memory(run_of, np.uint32, n).astype(np.int64) + _memory(flags, np.uint32, n) - 1
    total = _memory(counts, np.uint64, int(run.max()) + 1)
    np.add.at(total, run, _memory(weights, np.uint64, int(_memory(perm, np.uint32, n).max()) + 1)[
        _memory(perm, np.uint32, n)])


def _gather_u64(source, perm, out, n):
    index = _memory(perm, np.uint32, int(n))
    _memory(out, np.uint64, int(n))[:] = _memory(source, np.uint64, int(index.max()) + 1)[index]


TWINS = {
    "radix_histogram": _radix_histogram, "radix_scatter_keys": _radix_scatter_keys,
    "radix_scatter_pairs": _radix_scatter_pairs,
    "iota_u32": lambda out, n: _memory(out, np.uint32, int(n)).__setitem__(slice(None), np.arange(int(n))),
    "fill_u64": lambda out, value, n: _memory(out, np.uint64, int(n)).fill(value),
    "gather_u64": _gather_u64,
    "sum_u64": lambda values, n, total: _memory(total, np.uint64, 1).__iadd__(
        _memory(values, np.uint64, int(n)).sum(dtype=np.uint64)),
    "run_heads": _run_heads, "run_compact": _run_compact, "run_lengths": _run_lengths, "run_weights": _run_weights,
}


class HostDevice:
    """The parts of mapper.device.cuda (and of pycuda.driver) that gpu.py uses, on host memory."""

    BLOCK = real_cuda.BLOCK
    KERNEL_DIR = real_cuda.KERNEL_DIR

    def function(self, source, name, **defines):
        if source == "kmer_sort.cu":
            return Twin(TWINS[name])
        lib = host._library(source, tuple(sorted({**real_cuda.code_defines(), **defines}.items())))
        return CompiledKernel(lib, name)

    def driver(self):
        return self

    def empty(self, nbytes):
        return np.full(max(int(nbytes), 1), 0xA5, dtype=np.uint8).view(Buffer)  # poisoned: unwritten shows

    def to_device(self, array):
        array = np.ascontiguousarray(array)
        buffer = self.empty(array.nbytes)
        buffer[:array.nbytes] = array.reshape(-1).view(np.uint8)
        return buffer

    scratch, scratch_copy = empty, to_device  # the device's pool: plain buffers here

    def trim_pool(self, limit):
        pass  # no pool here

    def limit_pool(self, nbytes):
        pass

    def pagelocked(self, nbytes):
        return np.full(max(int(nbytes), 1), 0xA5, dtype=np.uint8)

    def from_device(self, buffer, shape, dtype):
        return _memory(buffer, dtype, int(np.prod(shape))).reshape(shape).copy()

    def launch(self, kernel, n, *args):
        if n:
            kernel.run(n, args)

    @staticmethod
    def exclusive_scan(data, n, wide=False):
        host.exclusive_scan(data, n, wide)  # scan.cu's contract (tile scans need a GPU: tested there)

    @staticmethod
    def _pointer(value):
        """What pycuda's copies take: an allocation or a Python int, not a numpy scalar (its Boost
        signature refuses np.uint64, which kernel arguments are)."""
        if isinstance(value, np.generic):
            raise TypeError(f"a driver copy takes no numpy scalar pointer ({type(value).__name__})")
        return int(value)

    def memcpy_dtod(self, destination, source, nbytes):
        ctypes.memmove(self._pointer(destination), self._pointer(source), int(nbytes))

    def memcpy_htod(self, destination, array):
        ctypes.memmove(self._pointer(destination), array.ctypes.data, array.nbytes)

    def memcpy_dtoh(self, array, source):
        ctypes.memmove(array.ctypes.data, self._pointer(source), array.nbytes)

    def memset_d8(self, destination, value, nbytes):
        ctypes.memset(self._pointer(destination), value, int(nbytes))


@pytest.fixture(scope="module")
def host_kernels():
    """gpu.CudaKernels on the host: HostDevice is the active device layer for the module's tests (injected
    through the device seam, mapper.device.using)."""
    with using(HostDevice()):
        yield gpu.CudaKernels()


@pytest.fixture(scope="module")
def host_backend(host_kernels):
    """backend.select's cuda factory, on the host."""
    def make(kmer_layout, canonical, slots):
        return gpu.CudaBackend(kmer_layout, canonical, slots, host_kernels)
    make.bytes_per_kmer = gpu.CudaBackend.bytes_per_kmer
    return make


def records(rng, n, max_len):
    """Sequences with N runs, IUPAC letters, lower case, short and empty records."""
    out = []
    for _ in range(n):
        seq = rng.choice(np.frombuffer(b"ACGTACGTACGTacgtNR", dtype=np.uint8), int(rng.integers(0, max_len)))
        out.append(seq.tobytes().decode())
    return out + ["ACGT" * 40, "", "N" * 10]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    rng = np.random.default_rng(11)
    folder = tmp_path_factory.mktemp("host_gpu")
    seqs = records(rng, 40, 300)
    fasta = folder / "r.fa"
    fasta.write_text("".join(f">r{i} x\n" + "\n".join(s[j:j + 50] for j in range(0, len(s), 50)) + "\n"
                             for i, s in enumerate(seqs)))
    odd = folder / "odd.fa"  # CRLF, a comment line, white space: the host's exact parse takes these blocks
    odd.write_text("".join(f">r{i}\r\n# note\r\n {s[:70]} \r\n{s[70:]}\n" for i, s in enumerate(seqs)))
    fastq = folder / "r.fq"
    fastq.write_text("".join(f"@r{i}\n{s}\n+\n{'I' * len(s)}\n" for i, s in enumerate(seqs)))
    crlf = folder / "crlf.fq.gz"  # gzip, and CRLF: the host parses these blocks
    crlf.write_bytes(gzip.compress(fastq.read_bytes().replace(b"\n", b"\r\n")))
    return [fasta, odd, fastq, crlf]


def table_bytes(paths, out, k, canonical, make_backend, memory=2 << 30, min_count=1):
    count_kmers(paths, out, k, canonical, min_count, make_backend, memory, out.parent)
    return out.read_bytes()


@pytest.mark.parametrize("k, canonical", [(1, False), (5, True), (31, False), (32, True), (33, False),
                                          (65, True), (100, False)])
def test_host_cuda_pipeline_equals_cpu(host_backend, inputs, tmp_path, k, canonical):
    """FASTA and FASTQ text blocks parsed by the kernels (and the odd ones on the host), k-mers
    built from packed words, the table laid out and encoded by the codec kernels: the cpu backend's bytes."""
    want = table_bytes(inputs, tmp_path / "cpu.kmers", k, canonical, backend_module.CpuBackend)
    got = table_bytes(inputs, tmp_path / "cuda.kmers", k, canonical, host_backend)
    assert got == want
    with KmerTable(tmp_path / "cuda.kmers") as table:
        assert table.distinct > 0 or k == 100


@pytest.mark.parametrize("k, canonical", [(7, False), (40, True)])
def test_host_cuda_spills_keeps_and_filters_like_cpu(host_backend, inputs, tmp_path, k, canonical, monkeypatch):
    """A tiny budget: runs kept weighted in the buffer (k=7: few distinct) or spilled and merged; and
    --min-count on the device; tables copied back a few bins at a time."""
    monkeypatch.setattr("mapper.kmers.counter.MIN_CAPACITY", 1 << 9)
    monkeypatch.setattr(layout, "GROUP_BYTES", 100)
    memory = (1 << 9) * gpu.CudaBackend.bytes_per_kmer(1 + (k > 32))
    for min_count in (1, 2):
        want = table_bytes(inputs, tmp_path / "cpu.kmers", k, canonical, backend_module.CpuBackend, memory, min_count)
        got = table_bytes(inputs, tmp_path / "cuda.kmers", k, canonical, host_backend, memory, min_count)
        assert got == want


@pytest.mark.parametrize("k, canonical", [(21, True), (40, False)])
def test_host_cuda_merges_held_runs_a_range_of_bins_at_a_time(host_backend, tmp_path, k, canonical, monkeypatch):
    """Runs held on the device that the buffer cannot take together, nothing spilled: merged a range of bins
    at a time (CudaBackend.merge_pieces), with --min-count too, into the cpu backend's table; the copies
    back go through the two staging buffers in turn across the pieces."""
    monkeypatch.setattr("mapper.kmers.counter.MIN_CAPACITY", 1 << 9)
    monkeypatch.setattr("mapper.kmers.counter.MAX_BLOCK_BYTES", 1024)  # the buffer: 5,000 + 1,024 k-mers
    monkeypatch.setattr(layout, "GROUP_BYTES", 100)
    reads = half_repeated_fasta(tmp_path / "r.fa", 5, 12_000)
    memory = 5000 * gpu.CudaBackend.bytes_per_kmer(1 + (k > 32))  # ~9,000 distinct k-mers, 1.8 buffers: none spilled
    for min_count in (1, 2):
        want = table_bytes([reads], tmp_path / "cpu.kmers", k, canonical, backend_module.CpuBackend, memory, min_count)
        stats = count_kmers([reads], tmp_path / "cuda.kmers", k, canonical, min_count, host_backend, memory, tmp_path)
        assert stats.runs_spilled == 0 and "merging" in stats.phases
        assert (tmp_path / "cuda.kmers").read_bytes() == want


class CountingDevice(HostDevice):
    """HostDevice that keeps the bytes of its live "device" buffers and their peak: what the GPU's
    allocations would be without the pool's rounding (which CudaBackend.device_budget adds apart)."""

    def __init__(self):
        self.live = self.peak = 0

    def empty(self, nbytes):
        buffer = super().empty(nbytes)
        self.live += buffer.nbytes
        self.peak = max(self.peak, self.live)
        weakref.finalize(buffer, self._free, buffer.nbytes)
        return buffer

    def _free(self, nbytes):
        self.live -= nbytes

    def to_device(self, array):
        array = np.ascontiguousarray(array)
        buffer = self.empty(array.nbytes)
        buffer[:array.nbytes] = array.reshape(-1).view(np.uint8)
        return buffer

    scratch, scratch_copy = empty, to_device


@pytest.mark.parametrize("k, canonical, fastq, min_count, kmers", [
    (31, True, False, 1, 60_000),  # runs held, then spilled
    (31, True, True, 2, 60_000),   # FASTQ blocks; --min-count: the spilled merge's ranges filtered
    (63, False, True, 1, 60_000),  # two channels: the buffer's share of the budget doubles
    (21, True, False, 1, 180_000),  # runs held and merged a range of bins at a time (nothing spilled)
    (31, True, False, 1, 2_000_000),  # one run, encoded whole
    (31, True, None, 1, 200_000),  # a genome's FASTA: a k-mer a byte, blocks as large as the room
])
def test_host_cuda_device_memory_stays_within_the_budget(tmp_path, monkeypatch, k, canonical, fastq, min_count, kmers):
    """Every "device" byte the cuda backend holds at once (buffer, held runs, sorts, encodings in pieces,
    merges) stays within the budget plus PARSE_BYTES a byte of the largest input block; before the count
    knew the buffer's fixed bytes and encoded runs in pieces, spilling went 19-25 % over. A genome's FASTA
    (a k-mer a byte) too, in blocks of about half the room."""
    reads = half_repeated_fasta(tmp_path / "r.fa", 3, 400_000)
    if fastq is None:
        sequence = "".join(line.split()[1] for line in reads.read_text().split(">")[1:])
        reads.write_text(">genome\n" + "\n".join(sequence[i:i + 60] for i in range(0, len(sequence), 60)) + "\n")
    if fastq:
        records = reads.read_text().split(">")[1:]
        reads = tmp_path / "r.fq"
        reads.write_text("".join(f"@{r.split()[0]}\n{r.split()[1]}\n+\n{'I' * len(r.split()[1])}\n" for r in records))
    if kmers == 180_000:  # blocks much smaller than the budget: a buffer of about the budget's k-mers, whose
        monkeypatch.setattr("mapper.kmers.counter.MAX_BLOCK_BYTES", 16384)  # held runs need merge_pieces
    if fastq is None:  # blocks of about half the room: the second one would take the buffer past it
        monkeypatch.setattr("mapper.kmers.counter.MAX_BLOCK_BYTES", 90_000)
    device = CountingDevice()
    largest = [0]
    add = gpu.CudaBackend.add

    def counted_add(self, block):
        largest[0] = max(largest[0], len(block.data))
        return add(self, block)
    monkeypatch.setattr(gpu.CudaBackend, "add", counted_add)
    memory = kmers * gpu.CudaBackend.bytes_per_kmer(1 + (k > 32))
    with using(device):
        kernels = gpu.CudaKernels()
        device.live = device.peak = 0

        def make(kmer_layout, canonical, slots):
            return gpu.CudaBackend(kmer_layout, canonical, slots, kernels)
        make.bytes_per_kmer = gpu.CudaBackend.bytes_per_kmer
        stats = count_kmers([reads], tmp_path / "cuda.kmers", k, canonical, min_count, make, memory, tmp_path)
    if fastq is not None:
        assert (stats.runs_spilled > 0) == (kmers == 60_000)
        assert ("merging" in stats.phases) == (kmers < 2_000_000)
    assert device.peak <= memory + gpu.PARSE_BYTES * largest[0], (device.peak, memory, largest[0])
    want = table_bytes([reads], tmp_path / "cpu.kmers", k, canonical, backend_module.CpuBackend, memory, min_count)
    assert (tmp_path / "cuda.kmers").read_bytes() == want


def test_host_cuda_sort_count_equals_cpu(host_kernels):
    """CudaKernels.sort_count (the merge's sort) around the twins: one and several channels, weights."""
    rng = np.random.default_rng(2)
    for channels, weighted in [(1, False), (1, True), (3, False), (2, True)]:
        pool = rng.integers(0, 2 ** 64 - 1, (channels, 500), dtype=np.uint64, endpoint=True)
        pool[0, ::3] = pool[0, 0]  # shared channel 0: the later channels decide
        keys = pool[:, rng.integers(0, 500, 5000)]
        weights = rng.integers(1, 2 ** 40, 5000, dtype=np.uint64) if weighted else None
        got, want = host_kernels.sort_count(keys, weights), sort_count(keys, weights)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
