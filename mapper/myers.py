"""Myers' bit-vector edit distance on numpy, vectorised over many (read, text) pairs at once.

This is the host twin of `kernels/myers.cu` (the same block algorithm of Hyyrö 2003, the same N rule):
the cpu backend verifies its windows with it, and locus selection (mapper/loci.py) uses it to compute a
read's exact distances over a whole tandem repeat. One numpy pass per text column serves every pair, so
there is no Python loop per pair; pairs are sorted by text length so that column j touches only the pairs
whose text is longer than j (a contiguous prefix).

Per word w of the read's bit columns, with Eq = Peq[w][base] (see the kernel's header for the derivation):
    Xv = Eq | Mv;  Eq |= (hin == -1);  Xh = (((Eq & Pv) + Pv) ^ Pv) | Eq
    Ph = Mv | ~(Xh | Pv);  Mh = Pv & Xh;  hout = top(Ph) - top(Mh)
    Ph = Ph << 1 | (hin == +1);  Mh = Mh << 1 | (hin == -1);  Pv = Mh | ~(Xv | Ph);  Mv = Ph & Xv
Pairs whose read has fewer words than the batch's longest run the extra words on padding rows: rows below
the read's last never feed back into it, so the last row's score is unaffected.
"""
import numpy as np

from mapper.alphabet import CODE_N

_ONE = np.uint64(1)
_TOP = np.uint64(63)


def peq_masks(codes, first, length, words, step=1):
    """uint64 [5, words, P]: bit i of word i // 64 of mask c is set where read base i is code c (c < 4),
    the read's base i being codes[first + step * i] (step -1: the read backwards from `first`). Mask
    CODE_N stays zero, so a reference N matches nothing and a read N no reference base."""
    col = np.arange(words * 64)
    index = first[:, None] + step * np.minimum(col[None, :], np.maximum(length[:, None] - 1, 0))
    pad = np.where(col[None, :] < length[:, None], codes[index], CODE_N)
    masks = np.zeros((5, words, len(first)), dtype=np.uint64)
    for code in range(4):
        bits = np.packbits((pad == code).reshape(len(first), words, 64), axis=2, bitorder="little")
        masks[code] = bits.view("<u8").reshape(len(first), words).T
    return masks


class _Columns:
    """The block algorithm's state for P pairs (sorted by text length, longest first)."""

    def __init__(self, peq, length, top_hin):
        self.words, self.n = peq.shape[1], peq.shape[2]
        self.peq = peq.reshape(-1)
        self.Pv = np.full((self.words, self.n), ~np.uint64(0), dtype=np.uint64)
        self.Mv = np.zeros((self.words, self.n), dtype=np.uint64)
        self.last_word = (length - 1) // 64
        self.last_bit = ((length - 1) % 64).astype(np.uint64)
        self.top_hin = top_hin
        self.score = length.astype(np.int64)

    def advance(self, base, n):
        """One text column for pairs 0..n-1 (`base` uint8 [n]); updates and returns their scores."""
        hin = np.full(n, self.top_hin, dtype=np.int64)
        index = base.astype(np.int64) * (self.words * self.n) + np.arange(n)
        for w in range(self.words):
            Pv, Mv = self.Pv[w, :n], self.Mv[w, :n]
            Eq = self.peq[index + w * self.n]
            neg = (hin < 0).astype(np.uint64)
            Xv = Eq | Mv
            Eq |= neg
            Xh = (((Eq & Pv) + Pv) ^ Pv) | Eq
            Ph = Mv | ~(Xh | Pv)
            Mh = Pv & Xh
            last = self.last_word[:n] == w
            if last.any():
                bit = self.last_bit[:n]
                delta = ((Ph >> bit) & _ONE).astype(np.int64) - ((Mh >> bit) & _ONE).astype(np.int64)
                self.score[:n] += np.where(last, delta, 0)
            hout = (Ph >> _TOP).astype(np.int64) - (Mh >> _TOP).astype(np.int64)
            Ph = (Ph << _ONE) | (hin > 0).astype(np.uint64)
            Mh = (Mh << _ONE) | neg
            self.Pv[w, :n] = Mh | ~(Xv | Ph)
            self.Mv[w, :n] = Ph & Xv
            hin = hout
        return self.score[:n]


def last_rows(genome, codes, read_start, read_length, text_start, text_length, cap):
    """Semi-global distances of each read against its text, at every end column: for pair p and column j,
    D_p[j] = the fewest edits of an alignment of the whole read ending at text base j (start free).

    Returns (D uint8 [sum(text_length)], offsets int64 [P + 1]): pair p's row is D[offsets[p]:offsets[p+1]],
    values clamped to `cap` (callers ask for e + 1: larger distances are all "too far")."""
    P = len(read_start)
    offsets = np.zeros(P + 1, dtype=np.int64)
    np.cumsum(text_length, out=offsets[1:])
    out = np.full(int(offsets[-1]), cap, dtype=np.uint8)
    if not P or not offsets[-1]:
        return out, offsets
    order = np.argsort(-text_length, kind="stable")
    lengths = text_length[order]
    words = max(1, int(-(-read_length.max() // 64)))
    state = _Columns(peq_masks(codes, read_start[order], read_length[order], words), read_length[order], 0)
    where, text = offsets[order], text_start[order]
    active = np.searchsorted(-lengths, -np.arange(int(lengths[0])), side="left")  # pairs longer than j
    for j, n in enumerate(active.tolist()):
        score = state.advance(genome[text[:n] + j], n)
        out[where[:n] + j] = np.minimum(score, cap)
    return out, offsets


def leftmost_starts(genome, codes, read_start, read_length, end, edits, lowest):
    """For each (read, end, edits): the leftmost reference start s >= lowest of an alignment of the whole
    read to genome[s..end] (end inclusive) costing exactly `edits`, the same rule as the kernel and edlib:
    align the reversed read against the reference read backwards from `end`, anchored there (prefix mode,
    the top row costs one a column), and take the farthest column whose last-row score equals `edits`.
    An alignment of L bases with d edits spans at most L + d reference bases."""
    P = len(end)
    if not P:
        return np.zeros(0, dtype=np.int64)
    span = np.minimum(end - lowest + 1, read_length + edits)
    order = np.argsort(-span, kind="stable")
    words = max(1, int(-(-read_length.max() // 64)))
    rev_start = read_start[order] + read_length[order] - 1
    state = _Columns(peq_masks(codes, rev_start, read_length[order], words, step=-1), read_length[order], 1)
    spans, ends, want = span[order], end[order], edits[order]
    farthest = np.zeros(P, dtype=np.int64)
    active = np.searchsorted(-spans, -np.arange(int(spans[0])), side="left")
    for j, n in enumerate(active.tolist()):
        score = state.advance(genome[ends[:n] - j], n)
        hit = score == want[:n]
        farthest[:n][hit] = j + 1
    starts = np.empty(P, dtype=np.int64)
    starts[order] = ends - farthest + 1
    return starts
