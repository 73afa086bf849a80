"""FASTQ text -> uint8 base codes, vectorised (numpy), with the result dnaio gives for the same records.

In : text  bytes of whole 4-line records (reading.py cuts FASTQ blocks after every fourth newline); the
           last record of a file may lack its final newline
Out: codes uint8 [m] (mapper.alphabet: A=0, C=1, G=2, T=3, N=4 for any other byte), the sequence lines
     each followed by one N, so that no k-mer spans two records; or None when the block is not plain.

Why not dnaio record by record: a Python object per read costs more than everything else of a count
(1 M reads: 4.6 s of 15.5 s). Here a block is a few whole-array passes: the newlines found, the four
lines of every record checked at once ('@' header, a bare '+' line, as many qualities as bases), and the
sequence lines (and their newlines, which become the Ns) kept by a mask made with one np.repeat of
each line's role over its length (ten times faster than a prefix sum of marks).

A block is plain when it has only \\n line ends, no byte >= 0x80, a multiple of four lines, and every
record passes the checks above. Anything else (CRLF, a '+' line repeating the header, a malformed record)
is None here, and reading.py hands that block to dnaio, which parses it the way it always did or raises
the error it always raised (with the line): exact on both paths, and only odd blocks pay.
The GPU parses FASTQ blocks with the same rules (kernels/kmer_extract.cu: fastq_*).
"""
import numpy as np

from mapper.alphabet import BASES, CODE_N

NEWLINE, AT, PLUS = ord("\n"), ord("@"), ord("+")


def _table():
    table = bytearray([CODE_N] * 256)
    for code, base in enumerate(BASES):
        table[ord(base)] = table[ord(base.lower())] = code
    return bytes(table)


SEQUENCE_TABLE = _table()  # a newline becomes N: the separator after each sequence line


def line_bounds(a):
    """(starts, ends) int64 of the lines of a uint8 [n] (ends at the newline, or at n for a last line
    without one)."""
    ends = np.flatnonzero(a == NEWLINE)
    if len(a) and a[-1] != NEWLINE:
        ends = np.append(ends, len(a))
    starts = np.empty_like(ends)
    starts[:1] = 0
    starts[1:] = ends[:-1] + 1
    return starts, ends


def fastq_codes(text):
    """codes of a block of plain FASTQ records (module docstring), else None."""
    text = bytes(text)
    if b"\r" in text:  # memchr: usually absent
        return None
    a = np.frombuffer(text, dtype=np.uint8)
    if not len(a):
        return a.copy()
    starts, ends = line_bounds(a)
    if len(starts) % 4 or a.max() >= 0x80:
        return None
    header, sequence, plus, quality = (starts[j::4] for j in range(4))
    sequence_end, plus_end, quality_end = ends[1::4], ends[2::4], ends[3::4]
    if not ((a[header] == AT).all() and (plus_end - plus == 1).all() and (a[plus] == PLUS).all()
            and (quality_end - quality == sequence_end - sequence).all()):
        return None
    lengths = np.minimum(ends + 1, len(a)) - starts  # with the newline
    is_sequence = np.zeros(len(starts), dtype=bool)
    is_sequence[1::4] = True
    keep = np.repeat(is_sequence, lengths)
    return np.frombuffer(text.translate(SEQUENCE_TABLE), dtype=np.uint8)[keep]
