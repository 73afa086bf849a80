"""FASTA text -> uint8 base codes, vectorised (numpy), with the same result as reading the records with dnaio.

In : text  bytes of whole lines of a FASTA file (a block cut after a newline; a file's first block starts
           with its first header line)
Out: codes uint8 [m] (mapper.alphabet: A=0, C=1, G=2, T=3, N=4 for any other byte), the sequence lines
     concatenated, one N in place of each header line, so that no k-mer spans two records.

What dnaio (the reference, reading.py's path for everything else) does with a FASTA line, and so this: the
line is stripped of white space (str.strip(): space, \\t, \\n, \\v, \\f, \\r, \\x1c-\\x1f); a blank line is
skipped; '>' first starts a record (the header is dropped); '#' first makes it a comment (dropped); any
other line is sequence, and white space inside it is a non-ACGT letter. '\\r' also ends a line
(universal newlines). A byte >= 0x80 in a sequence line is an error (header text is not looked into).

Two paths, exact on what they accept:
- `fast_codes`, the common file (\\n line ends, no other white space or '#' line, ASCII): one
  bytes.translate, the header lines found by their '>' after a newline, one boolean compaction. A block
  it cannot take exactly (it finds a white space, '#' or non-ASCII byte outside header lines) gives None.
- `general_codes`, everything else: each line's first and last non-space byte found with numpy, lines
  classified by their first byte. It costs a few times more, and only the blocks that need it pay.
The GPU parses text blocks with the same rules (kernels/kmer_extract.cu) and falls back to
`general_codes` where it finds an odd byte.
"""
import numpy as np

from mapper.alphabet import BASES, CODE_N

CODE_SKIP = 5  # a byte that leaves no code (a newline)
CODE_ODD = 6   # a byte the fast path cannot place (white space, non-ASCII): the block takes the general path
NEWLINE, CR, HEADER, COMMENT = ord("\n"), ord("\r"), ord(">"), ord("#")
WHITESPACE = b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "  # what str.strip() removes, among ASCII bytes


def _table(default, extra):
    table = bytearray([default] * 256)
    for code, base in enumerate(BASES):
        table[ord(base)] = table[ord(base.lower())] = code
    for byte, code in extra.items():
        table[byte] = code
    return bytes(table)


FAST_TABLE = _table(CODE_N, {**{b: CODE_ODD for b in WHITESPACE}, **{b: CODE_ODD for b in range(128, 256)},
                             NEWLINE: CODE_SKIP})
GENERAL_TABLE = np.frombuffer(_table(CODE_N, {}), dtype=np.uint8)
IS_SPACE = np.zeros(256, dtype=bool)
IS_SPACE[list(WHITESPACE)] = True


class NonAsciiError(ValueError):
    """A byte >= 0x80 at `offset` of the block (reading.py names the file and line)."""

    def __init__(self, offset):
        super().__init__(f"non-ASCII byte at offset {offset}")
        self.offset = offset


def ranges(starts, lengths):
    """int64 [sum(lengths)]: the concatenated ranges starts[i] .. starts[i] + lengths[i] - 1."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    before = np.cumsum(lengths) - lengths
    return np.repeat(np.asarray(starts, dtype=np.int64) - before, lengths) + np.arange(total, dtype=np.int64)


def _at_line_start(a, positions):
    """The positions (int64) whose byte follows a newline or starts the block."""
    return positions[(positions == 0) | (a[positions - 1] == NEWLINE)]


def fast_codes(text):
    """codes of a block with \\n line ends and no white space or '#' line outside headers; else None."""
    text = bytes(text)
    if b"\r" in text or b"#" in text and (text.startswith(b"#") or b"\n#" in text):  # memchr: usually absent
        return None
    a = np.frombuffer(text, dtype=np.uint8)
    codes = np.frombuffer(text.translate(FAST_TABLE), dtype=np.uint8)
    keep = codes != CODE_SKIP
    heads = _at_line_start(a, np.flatnonzero(a == HEADER))  # each becomes one N (FAST_TABLE['>'] = N)
    if len(heads):
        newlines = np.flatnonzero(a == NEWLINE)
        ends = np.append(newlines, len(a))[np.searchsorted(newlines, heads)]
        keep[ranges(heads + 1, ends - heads - 1)] = False
    codes = codes[keep]
    if len(codes) and codes.max() > CODE_N:
        return None
    return codes


def general_codes(text):
    """codes of any block (the module docstring's rules); NonAsciiError for a byte >= 0x80."""
    a = np.frombuffer(text, dtype=np.uint8)
    high = np.flatnonzero(a >= 0x80)
    if len(high):
        raise NonAsciiError(int(high[0]))
    a = np.where(a == CR, np.uint8(NEWLINE), a)
    solid = np.flatnonzero(~IS_SPACE[a])
    if not len(solid):
        return np.empty(0, dtype=np.uint8)
    line = np.cumsum(a == NEWLINE, dtype=np.int64)[solid]  # the line of each non-space byte
    first = np.ones(len(solid), dtype=bool)
    first[1:] = line[1:] != line[:-1]
    last = np.append(first[1:], True)
    lo, hi = solid[first], solid[last]  # per non-blank line: its first and last non-space byte
    kind = a[lo]
    header, sequence = kind == HEADER, (kind != HEADER) & (kind != COMMENT)
    codes = GENERAL_TABLE[a]
    codes[lo[header]] = CODE_N
    # keep [lo, hi] of each sequence line and the first byte (now an N) of each header line
    edges = np.zeros(len(a) + 1, dtype=np.int8)
    edges[lo[header | sequence]] = 1
    edges[np.where(header, lo, hi)[header | sequence] + 1] = -1
    return codes[np.cumsum(edges[:-1], dtype=np.int8) > 0]


def fasta_codes(text):
    """codes of a block of FASTA text (the fast path when it applies)."""
    codes = fast_codes(text)
    return general_codes(text) if codes is None else codes
