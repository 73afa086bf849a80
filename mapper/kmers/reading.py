"""FASTA/FASTQ (plain or gzip) -> a stream of sequence blocks for k-mer extraction.

A `Block` is either FASTA text (whole lines as read, parsed by fasta.py on the host or by the GPU:
kernels/kmer_extract.cu) or base codes (uint8, mapper.alphabet: A=0, C=1, G=2, T=3, 4 = N or any other
letter). `carry` says that the block continues the sequence of the block before it: a k-mer may span the
two, so the consumer prepends the last k - 1 codes of the previous block (backend.Tail). Records are
separated by an N, so no k-mer spans two records, nor two files (a file's first block never carries).

- A file whose first byte (after decompression) is '>' is read as text, in blocks of about
  `block_bytes` cut after their last newline (a line never spans two blocks; a block grows to hold a
  longer line). Parsing is then whole-array work, on the host or on the GPU, with no Python object per
  record.
- A file whose first byte is '@' is read as FASTQ text, in blocks of about `block_bytes` cut after a
  multiple of four lines (whole records; a block grows to hold one record), parsed by fastq.py on the
  host or by the GPU; a block that is not plain FASTQ (fastq.py says which) is parsed by dnaio, which
  gives its records or its error, with the line counted from the file's start.
- Anything else (a FASTA file that starts with a blank or comment line) is parsed by dnaio (C,
  records in batches) into code blocks of about `block_bytes` bases: whole records joined by an N, a
  longer record cut into pieces that carry.

Bytes come in through a source: with `parallel`, an uncompressed file is read with os.preadv by several
threads at once (up to READ_THREADS of the pool, workers.py), each reading and counting the newlines of
its own part of the buffer while the bytes are in its cache (the page cache gives one thread about
4.4 GB/s, eight about 20 GB/s on the H100 machine, where one thread's read and count of a FASTQ block ran
at 1.5 GB/s in all); a compressed one through xopen (ISA-L decompresses in a thread of its own), its
newlines counted by the same threads afterwards. Without `parallel` the calling thread does it all.

Each block's buffer comes from `allocate(size)`: by default a fresh numpy array (the cpu backend still holds a
block's text while its pool parses it); the cuda backend passes the allocator of its pinned buffers, so
that the upload to the GPU runs at the bus's speed instead of through the driver's pageable staging. A
buffer that is let go without a block made of it (it had to grow to hold one whole line or record, or
the file ended) is handed to `release`; one that a block is made of is the consumer's to release.

Format errors are one-line InputErrors naming the file and line. An empty file is valid input and holds no
k-mers (as for jellyfish).
"""
import contextlib
import io
import os
from dataclasses import dataclass

import dnaio
import numpy as np
from xopen import xopen

from mapper.device import host
from mapper.errors import InputError
from mapper.kmers.fasta import GENERAL_TABLE, NonAsciiError, fasta_codes
from mapper.kmers.fastq import fastq_codes
from mapper.kmers.workers import pool
from mapper.reference import DECOMPRESSION_ERRORS, stream_error

UNREADABLE = (UnicodeDecodeError, OSError, *DECOMPRESSION_ERRORS)  # a damaged gzip block, CRC or end included


@dataclass
class Block:
    data: object   # FASTA text (bytes-like, is_text), FASTQ text (is_fastq); else uint8 codes
    is_text: bool
    carry: bool    # continues the previous block's sequence
    path: str
    offset: int = 0  # of the text in the decompressed file, for error messages
    is_fastq: bool = False
    line: int = 0    # FASTQ: the lines of the file before the block, for error messages

    def codes(self, parse=fasta_codes):
        """uint8 codes of the block (FASTA text parsed by `parse`, fasta.py's rules; FASTQ by fastq.py, or by
        dnaio where it is not plain)."""
        if self.is_fastq:
            codes = fastq_codes(self.data)
            return self.dnaio_codes() if codes is None else codes
        if not self.is_text:
            return self.data
        try:
            return parse(self.data)
        except NonAsciiError as e:
            line = _line_of(self.path, self.offset + e.offset)
            raise InputError(self.path, "non-ASCII byte in a sequence line", line=line) from None


    @property
    def max_bases(self):
        """A bound on the block's bases (so on its k-mers): a FASTQ record has as many qualities as bases."""
        return len(self.data) // 2 + 1 if self.is_fastq else len(self.data)

    def dnaio_codes(self):
        """codes of a FASTQ block that is not plain: dnaio's records, or its error as an InputError."""
        with _dnaio_errors(self.path, self.line):
            with dnaio.open(io.BytesIO(bytes(self.data)), fileformat="fastq") as reader:
                return _codes([record.sequence for record in reader] + [""])


def _line_of(path, offset):
    """1-based line of byte `offset` of a (decompressed) file; only for error messages."""
    with xopen(path, "rb") as f:
        return f.read(offset).count(b"\n") + 1


def _read_into(f, view):
    """Fill `view` from f as far as the file goes (reads may come short); returns the bytes read."""
    filled = 0
    while filled < len(view):
        got = f.readinto(view[filled:])
        if not got:
            break
        filled += got
    return filled


def fresh_buffer(size):
    """A new uninitialised buffer of `size` bytes. Not a bytearray: zeroing a fresh 32 MB bytearray cost more
    than reading into it (page faults and zeroing, 1.7 GB/s against 4.8 GB/s for numpy's reused heap
    memory, measured on the development machine)."""
    return np.empty(size, np.uint8)


def _new_buffer(pending, block_bytes, allocate):
    """The buffer for the next block from `allocate`, `pending` (the unfinished line or record the block
    before left) at its start."""
    size = len(pending) + max(block_bytes, len(pending))  # growing: a long line stays linear
    buffer = allocate(size)[:size]
    buffer[:len(pending)] = np.frombuffer(pending, np.uint8)
    return buffer


COUNT_PIECE = 1 << 20  # bytes a reading thread reads and counts at a time: the count finds them in its cache
READ_THREADS = 8       # at most (and no more than -t): the page cache gave 8 threads 20 GB/s, 4 threads 16


def _newlines(array):
    """The newlines in a uint8 array, compared a COUNT_PIECE at a time (twice as fast as one compare of a
    whole 32 MB block, whose flags would be fresh memory)."""
    flags = np.empty(min(len(array), COUNT_PIECE), bool)
    count = 0
    for start in range(0, len(array), COUNT_PIECE):
        piece = array[start:start + COUNT_PIECE]
        np.equal(piece, 10, out=flags[:len(piece)])
        count += int(np.count_nonzero(flags[:len(piece)]))
    return count


def _spans(n, parts):
    """Up to `parts` consecutive spans that cover [0, n), made of whole COUNT_PIECEs but the last."""
    pieces = -(-n // COUNT_PIECE)
    bounds = [min(n, COUNT_PIECE * (pieces * i // parts)) for i in range(parts + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def _split(work, n, parallel):
    """[work(begin, end) for the spans of [0, n)]: a span a reading thread where `parallel`, else one call
    in this thread."""
    if not parallel:
        return [work(0, n)]
    threads = max(1, min(READ_THREADS, host.threads()))
    return list(pool().map(lambda span: work(*span), _spans(n, threads)))


def _count_newlines(array, parallel):
    """_newlines of a uint8 array (numpy's compare and count release the GIL)."""
    return sum(_split(lambda begin, end: _newlines(array[begin:end]), len(array), parallel))


def _pread_into(fd, array, offset):
    """Fill the uint8 array from the file at `offset` as far as the file goes; returns the bytes read."""
    view, filled = memoryview(array), 0
    while filled < len(view):
        got = os.preadv(fd, [view[filled:]], offset + filled)
        if not got:
            break
        filled += got
    return filled


class _PlainSource:
    """An uncompressed file, read by the reading threads at once, each its own span of the buffer with
    os.preadv (which releases the GIL) and each piece's newlines counted just after it was read."""

    def __init__(self, fd, parallel):
        self.fd, self.offset, self.parallel = fd, 0, parallel

    def _span(self, array, begin, end, count):
        """Read array[begin:end] from the file; (bytes read, their newlines if `count`, whether it is full)."""
        at, newlines = begin, 0
        while at < end:
            stop = min(end, at + COUNT_PIECE)
            got = _pread_into(self.fd, array[at:stop], self.offset + at)
            newlines += _newlines(array[at:at + got]) if count else 0
            at += got
            if at < stop:  # the end of the file
                return at - begin, newlines, False
        return at - begin, newlines, True

    def fill(self, array, count):
        """Read the next bytes of the file into the uint8 array, as many as fit or as the file has left:
        (bytes read, the newlines among them if `count`, else 0)."""
        filled = newlines = 0
        for got, lines, full in _split(lambda begin, end: self._span(array, begin, end, count), len(array),
                                       self.parallel):
            filled, newlines = filled + got, newlines + lines
            if not full:  # the file ended in this span: the later ones read nothing
                break
        self.offset += filled
        return filled, newlines


class _StreamSource:
    """A compressed file read through xopen (ISA-L decompresses gzip in a thread of its own); the
    newlines counted afterwards by the reading threads."""

    def __init__(self, file, parallel):
        self.file, self.parallel = file, parallel

    def fill(self, array, count):
        """As _PlainSource.fill."""
        filled = _read_into(self.file, memoryview(array))
        return filled, _count_newlines(array[:filled], self.parallel) if count else 0


COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")  # gzip, bzip2, xz, zstd
COMPRESSED_NAMES = (".gz", ".bz2", ".xz", ".zst")


@contextlib.contextmanager
def _source(path, parallel):
    """The source of a file: xopen's stream for a file that is compressed by its first bytes or by its name
    (xopen goes by the name first: a plain file named .gz is its error, as everywhere else that reads it),
    else the file itself; `parallel`: read and count with the reading threads."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if path.endswith(COMPRESSED_NAMES) or os.pread(fd, 6, 0).startswith(COMPRESSED):
            with xopen(path, "rb") as file:
                yield _StreamSource(file, parallel)
        else:
            yield _PlainSource(fd, parallel)
    finally:
        os.close(fd)


def _newline_back(buffer, end, count):
    """The offset just after the `count`-th newline counted back from `end` (count >= 1), or 0 when the
    buffer has fewer: searched in a window at the end that doubles, so a block costs one scan of its tail."""
    window = 1 << 16
    while True:
        start = max(0, end - window)
        found = np.flatnonzero(buffer[start:end] == 10)
        if len(found) >= count:
            return start + int(found[-count]) + 1
        if start == 0:
            return 0
        window *= 2


def _text_blocks(source, head, path, block_bytes, allocate, release):
    """Blocks of whole lines of a file whose first bytes (already read) are `head`. Each block is read into
    its buffer behind the partial line left by the block before, and handed on as a memoryview: no copy of
    the text is made here."""
    pending, offset, carry = head, 0, False
    while True:
        buffer = _new_buffer(pending, block_bytes, allocate)
        end = len(pending) + source.fill(buffer[len(pending):], False)[0]
        at_end = end < len(buffer)
        cut = end if at_end else _newline_back(buffer, end, 1)
        if cut:
            yield Block(memoryview(buffer)[:cut], True, carry, path, offset)
            offset, carry = offset + cut, True
        pending = buffer[cut:end].tobytes()
        if not cut:
            release(buffer)
        if at_end:
            return


def _fastq_blocks(source, head, path, block_bytes, allocate, release):
    """Blocks of whole FASTQ records of a file (first bytes `head`): cut after the last newline whose
    number, from the block's start, is a multiple of four (the newlines of the bytes the block before left
    over are that block's count modulo four)."""
    pending, pending_lines, line = head, 0, 0
    while True:
        buffer = _new_buffer(pending, block_bytes, allocate)
        got, newlines = source.fill(buffer[len(pending):], True)
        end = len(pending) + got
        at_end = end < len(buffer)
        lines, cut = pending_lines + newlines, end
        if not at_end:
            cut = 0  # no whole record yet: the buffer grows
            if lines >= 4:
                cut = _newline_back(buffer, end, lines % 4 + 1)  # back over the unfinished record's newlines
            pending_lines = lines % 4 if cut else lines
            lines -= pending_lines
        if cut:
            yield Block(memoryview(buffer)[:cut], False, False, path, is_fastq=True, line=line)
            line += lines
        pending = buffer[cut:end].tobytes()
        if not cut:
            release(buffer)
        if at_end:
            return


class _dnaio_errors:
    """dnaio's format errors as one-line InputErrors naming the file and line (`first_line` lines of the file
    come before what dnaio reads)."""

    def __init__(self, path, first_line=0):
        self.path, self.first_line = path, first_line

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if kind is None:
            return False
        if issubclass(kind, dnaio.exceptions.UnknownFileFormat):
            raise InputError(self.path, "neither FASTA nor FASTQ (expected '>' or '@' at the start)") from None
        if issubclass(kind, dnaio.FileFormatError):
            line = None if error.line is None else error.line + 1 + self.first_line
            message = " ".join(error.message.split()).rstrip(".")  # some of dnaio's span two lines
            raise InputError(self.path, message, line=line) from None
        if issubclass(kind, UNREADABLE):
            raise stream_error(self.path, error) from None
        return False


def _codes(sequences):
    return GENERAL_TABLE[np.frombuffer("\n".join(sequences).encode("ascii"), dtype=np.uint8)]


def _record_blocks(path, block_bytes):
    """Code blocks of a file that dnaio parses (its errors turned into InputErrors)."""
    batch, size = [], 0
    with _dnaio_errors(path), dnaio.open(path) as reader:
        for record in reader:
            sequence = record.sequence
            if len(sequence) > block_bytes:  # a long record alone, in pieces that carry
                if batch:
                    yield Block(_codes(batch), False, False, path)
                    batch, size = [], 0
                for start in range(0, len(sequence), block_bytes):
                    yield Block(_codes([sequence[start:start + block_bytes]]), False, start > 0, path)
                continue
            batch.append(sequence)
            size += len(sequence) + 1
            if size >= block_bytes:
                yield Block(_codes(batch), False, False, path)
                batch, size = [], 0
    if batch:
        yield Block(_codes(batch), False, False, path)


def blocks(paths, block_bytes, allocate=fresh_buffer, parallel=True, release=lambda buffer: None):
    """Yield the Blocks of every file of `paths`, in order, each text block in a buffer from
    `allocate(size)`; a buffer let go without a block goes to `release(buffer)` (module docstring);
    `parallel`: read with the reading threads, else in the calling thread alone."""
    for path in map(os.fspath, paths):
        if not os.path.isfile(path):
            raise InputError(path, "no such file")
        if os.path.getsize(path) == 0:
            continue
        try:
            with _source(path, parallel) as source:
                first = np.empty(1, np.uint8)
                head = first[:source.fill(first, False)[0]].tobytes()
                if head == b">":
                    yield from _text_blocks(source, head, path, block_bytes, allocate, release)
                    continue
                if head == b"@":
                    yield from _fastq_blocks(source, head, path, block_bytes, allocate, release)
                    continue
        except UNREADABLE as e:
            raise stream_error(path, e) from None
        if head:
            yield from _record_blocks(path, block_bytes)
