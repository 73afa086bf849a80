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
    `InputError`s naming the file, the line and the record.
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
from mapper.read_blocks import FastaBlocks, FastqBlocks, Unsure, read_chunks
from mapper.reference import require_readable

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


def with_codes(batches):
    """`batches`, each with its codes computed as it passes: run inside `prefetch`, the encoding happens in
    the reader thread, not in the thread that drives the GPU."""
    for batch in batches:
        batch.codes()
        yield batch


def _format_error(path, error, is_fastq):
    line = None if error.line is None else error.line + 1
    record = None if error.line is None or not is_fastq else error.line // 4 + 1
    return InputError(path, error.args[0].rstrip("."), line=line, record=record)


def _to_batch(records, first, path, fastq):
    names = [r.name.split(None, 1)[0] if r.name.strip() else "" for r in records]
    if "" in names:
        raise InputError(path, "a read has an empty name", record=first + names.index("") + 1)
    seqs = [r.sequence for r in records]
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    starts = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    seq = _UPPER[np.frombuffer("".join(seqs).encode("ascii", "replace"), dtype=np.uint8)]
    qual = None
    if fastq:
        qual = np.frombuffer("".join(r.qualities for r in records).encode("ascii", "replace"), dtype=np.uint8)
    return ReadBatch(names, seq, qual, starts, first)


def read_batches(path, batch_size=BATCH_SIZE, fast=True):
    """Yield `ReadBatch`es from a FASTQ/FASTA file. Raises InputError for a bad or empty file.
    `fast=False` reads with dnaio alone (the reference the block parser is tested against)."""
    path = os.fspath(path)
    require_readable(path)
    first = 0
    if fast and os.path.isfile(path):  # (a pipe could not be read again by dnaio)
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
    except (EOFError, UnicodeDecodeError) as e:
        raise InputError(path, f"truncated or corrupt file ({e})") from None
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
