"""The k-mer table file: sorted distinct k-mers and their counts, compressed per bin; written and read back.

The same format holds the final output of `gkmap kmers count` and the sorted runs it spills to its
temporary folder. All integers are little-endian.

    header (64 bytes)
      magic      8 bytes  b"GKMERTAB"
      version    u32      1
      k          u32      1..256
      flags      u32      bit 0: canonical (each k-mer is min(k-mer, reverse complement))
      bin_bits   u32      the table has 2^bin_bits bins (binning.py)
      min_count  u64      k-mers counted fewer times were left out (1: none were)
      distinct   u64      number of k-mers in the table
      total      u64      sum of their counts
      (zero padding to 64 bytes)
    bin table: 2^bin_bits entries of 40 bytes, in bin order
      offset       u64    where the bin's data starts, from the start of the file
      n            u64    number of k-mers in the bin
      count_bytes  u64    length of its counts stream (a multiple of 8)
      key_bytes    u64    length of its k-mer stream
      crc32        u32    zlib.crc32 of the bin's data (both streams)
      (4 bytes zero padding)
    data: for each non-empty bin, its counts (Simple-8b words of count - 1) then its k-mers (VLQ,
      channel-wise deltas), codec.py. Bin b holds the k-mers whose top bin_bits bits are b, sorted, so
      the bins in order list the whole table in lexicographic k-mer order.
"""
import os
import struct
from collections import deque
from concurrent.futures import wait

try:  # ISA-L's CRC-32 (installed with xopen): the same value as zlib's, about 6x faster (23 against 3.9 GB/s here)
    from isal.isal_zlib import crc32
except ImportError:
    from zlib import crc32

import numpy as np

from mapper.device import host
from mapper.errors import InputError
from mapper.kmers import codec
from mapper.kmers.binning import bin_bits
from mapper.kmers.encode import MAX_K, KmerLayout
from mapper.kmers.layout import decode_keys, encode_bin
from mapper.kmers.workers import in_order, pool

MAGIC = b"GKMERTAB"
VERSION = 1
HEADER = struct.Struct("<8sIIIIQQQ16x")
ENTRY = struct.Struct("<QQQQI4x")
CANONICAL = 1


class TableWriter:
    """Writes a table bin by bin, in increasing bin order; `close()` fills in the header and bin table."""

    def __init__(self, path, k, canonical, min_count=1):
        self.path = path
        self.k, self.canonical, self.min_count = k, canonical, min_count
        self.entries = [(0, 0, 0, 0, 0)] * 2 ** bin_bits(k)
        self.distinct = self.total = 0
        self.next_bin = 0
        self.file = open(path, "wb")
        self.file.seek(HEADER.size + ENTRY.size * len(self.entries))

    def write_bin(self, b, keys, counts):
        """Store bin b: keys uint64 [C, n] sorted and distinct, counts uint64 [n]; encoded by the compiled
        codec (layout.encode_bin), or numpy's where there is no compiler."""
        if not len(counts):
            return self.write_encoded(b, 0, (), 0, 0)
        if host.available():
            count_bytes, _, total, data = encode_bin(keys, counts, keys.shape[0], self.k)
            return self.write_encoded(b, len(counts), (data,), count_bytes, total)
        count_data = codec.encode_counts(counts).astype("<u8").tobytes()
        key_data = codec.encode_keys(keys).tobytes()
        self.write_encoded(b, len(counts), (count_data, key_data), len(count_data),
                           int(counts.sum(dtype=np.uint64)), crc32(key_data, crc32(count_data)))

    def write_encoded(self, b, n, parts, count_bytes, total, crc=None):
        """Store bin b already encoded: n k-mers, its counts stream (count_bytes long) then its k-mer
        stream as the buffers `parts`, the sum of its counts, the CRC-32 of its data (computed if None)."""
        if b < self.next_bin:
            raise ValueError(f"bin {b} written after bin {self.next_bin - 1}")
        self.next_bin = b + 1
        if not n:
            return
        if crc is None:
            crc = 0
            for part in parts:
                crc = crc32(part, crc)
        offset = self.file.tell()
        for part in parts:
            self.file.write(part)
        self.entries[b] = (offset, n, count_bytes, self.file.tell() - offset - count_bytes, crc)
        self.distinct += n
        self.total += total

    def close(self):
        self.file.seek(0)
        flags = CANONICAL if self.canonical else 0
        self.file.write(HEADER.pack(MAGIC, VERSION, self.k, flags, bin_bits(self.k), self.min_count,
                                    self.distinct, self.total))
        self.file.write(b"".join(ENTRY.pack(*entry) for entry in self.entries))
        self.file.close()

    def abort(self):
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        self.close() if kind is None else self.abort()


def _write_bin(fd, offset, parts):
    """Write a bin's buffers at `offset` of the open file; returns their CRC-32 (both calls release the GIL)."""
    crc = 0
    for part in parts:
        crc = crc32(part, crc)
        os.pwrite(fd, part, offset)
        offset += len(part)
    return crc


def write_table(path, k, canonical, min_count, pieces):
    """Write a whole table from backend.EncodedTables `pieces`, in bin order (one for a run encoded whole;
    one per range of bins where runs are merged a range at a time, each with its range's bins only): each
    bin is written at its place and checksummed by the thread pool, while the next group of bins is being
    made ready; returns the number of distinct k-mers written. `path` is a new file or an empty one
    (outputs.atomic_path's): it is not truncated, which would make ext4 and XFS write the whole table to
    disk when it is closed (outputs.no_truncate)."""
    bins = 2 ** bin_bits(k)
    entries = [None] * bins  # (offset, n, count_bytes, key_bytes, future of the CRC-32) of the bins written
    offset = HEADER.size + ENTRY.size * bins
    distinct = total = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)
    submitted = []
    try:
        writing = deque()  # each group's futures, while its buffers may be reused (EncodedTable.reuse)
        for encoded in pieces:
            sizes = encoded.count_bytes + encoded.key_bytes
            offsets = offset + np.cumsum(sizes) - sizes
            offset += int(sizes.sum())
            distinct, total = distinct + int(encoded.n.sum()), total + encoded.total
            for first, group in encoded.groups:
                writing.append([])
                for b, parts in enumerate(group, first):
                    if encoded.n[b]:
                        future = pool().submit(_write_bin, fd, int(offsets[b]), parts)
                        submitted.append(future)
                        entries[b] = (int(offsets[b]), int(encoded.n[b]), int(encoded.count_bytes[b]),
                                      int(encoded.key_bytes[b]), future)
                        writing[-1].append(future)
                if encoded.reuse and len(writing) >= encoded.reuse:  # the next group reuses the oldest's buffers
                    for future in writing.popleft():
                        future.result()
        table = [(0, 0, 0, 0, 0) if entry is None else (*entry[:4], entry[4].result()) for entry in entries]
        flags = CANONICAL if canonical else 0
        head = HEADER.pack(MAGIC, VERSION, k, flags, bin_bits(k), min_count, distinct, total)
        os.pwrite(fd, head + b"".join(ENTRY.pack(*entry) for entry in table), 0)
    finally:
        wait(submitted)  # after an error too: a write still queued would land in whatever reuses the descriptor
        os.close(fd)
    return distinct


class KmerTable:
    """A table opened for reading: `layout`, `canonical`, `min_count`, `distinct`, `total`, and its bins."""

    def __init__(self, path):
        self.path = path
        try:
            self.file = open(path, "rb")
        except FileNotFoundError:
            raise InputError(path, "no such file") from None
        try:
            self._read_header()
        except BaseException:
            self.file.close()
            raise

    def _fail(self, message):
        raise InputError(self.path, message)

    def _read_header(self):
        raw = self.file.read(HEADER.size)
        if len(raw) < HEADER.size or raw[:8] != MAGIC:
            self._fail("not a gkmap k-mer table (made by `gkmap kmers count`)")
        _, version, k, flags, bits, self.min_count, self.distinct, self.total = HEADER.unpack(raw)
        if version != VERSION:
            self._fail(f"k-mer table format version {version}, this gkmap reads version {VERSION}")
        if not 1 <= k <= MAX_K or bits != bin_bits(k):
            self._fail(f"corrupt header (k={k}, bin_bits={bits})")
        self.layout = KmerLayout(k)
        self.canonical = bool(flags & CANONICAL)
        raw = self.file.read(ENTRY.size * 2 ** bits)
        if len(raw) < ENTRY.size * 2 ** bits:
            self._fail("truncated file (bin table)")
        self.entries = list(ENTRY.iter_unpack(raw))
        if sum(entry[1] for entry in self.entries) != self.distinct:
            self._fail("corrupt bin table (k-mer counts do not add up)")

    @property
    def k(self):
        return self.layout.k

    @property
    def bins(self):
        return len(self.entries)

    def _bin_data(self, b):
        """The bytes of bin b, checked against its CRC-32; (data, count_bytes, n)."""
        offset, n, count_bytes, key_bytes, crc = self.entries[b]
        data = os.pread(self.file.fileno(), count_bytes + key_bytes, offset)  # threads may read bins at once
        if len(data) != count_bytes + key_bytes or crc32(data) != crc or count_bytes % 8:
            self._fail(f"bin {b} is truncated or corrupt (checksum mismatch)")
        return data, count_bytes, n

    def read_bin(self, b):
        """(keys uint64 [C, n] sorted, counts uint64 [n]) of bin b."""
        if self.entries[b][1] == 0:
            return np.empty((self.layout.channels, 0), dtype=np.uint64), np.empty(0, dtype=np.uint64)
        data, count_bytes, n = self._bin_data(b)
        try:
            counts = codec.decode_counts(np.frombuffer(data, dtype="<u8", count=count_bytes // 8), n)
            keys = decode_keys(memoryview(data)[count_bytes:], self.layout.channels, n)
        except codec.CodecError as e:
            self._fail(f"bin {b}: {e}")
        return keys, counts

    def read_counts(self, b):
        """counts uint64 [n] of bin b (its k-mers not decoded: a histogram needs only these)."""
        if self.entries[b][1] == 0:
            return np.empty(0, dtype=np.uint64)
        data, count_bytes, n = self._bin_data(b)
        try:
            return codec.decode_counts(np.frombuffer(data, dtype="<u8", count=count_bytes // 8), n)
        except codec.CodecError as e:
            self._fail(f"bin {b}: {e}")

    def __iter__(self):
        """(keys, counts) of every non-empty bin, in order."""
        for b, entry in enumerate(self.entries):
            if entry[1]:
                yield self.read_bin(b)

    def map_bins(self, work):
        """work(b) of every non-empty bin b, in bin order, computed by the thread pool a few bins ahead
        (workers.in_order): decoding is the compiled kernel's and numpy's, which leave the GIL, and bins are
        independent."""
        return in_order(work, [b for b, entry in enumerate(self.entries) if entry[1]])

    def close(self):
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
