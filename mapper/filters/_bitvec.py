"""Multi-word bit vectors, one per pair, vectorised across pairs (the numpy side of the filter kernels).

A batch of bit vectors is an unsigned array `x[nwords, n]` (word-major, like the kernels' layout: word j of
every pair is contiguous), holding n big numbers whose word 0 is the LEAST significant. The word type
(uint32 or uint64) is the array's. Shifts and sums drop whatever leaves the top word.

The two filter modes see the same numbers in opposite orders: improved mode stores column k at bit k
(least significant first), faithful mode stores base k at bit 31 - k%32 of word k/32 (the published
layout, most significant first) and hands these helpers the reversed view `x[::-1]`.
"""
import numpy as np


def _bits(x):
    return x.dtype.itemsize * 8


def shift_up(x, s):
    """x * 2**s: bit b moves to bit b + s."""
    B, nw = _bits(x), len(x)
    q, r = divmod(s, B)
    out = np.zeros_like(x)
    if q >= nw:
        return out
    if r == 0:
        out[q:] = x[:nw - q]
    else:
        out[q:] = x[:nw - q] << r
        out[q + 1:] |= x[:nw - q - 1] >> (B - r)
    return out


def shift_down(x, s):
    """x // 2**s: bit b moves to bit b - s."""
    B, nw = _bits(x), len(x)
    q, r = divmod(s, B)
    out = np.zeros_like(x)
    if q >= nw:
        return out
    if r == 0:
        out[:nw - q] = x[q:]
    else:
        out[:nw - q] = x[q:] >> r
        out[:nw - q - 1] |= x[q + 1:] << (B - r)
    return out


def add(a, b):
    """a + b, word by word with the carry rippling up (the carry out of the top word is dropped)."""
    out = np.empty_like(a)
    carry = None
    for w in range(len(a)):
        s = a[w] + b[w]
        if carry is None:
            carry = s < a[w]
        else:
            t = s + carry
            carry = (s < a[w]) | (t < s)
            s = t
        out[w] = s
    return out


def pack_rows(bits, nwords, dtype, msb_first):
    """bool/0-1 uint8 [n, m] -> [nwords, n] words of `dtype`, zero-padded. msb_first: column k at bit
    B-1-k%B of word k//B (the published layout); else column k at bit k%B."""
    n, m = bits.shape
    B = np.dtype(dtype).itemsize * 8
    padded = np.zeros((n, nwords * B), dtype=np.uint8)
    padded[:, :m] = bits
    packed = np.packbits(padded, axis=1, bitorder="big" if msb_first else "little")
    order = ">" if msb_first else "<"
    words = packed.view(np.dtype(dtype).newbyteorder(order)).astype(dtype)
    return np.ascontiguousarray(words.T)


def low_bits(nbits, nwords, dtype):
    """[nwords, 1] words of `dtype` with the nbits lowest bits of the big number set (a column mask)."""
    B = np.dtype(dtype).itemsize * 8
    out = np.zeros((nwords, 1), dtype=dtype)
    full, rest = divmod(min(nbits, nwords * B), B)
    out[:full] = np.iinfo(dtype).max
    if rest:
        out[full] = (1 << rest) - 1
    return out


def bit_mask(positions, nwords):
    """uint64 [nwords]: the big number with the given bits set (column masks of the improved mode)."""
    out = np.zeros(nwords, dtype=np.uint64)
    for p in positions:
        out[p // 64] |= np.uint64(1 << (p % 64))
    return out


# set bits of every 16-bit value, from the values' bytes unpacked (a Python loop over 65,536 values cost
# every gkmap start ~20 ms)
POPCOUNT16 = np.unpackbits(np.arange(1 << 16, dtype=np.uint16).view(np.uint8)).reshape(-1, 16).sum(
    axis=1, dtype=np.uint8)


def popcount(x):
    """Set bits per pair of x [nwords, n] (any unsigned word type): int64 [n]. numpy >= 2 counts with the CPU's
    popcount (np.bitwise_count, some 40 times faster than the table of `popcount_table`)."""
    if not hasattr(np, "bitwise_count"):
        return popcount_table(x)
    return np.bitwise_count(x).sum(axis=0, dtype=np.int64)


def popcount_table(x):
    """`popcount` by a 16-bit table (numpy < 2)."""
    x = np.ascontiguousarray(x)
    halves = x.view(np.uint16).reshape(len(x), x.shape[1], -1)
    return POPCOUNT16[halves].sum(axis=(0, 2), dtype=np.int64)
