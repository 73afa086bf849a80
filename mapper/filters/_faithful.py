"""Faithful GateKeeper-GPU: the published filter, quirks included, vectorised across pairs with numpy.

Input : shifted uint8 [n, L]  codes 0..3 of the string that gets shifted (column 1 of a pairs file)
        fixed   uint8 [n, L]  codes 0..3 of the other string (column 2)
        undefined bool [n]    pairs with a non-ACGT character (they pass with estimate -2)
Output: accept bool [n], estimate int16 [n] (0..E on accept, -1 on reject, -2 undefined)

Every step is the one in ../shared/spec/gatekeeper-gpu.md (sections 1-7), computed on two bit planes per string
(the high and the low bit of each base's 2-bit code) instead of on 2-bit words: XOR-then-fold of 2-bit codes is
(hi XOR hi') OR (lo XOR lo'), and shifting a string by i bases shifts both planes by i bits, so the masks come out
directly in the published 1-bit layout (base k at bit 31 - k%32 of 32-bit word k/32).

Two published steps are sequential loops; here they are whole-array expressions, proven equal by
tests/filters/test_filter_faithful.py against a literal transcription of the spec and against the published program:
- the in-word amend (a 4-bit LUT slid over the word, updated in place) fills every run of one or two 0s that has a
  1 on both sides inside the word, except a single 0 at bit 30 when bits 26..28 are all 0 (the last window, at bit
  28, sees bit 28 only after the earlier windows, which set it exactly when bit 26 or 27 is 1);
- the three cross-word rules read bits 2..0 of word w-1 and bits 31..29 of word w and write bits 1..0 and 31..30:
  no boundary writes what another reads, so all boundaries are done at once.
"""
import numpy as np

from mapper.filters import _bitvec

CHUNK = 1 << 15  # pairs per numpy pass: keeps the working arrays in cache
MAX_E = 32

# Published count (section 7) of one aligned nibble: 0000 -> 0, 0101 0110 1001 1010 1011 1101 -> 2, else 1.
_NIBBLE = np.array([0 if v == 0 else 2 if v in (0x5, 0x6, 0x9, 0xA, 0xB, 0xD) else 1 for v in range(16)],
                   dtype=np.int16)
_v = np.arange(1 << 16)
NIBBLE_COUNT16 = (_NIBBLE[_v & 15] + _NIBBLE[(_v >> 4) & 15] + _NIBBLE[(_v >> 8) & 15]
                  + _NIBBLE[_v >> 12]).astype(np.int16)
POPCOUNT16 = _bitvec.POPCOUNT16.astype(np.int16)
del _v


def geometry(L):
    """(W, A): 32-bit words of 2-bit code and of 1-bit code for pair length L (spec notation)."""
    W = -(-L // 16)
    return W, -(-W // 2)


def _per_word16(table, x):
    """Sum of `table` over the 16-bit halves of every uint32 word, per pair: x [A, n] -> int16 [n]."""
    return (table[x & 0xFFFF] + table[x >> 16]).sum(axis=0, dtype=np.int16)


def toward_end(x, i):
    """Planes [A, n] (published layout) with every base moved from index k to k + i; A fills the start."""
    return _bitvec.shift_down(x[::-1], i)[::-1]


def toward_start(x, i):
    """Planes [A, n] with every base moved from index k to k - i; A (the zero padding) fills the end."""
    return _bitvec.shift_up(x[::-1], i)[::-1]


def amend(x):
    """Published amend (spec section 5) of folded masks x uint32 [A, n], in place and returned."""
    inv = ~x
    single = inv & (x << 1) & (x >> 1)
    seen28 = ((x >> 26) | (x >> 27) | (x >> 28)) & 1
    single &= ~((seen28 ^ 1) << 30)
    double = inv & (inv >> 1) & (x << 1) & (x >> 2)
    x |= single | double | (double << 1)
    # cross-word rules (a), (b), (c), in that order, on every boundary of word w-1 (p) and word w (t)
    p, t = x[:-1], x[1:]
    p1, p0 = (p >> 1) & 1, p & 1
    a = (p >> 2) & (t >> 31) & 1
    p1 |= a
    p0 |= a
    b = p1 & (t >> 30) & 1
    p0 |= b
    c = p0 & (t >> 29) & 1
    add_t = ((b | c) << 31) | (c << 30)
    p |= (p1 << 1) | p0
    t |= add_t
    return x


def faithful(shifted, fixed, e, undefined):
    """The published decision and estimate of every pair (module docstring). e <= MAX_E: the published end
    fixes shift a 32-bit constant by e - 1 bits, which C leaves undefined beyond 31."""
    if not 0 <= e <= MAX_E:
        raise ValueError(f"faithful GateKeeper needs 0 <= e <= {MAX_E}, not {e}")
    n, L = shifted.shape
    accept = np.ones(n, dtype=bool)
    estimate = np.full(n, -2, dtype=np.int16)
    if L <= 16:
        return accept, estimate
    todo = np.flatnonzero(~undefined)
    for lo in range(0, len(todo), CHUNK):
        rows = todo[lo:lo + CHUNK]
        accept[rows], estimate[rows] = _faithful_chunk(shifted[rows], fixed[rows], e)
    return accept, estimate


def _planes(codes, A):
    return (_bitvec.pack_rows(codes >> 1, A, np.uint32, msb_first=True),
            _bitvec.pack_rows(codes & 1, A, np.uint32, msb_first=True))


def _faithful_chunk(shifted, fixed, e):
    n, L = shifted.shape
    W, A = geometry(L)
    sh, sl = _planes(shifted, A)
    fh, fl = _planes(fixed, A)
    mask0 = (sh ^ fh) | (sl ^ fl)
    hamming = _per_word16(POPCOUNT16, mask0)
    # A right shift drops what leaves the W 2-bit words; with W odd the planes hold 16 positions more.
    inside = None
    if W % 2:
        inside = np.full((A, 1), 0xFFFFFFFF, dtype=np.uint32)
        inside[A - 1] = 0xFFFF0000
    both = amend(mask0)
    for i in range(1, e + 1):
        deletion = (toward_end(sh, i) ^ fh) | (toward_end(sl, i) ^ fl)
        if inside is not None:
            deletion &= inside
        deletion = amend(deletion)
        deletion[0] |= np.uint32(0x80000000 >> (i - 1))
        insertion = amend((toward_start(sh, i) ^ fh) | (toward_start(sl, i) ^ fl))
        insertion[A - 1] |= np.uint32(1 << (i - 1))
        both &= deletion & insertion
    count = _per_word16(NIBBLE_COUNT16, both)
    accept = (hamming <= e) | ((e > 0) & (count <= e))
    estimate = np.where(hamming <= e, hamming, np.where(accept, count, -1)).astype(np.int16)
    return accept, estimate
