"""BAM output: SAM record text to BGZF-compressed BAM, unsorted or coordinate-sorted (issue #18).

Interface (what a sink calls):

    writer = BamWriter(handle, header_text, threads=1, level=DEFAULT_LEVEL)
    writer = SortedBamWriter(handle, header_text, threads=1, level=DEFAULT_LEVEL,
                             memory=DEFAULT_SORT_MEMORY, temp_dir=None)
    writer.write(sam_records)   # bytes-like (bytes, memoryview, numpy uint8): whole SAM record lines, each
                                # ending with '\\n'; not kept after the call (the buffer may be reused)
    writer.write_blocks(blocks) # BamWriter: BGZF blocks of records made elsewhere (by a render process:
                                # compressed_records(sam_records, header_text, out)), appended in order
    writer.close()              # everything written, then the BGZF EOF block; `handle` stays open
    writer.abort()              # after an error: stop the threads, drop the temporary files, write nothing more

`handle` is a binary file object (only `write` is called), `header_text` the SAM header (str, every line
'\\n'-terminated): its @SQ lines, in order, give the refIDs. Both writers are context managers (close on
success, abort on an exception) and are not thread-safe: one thread calls them (`threads` is the
encoder's OpenMP threads and the compressor's pool). A record that is not SAM, or that names a reference the
header lacks, raises `BamEncodeError` (a ValueError: its index in that write call, the reason, the line)
before any record of that write is kept, so the writer stays usable. An error from `handle` propagates;
then call abort (the context manager does). `sam_to_bam` converts a whole SAM file.

Why each choice:
- Encoding: kernels/sam_to_bam.cu, compiled as C++ with OpenMP by the host device layer
  (mapper/device/host.py): one thread per record sizes it, numpy's cumsum places the records, one thread
  per record writes it. No Python runs per record. The library is built on first use (about 1.5 s, then
  from the kernel cache). The records are byte for byte what `samtools view -b` makes of the same lines,
  its repairs of inconsistent records included (FLAG 0x4 without RNAME or CIGAR, RNAME with POS 0
  unplaced, RNEXT with PNEXT 0 dropped); an RNAME the header lacks is an error, not samtools's warning.
  Without a C++ compiler BAM is refused with one line (`UsageError`): a numpy encoder of every SAM field
  and tag type would be a second implementation to keep equal to the first, for machines that can write
  SAM and pipe it to `samtools view -b` instead.
- Compression: BGZF blocks of at most 65,280 input bytes (so that a block that does not compress still
  fits BGZF's 64 KiB), raw deflate by ISA-L (`isal_zlib`, installed with xopen), tasks of 8 blocks over
  a thread pool (ISA-L releases the GIL). Measured on this machine on 23 MB of gkmap's BAM records
  (measles, one core, 64 KB blocks): ISA-L level 1 383 MB/s ratio 2.63, level 2 359 MB/s 2.65, level 3 276
  MB/s 2.65; zlib-ng level 1 201 MB/s 2.03, level 6 61 MB/s 2.86; zlib level 6 22 MB/s 2.85; samtools's
  default (level 6 through htslib) 42 MB/s 2.88. ISA-L level 1 is 6 to 9 times faster than samtools's
  default for files 9% larger, so it is the default (DEFAULT_LEVEL). Levels 4-9 use zlib-ng (also installed
  with xopen) for those who want the smaller file; level 0 stores blocks uncompressed. Whole conversion of
  1M Shigella records (383 MB of SAM; scripts/bench_output.py), one thread: 1.59 CPU-s and 93.7 MB here,
  samtools view -b 6.61 CPU-s and 86.6 MB (1.90 and 90.2 MB at its level 1, libdeflate).
- Sorting: samtools sort's order (refID with -1 last, then pos, then reverse strand; input order on ties).
  Records are encoded straight into an arena of `memory` bytes (less PER_RECORD bytes a record for its
  key, place and length and the sort's index); a full arena is sorted (numpy's stable argsort of 64-bit
  keys) and spilled as a run of pieces of at most PIECE bytes (ISA-L level 1: temporary files about 2.6
  times smaller than the records). At close the runs are merged a batch of records at a time: the
  smallest last key among the runs' current pieces bounds what every run can give now, those records are
  ordered by one stable argsort and copied by a kernel (gather_records). More runs than memory allows
  pieces for are merged in several passes, so memory stays within the budget whatever the input size
  (sam_to_bam of 1M records, 383 MB of SAM: peak RSS 176 MB at memory=64M, 140 MB unsorted, 34 MB of it
  the process with the encoder loaded). Run files are named
  `temp_prefix("gkmap-sort-")`...`.run` in `temp_dir` and unlinked as soon as they are opened (the open
  descriptor keeps the data), so nothing is left after close, an error or a kill; `remove_stale` removes
  what a kill between creating and unlinking one left.
"""
import collections
import functools
import itertools
import os
import struct
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mapper.errors import InputError, UsageError
from mapper.outputs import atomic_output, remove_stale, temp_prefix

try:
    from isal import isal_zlib as _fast
except ImportError:  # xopen installs ISA-L where it has wheels; elsewhere zlib, slower
    _fast = zlib
_crc32 = _fast.crc32  # ISA-L's: zlib's value, about 6x faster
try:
    from zlib_ng import zlib_ng as _small
except ImportError:
    _small = zlib

DEFAULT_LEVEL = 1
DEFAULT_SORT_MEMORY = 768 << 20  # samtools sort's default per thread
MIN_SORT_MEMORY = 64 << 10
BLOCK_DATA = 65280  # input bytes per BGZF block, as htslib: a stored block of that size still fits
BLOCKS_PER_TASK = 8
SLICE = 16 << 20  # BAM bytes written per launch of pass 2: bounds the encoder's memory whatever a write holds
SERIAL = 4096  # records (or segments) below which a kernel runs on one thread
SEG = 4096  # bytes of text per thread of the line finder
PER_RECORD = 56  # sort memory a record takes beside its bytes: key, place, length (24), sorting them (32)
PIECE = 4 << 20  # record bytes per piece of a sort run (fewer for a small memory budget)
EOF_BLOCK = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
_HEADER = struct.Struct("<4BI2BH2BHH")  # gzip member header with the BC extra field (block size - 1)
_PIECE_HEAD = struct.Struct("<qqq")  # records, raw bytes, compressed bytes

REASONS = {1: "fewer than 11 tab-separated fields", 2: "QNAME empty, longer than 254 or not of '!'-'~'",
           3: "FLAG not an integer 0-65535", 4: "RNAME not an @SQ name of the header", 5: "POS not an integer 0-2^31-1",
           6: "MAPQ not an integer 0-255", 7: "bad CIGAR (syntax, an op longer than 2^28-1, or more than 65535 ops)",
           8: "RNEXT not '=', '*' or an @SQ name", 9: "PNEXT not an integer 0-2^31-1", 10: "TLEN not a 32-bit integer",
           11: "SEQ length differs from the CIGAR's query length",
           12: "QUAL length differs from SEQ's, or a character outside '!'-'~'",
           13: "bad optional field (TG:TYPE:VALUE with TYPE A, i, f, Z, H or B, and a value that type holds)",
           14: "a NUL byte"}


class BamEncodeError(ValueError):
    """A SAM record that cannot be encoded: `index` is its line number (0-based) within the write call."""

    def __init__(self, index, reason, line):
        super().__init__(f"record {index + 1} of the batch: {reason}: {line[:200]!r}")
        self.index, self.reason, self.line = index, reason, line


def references(header_text):
    """(names, lengths) of the header's @SQ lines, in order: the refIDs."""
    names, lengths = [], []
    for line in header_text.splitlines():
        if line.startswith("@SQ\t"):
            fields = dict(f.split(":", 1) for f in line.split("\t")[1:] if ":" in f)
            if "SN" not in fields or "LN" not in fields:
                raise ValueError(f"@SQ line without SN or LN: {line!r}")
            names.append(fields["SN"].encode())
            lengths.append(int(fields["LN"]))
    return names, lengths


def header_block(header_text):
    """The BAM header: magic, the SAM header text (its last line '\\n'-terminated), the references (names
    NUL-terminated, lengths)."""
    text = header_text.encode()
    if text and not text.endswith(b"\n"):
        text += b"\n"
    names, lengths = references(header_text)
    parts = [b"BAM\1", struct.pack("<i", len(text)), text, struct.pack("<i", len(names))]
    for name, length in zip(names, lengths):
        parts += [struct.pack("<i", len(name) + 1), name, b"\0", struct.pack("<i", length)]
    return b"".join(parts)


def coordinate_header(header_text):
    """The header with @HD saying SO:coordinate (GO, a grouping the sort undoes, removed), as samtools sort
    writes it; an @HD line is added when there is none."""
    lines = header_text.splitlines(keepends=True)
    if lines and lines[0].startswith("@HD\t"):
        fields = [f for f in lines[0].rstrip("\n").split("\t")[1:] if not f.startswith(("SO:", "GO:"))]
        lines[0] = "\t".join(["@HD", *fields, "SO:coordinate"]) + "\n"
    else:
        lines.insert(0, "@HD\tVN:1.6\tSO:coordinate\n")
    return "".join(lines)


class _Encoder:
    """SAM text to BAM records with kernels/sam_to_bam.cu on the host (see the kernel's comment)."""

    def __init__(self, header_text, threads):
        from mapper.device import host  # a device layer, imported only for BAM
        if not host.available():
            raise UsageError("BAM output needs a C++ compiler (g++) to build its encoder; write SAM and "
                             "convert it with `samtools view -b`")
        self._host, self._threads = host, max(1, int(threads))
        self._sizes = host.function("sam_to_bam.cu", "bam_sizes")
        self._records = host.function("sam_to_bam.cu", "bam_records")
        self._gather = host.function("sam_to_bam.cu", "gather_records")
        self._line_counts = host.function("sam_to_bam.cu", "line_counts")
        self._line_ends = host.function("sam_to_bam.cu", "line_ends")
        names, _ = references(header_text)
        order = sorted(range(len(names)), key=names.__getitem__)
        self._names = np.frombuffer(b"".join(names[k] for k in order) or b"\0", np.uint8)
        self._name_at = np.zeros(len(names) + 1, np.int64)
        np.cumsum([len(names[k]) for k in order], out=self._name_at[1:])
        self._name_id = np.array(order or [0], np.int32)
        self._refs = (self._names, self._name_at, self._name_id, len(names))

    def _workers(self, n):
        """OpenMP threads for a launch over n records: one below SERIAL, where waking threads (which spin on
        a busy machine) costs more than the records."""
        return 1 if n < SERIAL else self._threads

    def lines(self, text):
        """The text as bytes and its line ends (ends[0] = -1, then each '\\n'), the kernels' input."""
        data = np.frombuffer(text, np.uint8)
        nseg = -(-len(data) // SEG)
        counts = np.empty(nseg, np.int64)
        self._host.launch(self._line_counts, nseg, data, len(data), SEG, counts,
                          workers=self._workers(nseg))
        first = np.cumsum(counts) - counts
        ends = np.empty(int(counts.sum()) + 1, np.int64)
        ends[0] = -1
        self._host.launch(self._line_ends, nseg, data, len(data), SEG, first, ends[1:],
                          workers=self._workers(nseg))
        if len(data) and data[-1] != 10:
            raise BamEncodeError(len(ends) - 1, "the last line has no '\\n'",
                                 bytes(data[ends[-1] + 1:][:200]).decode(errors="replace"))
        return data, ends

    def sizes(self, data, ends):
        """Pass 1: each line's record size; BamEncodeError for the first bad line."""
        n = len(ends) - 1
        sizes = np.empty(n, np.int64)
        self._host.launch(self._sizes, n, data, ends, n, *self._refs, sizes, workers=self._workers(n))
        bad = np.flatnonzero(sizes < 0)
        if len(bad):
            i = int(bad[0])
            line = bytes(data[ends[i] + 1:ends[i + 1]]).decode(errors="replace")
            raise BamEncodeError(i, REASONS[int(-sizes[i])], line)
        return sizes

    def records(self, data, ends, at, out):
        """Pass 2: the records at out + at[i]; returns their sort keys."""
        n = len(ends) - 1
        keys = np.empty(n, np.uint64)
        self._host.launch(self._records, n, data, ends, n, *self._refs, at, out, keys,
                          workers=self._workers(n))
        return keys

    def gather(self, address, length):
        """The records at `address` (int64) of `length` bytes, back to back in one new buffer."""
        at = np.zeros(len(length) + 1, np.int64)
        np.cumsum(length, out=at[1:])
        out = np.empty(max(int(at[-1]), 1), np.uint8)
        self._host.launch(self._gather, len(length), address, length, at, len(length), out,
                          workers=self._workers(len(length)))
        return out[:int(at[-1])]


def _deflate(data, level):
    """Raw deflate of one block (see the module docstring for the library of each level)."""
    if level == 0:
        return zlib.compress(data, 0, -15)
    if level <= 3:
        return _fast.compress(data, level, -15)
    return _small.compress(data, level, -15)


def bgzf_blocks(data, level):
    """`data` (at most BLOCKS_PER_TASK * BLOCK_DATA bytes) as BGZF blocks: gzip members whose extra field BC
    holds the member's size - 1, with the CRC32 and length of their input."""
    out = []
    view = memoryview(data)
    for start in range(0, len(view), BLOCK_DATA):
        block = view[start:start + BLOCK_DATA]
        body = _deflate(block, level)
        if len(body) > 65536 - 26:  # did not compress: stored, which always fits
            body = zlib.compress(block, 0, -15)
        out += [_HEADER.pack(31, 139, 8, 4, 0, 0, 255, 6, 66, 67, 2, len(body) + 25), body,
                struct.pack("<II", _crc32(block), len(block))]
    return b"".join(out)


class _Bgzf:
    """Bytes to BGZF on `handle`: tasks of BLOCKS_PER_TASK blocks compressed over `threads` threads (in the
    caller's thread when 1), written in order; at most 2 tasks a thread in flight (bounded memory)."""

    def __init__(self, handle, threads, level):
        self._handle, self._level = handle, level
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="gkmap-bgzf") if threads > 1 else None
        self._limit = 2 * threads
        self._pending, self._npending = [], 0
        self._flight = collections.deque()

    def write(self, data):
        if len(data):
            self._pending.append(data)
            self._npending += len(data)
        task = BLOCKS_PER_TASK * BLOCK_DATA
        if self._npending >= task:
            joined = memoryview(b"".join(self._pending))
            whole = len(joined) - len(joined) % task
            self._pending, self._npending = [bytes(joined[whole:])], len(joined) - whole  # not a view: frees joined
            for start in range(0, whole, task):
                self._submit(joined[start:start + task])

    def flush(self):
        """Compress what is pending (the last block may be short): a block boundary here."""
        joined = memoryview(b"".join(self._pending))
        self._pending, self._npending = [], 0
        task = BLOCKS_PER_TASK * BLOCK_DATA
        for start in range(0, len(joined), task):
            self._submit(joined[start:start + task])

    def write_blocks(self, blocks):
        """Whole BGZF blocks compressed elsewhere, after everything given so far."""
        self.flush()
        while self._flight:
            self._handle.write(self._flight.popleft().result())
        self._handle.write(blocks)

    def _submit(self, data):
        if self._pool is None:
            self._handle.write(bgzf_blocks(data, self._level))
            return
        self._flight.append(self._pool.submit(bgzf_blocks, data, self._level))
        while len(self._flight) > self._limit:
            self._handle.write(self._flight.popleft().result())

    def close(self):
        self.flush()
        while self._flight:
            self._handle.write(self._flight.popleft().result())
        self._handle.write(EOF_BLOCK)
        self.abort()

    def abort(self):
        if self._pool is not None:
            for future in self._flight:
                future.cancel()
            self._pool.shutdown(wait=True)
            self._pool = None
        self._flight.clear()


class _Writer:
    """A context manager: close when the block succeeds, abort when it raises."""

    def __enter__(self):
        return self

    def __exit__(self, kind, *_):
        if kind is None:
            self.close()
        else:
            self.abort()
        return False


class BamWriter(_Writer):
    """Writes BAM to a binary file object from SAM text (see the module docstring)."""

    def __init__(self, handle, header_text, threads=1, level=DEFAULT_LEVEL):
        if not 0 <= level <= 9:
            raise UsageError(f"BAM compression level {level}: 0-9")
        self._encoder = _Encoder(header_text, threads)
        self._bgzf = _Bgzf(handle, max(1, int(threads)), level)
        self._bgzf.write(header_block(header_text))
        self._bgzf.flush()

    def write(self, sam_records):
        """Every record is checked (pass 1) before any is written (pass 2, SLICE bytes of BAM at a time)."""
        _encode(self._encoder, self._bgzf, sam_records)

    def write_blocks(self, blocks):
        """BGZF blocks of records that `compressed_records` made (in a render process), after every record
        written so far."""
        self._bgzf.write_blocks(blocks)

    def close(self):
        self._bgzf.close()

    def abort(self):
        self._bgzf.abort()


def _encode(encoder, bgzf, sam_records):
    data, ends = encoder.lines(sam_records)
    sizes = encoder.sizes(data, ends)
    for lo, hi in _pieces(sizes, SLICE):
        at = np.zeros(hi - lo + 1, np.int64)
        np.cumsum(sizes[lo:hi], out=at[1:])
        records = np.empty(int(at[-1]), np.uint8)
        encoder.records(data, ends[lo:hi + 1], at, records)
        bgzf.write(records)


@functools.lru_cache(maxsize=2)
def _one_thread_encoder(header_text):
    return _Encoder(header_text, 1)


def compressed_records(sam_records, header_text, out, level=DEFAULT_LEVEL):
    """SAM record lines (bytes-like) as their BAM records, the header's @SQ lines giving the refIDs, in BGZF
    blocks written to the binary file `out`, on this thread: a render process's share of a BAM output
    (BamWriter.write_blocks appends it), so that the encoding and the compression run in the render
    processes beside the GPU's work instead of in the process that drives it, which for 1 M chr20 reads
    made BAM 0.9-1.0 s slower than SAM on the H200 host (2.81-2.91 s against 1.90-1.92 s)."""
    bgzf = _Bgzf(out, 1, level)
    _encode(_one_thread_encoder(header_text), bgzf, sam_records)
    bgzf.flush()


def pack(records):
    """A run piece's records compressed (ISA-L level 1, raw deflate): temporary files 2.6 times smaller."""
    return _fast.compress(records, 1, -15)


class _Run:
    """A sorted run in a temporary file: pieces of (keys, lengths, ISA-L-compressed records)."""

    def __init__(self, temp_dir):
        fd, path = tempfile.mkstemp(dir=temp_dir, prefix=temp_prefix("gkmap-sort-"), suffix=".run")
        os.unlink(path)  # the descriptor keeps the data until closed: nothing is left behind, even on a kill
        self.file = os.fdopen(fd, "w+b")

    def append(self, keys, lengths, raw, body):
        """A piece: its keys, record lengths, and records (`raw` bytes) compressed to `body` (`pack`)."""
        self.file.write(_PIECE_HEAD.pack(len(keys), raw, len(body)))
        self.file.write(keys.tobytes())
        self.file.write(lengths.astype(np.uint32).tobytes())
        self.file.write(body)

    def rewind(self):
        self.file.flush()
        self.file.seek(0)

    def piece(self):
        """The next piece: (keys, lengths, records), or None after the last."""
        head = self.file.read(_PIECE_HEAD.size)
        if not head:
            return None
        n, raw, packed = _PIECE_HEAD.unpack(head)
        keys = np.frombuffer(self.file.read(8 * n), np.uint64)
        lengths = np.frombuffer(self.file.read(4 * n), np.uint32).astype(np.int64)
        records = np.frombuffer(_fast.decompress(self.file.read(packed), -15, raw), np.uint8)
        return keys, lengths, records

    def close(self):
        self.file.close()


def _pieces(lengths, size):
    """[lo, hi) ranges of consecutive records of `lengths` bytes, each of at most `size` bytes or one record."""
    ends = np.cumsum(lengths)
    lo = 0
    while lo < len(lengths):
        hi = max(lo + 1, int(np.searchsorted(ends, ends[lo] - lengths[lo] + size, "right")))
        yield lo, hi
        lo = hi


def _split(keys, lengths, records, size):
    """Consecutive records (keys, lengths, their bytes back to back) as pieces of about `size` bytes."""
    starts = np.cumsum(lengths) - lengths
    for lo, hi in _pieces(lengths, size):
        yield keys[lo:hi], lengths[lo:hi], records[starts[lo]:starts[hi - 1] + lengths[hi - 1]]


class _Cursor:
    """A run being merged: its current piece and the first record of it not yet output."""

    def __init__(self, run):
        self.run = run
        self.load()

    def load(self):
        """The next piece; False when the run is exhausted."""
        piece = self.run.piece()
        if piece is None:
            return False
        self.keys, self.lengths, self.records = piece
        self.starts = np.cumsum(self.lengths) - self.lengths
        self.at = 0
        return True


class SortedBamWriter(_Writer):
    """Writes coordinate-sorted BAM (@HD SO:coordinate) from SAM text within `memory` bytes (see the module
    docstring); the records are output at close."""

    def __init__(self, handle, header_text, threads=1, level=DEFAULT_LEVEL, memory=DEFAULT_SORT_MEMORY,
                 temp_dir=None):
        if not 0 <= level <= 9:
            raise UsageError(f"BAM compression level {level}: 0-9")
        header_text = coordinate_header(header_text)
        self._memory = max(int(memory), MIN_SORT_MEMORY)
        self._piece = max(4096, min(PIECE, self._memory // 16))
        self._temp_dir = temp_dir or tempfile.gettempdir()
        if not os.path.isdir(self._temp_dir) or not os.access(self._temp_dir, os.W_OK | os.X_OK):
            raise UsageError(f"the sort's temporary folder {self._temp_dir} is not a writable folder")
        remove_stale(self._temp_dir, "gkmap-sort-", ".run")
        self._encoder = _Encoder(header_text, threads)
        self._handle, self._threads, self._level = handle, max(1, int(threads)), level
        self._header = header_block(header_text)
        try:
            self._arena = np.empty(self._memory, np.uint8)  # pages are touched only as records fill it
        except MemoryError:
            raise UsageError(f"sort memory of {self._memory} bytes is more than this machine can reserve") from None
        self._fill, self._count = 0, 0
        self._keys, self._starts, self._lengths = [], [], []
        self._runs, self._open = [], []  # the runs to merge; every run file still open
        self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="gkmap-sort") if self._threads > 1 else None

    def write(self, sam_records):
        """Every record is checked (pass 1) before any is kept; they are encoded straight into the arena,
        which is sorted and spilled whenever the next records do not fit."""
        data, ends = self._encoder.lines(sam_records)
        sizes = self._encoder.sizes(data, ends)
        done = 0
        while done < len(sizes):
            room = self._memory - self._fill - PER_RECORD * self._count
            take = int(np.searchsorted(np.cumsum(sizes[done:] + PER_RECORD), room, "right"))
            if take == 0:
                if self._count == 0:
                    raise UsageError(f"a BAM record of {sizes[done]} bytes exceeds the sort memory "
                                     f"({self._memory} bytes)")
                self._spill()
                continue
            part = sizes[done:done + take]
            at = np.zeros(take + 1, np.int64)
            np.cumsum(part, out=at[1:])
            self._keys.append(self._encoder.records(data, ends[done:done + take + 1], at, self._arena[self._fill:]))
            self._starts.append(at[:-1] + self._fill)
            self._lengths.append(part)
            self._fill += int(at[-1])
            self._count += take
            done += take

    def _sorted_pieces(self):
        """The arena's records in sorted order, as (keys, lengths, records) pieces of about self._piece bytes."""
        if not self._count:
            return
        keys = np.concatenate(self._keys)
        order = np.argsort(keys, kind="stable")
        keys, lengths = keys[order], np.concatenate(self._lengths)[order]
        address = np.concatenate(self._starts)[order] + self._arena.ctypes.data
        for lo, hi in _pieces(lengths, self._piece):
            yield keys[lo:hi], lengths[lo:hi], self._encoder.gather(address[lo:hi], lengths[lo:hi])

    def _new_run(self):
        run = _Run(self._temp_dir)
        self._open.append(run)
        return run

    def _store(self, run, pieces):
        """Append (keys, lengths, records) pieces to `run`, `threads` of them compressed at once."""
        pieces = iter(pieces)
        while batch := list(itertools.islice(pieces, self._threads)):
            records = [p[2] for p in batch]
            bodies = self._pool.map(pack, records) if self._pool else map(pack, records)
            for (keys, lengths, raw), body in zip(batch, bodies):
                run.append(keys, lengths, len(raw), body)

    def _spill(self):
        run = self._new_run()
        self._runs.append(run)
        self._store(run, self._sorted_pieces())
        run.rewind()
        self._fill, self._count = 0, 0
        self._keys, self._starts, self._lengths = [], [], []

    def _merge(self, runs, emit):
        """Merge sorted runs (in input order) into emit(keys, lengths, records) calls, in sorted order."""
        cursors = [_Cursor(r) for r in runs]  # every run has a piece
        while cursors:
            last = [int(c.keys[-1]) for c in cursors]
            bound = min(range(len(cursors)), key=last.__getitem__)  # the first run with the smallest
            parts = []
            for k, c in enumerate(cursors):
                stop = int(np.searchsorted(c.keys, np.uint64(last[bound]), "right" if k <= bound else "left"))
                if stop > c.at:
                    parts.append((c.keys[c.at:stop], c.lengths[c.at:stop],
                                  c.starts[c.at:stop] + c.records.ctypes.data))
                    c.at = stop
            keys, lengths, address = (np.concatenate(p) for p in zip(*parts))
            order = np.argsort(keys, kind="stable")
            records = self._encoder.gather(address[order], lengths[order])
            emit(keys[order], lengths[order], records)  # before the pieces it came from are replaced
            cursors = [c for c in cursors if c.at < len(c.keys) or c.load()]

    def close(self):
        bgzf = _Bgzf(self._handle, self._threads, self._level)
        try:
            bgzf.write(self._header)
            bgzf.flush()
            if not self._runs:
                for _, _, records in self._sorted_pieces():
                    bgzf.write(records)
            else:
                if self._count:
                    self._spill()
                self._arena = None
                fan_in = max(2, self._memory // (3 * self._piece))
                while len(self._runs) > fan_in:
                    self._runs = [self._merged(self._runs[k:k + fan_in])
                                  for k in range(0, len(self._runs), fan_in)]
                self._merge(self._runs, lambda keys, lengths, records: bgzf.write(records))
            bgzf.close()
        finally:
            bgzf.abort()
            self.abort()

    def _merged(self, runs):
        """One run holding the merge of `runs` (a pass of a merge with more runs than memory for pieces)."""
        if len(runs) == 1:
            return runs[0]
        out = self._new_run()
        try:
            self._merge(runs, lambda keys, lengths, records: self._store(out, _split(keys, lengths, records,
                                                                                     self._piece)))
        finally:
            for run in runs:
                run.close()
        out.rewind()
        return out

    def abort(self):
        """Drop the records and the temporary files (also what close does last)."""
        for run in self._open:
            run.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._open, self._runs, self._arena = [], [], None
        self._keys, self._starts, self._lengths = [], [], []


def sam_to_bam(sam_path, bam_path, sort=False, threads=1, level=DEFAULT_LEVEL, memory=DEFAULT_SORT_MEMORY,
               temp_dir=None, chunk=SLICE):
    """Convert a SAM file to BAM (coordinate-sorted with `sort`), read `chunk` bytes at a time; the output
    is written by outputs.atomic_output's rules. A bad record is an InputError naming its line."""
    with open(sam_path, "rb") as sam:
        header, line = [], 0
        first = sam.readline()
        while first.startswith(b"@"):
            header.append(first)
            first = sam.readline()
        line = len(header)
        with atomic_output(bam_path, "wb") as handle:
            kind = SortedBamWriter if sort else BamWriter
            extra = {"memory": memory, "temp_dir": temp_dir} if sort else {}
            with kind(handle, b"".join(header).decode(), threads=threads, level=level, **extra) as writer:
                rest = first
                while True:
                    block = sam.read(chunk)
                    text = rest + block
                    if not block and text and not text.endswith(b"\n"):
                        text += b"\n"
                    cut = text.rfind(b"\n") + 1
                    if cut:
                        try:
                            writer.write(memoryview(text)[:cut])
                        except BamEncodeError as error:
                            raise InputError(sam_path, f"not a BAM-encodable SAM record: {error.reason}",
                                             line=line + error.index + 1) from None
                        line += text.count(b"\n", 0, cut)
                    rest = text[cut:]
                    if not block:
                        break

