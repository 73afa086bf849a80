"""Seeding with the neighbourhood index: patterns s_i b_i of every strand row, their degenerated
neighbourhoods, look-ups, candidate diagonals (numpy; kernels/phf.cu does the same on the GPU).

Input : `StrandRows` (mapper/seeding.py), a `NeighbourhoodIndex`, the pattern step delta, the neighbourhood
        errors k (0..2) and the look-up method.
Output: `Candidates` (row, contig, lo = hi = diagonal), sorted by (row, contig, diagonal) and distinct, and
        `SeedStats` (kmers = patterns, seeds = look-ups, hits = positions, diagonals = bands = candidates).

1. patterns: at read offsets i = 0, delta, 2 delta, ... <= L - width, the seed s_i (the mask's '#' bases)
   and the neighbourhood b_i (the ln bases after the mask). A seed with an N is not looked up (N never
   matches). An N in b_i is packed as A: the look-ups below then find every reference neighbourhood within
   Hamming k of b_i with the N counted as a mismatch (and a few more), so none is lost.
2. degenerated neighbourhoods: b_i XOR every mask with at most k non-zero 2-bit digits (a non-zero digit
   turns a base into another base): all neighbourhoods within Hamming distance k, each once.
3. look-up in block s_i (lookup.py); every position p of a found slot gives the diagonal p - i on the
   contig of p (the verification window is clipped to that contig).
4. (row, contig, diagonal) de-duplicated. Guarantee: a read aligning at diagonal d with <= e edits is found
   whenever one of its patterns has an exact seed and <= k substitutions in its neighbourhood against the
   reference at d + i (an ungapped pattern: indels elsewhere in the read are fine).
"""
import itertools

import numpy as np

from mapper.neighbourhood.index import packed_keys
from mapper.neighbourhood.lookup import slots
from mapper.seeding import Candidates, SeedStats, ragged_arange

MAX_NB_ERRORS = 2
CHUNK = 1 << 22  # look-ups per numpy pass (bounds memory on large batches)


def substitution_masks(ln, errors):
    """uint32 XOR masks of every neighbourhood within Hamming distance `errors` (<= 2) of a key of ln bases,
    the identity first. 1 + 3 ln + 9 C(ln, 2) masks for errors = 2 (a constant table, not per read)."""
    masks = [0]
    for k in range(1, errors + 1):
        for where in itertools.combinations(range(ln), k):
            for digits in itertools.product((1, 2, 3), repeat=k):
                masks.append(sum(d << 2 * (ln - 1 - w) for w, d in zip(where, digits)))
    return np.array(masks, dtype=np.uint32)


def patterns(rows, index, step):
    """(row, offset, seed key, neighbourhood key) of every pattern whose seed has no N."""
    width = index.width
    count = np.where(rows.active & (rows.length >= width), (rows.length - width) // step + 1, 0)
    row, k = ragged_arange(count)
    offset = k * step
    start = rows.start[row] + offset
    seed, seed_n = packed_keys(rows.codes, index.seed_offsets, start)
    nb, _ = packed_keys(rows.codes, index.nb_offsets, start)
    keep = ~seed_n
    return row[keep], offset[keep], seed[keep].astype(np.int64), nb[keep]


def diagonals(index, row, offset, slot):
    """(row, contig, diagonal) of every position of the found slots, distinct and sorted."""
    start = index.posoff[slot].astype(np.int64)
    owner, k = ragged_arange(index.posoff[slot + 1].astype(np.int64) - start)
    hit = index.positions[start[owner] + k].astype(np.int64)
    contig = np.searchsorted(index.reference.starts, hit, side="right") - 1
    return row[owner], contig, hit - offset[owner]


def seed(rows, index, step=1, nb_errors=1, method="phf"):
    """Candidates and SeedStats of all rows (module docstring)."""
    stats = SeedStats()
    row, offset, seed_key, nb = patterns(rows, index, step)
    masks = substitution_masks(index.ln, nb_errors)
    stats.kmers = len(row)
    per_chunk = max(CHUNK // len(masks), 1)
    found = []
    for begin in range(0, len(row), per_chunk):  # chunks of patterns, each a few million look-ups
        part = slice(begin, begin + per_chunk)
        block = np.repeat(seed_key[part], len(masks))
        key = (nb[part, None] ^ masks[None, :]).ravel()
        slot = slots(index, method, block, key)
        hit = np.flatnonzero(slot >= 0)
        pattern = begin + hit // len(masks)
        stats.seeds += len(key)
        found.append(diagonals(index, row[pattern], offset[pattern], slot[hit]))
    if not found:
        return Candidates(), stats
    row, contig, diag = (np.concatenate(c) for c in zip(*found))
    stats.hits = len(row)
    return distinct_candidates(row, contig, diag, stats)


def distinct_candidates(row, contig, diag, stats):
    """Candidates from (row, contig, diagonal) hits: sorted, each once; fills the stats' candidate counts."""
    order = np.lexsort((diag, contig, row))
    row, contig, diag = row[order], contig[order], diag[order]
    new = np.ones(len(row), dtype=bool)
    new[1:] = (row[1:] != row[:-1]) | (contig[1:] != contig[:-1]) | (diag[1:] != diag[:-1])
    row, contig, diag = row[new], contig[new], diag[new]
    stats.diagonals = stats.adjacent = stats.bands = len(row)
    return Candidates(row, contig, diag, diag.copy()), stats
