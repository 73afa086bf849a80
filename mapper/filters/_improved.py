"""Improved GateKeeper: GateKeeper's shifted match masks, counted soundly, vectorised across pairs with numpy.

Input : reads   uint8 [n, L]  codes 0..3, 4 = N
        windows uint8 [n, W]  codes 0..3, 4 = N (reference N or padding)
        ends    "global": W == L, the whole read against the whole window (a pairs file's equal-length pairs,
                          judged by the global edit distance); "infix": the read anywhere in the window
                          (semi-global, the mapper's windows and edlib's HW mode)
Output: accept bool [n], estimate int16 [n]: the fewest edits on accept (0..e), -1 on reject

Why not GateKeeper's count: amend + AND + nibble count is neither a lower bound nor monotone, so it can reject
a true mapping, and shifting in 'A's invents matches at the ends. What stays is GateKeeper's front end: one
match mask per diagonal d (text position minus read position), F_d[p] = 1 when read[p] == window[p + d] and
neither is N, built from two bit planes per string (XOR, fold) with the real flanking window bases. What
replaces the count is a walk through those masks that is exact:

    R_k[d] = the columns p such that read[0, p) aligns, ending on diagonal d, with k edits.
    R_0[d]  = extend_d({0}) for every start diagonal
    R_k[d]  = extend_d( R_{k-1}[d] << 1          substitution: one column, same diagonal
                      | R_{k-1}[d+1] << 1        insertion:    one column, diagonal - 1
                      | R_{k-1}[d-1]             deletion:     no column,  diagonal + 1
                      | R_{k-1}[d] )             nothing new: R only grows with k
    extend_d(S) = every column reached from S along a run of matches on d
                = S | (((F_d & S) + F_d) ^ F_d)  (column k at bit k: a start bit inside a run of 1s in F_d
                                                  carries to the end of the run and sets the bit after it)

The estimate is the least k with column L reached on an end diagonal: the banded edit distance, a lower bound
of the true one (exact within the band, which holds every alignment of <= e edits; the walk may substitute
outside the window, which only lowers it). Pruning: level k keeps only diagonals that can still be reached
from a start and still reach an end within e edits.
"""
import numpy as np

from mapper.filters import _bitvec

CHUNK = 1 << 14  # pairs per numpy pass: keeps the [words, diagonals, pairs] arrays in cache
STAGE1_AFTER = 0  # the walk level after which the stage-1 bound prunes (the cuda kernel runs it first)


def band(L, W, e, ends):
    """(start, end) diagonal ranges, inclusive, and lo(k), hi(k): the diagonals level k keeps."""
    if ends == "global":
        return (0, 0), (0, 0), (lambda k: -min(k, e - k)), (lambda k: min(k, e - k))
    # infix: the read starts at window offset 0..W-L+e (later starts need more than e insertions) and ends
    # at W at the latest; every edit moves the diagonal by at most one.
    return (0, W - L + e), (-e, W - L), (lambda k: -k), (lambda k: W - L + e - k)


def improved(reads, windows, e, ends):
    """Decision and estimate of every pair (module docstring)."""
    n, L = reads.shape
    W = windows.shape[1]
    if ends == "global" and W != L:
        raise ValueError(f"global ends need equal lengths, not {L} and {W}")
    accept = np.zeros(n, dtype=bool)
    estimate = np.full(n, -1, dtype=np.int16)
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        accept[lo:hi], estimate[lo:hi] = _improved_chunk(reads[lo:hi], windows[lo:hi], e, ends)
    return accept, estimate


def _planes(codes, nwords, offset=0):
    """[nwords, 3, n] uint64 column bitsets (column k at bit k + offset): high bit, low bit, not-N. The padding
    is code 4 (N, 100 in binary): 0 in every plane, like an N."""
    n, m = codes.shape
    padded = np.full((n, nwords * 64), 4, dtype=np.uint8)
    padded[:, offset:offset + m] = codes
    bits = np.empty((3, n, nwords * 64), dtype=np.uint8)
    np.bitwise_and(padded >> 1, 1, out=bits[0])
    np.bitwise_and(padded, 1, out=bits[1])
    np.less(padded, 4, out=bits[2], casting="unsafe")
    packed = np.packbits(bits.reshape(-1), bitorder="little").view(np.dtype("<u8")).reshape(3, n, nwords)
    return np.ascontiguousarray(packed.transpose(2, 0, 1), dtype=np.uint64)


def match_masks(reads, windows, diagonals):
    """F [nwords, len(diagonals), n] uint64: F[:, j][p] = 1 when reads[p] == windows[p + diagonals[j]], neither
    N (columns 0..L-1; a window position outside 0..W-1 never matches)."""
    n, L = reads.shape
    W = windows.shape[1]
    nw = -(-(L + 1) // 64)  # column L is the end state of the walk
    pad = max(0, -diagonals[0])
    read = _planes(reads, nw)
    text = _planes(windows, max(nw, -(-(pad + W) // 64)), offset=pad)
    F = np.empty((nw, len(diagonals), n), dtype=np.uint64)
    for j, d in enumerate(diagonals):
        t = _bitvec.shift_down(text, d + pad)[:nw]
        F[:, j] = ~((read[:, 0] ^ t[:, 0]) | (read[:, 1] ^ t[:, 1])) & read[:, 2] & t[:, 2]
    return F


def pieces(L, e):
    """Stage 1's partition of the read columns: P = min(2(e + 1), L, 64) pieces, piece j = [jL/P, (j+1)L/P)
    rounded down (the kernel uses the same bounds, one bit per piece); returns [b0 = 0, b1, ..., bP = L]."""
    P = min(2 * (e + 1), L, 64)
    return np.arange(P + 1, dtype=np.int64) * L // P


def unmatched_pieces(F, L, e):
    """Stage 1, a cheap lower bound: the number of pieces (of `pieces`) that match exactly on no diagonal.
    An alignment's edits touch at most one piece each (a deletion counts for the piece after it), and an untouched
    piece is an exact match on one diagonal of the band. Pieces are tested by carries: with only the even (or odd)
    pieces' bits of F_d kept, adding 1 at each piece's first column carries to the column after it exactly when
    the whole piece matches; that column belongs to the next piece, which is outside the kept bits, so the carry
    stops there."""
    nw = len(F)
    bounds = pieces(L, e)
    matched = np.zeros((nw, F.shape[2]), dtype=np.uint64)
    for parity in (0, 1):
        first, after = bounds[parity:-1:2], bounds[parity + 1::2]
        inside = _bitvec.bit_mask([c for a, b in zip(first, after) for c in range(a, b)], nw)[:, None, None]
        ones = np.broadcast_to(_bitvec.bit_mask(first, nw)[:, None, None], F.shape)
        carried = _bitvec.add(F & inside, ones) & _bitvec.bit_mask(after, nw)[:, None, None]
        matched |= np.bitwise_or.reduce(carried, axis=1)
    every = _bitvec.bit_mask(bounds[1:], nw)[:, None]
    return _bitvec.popcount(every & ~matched)


def _improved_chunk(reads, windows, e, ends):
    n, L = reads.shape
    W = windows.shape[1]
    band_ = band(L, W, e, ends)
    lo, hi = band_[2], band_[3]
    dmin = min(lo(k) for k in range(e + 1))
    dmax = max(hi(k) for k in range(e + 1))
    F = match_masks(reads, windows, list(range(dmin, dmax + 1)))
    estimate = np.full(n, -1, dtype=np.int16)
    if ends == "global":
        # Equal lengths: with up to 2 mismatches on the main diagonal, the distance is their number (one edit
        # between equal-length strings is a substitution), so the walk can leave these pairs at once.
        hamming = _bitvec.popcount(~F[:, -dmin] & _bitvec.low_bits(L, len(F), np.uint64))
        estimate[hamming <= min(2, e)] = hamming[hamming <= min(2, e)]
    walk(F, L, e, dmin, band_, estimate)
    return estimate >= 0, estimate


def walk(F, L, e, dmin, band_, estimate):
    """The exact walk of the module docstring through the masks F [nwords, diagonals from dmin, n]: fills in
    estimate int16 [n] where it is -1 with the fewest edits (<= e) that reach column L on an end diagonal (-1 if
    none); the others are settled already. Pairs leave the arrays once they are settled (the walk costs per level
    and pair): known, reached, or rejected by stage 1 (`unmatched_pieces`) after level STAGE1_AFTER."""
    (s0, s1), (e0, e1), lo, hi = band_
    word, bit = divmod(L, 64)
    settled = estimate >= 0
    left = np.arange(len(settled))  # pair index of each column of R and F
    if 4 * settled.sum() >= len(settled):
        left = np.flatnonzero(~settled)
        F = F[:, :, left]
    nw, _, n = F.shape
    if n == 0:
        return
    # R[:, 1 + d - dmin] is R_k[d]; one empty diagonal on each side keeps d - 1 and d + 1 in range
    R = np.zeros((nw, F.shape[1] + 2, n), dtype=np.uint64)
    R[0, 1 + s0 - dmin:2 + s1 - dmin] = 1
    a_prev, b_prev = 1 + s0 - dmin, 2 + s1 - dmin
    for k in range(e + 1):
        a, b = 1 + lo(k) - dmin, 2 + hi(k) - dmin
        seeds = R[:, a:b]
        if k:
            seeds = _bitvec.shift_up(seeds | R[:, a + 1:b + 1], 1) | R[:, a - 1:b - 1] | seeds
        f = F[:, a - 1:b - 1]
        grown = seeds | (_bitvec.add(f & seeds, f) ^ f)
        R[:, a_prev:a] = 0
        R[:, b:b_prev] = 0
        R[:, a:b] = grown
        a_prev, b_prev = a, b
        ea, eb = max(a, 1 + e0 - dmin), min(b, 2 + e1 - dmin)
        done = settled[left]
        if ea < eb:
            reached = ((R[word, ea:eb] >> np.uint64(bit)) & np.uint64(1)).any(axis=0)
            estimate[left[reached & (estimate[left] < 0)]] = k
            done = done | reached
        if k == STAGE1_AFTER and k < e:
            done = done | (unmatched_pieces(F, L, e) > e)
        if done.all():
            break
        if 4 * done.sum() >= len(done):
            keep = ~done
            R, F, left = R[:, :, keep], F[:, :, keep], left[keep]
