"""Seeding: FastHASH (mrFAST's) over a whole batch at once, vectorised with numpy.

Input  `StrandRows`: every read on both strands as a "row" of one flat code array (forward reads, then
       their reverse complements), with each row's start, length and error threshold e.
Output `Candidates`: (row, contig, lo, hi): the row may align with <= e edits starting near a diagonal
       in [lo, hi] (hi - lo <= e); the verifier searches the window [lo - e, hi + L + e] of that contig.

Steps, each counted in `SeedStats`:
1. k-mers: the row's non-overlapping ws-mers at offsets 0, ws, 2ws, ... (floor(L/ws) of them); a k-mer
   with an N is never a seed (CONVENTIONS.md).
2. cheap k-mer selection: the e+1 least frequent present k-mers of the row. Each edit breaks at most one
   non-overlapping k-mer, so with <= e edits at least one selected k-mer occurs exactly in the reference,
   on a diagonal within e of the alignment's start (pigeonhole; needs e+1 <= floor(L/ws)).
3. emission: every occurrence of a selected k-mer gives a candidate diagonal (position - offset in read);
   identical (row, contig, diagonal) are merged.
4. adjacency filter: a candidate is dropped when more than e of the row's k-mers are missing from the
   reference at their expected position +-e. Intact k-mers of a true alignment are always found there (the
   shift between two k-mers is at most the number of indels), so this never loses an alignment.
5. diagonal bands: candidates of one row and contig whose diagonals lie within e of each other are chained,
   and chains are cut into bands of width e+1, so that one verification covers a band and windows stay
   at most L + 3e long.
"""
import dataclasses
import functools
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from mapper.alphabet import CODE_N, COMPLEMENT


@dataclass
class StrandRows:
    """Rows 0..n-1 are the reads forward, rows n..2n-1 their reverse complements."""
    forward: np.ndarray    # uint8 [T]: the reads' codes (rows 0..n-1)
    start: np.ndarray      # int64 [2n]
    length: np.ndarray     # int64 [2n]
    e: np.ndarray          # int64 [2n]
    active: np.ndarray     # bool [2n]: rows worth seeding (not more Ns than e)
    reads: tuple = None    # (a, b): a row group's reads (read_groups), whose rows alone may be active

    @functools.cached_property
    def codes(self):
        """uint8 [2T]: `forward`, then its reverse complement (rows n..2n-1). Built on first use: the cuda
        backend builds its device copy from `forward` on the GPU and never needs this one."""
        return np.concatenate([self.forward, COMPLEMENT[self.forward[::-1]]])

    def with_active(self, active, reads=None):
        """These rows with only `active` ones seeded (`reads`: the read range they lie in, if known); the
        codes (built once) are shared."""
        out = dataclasses.replace(self, active=active, reads=reads)
        if "codes" in self.__dict__:
            out.__dict__["codes"] = self.codes
        return out

    @property
    def n_reads(self):
        return len(self.start) // 2

    @property
    def spans(self):
        """The row ranges [lo, hi) outside which no row is active: a group's reads forward and reverse, or
        every row. Work per group over these instead of all the batch's rows: a batch at genome scale is
        seeded in ~30 groups."""
        n = self.n_reads
        if self.reads is None:
            return ((0, 2 * n),)
        a, b = self.reads
        return ((a, b), (n + a, n + b))

    def read_of(self, row):
        return row % self.n_reads

    def strand_of(self, row):
        return row // self.n_reads


def strand_rows(codes, starts, e):
    """Build `StrandRows` from a batch's concatenated codes, its starts [n+1] and per-read e [n]."""
    total = len(codes)
    length = np.diff(starts)
    rc_start = total + (total - starts[1:])
    is_n = np.flatnonzero(codes == CODE_N)  # usually none or few: counted per read only where they are
    n_count = np.bincount(np.searchsorted(starts, is_n, side="right") - 1, minlength=len(length))
    active = n_count <= e
    return StrandRows(
        forward=codes,
        start=np.concatenate([starts[:-1], rc_start]),
        length=np.tile(length, 2),
        e=np.tile(np.asarray(e, dtype=np.int64), 2),
        active=np.tile(active, 2),
    )


@dataclass
class Candidates:
    row: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    contig: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    lo: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    hi: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __len__(self):
        return len(self.row)

    def subset(self, mask):
        return Candidates(self.row[mask], self.contig[mask], self.lo[mask], self.hi[mask])

    def windows(self, rows, reference):
        """(start, end) of each candidate's verification window, clipped to its contig."""
        e = rows.e[self.row]
        start = np.maximum(self.lo - e, reference.starts[self.contig])
        end = np.minimum(self.hi + rows.length[self.row] + e, reference.ends[self.contig])
        return start, end


@dataclass
class SeedStats:
    kmers: int = 0          # k-mers looked at (both strands)
    seeds: int = 0          # k-mers chosen by cheap selection
    hits: int = 0           # occurrences of the chosen k-mers
    diagonals: int = 0      # distinct (row, contig, diagonal)
    adjacent: int = 0       # diagonals kept by the adjacency filter
    bands: int = 0          # verification windows (Candidates)

    def add(self, other):
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def ragged_arange(counts):
    """For counts [m]: (owner, local) with owner = i repeated counts[i] times and local = 0..counts[i]-1."""
    counts = np.asarray(counts, dtype=np.int64)
    owner = np.repeat(np.arange(len(counts)), counts)
    first = np.cumsum(counts) - counts
    return owner, np.arange(len(owner), dtype=np.int64) - first[owner]


def gather_kmers(codes, positions, ws):
    """Keys (int64) and has-N flags of the ws-mers of `codes` starting at `positions`."""
    keys = np.zeros(len(positions), dtype=np.int64)
    has_n = np.zeros(len(positions), dtype=bool)
    for i in range(ws):
        base = codes[positions + i]
        keys = (keys << 2) | (base & 3)
        has_n |= base == CODE_N
    return keys, has_n


def occurs_within(index, keys, lo, hi):
    """bool: key occurs in the reference at a position in [lo, hi] (vectorised binary search per bucket)."""
    a = index.offsets[keys].astype(np.int64)
    end = index.offsets[keys + 1].astype(np.int64)
    b = end.copy()
    todo = np.flatnonzero(a < b)
    while len(todo):
        mid = (a[todo] + b[todo]) >> 1
        below = index.positions[mid] < lo[todo]
        a[todo] = np.where(below, mid + 1, a[todo])
        b[todo] = np.where(below, b[todo], mid)
        todo = todo[a[todo] < b[todo]]
    found = a < end
    found[found] = index.positions[a[found]] <= hi[found]
    return found


@dataclass
class Selection:
    """Steps 1-2 for a batch: every row's k-mers (row krow, index kj in the row, key, has an N, bucket
    size) with each row's first k-mer index and count, and the chosen ones (indices into those arrays)."""
    nk: np.ndarray
    kfirst: np.ndarray
    krow: np.ndarray
    kj: np.ndarray
    keys: np.ndarray
    has_n: np.ndarray
    count: np.ndarray
    chosen: np.ndarray


def select(rows, index):
    """Steps 1-2: the k-mers of every active row, and the e+1 least frequent of each."""
    ws = index.ws
    nk = np.where(rows.active, rows.length // ws, 0)
    kfirst = np.cumsum(nk) - nk
    krow, kj = ragged_arange(nk)
    keys, has_n = gather_kmers(rows.codes, rows.start[krow] + kj * ws, ws)
    count = np.where(has_n, 0, index.bucket_sizes(keys))
    # 2. cheap selection: the e+1 least frequent k-mers of each row. An N or absent k-mer counts as
    # frequency 0: it is certainly broken, so it may take a slot (the pigeonhole holds for *any* e+1
    # k-mers) and costs nothing, which makes the selection both complete and as cheap as possible.
    by_freq = np.lexsort((count, krow))
    rank = np.arange(len(by_freq)) - kfirst[krow[by_freq]]
    chosen = by_freq[rank < rows.e[krow[by_freq]] + 1]
    chosen = chosen[count[chosen] > 0]
    return Selection(nk, kfirst, krow, kj, keys, has_n, count, chosen)


class RowGroup(NamedTuple):
    """Reads [a, b) of a batch as the stages run on them: `rows`, the batch's StrandRows with only those
    reads active, so that row numbers, and everything keyed by them, stay the batch's."""
    a: int
    b: int
    rows: StrandRows


def hit_groups(rows, index, budget):
    """`rows` cut into RowGroups of whole reads (both strands) whose seed hits add up to at most `budget`
    (a read with more is a group of its own). Seeding and verifying one group at a time bounds the memory
    of a batch by the budget instead of by what its reads hit (a poly-A read hits every poly-A stretch of
    the genome)."""
    sel = select(rows, index)
    per_row = np.bincount(sel.krow[sel.chosen], weights=sel.count[sel.chosen], minlength=len(rows.start))
    return read_groups(rows, per_row, budget)


def read_groups(rows, per_row, budget):
    """`rows` cut into RowGroups of whole reads whose hits (`per_row`, of each strand row) add up to at
    most `budget` (see hit_groups)."""
    n = rows.n_reads
    per_read = per_row[:n] + per_row[n:]
    if per_read.sum() <= budget:
        return [RowGroup(0, n, rows)]
    ends = np.cumsum(per_read)
    cuts = [0]
    while cuts[-1] < n:
        start = cuts[-1]
        cuts.append(max(int(np.searchsorted(ends, ends[start] - per_read[start] + budget, side="right")), start + 1))
    return [RowGroup(a, b, rows.with_active(_active_within(rows.active, n, a, b), (a, b)))
            for a, b in zip(cuts[:-1], cuts[1:])]


def _active_within(active, n, a, b):
    """`active` with only the rows of reads [a, b) kept (forward and reverse)."""
    kept = np.zeros(len(active), dtype=bool)
    kept[a:b], kept[n + a:n + b] = active[a:b], active[n + a:n + b]
    return kept


def seed(rows, index):
    """Candidates of all rows (see the module docstring), and the counts of each step."""
    ws = index.ws
    stats = SeedStats()
    sel = select(rows, index)
    nk, kfirst, krow, kj, keys, has_n, count, chosen = (
        sel.nk, sel.kfirst, sel.krow, sel.kj, sel.keys, sel.has_n, sel.count, sel.chosen)
    stats.kmers = len(keys)
    stats.seeds = len(chosen)

    # 3. emission
    owner, local = ragged_arange(count[chosen])
    sel = chosen[owner]
    hit = index.positions[index.offsets[keys[sel]].astype(np.int64) + local].astype(np.int64)
    row = krow[sel]
    diag = hit - kj[sel] * ws
    contig = np.searchsorted(index.reference.starts, hit, side="right") - 1
    stats.hits = len(hit)
    order = np.lexsort((diag, contig, row))
    row, contig, diag = row[order], contig[order], diag[order]
    new = np.ones(len(row), dtype=bool)
    new[1:] = (row[1:] != row[:-1]) | (contig[1:] != contig[:-1]) | (diag[1:] != diag[:-1])
    row, contig, diag = row[new], contig[new], diag[new]
    stats.diagonals = len(row)

    # 4. adjacency filter
    owner, j = ragged_arange(nk[row])
    kidx = kfirst[row[owner]] + j
    target = diag[owner] + j * ws
    e_own = rows.e[row[owner]]
    present = ~has_n[kidx] & occurs_within(index, keys[kidx], target - e_own, target + e_own)
    missing = nk[row] - np.bincount(owner, weights=present, minlength=len(row)).astype(np.int64)
    keep = missing <= rows.e[row]
    row, contig, diag = row[keep], contig[keep], diag[keep]
    stats.adjacent = len(row)
    if not len(row):
        return Candidates(), stats

    # 5. bands of width e+1 within chains of diagonals that are <= e apart
    e_row = rows.e[row]
    chain = np.ones(len(row), dtype=bool)
    chain[1:] = (row[1:] != row[:-1]) | (contig[1:] != contig[:-1]) | (diag[1:] - diag[:-1] > e_row[1:])
    chain_first = diag[np.flatnonzero(chain)][np.cumsum(chain) - 1]
    band = (diag - chain_first) // (e_row + 1)
    new = chain.copy()
    new[1:] |= band[1:] != band[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(row)) - 1
    stats.bands = len(first)
    return Candidates(row[first], contig[first], diag[first], diag[last]), stats

