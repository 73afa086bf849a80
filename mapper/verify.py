"""Verification: the exact edit distance of each candidate window, and the loci the read maps to.

Input : `StrandRows`, `Candidates` (surviving the filter), the `Reference`.
Output: `Mappings` (row, contig, start, end, edits): each window's *cover*. For a window T and the read R,
        D[j] is the fewest edits of an alignment of the whole of R ending at T[j] (semi-global: free start);
        the cover takes the end with the fewest edits (leftmost on ties), then, among ends with D <= e more
        than e away from every taken end, again the fewest, until none is left. Each taken end comes with
        the *leftmost* start (inside the window) of an alignment of cost D[j] ending there; global
        coordinates, end exclusive. N never matches (alphabet.py). kernels/myers.cu computes the same set,
        so every backend writes the same SAM; here it is mapper/myers.py's numpy Myers.

`select_loci` turns the windows' covers into the read's reported mappings, whose rule (the greedy cover of
every end within e, never chained transitively) its docstring states.
"""
import math
from dataclasses import dataclass, fields

import numpy as np

from mapper.myers import last_rows, leftmost_starts
from mapper.options import MAX_E
from mapper.seeding import ragged_arange

MAX_ENDS = 8  # ends of a window's cover verify_windows keeps (a band's window has at most five); more: verify_wide


def kernel_defines(longest):
    """-D constants of kernels/myers.cu for reads of at most `longest` bases (both targets)."""
    words = max(1, -(-int(longest) // 64))
    return dict(MAX_WORDS=words, MAX_ENDS=MAX_ENDS, MAX_WIN=64 * words + 3 * MAX_E + 1)


@dataclass
class Mappings:
    """Verified mappings, one per taken end (row, contig, start, end exclusive, edits). `settled` (bool, or
    None: none is): the end belongs to the cover of a whole stretch (gather.cu candidate_stretches), which is
    already locus selection's answer there, so select_loci keeps it as it is."""
    row: np.ndarray
    contig: np.ndarray
    start: np.ndarray
    end: np.ndarray
    edits: np.ndarray
    settled: np.ndarray = None

    def __len__(self):
        return len(self.row)

    def take(self, index):
        return Mappings(*(None if (value := getattr(self, f.name)) is None else value[index] for f in fields(self)))

    @classmethod
    def concat(cls, parts):
        """One Mappings of several, in the given order, every position field int64 (a device's parts
        come in its narrower dtypes: widened in the same pass as the copy); none: no mappings."""
        if not parts:
            return cls(*(np.zeros(0, dtype=np.int64) for _ in POSITION_FIELDS))
        if len(parts) == 1:
            one = parts[0]
            return cls(*(getattr(one, f).astype(np.int64, copy=False) for f in POSITION_FIELDS), one.settled)
        columns = [np.concatenate([getattr(m, f) for m in parts], dtype=np.int64) for f in POSITION_FIELDS]
        settled = None
        if any(m.settled is not None for m in parts):
            settled = np.concatenate([np.zeros(len(m), bool) if m.settled is None else m.settled for m in parts],
                                     dtype=bool)
        return cls(*columns, settled)


POSITION_FIELDS = ("row", "contig", "start", "end", "edits")  # Mappings' fields every mapping has
# the device's mapping records (row, contig, start, end, edits, settled: gather.cu found_mappings, myers.cu
# cover_records), as narrow as the values allow (positions below 2^32: every index format's bound)
FOUND_DTYPES = (np.int32, np.int32, np.uint32, np.uint32, np.uint8, np.bool_)


class RecordBuffer:
    """Room for m mapping records on a device `layer`: one allocation holding the FOUND_DTYPES columns one
    after the other (each from an 8-byte boundary), so that they come back in one copy (`fetch`, through the
    layer's pinned buffers when large) and not one per column, each of which waited for the device."""

    def __init__(self, layer, m):
        sizes = [-(-np.dtype(dtype).itemsize * m // 8) * 8 for dtype in FOUND_DTYPES]
        self.layer, self.m, self.at = layer, m, np.cumsum([0] + sizes)
        self.buffer = layer.scratch(int(self.at[-1]))
        self.columns = [layer.shifted(self.buffer, -int(at)) for at in self.at[:-1]]  # kernel arguments

    def fetch(self):
        """The records as host arrays in FOUND_DTYPES (views of one copy)."""
        raw = np.empty(int(self.at[-1]), dtype=np.uint8)
        if len(raw):
            self.layer.copy_out(raw, self.buffer)
        return [raw[at:at + np.dtype(dtype).itemsize * self.m].view(dtype) for at, dtype in zip(self.at, FOUND_DTYPES)]


def verify(rows, cands, reference, budget=1 << 25):
    """Every window's cover (the module docstring) by the numpy Myers of mapper/myers.py: windows in
    chunks of at most `budget` reference bases, so memory is bounded whatever the batch holds."""
    wstart, wend = cands.windows(rows, reference)
    width = wend - wstart
    parts = [_verify_chunk(rows, cands.row[a:b], cands.contig[a:b], wstart[a:b], width[a:b], reference)
             for a, b in column_chunks(width, budget)]
    return Mappings.concat(parts) if parts else _no_mappings()


def column_chunks(width, budget):
    """(a, b) ranges of windows whose widths add up to about `budget` columns each (a wider window alone):
    what bounds the memory of a verification whatever the windows."""
    cut = np.flatnonzero(np.diff(np.cumsum(width) // budget)) + 1
    return zip(np.r_[0, cut], np.r_[cut, len(width)])


def _verify_chunk(rows, row, contig, wstart, width, reference):
    window, end, edits, first = window_covers(reference.codes, rows.codes, rows.start[row], rows.length[row],
                                              rows.e[row], wstart, width)
    return Mappings(row[window], contig[window], first, end + 1, edits)


def window_covers(genome, codes, read_start, read_len, e, win_start, win_len, skip=None):
    """The cover of each window (the module docstring) as flat arrays: (window, end, edits, start), ends
    inclusive and starts in genome coordinates, ordered by window, then end. `skip` (int [n]): leading
    columns of each window that are not ends, though alignments may start there."""
    cap = int(e.max(initial=0)) + 1
    D, offsets = last_rows(genome, codes, read_start, read_len, win_start, win_len, cap)
    if skip is not None:
        owner, column = ragged_arange(skip)
        D[offsets[owner] + column] = cap
    window, column, edits = greedy_cover(D, offsets, e)
    end = win_start[window] + column
    first = leftmost_starts(genome, codes, read_start[window], read_len[window], end, edits, win_start[window])
    return window, end, edits, first


def compiled_covers(genome, codes, read_start, read_len, e, win_start, win_len, skip=None):
    """`window_covers` by kernels/myers.cu verify_wide compiled for the host, on one thread, where a compiler
    is there (render processes refine many small stretches, where numpy's cost per column would dominate);
    numpy where there is none. verify_wide, not verify_windows: the stretches locus selection refines are
    mostly tandem runs, whose ends see the same text and share their starts there (myers.cu
    leftmost_starts), and a stretch of more ends than verify_windows keeps would be verified twice."""
    from mapper.device import host  # a device layer: imported only for this
    if not len(read_start) or not host.available():
        return window_covers(genome, codes, read_start, read_len, e, win_start, win_len, skip)
    window, end, edits, first = wide_covers(host, np.ascontiguousarray(genome), codes, read_start, read_len, e,
                                            win_start, win_len, skip, workers=1)
    order = _sort_order(window, end)  # packed keys: np.lexsort took ~20x as long on a render job's millions
    return window[order], end[order], edits[order], first[order]


def wide_covers(layer, genome, codes, read_start, read_len, e, win_start, win_len, skip=None, budget=1 << 25,
                **launch):
    """`window_covers` of windows of any width and cover size by kernels/myers.cu verify_wide on a device
    `layer` (mapper/device: the GPU's, or the host's), `genome` and `codes` being its buffers and the other
    arguments host arrays [n]. Windows go in chunks of at most `budget` columns (a longer one alone), since
    the kernel keeps each window's last row in memory: the memory is bounded whatever the windows. Returns
    (window, end, edits, start) like window_covers, ordered by window, then the order the ends were taken."""
    width, e = np.asarray(win_len, dtype=np.int64), np.asarray(e, dtype=np.int64)
    parts = []
    for a, b in column_chunks(width, budget):
        up = lambda values, cast: layer.scratch_copy(cast(values[a:b]))
        windows = (up(read_start, _i64), up(read_len, _i32), up(e, _i32), up(win_start, _i64), up(width, _i32),
                   0 if skip is None else up(skip, _i32))
        window, _, start, end, edits, _ = wide_records(layer, genome, codes, windows, width[a:b], e[a:b],
                                                       int(read_len.max()), **launch)
        parts.append((window.astype(np.int64) + a, end.astype(np.int64) - 1, edits.astype(np.int64),
                      start.astype(np.int64)))
    return tuple(np.concatenate(column) for column in zip(*parts))


def wide_records(layer, genome, codes, windows, width, e, longest, labels=(0, 0, 0), **launch):
    """The covers of n windows by kernels/myers.cu verify_wide in one launch, as records in FOUND_DTYPES
    (myers.cu cover_records: only the taken ends come back, already records). `windows`: the device buffers
    read_start, read_len, e, win_start, win_len and skip (0: none) [n]; `labels`: device buffers of each
    window's row, contig and settled (0: the window's index, 0, False); `width`, `e`: the same host arrays
    (the windows' rooms); `longest`: the longest read. The caller bounds the columns (the rows' memory)."""
    n = len(width)
    room = width // (e + 1) + 1  # ends a cover can take (see verify_wide)
    offsets = layer.scratch_copy(_i64(np.r_[np.cumsum(width) - width, np.cumsum(room) - room]))  # one copy
    row_offset, cover_offset = offsets, layer.shifted(offsets, -8 * n)
    slots = int(room.sum())
    best, n_ends = layer.scratch(4 * n), layer.scratch(4 * n)
    ends, starts, edits = (layer.scratch(4 * slots) for _ in range(3))
    defines = kernel_defines(longest)
    layer.launch(layer.function("myers.cu", "verify_wide", **defines), n, genome, codes, *windows[:5], n, windows[5],
                 layer.scratch(int(width.sum())), row_offset, cover_offset, best, n_ends,
                 ends, starts, edits, **launch)
    count = layer.from_device(n_ends, (n,), np.int32).astype(np.int64)
    m = int(count.sum())
    records = RecordBuffer(layer, m)
    if m:
        layer.launch(layer.function("myers.cu", "cover_records", **defines), n, n_ends, cover_offset,
                     layer.scratch_copy(_i64(np.cumsum(count) - count)), n, ends, starts, edits, windows[3], *labels,
                     *records.columns, **launch)
    return records.fetch()


def _i32(a):
    return np.ascontiguousarray(a, dtype=np.int32)


def _i64(a):
    return np.ascontiguousarray(a, dtype=np.int64)


def _no_mappings():
    return Mappings(*(np.zeros(0, dtype=np.int64) for _ in POSITION_FIELDS))


def greedy_cover(D, offsets, e):
    """The cover of each row of distances (row p: D[offsets[p]:offsets[p+1]], radius e[p]): repeatedly take
    the column with the fewest edits (leftmost on ties) among those with at most e[p] not yet covered, and
    cover every column within e[p] of it. Returns (row, column, edits) of the taken columns, int64.

    Vectorised by levels: at level d every column of distance d not covered by a lower level's pick is
    taken left to right unless a pick of the same level lies within e to its left, which is the greedy
    order (d, column) exactly. Pick chains of one level run in rounds (one per pick of the longest chain:
    one round unless the read sits in a tandem repeat)."""
    cand = np.flatnonzero(D <= int(e.max(initial=0)))
    seg = np.searchsorted(offsets, cand, side="right") - 1
    keep = D[cand] <= e[seg]
    cand, seg = cand[keep], seg[keep]
    d, radius = D[cand].astype(np.int64), e[seg]
    picked = np.zeros(len(cand), dtype=bool)
    for level in np.unique(d).tolist():
        at = np.flatnonzero(d == level)
        at = at[~_near_pick(cand, seg, radius, picked, at)]
        if not len(at):
            continue
        pos, own, r = cand[at], seg[at], radius[at]
        run_start = np.ones(len(at), dtype=bool)
        run_start[1:] = (own[1:] != own[:-1]) | (pos[1:] - pos[:-1] > r[1:])
        run = np.cumsum(run_start)
        beyond = np.searchsorted(pos, pos + r, side="right")  # the first of the level past each one's reach
        take = np.zeros(len(at), dtype=bool)
        frontier = np.flatnonzero(run_start)
        while len(frontier):
            take[frontier] = True
            nxt = beyond[frontier]
            ok = nxt < len(at)
            frontier = nxt[ok][run[nxt[ok]] == run[frontier[ok]]]
        picked[at[take]] = True
    cand, seg = cand[picked], seg[picked]
    return seg, cand - offsets[seg], d[picked]


def _near_pick(pos, seg, radius, picked, at):
    """bool per index in `at`: a picked column of the same row lies within its radius."""
    taken = np.flatnonzero(picked)
    if not len(taken):
        return np.zeros(len(at), dtype=bool)
    k = np.searchsorted(pos[taken], pos[at])
    near = np.zeros(len(at), dtype=bool)
    for side in (np.maximum(k - 1, 0), np.minimum(k, len(taken) - 1)):
        t = taken[side]
        near |= (seg[t] == seg[at]) & (np.abs(pos[t] - pos[at]) <= radius[at])
    return near


def select_loci(rows, maps, reference):
    """The reported mappings of each read, in report order (read, then edits, contig, start, strand).

    The rule (README, "What is reported"): on each strand and contig, let D(x) be the fewest edits of an
    alignment of the whole read ending at reference base x. The greedy cover of {x : D(x) <= e} is
    reported: the end with the fewest edits (leftmost on ties), then, among ends more than e from every
    end reported so far, again the fewest edits, and so on. So a mapping within e is hidden only when a
    reported end lies within e of its end, never transitively, and each reported mapping has the leftmost
    start of an alignment of its cost.

    The windows' covers (`verify`) already give this wherever one end stands alone: every end within e is
    within e of some window's pick, so a pick with no other pick within 3e decides its neighbourhood. Picks
    closer than that (tandem repeats, near copies) are recomputed over the whole stretch (`_refine`), unless
    they are all `settled`: the cover of one whole stretch, which the device has taken already."""
    if not len(maps):
        return maps
    maps = maps.take(_sort_order(maps.row, maps.end, maps.edits))
    # one pick per end: the fewest edits, then the leftmost start (windows overlap, so an end may come twice)
    same_end = (maps.row[1:] == maps.row[:-1]) & (maps.end[1:] == maps.end[:-1])
    if same_end.any():
        tie = np.r_[True, ~same_end | (maps.edits[1:] != maps.edits[:-1])]
        maps.start[tie] = np.minimum.reduceat(maps.start, np.flatnonzero(tie))
        maps = maps.take(np.r_[True, ~same_end])
    e = rows.e[maps.row]
    new = np.ones(len(maps), dtype=bool)
    new[1:] = ((maps.row[1:] != maps.row[:-1]) | (maps.contig[1:] != maps.contig[:-1])
               | (maps.end[1:] - maps.end[:-1] > 3 * e[1:]))
    group = np.cumsum(new) - 1
    size = np.bincount(group)
    alone = size[group] == 1
    if maps.settled is not None:
        unsettled = np.bincount(group, weights=~maps.settled, minlength=len(size)) > 0
        alone |= ~unsettled[group]
    if not alone.all():
        crowded = maps.take(~alone)
        maps = Mappings.concat([maps.take(alone), _refine(rows, crowded, group[~alone], reference)])
    read, strand = rows.read_of(maps.row), rows.strand_of(maps.row)
    order = _sort_order(read, maps.edits, maps.start, strand)
    return Mappings(*(getattr(maps, f)[order] for f in POSITION_FIELDS))


def _refine(rows, maps, group, reference):
    """The greedy cover of each group of nearby picks, from the read's distances over the group's whole
    stretch: ends from e before the first pick to e after the last, every alignment of them (at most L + e
    reference bases each) inside the text."""
    first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    last = np.r_[first[1:], len(group)] - 1
    row, contig = maps.row[first], maps.contig[first]
    e, length = rows.e[row], rows.length[row]
    lo_contig, hi_contig = reference.starts[contig], reference.ends[contig]
    zone = np.maximum(maps.end[first] - 1 - e, lo_contig)
    text = np.maximum(zone - length - e + 1, lo_contig)
    width = np.minimum(maps.end[last] + e, hi_contig) - text
    window, end, edits, start = compiled_covers(reference.codes, rows.codes, rows.start[row], length, e, text, width,
                                                zone - text)
    return Mappings(row[window], contig[window], start, end + 1, edits)


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
