"""Pairs files: one `<seq1>\\t<seq2>` a line (the published filter benchmarks' format), parsed with whole-array
numpy operations (no per-line Python loop), so that reading keeps up with the filter.

Input : a pairs file. Column 1 is the reference segment or window (the string that gets shifted in faithful
        mode), column 2 the read. Lengths may differ between lines; CRLF line ends and a last line without a
        newline are fine. A line without exactly one tab, with an empty column, or with a character other than a
        letter is an error naming the file and the line.
Output: `Pairs`: the file's bytes and, per line, where each column starts and how long it is; `groups()` hands
        out the lines in blocks of one (len1, len2) as ASCII arrays uint8 [n, len].
"""
from dataclasses import dataclass

import numpy as np

from mapper.errors import InputError

_LETTER = np.zeros(256, dtype=bool)
_LETTER[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", dtype=np.uint8)] = True


@dataclass
class Pairs:
    path: str
    data: np.ndarray        # uint8, the file's bytes
    start1: np.ndarray      # int64 [n], offset of column 1 in data
    len1: np.ndarray        # int64 [n]
    start2: np.ndarray
    len2: np.ndarray
    first_line: int = 1     # the file's line number of data's first line (a chunk of a larger file)

    def __len__(self):
        return len(self.start1)

    def groups(self):
        """Yield (line indices, ascii1 uint8 [m, len1], ascii2 uint8 [m, len2]) per distinct (len1, len2)."""
        key = self.len1 * (int(self.len2.max(initial=0)) + 1) + self.len2
        order = np.argsort(key, kind="stable")
        bounds = np.flatnonzero(np.diff(key[order])) + 1
        for rows in np.split(order, bounds):
            if len(rows):
                yield rows, self._gather(self.start1[rows], int(self.len1[rows[0]])), \
                    self._gather(self.start2[rows], int(self.len2[rows[0]]))

    def _gather(self, starts, length):
        return self.data[starts[:, None] + np.arange(length)]

    def line_of(self, index):
        """1-based line number of pair `index` in the file (lines are pairs: no blank lines are allowed)."""
        return int(index) + self.first_line


def parse_pairs(raw, path, first_line=1):
    """`Pairs` from the bytes of a pairs file, or of whole lines of it from line `first_line` on;
    InputError(path, ..., line=N) for the first bad line."""
    data = np.frombuffer(raw, dtype=np.uint8)
    if not len(data):
        empty = np.zeros(0, dtype=np.int64)
        return Pairs(str(path), data, empty, empty, empty, empty, first_line)
    newline = np.flatnonzero(data == 10)
    ends = newline if data[-1] == 10 else np.append(newline, len(data))
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    ends = ends.astype(np.int64)
    crlf = (ends > starts) & (data[np.maximum(ends - 1, 0)] == 13)
    ends = ends - crlf
    n = len(starts)

    tabs = np.flatnonzero(data == 9)
    first_tab = np.searchsorted(tabs, starts)
    ntabs = np.searchsorted(tabs, ends) - first_tab
    tab = tabs[np.minimum(first_tab, len(tabs) - 1)] if len(tabs) else starts
    problems = [(ntabs != 1, "expected two columns separated by one tab")]
    len1, len2 = tab - starts, ends - tab - 1
    problems.append(((ntabs == 1) & ((len1 <= 0) | (len2 <= 0)), "empty sequence"))
    # every byte of a line but its tab must be a letter (the CR of a CRLF and the newlines are outside [start, end))
    bad_byte = ~_LETTER[data]
    bad_byte[tabs] = False
    pos = np.flatnonzero(bad_byte)
    line = np.searchsorted(starts, pos, side="right") - 1
    bad_line = np.zeros(n, dtype=bool)
    bad_line[line[pos < ends[line]]] = True
    problems.append((bad_line, "a character other than a letter"))
    first = [(int(np.argmax(mask)), message) for mask, message in problems if mask.any()]
    if first:
        line, message = min(first)
        raise InputError(path, message, line=line + first_line)
    return Pairs(str(path), data, starts, len1, tab + 1, len2, first_line)


def read_pairs(path):
    """`parse_pairs` of a file on disk."""
    with open(path, "rb") as f:
        return parse_pairs(f.read(), path)
