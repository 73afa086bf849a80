"""The backends of `gkmap kmers count`: where phase 1 (blocks -> sorted, counted runs) and the encoding of a run
into table bytes happen. counter.py drives either one through the same methods:

    bytes_per_kmer(C)    what one buffered k-mer of C channels costs at the peak of reduce() (the budget):
                         its share of the buffer (fixed_bytes, allocated for the whole count) and the work
                         of sorting it (work_bytes(C))
    add(block)           the k-mers of a reading.Block into the buffer (`buffered` grows: a bound, or exact)
    settle() -> n        the exact number of k-mers in the buffer (waits for work in flight)
    reduce() -> run      sort + run-length encoding of the buffer (emptied): distinct keys and counts
    keep(run)            a (small) run back into the buffer, its counts as weights
    merge(runs, limit) -> run   runs held in memory merged into one (None where it would not fit the budget)
    encode(run, min_count) -> EncodedTable     the table's bins, bytes as store.py writes them
    encode_pieces(run, min_count, room)        the same as store.write_table's pieces, within `room` bytes
    block_buffer         None, or the allocator of the buffers input blocks are read into (cuda:
                         pin_blocks(block_bytes) allocates them first, in the thread with the device;
                         release(data) frees one again)
    read_ahead           how many blocks the counter's reading thread may read ahead of add()
    merge_pieces         None, or (runs, min_count, room, spilled tables, host bytes) -> EncodedTables of bin
                         ranges: the merge where merge() gives None or runs were spilled
    memory_run(run)      (cpu) the run as a merge input (read_bin), when runs were spilled
    sort_count(keys, weights)                  (cpu) count.sort_count, for the per-bin merge of spilled runs

- `CpuBackend`: blocks are parsed (fasta.py, fastq.py) and cut into pieces of PIECE bases, whose k-mers are
  built by kernels/kmer_extract.cu's kmer_keys_run (one walk over a piece; the cuda backend builds the
  same keys with three parallel kernels of that file), compiled as host C++ by mapper.device.host, and
  grouped by bin (a stable byte sort), each piece a task of a thread pool (the compiled kernels and numpy
  release the GIL). reduce() then sorts and counts bin by bin, a task per bin over the bin's slices of all
  pieces (one np.sort per bin: the only sort a k-mer goes through), and encode() compresses bin by bin
  (layout.encode_bins: kernels/kmer_codec.cu on the host).
- `CudaBackend` (gpu.py): the same on the GPU, the host only reading and writing files.

`select(device)` picks one; pycuda is imported only when cuda is chosen (mapper.device.cuda).
"""
import threading
from collections import deque
from concurrent.futures import Future

import numpy as np

from mapper.device import cuda_available, host
from mapper.device.cuda import BLOCK
from mapper.errors import UsageError
from mapper.kmers.binning import bin_bits, bin_bounds, shift_of
from mapper.kmers.count import sort_count
from mapper.kmers.fasta import CODE_ODD, CODE_SKIP
from mapper.kmers.layout import encode_bins
from mapper.kmers.workers import pool

PIECE = 1 << 22      # bases per extraction task of the cpu backend
PARSE_AHEAD = 2      # text blocks parsed ahead of the one being cut into pieces

def _done(value):
    future = Future()
    future.set_result(value)
    return future


class BinnedRun:
    """A sorted, counted run held bin by bin: bins[b] = (keys uint64 [C, n_b], counts uint64 [n_b]). Its
    length (distinct k-mers) is fixed when made: encode() and merge() let its bins go one by one."""

    def __init__(self, bins):
        self.bins = bins
        self.distinct = sum(len(counts) for _, counts in bins)

    def __len__(self):
        return self.distinct

    def read_bin(self, b):
        return self.bins[b]


_SCRATCH = threading.local()


def scratch(name, n, dtype):
    """A per-thread working array of n items, reused from piece to piece (grown when too small): fresh memory
    costs a page fault and a zeroed page per 4 KB touched, a fifth of the cpu backend's time on 1 M reads."""
    arrays = _SCRATCH.__dict__.setdefault("arrays", {})
    array = arrays.get(name)
    if array is None or len(array) < n:
        array = arrays[name] = np.empty(n, dtype=dtype)
    return array[:n]


class HostExtractor:
    """The k-mers of a piece's codes on the host: keys uint64 [C, m] in order of position (a view of the
    calling thread's scratch: valid until its next call), by kernels/kmer_extract.cu's kmer_keys_run on one
    OpenMP thread (the pool runs the pieces side by side): one walk over the codes, where the cuda backend's
    kernels for the same keys (pack_words, kmer_flags, kmer_keys) take three passes and a read of the packed
    words per window, 3-5x slower on a host thread (kmer_keys_run's comment has the figures). Same contract
    as encode.extract, which stays as the slow, readable twin."""

    def __init__(self, layout, canonical):
        self.k, self.C, self.canonical = layout.k, layout.channels, canonical
        self.fn = host.function("kmer_extract.cu", "kmer_keys_run", BLOCK=BLOCK, CODE_SKIP=CODE_SKIP,
                                CODE_ODD=CODE_ODD)

    def __call__(self, codes):
        k, n = self.k, len(codes)
        windows = n - k + 1
        if windows <= 0:
            return np.empty((self.C, 0), dtype=np.uint64)
        codes = np.ascontiguousarray(codes, dtype=np.uint8)
        keys = scratch("keys", self.C * windows, np.uint64).reshape(self.C, windows)
        found = scratch("found", 1, np.uint32)
        host.launch(self.fn, 1, codes, np.uint32(n), np.uint32(k), np.uint32(self.C), np.uint32(self.canonical),
                    keys, np.uint32(windows), found, workers=1)
        return keys[:, :int(found[0])]


class CpuBackend:
    """Compiled extraction and numpy sorting, with a thread pool over pieces of input and over bins (module
    docstring)."""

    name = "cpu"
    block_buffer = None  # each block in a fresh buffer (reading.py): the pool parses it after add() returns
    merge_pieces = None  # runs are always merged in memory (merge); spilled ones bin by bin (merge.py)

    fixed_bytes = 0  # no buffer allocated ahead: a block's pieces are its own arrays
    read_ahead = 2   # text blocks read ahead of add() by the counter's reading thread

    @staticmethod
    def bytes_per_kmer(channels):
        """The pieces' keys (8 C) and the run they become, at most one distinct k-mer per k-mer (8 C + 8);
        a bin's sort copy is one bin's worth, within the constant."""
        return 16 * channels + 8

    work_bytes = bytes_per_kmer

    def __init__(self, layout, canonical, capacity=None):
        self.layout, self.canonical, self.k = layout, canonical, layout.k
        self.bins = 2 ** bin_bits(self.k)
        self.shift = np.uint64(shift_of(self.k))
        self.extract = HostExtractor(layout, canonical)
        self.parsing = deque()  # (future codes, carry) of text blocks, in input order
        self.pieces = []        # futures of (keys grouped by bin, bounds [bins + 1], weights or None)
        self.tail = np.empty(0, dtype=np.uint8)  # the last k - 1 codes of the previous block
        self.buffered = 0       # bases added since the last reduce (a bound on the k-mers)
        self.occurrences = 0    # k-mers extracted so far

    def add(self, block):
        self.parsing.append((pool().submit(block.codes), block.carry))
        self.buffered += block.max_bases
        while len(self.parsing) > PARSE_AHEAD:
            self._cut_next()

    def settle(self):
        """The buffer's exact k-mer count: `buffered` counts a block's bases, which for reads overstates
        their k-mers by k - 1 per read (and by the Ns); the budget is checked against this instead."""
        while self.parsing:
            self._cut_next()
        self.buffered = sum(future.result()[0].shape[1] for future in self.pieces)
        return self.buffered

    def _cut_next(self):
        future, carry = self.parsing.popleft()
        codes = future.result()
        if carry and len(self.tail):
            codes = np.concatenate([self.tail, codes])
        self.tail = codes[len(codes) - min(self.k - 1, len(codes)):].copy()
        for start in range(0, len(codes) - self.k + 1, PIECE):
            self.pieces.append(pool().submit(self._piece, codes[start:start + PIECE + self.k - 1]))

    def _piece(self, codes):
        """A piece's k-mers grouped by bin, in an array of the piece's own (the extracted keys are the
        thread's scratch). One channel: sorted (numpy's SIMD sort; the bin's sort then sorts sorted slices,
        cheaper than grouping by bin first); several: grouped by bin with numpy's stable sort of bytes (a
        radix sort). A scatter kernel with an atomic per key was slower on the host: each atomic drains the
        store buffer."""
        keys = self.extract(codes)
        if keys.shape[0] == 1:
            keys = np.sort(keys, axis=1)
            return keys, bin_bounds(keys, self.k), None
        bins = (keys[0] >> self.shift).astype(np.uint8)  # bin_bits <= 8
        keys = np.take(keys, np.argsort(bins, kind="stable"), axis=1)
        bounds = np.concatenate(([0], np.cumsum(np.bincount(bins, minlength=self.bins))))
        return keys, bounds, None

    def _reduce_bin(self, pieces, b):
        parts = [(keys[:, bounds[b]:bounds[b + 1]], weights) for keys, bounds, weights in pieces]
        keys = np.concatenate([p[0] for p in parts] or [np.empty((self.layout.channels, 0), np.uint64)], axis=1)
        weights = None
        if any(w is not None for _, _, w in pieces):
            weights = np.concatenate([np.ones(keys_b.shape[1], dtype=np.uint64) if w is None
                                      else w[bounds[b]:bounds[b + 1]]
                                      for (keys_b, _), (_, bounds, w) in zip(parts, pieces)])
        return sort_count(keys, weights, own=True)  # the concatenation is this task's own

    def reduce(self):
        while self.parsing:
            self._cut_next()
        pieces = [future.result() for future in self.pieces]
        self.occurrences += sum(keys.shape[1] for keys, _, weights in pieces if weights is None)
        self.pieces, self.buffered = [], 0
        return BinnedRun(list(pool().map(lambda b: self._reduce_bin(pieces, b), range(self.bins))))

    def keep(self, run):
        keys = np.concatenate([keys for keys, _ in run.bins], axis=1)
        counts = np.concatenate([counts for _, counts in run.bins])
        bounds = np.concatenate(([0], np.cumsum([len(counts) for _, counts in run.bins])))
        self.pieces, self.buffered = [_done((keys, bounds, counts))], len(counts)

    def merge(self, runs, limit=None):
        """Runs held in memory merged bin by bin (their counts as weights), a task per bin; each bin of the
        inputs is let go once merged, so the peak is the runs plus one bin (`limit` is the cuda backend's)."""
        def merge_bin(b):
            parts = [run.bins[b] for run in runs]
            for run in runs:
                run.bins[b] = None
            return sort_count(np.concatenate([keys for keys, _ in parts], axis=1),
                              np.concatenate([counts for _, counts in parts]))
        return BinnedRun(list(pool().map(merge_bin, range(self.bins))))

    def encode(self, run, min_count=1):
        """The run's table bins by kernels/kmer_codec.cu compiled for the host, a bin at a time
        (layout.encode_bins), filtered by min_count."""
        if min_count > 1:
            run.bins = [(keys[:, counts >= np.uint64(min_count)], counts[counts >= np.uint64(min_count)])
                        for keys, counts in run.bins]
        return encode_bins(run.bins, self.layout.channels, self.k, lambda fn, items: pool().map(fn, items))

    def encode_pieces(self, run, min_count, room):
        """encode() as one piece: it works a bin at a time whatever `room` is."""
        return [self.encode(run, min_count)]

    def memory_run(self, run):
        return run

    def sort_count(self, keys, weights=None):
        return sort_count(keys, weights)


def select(device):
    """(backend factory (layout, canonical, capacity) -> backend, name) for --device cpu, cuda or auto."""
    if device == "cpu" or (device == "auto" and not cuda_available()):
        return CpuBackend, "cpu"
    if not cuda_available():
        raise UsageError("--device cuda: no CUDA GPU or no pycuda here (install gkmap[gpu]); use --device cpu")
    from mapper.kmers.gpu import CudaBackend, CudaKernels
    kernels = CudaKernels()

    def make_cuda(layout, canonical, capacity):
        return CudaBackend(layout, canonical, capacity, kernels)
    make_cuda.bytes_per_kmer = CudaBackend.bytes_per_kmer
    make_cuda.device_budget = CudaBackend.device_budget
    return make_cuda, "cuda"
