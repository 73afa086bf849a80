"""The backends of `gkmap kmers count`: where phase 1 (blocks -> sorted, counted runs) and the encoding of a run
into table bytes happen. counter.py drives either one through the same methods:

    add(block)           the k-mers of a reading.Block into the buffer (`buffered` grows)
    reduce() -> run      sort + run-length encoding of the buffer (emptied): distinct keys and counts
    keep(run)            a (small) run back into the buffer, its counts as weights
    encode(run, min_count) -> EncodedTable     the table's bins, bytes as store.py writes them
    memory_run(run)      the run as a merge input (read_bin), when runs were spilled
    sort_count(keys, weights)                  count.sort_count, for the per-bin merge of spilled runs

- `CpuBackend` (numpy): blocks are parsed (fasta.py) and cut into pieces of PIECE bases, whose k-mers are
  extracted (encode.py) and sorted (count.py) or, for several channels, grouped by bin, each piece a task
  of a thread pool (numpy releases the GIL in its loops). reduce() then sorts and counts bin by bin, a
  task per bin over the bin's slices of all pieces, and encode() compresses bin by bin (codec.py).
- `CudaBackend` (gpu.py): the same on the GPU, the host only reading and writing files.

`select(device)` picks one; pycuda is imported only when cuda is chosen (mapper.device.cuda).
"""
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from mapper.device import cuda_available
from mapper.errors import UsageError
from mapper.kmers import codec
from mapper.kmers.binning import bin_bits, bin_bounds, bin_of
from mapper.kmers.count import sort_count
from mapper.kmers.encode import extract

PIECE = 1 << 22      # bases per extraction task of the cpu backend
PARSE_AHEAD = 2      # text blocks parsed ahead of the one being cut into pieces

_POOL = None


def pool():
    """The process's thread pool (one worker per CPU)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="gkmap-kmers")
    return _POOL


def _done(value):
    future = Future()
    future.set_result(value)
    return future


@dataclass
class EncodedTable:
    """A table's bins as bytes: per bin its number of k-mers, the lengths of its counts stream and k-mer
    stream, and the sum of all counts; `groups` yields (first bin, [buffers of each bin]) in bin order, the
    buffers of a bin being its data (counts stream then k-mer stream) in pieces. A generator lets the cuda
    backend copy a group back from the device while the one before is being written."""

    n: np.ndarray            # int64 [bins]
    count_bytes: np.ndarray  # int64 [bins]
    key_bytes: np.ndarray    # int64 [bins]
    total: int
    groups: object

    @classmethod
    def empty(cls, bins):
        zeros = np.zeros(bins, dtype=np.int64)
        return cls(zeros, zeros, zeros, 0, [])


class BinnedRun:
    """A sorted, counted run held bin by bin: bins[b] = (keys uint64 [C, n_b], counts uint64 [n_b])."""

    def __init__(self, bins):
        self.bins = bins

    def __len__(self):
        return sum(len(counts) for _, counts in self.bins)

    def read_bin(self, b):
        return self.bins[b]


def _encode_bin(keys, counts, min_count):
    if min_count > 1:
        keep = counts >= np.uint64(min_count)
        keys, counts = keys[:, keep], counts[keep]
    if not len(counts):
        return 0, (), 0, 0, 0
    count_data = codec.encode_counts(counts).astype("<u8").tobytes()
    key_data = codec.encode_keys(keys).tobytes()
    return len(counts), (count_data, key_data), len(count_data), len(key_data), int(counts.sum(dtype=np.uint64))


class CpuBackend:
    """numpy, with a thread pool over pieces of input and over bins (module docstring)."""

    name = "cpu"

    def __init__(self, layout, canonical, capacity=None):
        self.layout, self.canonical, self.k = layout, canonical, layout.k
        self.bins = 2 ** bin_bits(self.k)
        self.parsing = deque()  # (future codes, carry) of text blocks, in input order
        self.pieces = []        # futures of (keys grouped by bin, bounds [bins + 1], weights or None)
        self.tail = np.empty(0, dtype=np.uint8)  # the last k - 1 codes of the previous block
        self.buffered = 0       # bases added since the last reduce (a bound on the k-mers)
        self.occurrences = 0    # k-mers extracted so far

    def add(self, block):
        self.parsing.append((pool().submit(block.codes), block.carry))
        self.buffered += len(block.data)
        while len(self.parsing) > PARSE_AHEAD:
            self._cut_next()

    def _cut_next(self):
        future, carry = self.parsing.popleft()
        codes = future.result()
        if carry and len(self.tail):
            codes = np.concatenate([self.tail, codes])
        self.tail = codes[len(codes) - min(self.k - 1, len(codes)):].copy()
        for start in range(0, len(codes) - self.k + 1, PIECE):
            self.pieces.append(pool().submit(self._piece, codes[start:start + PIECE + self.k - 1]))

    def _piece(self, codes):
        """A piece's k-mers grouped by bin (sorted, for one channel: numpy's sort is fastest there)."""
        keys = extract(codes, self.layout, self.canonical)
        if keys.shape[0] == 1:
            keys = np.sort(keys, axis=1)
            return keys, bin_bounds(keys, self.k), None
        bins = bin_of(keys, self.k).astype(np.uint8)  # bin_bits <= 8
        keys = np.take(keys, np.argsort(bins, kind="stable"), axis=1)  # numpy radix-sorts bytes
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
        return sort_count(keys, weights)

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

    def encode(self, run, min_count=1):
        bins = list(pool().map(lambda kc: _encode_bin(*kc, min_count), run.bins))
        n, parts, count_bytes, key_bytes, totals = zip(*bins)
        return EncodedTable(np.array(n, dtype=np.int64), np.array(count_bytes, dtype=np.int64),
                            np.array(key_bytes, dtype=np.int64), sum(totals), [(0, list(parts))])

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
    return (lambda layout, canonical, capacity: CudaBackend(layout, canonical, capacity, kernels)), "cuda"
