"""A sorted, counted run -> the bytes of its table bins (format version 1, docs/kmers.md), by the kernels
of kernels/kmer_codec.cu, on either device: the cuda backend runs them on the GPU (gpu.CudaKernels), the
cpu backend compiled for the host (HostCodec below). One layout, two targets: the two backends' tables
are the same bytes by construction, and the numpy codec (codec.py) stays the readable twin that the tests
hold both against.

`kn` is the device: per_item(name, n, *args) launches a kernel over n items; empty(nbytes) and
to_device(array) make buffers; at(buffer, offset) is a pointer `offset` bytes in; read(pointer, count,
dtype) copies back (a sync point); scan(pointer, n, wide) is an exclusive prefix sum in place.

The host lays the bins out from three totals per bin (k-mers, count words, VLQ bytes per channel);
everything per k-mer happens in the kernels: every k-mer's VLQ length and every block of 60 counts'
Simple-8b words are computed in parallel, prefix sums place them, and one buffer holds the table's data.
"""
from dataclasses import dataclass

import numpy as np

from mapper.device import host
from mapper.device.cuda import BLOCK
from mapper.kmers import codec
from mapper.kmers.binning import bin_bits, shift_of

S8B_BLOCK = 60
GROUP_BYTES = 1 << 25  # table bytes copied back from the device at a time
STAGES = 2  # host buffers the groups are copied back into in turn


def _u32(value):
    return np.uint32(value)


@dataclass
class EncodedTable:
    """A table's bins as bytes: per bin its number of k-mers, the lengths of its counts stream and k-mer
    stream, and the sum of all counts; `groups` yields (first bin, [buffers of each bin]) in bin order, the
    buffers of a bin being its data (counts stream then k-mer stream) in pieces. A generator lets the cuda
    backend copy a group back from the device while the one before is being written. `reuse` = r > 0: a
    group's buffers are overwritten by the group r places later, so a writer is done with a group before
    it asks for that one (the cuda backend copies back into two page-locked buffers in turn)."""

    n: np.ndarray            # int64 [bins]
    count_bytes: np.ndarray  # int64 [bins]
    key_bytes: np.ndarray    # int64 [bins]
    total: int
    groups: object
    reuse: int = 0

    @classmethod
    def empty(cls, bins):
        zeros = np.zeros(bins, dtype=np.int64)
        return cls(zeros, zeros, zeros, 0, [])


class HostCodec:
    """The device that encode_table asks for, on the host: kernels/kmer_codec.cu compiled by
    mapper.device.host (OpenMP over the items), buffers numpy byte arrays, prefix sums numpy's, cut into
    one chunk per thread and run by `parallel_map` (the cpu backend's pool)."""

    def __init__(self, parallel_map, workers=None):
        self.fn = {}
        self.parallel_map = parallel_map
        self.workers = workers  # OpenMP threads a launch takes (None: every host thread)

    def per_item(self, name, n, *args):
        if name not in self.fn:
            self.fn[name] = host.function("kmer_codec.cu", name, BLOCK=BLOCK)
        host.launch(self.fn[name], n, *args, workers=self.workers)

    empty = staticmethod(host.empty)
    to_device = staticmethod(host.to_device)

    @staticmethod
    def at(buffer, offset):
        return buffer[int(offset):]

    @staticmethod
    def read(pointer, count, dtype):
        return pointer[:count * np.dtype(dtype).itemsize].view(dtype).copy()

    def scan(self, data, n, wide=False):
        """Exclusive prefix sum in place: each chunk's own (numpy), then each chunk shifted by the total of
        the chunks before it."""
        values = data[:n * (8 if wide else 4)].view(np.uint64 if wide else np.uint32)
        cuts = np.linspace(0, n, host.threads() + 1).astype(np.int64)

        def local(c):
            chunk = values[cuts[c]:cuts[c + 1]]
            inclusive = np.cumsum(chunk, dtype=values.dtype)
            chunk[1:], chunk[:1] = inclusive[:-1], 0
            return inclusive[-1] if len(inclusive) else values.dtype.type(0)

        totals = list(self.parallel_map(local, range(len(cuts) - 1)))
        before = np.cumsum([values.dtype.type(0)] + totals[:-1], dtype=values.dtype)

        def shift(c):
            values[cuts[c]:cuts[c + 1]] += before[c]
        list(self.parallel_map(shift, range(len(cuts) - 1)))

    @staticmethod
    def total(counts, n):
        return int(counts[:8 * n].view(np.uint64).sum(dtype=np.uint64))


def encode_table(kn, keys, counts, u, C, k, stride=None):
    """EncodedTable of u distinct sorted keys (C channels, channel-major with `stride` (default u), at
    device buffer `keys`) and their counts (uint64 [u] at `counts`): a slice of a longer run is encoded
    where it lies."""
    if u == 0:
        return EncodedTable.empty(2 ** bin_bits(k))
    n_b, count_bytes, key_bytes, total, out, sizes = _encode(kn, keys, counts, u, C, k, stride)
    return EncodedTable(n_b, count_bytes, key_bytes, total, _groups(kn, out, sizes), STAGES)


def decode_keys(data, channels, count):
    """codec.decode_keys (VLQ bytes -> keys uint64 [channels, count]) by kernels/kmer_codec.cu's vlq_decode
    compiled for the host: one pass over the bytes in C++, where numpy's decoder makes a dozen passes
    (6 M k-mers/s a thread on the development machine). numpy's where no compiler is. Raises
    codec.CodecError for a stream that does not hold the keys."""
    if not host.available():
        return codec.decode_keys(data, channels, count)
    data = np.frombuffer(data, dtype=np.uint8)
    keys = np.empty(channels * count, dtype=np.uint64)
    errors = np.zeros(1, dtype=np.uint32)
    host.launch(host.function("kmer_codec.cu", "vlq_decode", BLOCK=BLOCK), 1, data,
                np.array([0, len(data)], dtype=np.uint64), np.array([count], dtype=np.uint32),
                np.zeros(1, dtype=np.uint64), 1, channels, np.empty(max(channels * count, 1), dtype=np.uint8),
                keys, errors, workers=1)
    if errors[0]:
        raise codec.CodecError(f"VLQ stream does not hold {channels * count} values" if errors[0] == 1
                               else "VLQ value longer than 10 bytes")
    return keys.reshape(channels, count)


def encode_bins(bins, C, k, parallel_map):
    """EncodedTable of a run held on the host bin by bin (`bins`: (keys uint64 [C, u_b], counts [u_b]) in
    bin order; each entry is let go once encoded): every bin encoded alone by the same kernels, a task a
    bin over `parallel_map`, one thread a task. Why not encode_table over the whole run: that needs the
    bins gathered into one channel-major array and sizes its per-k-mer arrays by the whole run, about 2 GB
    of fresh pages for 52 M distinct 31-mers, whose page faults cost more than the encoding (2-core
    development machine, 1 M reads: encoding 1.9-2.3 s). A bin's arrays are a few MB, reused by the
    allocator from one bin to the next."""
    def one(b):
        keys, counts = bins[b]
        bins[b] = None
        return (len(counts), *encode_bin(keys, counts, C, k))

    done = list(parallel_map(one, range(len(bins))))
    column = lambda i: np.array([d[i] for d in done], dtype=np.int64)
    return EncodedTable(column(0), column(1), column(2), sum(d[3] for d in done), [(0, [(d[4],) for d in done])])


_BIN_CODEC = HostCodec(lambda fn, items: list(map(fn, items)), workers=1)  # one thread: a bin is one task


def encode_bin(keys, counts, C, k):
    """(count bytes, k-mer bytes, sum of the counts, the bin's data uint8) of one bin's keys uint64 [C, u]
    (sorted, distinct, all in one bin) and counts uint64 [u], by the kernels on the calling thread: the
    bytes of codec.encode_counts and codec.encode_keys, one pass each in C++ instead of numpy's dozen."""
    u = len(counts)
    if u == 0:
        return 0, 0, 0, np.empty(0, np.uint8)
    keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1).view(np.uint8)
    counts = np.ascontiguousarray(counts, dtype=np.uint64).view(np.uint8)
    n_b, count_bytes, key_bytes, total, out, _ = _encode(_BIN_CODEC, keys, counts, u, C, k)
    b = int(np.flatnonzero(n_b)[0])
    return int(count_bytes[b]), int(key_bytes[b]), total, out[:count_bytes[b] + key_bytes[b]]


def _encode(kn, keys, counts, u, C, k, stride=None):
    """encode_table's work: (k-mers, count bytes and k-mer bytes per bin, the counts' sum, the table data
    on the device, each bin's bytes in it). Its device memory beyond the keys and counts: the values and
    their positions (16 C a k-mer) and the table's bytes (at most 10 C + 8 a k-mer: a VLQ value takes at
    most 10 bytes, a Simple-8b count 8), 26 C + 8 a k-mer with the small per-bin arrays."""
    bins = 2 ** bin_bits(k)
    shift = _u32(shift_of(k))
    starts = kn.empty(4 * (bins + 1))
    kn.per_item("bin_starts", u + 1, keys, _u32(u), shift, _u32(bins), starts)
    starts_h = kn.read(starts, bins + 1, np.uint32).astype(np.int64)
    n_b = np.diff(starts_h)
    block_first_h = np.concatenate(([0], np.cumsum(-(-n_b // S8B_BLOCK)))).astype(np.uint32)
    blocks = int(block_first_h[-1])
    block_first = kn.to_device(block_first_h)
    words, choice = kn.empty(4 * (blocks + 1)), kn.empty(blocks)
    kn.per_item("s8b_words", blocks + 1, counts, starts, block_first, _u32(bins), _u32(blocks), words, choice)
    kn.scan(words, blocks + 1)
    values, positions = kn.empty(8 * C * u), kn.empty(8 * C * (u + 1))
    kn.per_item("vlq_sizes", u + 1, keys, _u32(u if stride is None else stride), _u32(C), _u32(u), shift, values,
                positions)
    for c in range(C):
        kn.scan(kn.at(positions, 8 * c * (u + 1)), u + 1, wide=True)
    words_at, pos_at = kn.empty(8 * (bins + 1)), kn.empty(8 * C * (bins + 1))
    kn.per_item("bin_marks", bins + 1, starts, block_first, _u32(bins), words, positions, _u32(C), _u32(u),
                words_at, pos_at)
    words_at = kn.read(words_at, bins + 1, np.uint64)
    pos_at = kn.read(pos_at, C * (bins + 1), np.uint64).reshape(C, bins + 1)
    count_bytes = 8 * np.diff(words_at)
    channel_bytes = np.diff(pos_at, axis=1)
    key_bytes = channel_bytes.sum(axis=0)
    sizes = count_bytes + key_bytes
    offset = np.cumsum(sizes) - sizes
    word_base = offset - np.uint64(8) * words_at[:-1]  # uint64 arithmetic wraps: the kernels add back
    before = np.cumsum(channel_bytes, axis=0) - channel_bytes
    chan_base = (offset + count_bytes)[None, :] + before - pos_at[:, :-1]
    total_bytes = int(sizes.sum())
    out = kn.empty(total_bytes)
    kn.per_item("s8b_pack", blocks, counts, starts, block_first, _u32(bins), _u32(blocks), choice, words,
                kn.to_device(word_base.astype(np.uint64)), out)
    kn.per_item("vlq_write", u, values, positions, keys, _u32(C), _u32(u), shift, _u32(bins),
                kn.to_device(np.ascontiguousarray(chan_base, dtype=np.uint64)), out)
    return n_b, count_bytes.astype(np.int64), key_bytes.astype(np.int64), kn.total(counts, u), out, \
        sizes.astype(np.int64)


def _groups(kn, out, sizes):
    """(first bin, [bin buffers]) for groups of bins of about GROUP_BYTES, each copied back when asked
    for (EncodedTable.groups), into kn's STAGES page-locked buffers in turn (kn.read_staged): the copy of a
    group overlaps the writing of the one before, and runs at the bus's speed, without the driver's
    staging or the page faults of a fresh pageable array."""
    ends = np.cumsum(sizes)
    first = 0
    while first < len(sizes):
        start = int(ends[first] - sizes[first])
        last = max(int(np.searchsorted(ends, start + GROUP_BYTES, side="right")), first + 1)
        data = kn.read_staged(kn.at(out, start), int(ends[last - 1]) - start)
        yield first, [(data[e - s - start:e - start],) for e, s in zip(ends[first:last], sizes[first:last])]
        first = last
