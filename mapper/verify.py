"""Verification: the exact edit distance of each candidate window, and the loci the read maps to.

Input : `StrandRows`, `Candidates` (surviving the filter), the `Reference`.
Output: `Mappings` (row, contig, start, end, edits): every end position in each window where the whole
        read aligns semi-globally (free reference ends) with the window's fewest edits d, if d <= e, each with
        the *leftmost* start of an alignment of cost d ending there; global coordinates, end exclusive.
        edlib (HW mode, k = e, task "locations") computes exactly this (its start is found by a reverse
        prefix alignment taking the farthest position, checked against brute force in the tests); N never
        matches (alphabet.py). Every backend must return this same set, so the SAM is the same.

`select_loci` then applies CONVENTIONS.md: mappings of one read on one strand of one contig whose ends lie
within e of each other are one locus, reported once as its mapping with the fewest edits, then the
leftmost start; a read's loci are ordered by edits, contig, start, forward before reverse.
"""
import math
from dataclasses import dataclass, fields

import edlib
import numpy as np

from mapper.alphabet import READ_ASCII


@dataclass
class Mappings:
    row: np.ndarray
    contig: np.ndarray
    start: np.ndarray
    end: np.ndarray
    edits: np.ndarray

    def __len__(self):
        return len(self.row)

    def take(self, index):
        return Mappings(*(getattr(self, f.name)[index] for f in fields(self)))

    @classmethod
    def concat(cls, parts):
        """One Mappings of several (at least one), in the given order."""
        return cls(*(np.concatenate([getattr(m, f.name) for m in parts]) for f in fields(cls)))


def verify(rows, cands, reference):
    """edlib on every candidate window (one call per window; the hot loop the cuda backend replaces)."""
    wstart, wend = cands.windows(rows, reference)
    read_ascii = READ_ASCII[rows.codes]
    ref_ascii = reference.ascii
    out = ([], [], [], [], [])
    for row, contig, ws, we, s, length, e in zip(
            cands.row.tolist(), cands.contig.tolist(), wstart.tolist(), wend.tolist(),
            rows.start[cands.row].tolist(), rows.length[cands.row].tolist(), rows.e[cands.row].tolist()):
        result = edlib.align(read_ascii[s:s + length].tobytes(), ref_ascii[ws:we].tobytes(),
                             mode="HW", task="locations", k=e)
        edits = result["editDistance"]
        if edits < 0:
            continue
        for first, last in result["locations"]:
            for column, value in zip(out, (row, contig, ws + first, ws + last + 1, edits)):
                column.append(value)
    return Mappings(*(np.array(c, dtype=np.int64) for c in out))


def select_loci(rows, maps):
    """One mapping per locus, in report order (read, then edits, contig, start, strand).

    Global coordinates order contigs as the contig table does and a mapping lies inside its contig, so
    ordering by end (or start) also orders by contig: the sorts need no contig key."""
    if not len(maps):
        return maps
    read, strand = rows.read_of(maps.row), rows.strand_of(maps.row)
    order = _sort_order(read, strand, maps.end)
    maps, read, strand = maps.take(order), read[order], strand[order]
    new = np.ones(len(maps), dtype=bool)
    new[1:] = ((read[1:] != read[:-1]) | (strand[1:] != strand[:-1]) | (maps.contig[1:] != maps.contig[:-1])
               | (maps.end[1:] - maps.end[:-1] > rows.e[maps.row[1:]]))
    # each locus' first mapping (in this order) with the fewest edits, then the leftmost start
    locus = np.cumsum(new) - 1
    rank = maps.edits * (int(maps.start.max()) + 1) + maps.start
    candidate = np.flatnonzero(rank == np.minimum.reduceat(rank, np.flatnonzero(new))[locus])
    keep = candidate[np.r_[True, locus[candidate[1:]] != locus[candidate[:-1]]]]
    maps, read, strand = maps.take(keep), read[keep], strand[keep]
    return maps.take(_sort_order(read, maps.edits, maps.start, strand))


def _sort_order(*keys):
    """Stable order by `keys` (non-negative int arrays, most significant first): one argsort of the keys
    packed into int64 where their ranges fit (all but huge batches on a huge genome), else lexsort, which
    sorts once per key."""
    bounds = [int(key.max()) + 1 for key in keys]
    if math.prod(bounds) >= 1 << 63:
        return np.lexsort(keys[::-1])
    packed = keys[0].astype(np.int64)
    for key, bound in zip(keys[1:], bounds[1:]):
        packed = packed * bound + key
    return np.argsort(packed, kind="stable")
