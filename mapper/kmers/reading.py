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
- Anything else (FASTQ; a FASTA file that starts with a blank or comment line) is parsed by dnaio (C,
  records in batches) into code blocks of about `block_bytes` bases: whole records joined by an N, a
  longer record cut into pieces that carry.

Format errors are one-line InputErrors naming the file and line. An empty file is valid input and holds no
k-mers (as for jellyfish).
"""
import os
from dataclasses import dataclass

import dnaio
import numpy as np
from xopen import xopen

from mapper.errors import InputError
from mapper.kmers.fasta import GENERAL_TABLE, NonAsciiError, fasta_codes
from mapper.reference import DECOMPRESSION_ERRORS, stream_error

UNREADABLE = (UnicodeDecodeError, OSError, *DECOMPRESSION_ERRORS)  # a damaged gzip block, CRC or end included


@dataclass
class Block:
    data: object   # FASTA text (bytes-like, is_text); else uint8 codes
    is_text: bool
    carry: bool    # continues the previous block's sequence
    path: str
    offset: int = 0  # of the text in the decompressed file, for error messages

    def codes(self, parse=fasta_codes):
        """uint8 codes of the block (text parsed by `parse`, fasta.py's rules)."""
        if not self.is_text:
            return self.data
        try:
            return parse(self.data)
        except NonAsciiError as e:
            line = _line_of(self.path, self.offset + e.offset)
            raise InputError(self.path, "non-ASCII byte in a sequence line", line=line) from None


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


def _text_blocks(f, head, path, block_bytes):
    """Blocks of whole lines of the open file f, whose first bytes (already read) are `head`. Each block is
    read into its own buffer behind the partial line left by the block before, and handed on as a
    memoryview: no copy of the text is made here."""
    pending, offset, carry = head, 0, False
    while True:
        buffer = bytearray(len(pending) + max(block_bytes, len(pending)))  # growing: a long line stays linear
        buffer[:len(pending)] = pending
        end = len(pending) + _read_into(f, memoryview(buffer)[len(pending):])
        at_end = end < len(buffer)
        cut = end if at_end else buffer.rfind(b"\n", 0, end) + 1
        if cut:
            yield Block(memoryview(buffer)[:cut], True, carry, path, offset)
            offset, carry = offset + cut, True
        pending = bytes(buffer[cut:end])
        if at_end:
            return


def _codes(sequences):
    return GENERAL_TABLE[np.frombuffer("\n".join(sequences).encode("ascii"), dtype=np.uint8)]


def _record_blocks(path, block_bytes):
    """Code blocks of a file that dnaio parses (its errors turned into InputErrors)."""
    batch, size = [], 0
    try:
        with dnaio.open(path) as reader:
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
    except dnaio.exceptions.UnknownFileFormat:
        raise InputError(path, "neither FASTA nor FASTQ (expected '>' or '@' at the start)") from None
    except dnaio.FileFormatError as e:
        line = None if e.line is None else e.line + 1
        raise InputError(path, e.message.rstrip("."), line=line) from None
    except UNREADABLE as e:
        raise stream_error(path, e) from None
    if batch:
        yield Block(_codes(batch), False, False, path)


def blocks(paths, block_bytes):
    """Yield the Blocks of every file of `paths`, in order."""
    for path in map(os.fspath, paths):
        if not os.path.isfile(path):
            raise InputError(path, "no such file")
        if os.path.getsize(path) == 0:
            continue
        try:
            with xopen(path, "rb") as f:
                head = f.read(1)
                if head == b">":
                    yield from _text_blocks(f, head, path, block_bytes)
                    continue
        except UNREADABLE as e:
            raise stream_error(path, e) from None
        if head:
            yield from _record_blocks(path, block_bytes)
