"""Reads: FASTQ or FASTA (plain or gzip, any and mixed lengths) -> batches of concatenated arrays.

Output (`ReadBatch`, one per `batch_size` reads, in file order):
    names    list[str]     QNAME: the header's first word
    seq      uint8 [T]     all sequences concatenated, ASCII, upper-cased (IUPAC letters kept for SAM)
    qual     uint8 [T]     qualities concatenated (ASCII), or None for FASTA input
    starts   int64 [n+1]   read i is seq[starts[i]:starts[i+1]]
    first    int           index of the batch's first read in the file (records are written in input order)

Flat arrays rather than a padded matrix: one long read among short ones costs its own length, not
n x longest. Two parsers, one result:
  - `read_blocks` cuts whole batches with numpy, for FASTQ and FASTA files (plain or compressed, not pipes):
    dnaio's one Python object per read held the GIL for ~2.7 s per million reads in the reader thread,
    against the main thread that drives the GPU. It accepts only what it checks fully.
  - dnaio (C, with file and line in its errors) reads the rest: pipes, BAM, and any file the block parser
    is unsure of, which dnaio reads again from the start, skipping the reads already returned, so that its
    error is exactly the one a dnaio-only reading gives (a non-ASCII byte may come to light a batch later
    than there: dnaio checks each 128 kB it reads ahead). This module turns dnaio's errors into one-line
    `InputError`s naming the file, the line and the record; so are a damaged compressed file's errors
    (IsalError, BadGzipFile, EOFError, ...) and a BAM file dnaio cannot read.
Both give only what SAM can hold (README "Errors and safety"): a read whose name is not SAM's QNAME
([!-?A-~]{1,254}: printable ASCII but '@', at most 254 bytes), whose sequence holds anything but letters and '.', or
whose qualities anything outside '!'..'~', is refused with one line naming the file, the record and the field
(`check_batch`; the block parser checks the same with a few whole-batch numpy passes and hands a batch that
fails to dnaio, whose reading then names the record).
"""
import collections
import contextlib
import itertools
import os
import queue
import threading
import weakref
from dataclasses import dataclass, field

import dnaio
import numpy as np
from xopen import xopen

from mapper.alphabet import ENCODE
from mapper.errors import InputError
from mapper.read_blocks import (MAX_NAME, NAME_BYTE, FastaBlocks, FastqBlocks, Unsure, SEQ_BYTE, qualities_ok, sequence_ok,
                                read_chunks)
from mapper.reference import DECOMPRESSION_ERRORS, require_readable, stream_error

try:  # dnaio's choice of format by file name; private, so a dnaio without it means dnaio reads every file
    from dnaio.singleend import _detect_format_from_name
except ImportError:  # pragma: no cover - depends on the installed dnaio
    def _detect_format_from_name(path):
        return "unknown"

BATCH_SIZE = 100_000
_UPPER = np.frombuffer(bytes(range(256)).upper(), dtype=np.uint8)  # ASCII upper-casing as a lookup table


@dataclass
class ReadBatch:
    names: list
    seq: np.ndarray
    qual: np.ndarray
    starts: np.ndarray
    first: int = 0
    _codes: np.ndarray = field(default=None, init=False, repr=False, compare=False)

    def __len__(self):
        return len(self.names)

    @property
    def lengths(self):
        return np.diff(self.starts)

    def codes(self):
        """uint8 [T]: the concatenated sequences as 2-bit codes (4 = N); computed once, by whoever asks first
        (a mapping run has its reader thread do it: `with_codes`)."""
        if self._codes is None:
            self._codes = ENCODE[self.seq]
        return self._codes

    def slice(self, a, b):
        """Reads [a, b) as a batch of their own (views, the codes too where computed)."""
        s0, s1 = self.starts[a], self.starts[b]
        part = ReadBatch(self.names[a:b], self.seq[s0:s1], None if self.qual is None else self.qual[s0:s1],
                         self.starts[a:b + 1] - s0, self.first + a)
        if self._codes is not None:
            part._codes = self._codes[s0:s1]
        return part


def with_codes(batches):
    """`batches`, each with its codes computed as it passes: run inside `prefetch`, the encoding happens in
    the reader thread, not in the thread that drives the GPU."""
    for batch in batches:
        batch.codes()
        yield batch


def _format_error(path, error, is_fastq):
    line = None if error.line is None else error.line + 1
    message = " ".join(str(error.args[0]).split()).rstrip(".")  # one line
    if line is None and "Non-ASCII" in message:  # dnaio does not say where: find the byte
        line = _first_non_ascii_line(path)
    record = None if line is None or not is_fastq else (line - 1) // 4 + 1
    return InputError(path, message, line=line, record=record)


def _first_non_ascii_line(path):
    """The line (from 1) of the file's first byte above 127, or None (an error path only: reads it again)."""
    lines = 0
    try:
        with xopen(path, "rb", threads=0) as stream:
            while chunk := stream.read(1 << 22):
                array = np.frombuffer(chunk, dtype=np.uint8)
                high = np.flatnonzero(array >= 128)
                if len(high):
                    return lines + 1 + int(np.count_nonzero(array[:high[0]] == ord("\n")))
                lines += int(np.count_nonzero(array == ord("\n")))
    except (OSError, *DECOMPRESSION_ERRORS):
        return None
    return None


_NAME_OR_LF = NAME_BYTE.copy()
_NAME_OR_LF[ord("\n")] = True


def _shown(byte):
    return {32: "a space", 9: "a tab", 0: "a NUL byte"}.get(byte) or (
        repr(chr(byte)) if 32 < byte < 127 else f"byte 0x{byte:02x}")


def check_batch(path, names, seq, qual, starts, first, fastq):
    """Raise InputError for the batch's first read that SAM cannot hold (module docstring): its name, its
    sequence or its qualities. Whole-batch numpy passes; Python only for the read reported."""
    problems = []  # (index in the batch, line in the record (FASTQ), message)
    joined = np.frombuffer("\n".join(names).encode("utf-8", "surrogateescape"), dtype=np.uint8)
    bad = np.flatnonzero(~_NAME_OR_LF[joined])
    ends = np.flatnonzero(joined == ord("\n"))
    if len(bad):
        i = int(np.searchsorted(ends, bad[0]))
        byte = int(joined[bad[0]])
        what = "'@'" if byte == ord("@") else _shown(byte) if byte < 128 else "a non-ASCII character"
        problems.append((i, 0, f"read name {names[i][:60]!r} holds {what}, which SAM forbids in a read name "
                               f"(printable ASCII but '@')"))
    sizes = np.diff(np.concatenate([[-1], ends, [len(joined)]])) - 1
    long = np.flatnonzero(sizes > MAX_NAME)
    if len(long):
        i = int(long[0])
        problems.append((i, 0, f"read name of {int(sizes[i])} characters ({names[i][:20]}...); SAM allows at most "
                               f"{MAX_NAME}"))
    for line, data, allowed, rule in ((1, seq, sequence_ok, "only letters and '.' are allowed in a sequence"),
                                      (3, qual, qualities_ok, "only '!' to '~' are allowed in qualities")):
        if data is None or allowed(data):
            continue
        ok = SEQ_BYTE[data] if line == 1 else (data >= 33) & (data <= 126)
        at = int(np.argmin(ok))
        i = int(np.searchsorted(starts, at, side="right")) - 1
        problems.append((i, line, f"read {names[i][:60]!r}: {_shown(int(data[at]))} at position "
                                  f"{at - int(starts[i]) + 1} of its {'sequence' if line == 1 else 'qualities'} "
                                  f"({rule})"))
    if problems:
        i, line, message = min(problems, key=lambda p: p[0])
        record = first + i + 1
        raise InputError(path, message, line=4 * (record - 1) + 1 + line if fastq else None, record=record)


def _to_batch(records, first, path, fastq):
    names = [r.name.split(None, 1)[0] if r.name.strip() else "" for r in records]
    if "" in names:
        raise InputError(path, "a read has an empty name", record=first + names.index("") + 1)
    seqs = [r.sequence for r in records]
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    starts = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    seq = np.frombuffer("".join(seqs).encode("ascii", "replace"), dtype=np.uint8)
    qual = None
    if fastq:
        qual = np.frombuffer("".join(r.qualities for r in records).encode("ascii", "replace"), dtype=np.uint8)
    check_batch(path, names, seq, qual, starts, first, fastq)
    return ReadBatch(names, _UPPER[seq], qual, starts, first)


def read_batches(path, batch_size=BATCH_SIZE, fast=True):
    """Yield `ReadBatch`es from a FASTQ/FASTA file. Raises InputError for a bad or empty file.
    `fast=False` reads with dnaio alone (the reference the block parser is tested against)."""
    path = os.fspath(path)
    if path != "-":  # '-': standard input, read by dnaio (gzip detected)
        require_readable(path)
    first = 0
    if fast and path != "-" and os.path.isfile(path):  # (a pipe could not be read again by dnaio)
        with contextlib.closing(_block_batches(path, batch_size)) as batches:
            try:
                for batch in batches:
                    yield batch
                    first += len(batch)
                return
            except Unsure:
                pass
    yield from _dnaio_batches(path, batch_size, skip=first)


def _block_batches(path, batch_size):
    """`ReadBatch`es by the block parser; raises Unsure (maybe after some batches) where dnaio must read."""
    with xopen(path, "rb", threads=0) as stream:  # the stream dnaio.open(path) reads
        parser = _block_parser(path, stream)
        with contextlib.closing(prefetch(read_chunks(stream))) as chunks:  # reading overlaps parsing
            first = 0
            for names, seq, qual, lengths in parser(chunks, batch_size):
                starts = np.zeros(len(lengths) + 1, dtype=np.int64)
                np.cumsum(lengths, out=starts[1:])
                if (seq >= ord("a")).any():  # the look-up costs ~2 ns a base: only for lower case
                    seq = _UPPER[seq]
                yield ReadBatch(names, seq, qual, starts, first)
                first += len(names)


def _block_parser(path, stream):
    """The block parser for the file's format, chosen by dnaio's rules (file name, else first byte)."""
    fileformat = _detect_format_from_name(path)
    try:
        head = stream.peek(1)[:1]
    except Exception:  # a corrupt stream: dnaio reads it, and reports it its own way
        raise Unsure from None
    if head == b"@" and fileformat in ("fastq", None):
        return FastqBlocks
    if head == b">" and fileformat in ("fasta", None):
        return FastaBlocks
    raise Unsure


def _dnaio_batches(path, batch_size, skip=0):
    """`ReadBatch`es as dnaio reads `path`, after its first `skip` reads (parsed, not returned)."""
    fastq = None
    first = skip
    try:
        with dnaio.open(path) as reader:
            fastq = isinstance(reader, dnaio.FastqReader)
            # one iterator: each iter() of a FastaReader starts a new parse where the last one had read to
            # (past the next header), which lost a read and failed at every batch boundary
            reads = iter(reader)
            collections.deque(itertools.islice(reads, skip), maxlen=0)
            while True:
                records = list(itertools.islice(reads, batch_size))
                if not records:
                    break
                yield _to_batch(records, first, path, fastq)
                first += len(records)
    except dnaio.FileFormatError as e:
        raise _format_error(path, e, fastq is not False) from None
    except dnaio.UnknownFileFormat:
        raise InputError(path, "not a FASTQ or FASTA file (no such file name extension, and it starts with "
                               "neither '@' nor '>')") from None
    except UnicodeDecodeError as e:
        raise InputError(path, f"not a text file ({e})") from None
    except NotImplementedError as e:  # dnaio's BAM reader: unmapped single reads only
        raise InputError(path, f"cannot read this BAM file ({str(e).split('. ')[0]}); convert it to FASTQ with "
                               f"'samtools fastq'") from None
    except (OSError, *DECOMPRESSION_ERRORS) as e:
        raise stream_error(path, e) from None
    if first == 0:
        raise InputError(path, "no reads in the file")


def prefetch(batches, depth=2):
    """Iterate `batches` (e.g. read_batches) with the next `depth` items parsed by a background thread, so
    parsing overlaps the GPU stages (PyCUDA releases the GIL while it waits for the device). The thread
    starts at once, not at the first `next`, so a caller can open its index while the first batch is
    parsed. Items and any exception come out in order; stopping early (an error downstream, or closing or
    dropping the iterator before its first item) stops the thread."""
    items = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(entry):
        """Queue `entry`, unless the consumer stops first (it then takes nothing more: a put that waited
        for room for the end mark would wait for ever, and so would the consumer's join)."""
        while not stop.is_set():
            try:
                items.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        try:
            for item in batches:
                if not put((item, None)):
                    return
            put((done, None))
        except BaseException as error:  # handed to the consumer, which re-raises it in its own thread
            put((done, error))
        finally:
            if hasattr(batches, "close"):  # a generator's files close now, in the thread that ran it
                batches.close()

    def consume():
        try:
            while True:
                item, error = items.get()
                if error is not None:
                    raise error
                if item is done:
                    return
                yield item
        finally:
            stop.set()
            thread.join()

    thread = threading.Thread(target=produce, name="gkmap-reader", daemon=True)
    thread.start()
    consumer = consume()
    weakref.finalize(consumer, stop.set)  # a generator closed before it started never runs its finally
    return consumer
