"""k-mers as multi-word integers ("channels"), extracted from uint8 code arrays without a per-k-mer loop.

Layout (`KmerLayout`): a k-mer of length k is C = ceil(k / 32) uint64 channels. Channel c holds bases
[32c, min(32c + 32, k)) as a base-4 number, first base most significant, right-aligned in the word
(A=0, C=1, G=2, T=3, mapper.alphabet). All channels but the last hold 32 bases; the last holds
r = k - 32 (C - 1) bases. Because every k-mer has the same length, comparing channel 0 first, then
channel 1, ... is the lexicographic order of the k-mer strings, which is jellyfish's order and ours.

Arrays of k-mers are channel-major: `keys` uint64 [C, n], key i is keys[:, i] (each channel contiguous,
as the kernels want it).

In : codes uint8 [N], 0..3 or 4 (= N, any non-ACGT letter, and the separator between records)
Out: keys  uint64 [C, m], one column per k-mer that contains no N, in order of position; with
     canonical=True each k-mer is replaced by min(k-mer, reverse complement), as `jellyfish count -C`.
"""
from dataclasses import dataclass

import numpy as np

from mapper.alphabet import BASES, CODE_N, COMPLEMENT, ENCODE

BASES_PER_WORD = 32
MAX_K = 256


@dataclass(frozen=True)
class KmerLayout:
    """Where the bases of a k-mer live: `channels` words, the last holding `last_bases` bases."""

    k: int

    def __post_init__(self):
        if not 1 <= self.k <= MAX_K:
            raise ValueError(f"k must be between 1 and {MAX_K}, got {self.k}")

    @property
    def channels(self):
        return -(-self.k // BASES_PER_WORD)

    @property
    def last_bases(self):
        return self.k - BASES_PER_WORD * (self.channels - 1)

    def bases(self, channel):
        """Number of bases held by `channel`."""
        return self.last_bases if channel == self.channels - 1 else BASES_PER_WORD


def _word_type(bases):
    """The narrowest unsigned type that holds `bases` 2-bit bases."""
    return np.uint8 if bases <= 4 else np.uint16 if bases <= 8 else np.uint32 if bases <= 16 else np.uint64


def _window_values(codes, length):
    """uint64 [N - length + 1]: codes[p:p+length] (uint8, & 3) read as a base-4 number, for every p (length <= 32).

    Built by doubling, not by a loop over the length: a window of 2m bases is the window of m bases at p
    shifted left by 2m bits, OR the window of m bases at p + m. `length` is assembled from its binary
    digits the same way, so the cost is O(N log length); each step works in the narrowest type that holds
    its windows (bytes up to 4 bases), which makes the early steps cheap.
    """
    n = len(codes)
    result, result_len = None, 0
    piece, piece_len = codes & np.uint8(3), 1
    remaining = length
    while remaining:
        if remaining & 1:
            if result is None:
                result, result_len = piece, piece_len
            else:
                m = n - result_len - piece_len + 1
                wide = _word_type(result_len + piece_len)
                result = (result[:m].astype(wide) << wide(2 * piece_len)) | piece[result_len:result_len + m]
                result_len += piece_len
        remaining >>= 1
        if remaining:
            m = n - 2 * piece_len + 1
            wide = _word_type(2 * piece_len)
            piece = (piece[:m].astype(wide) << wide(2 * piece_len)) | piece[piece_len:piece_len + m]
            piece_len *= 2
    return result.astype(np.uint64, copy=False)


def _channels_at(codes, layout, starts):
    """uint64 [C, len(starts)]: the channels of the k-mers of `codes` starting at `starts`."""
    keys = np.empty((layout.channels, len(starts)), dtype=np.uint64)
    last = _window_values(codes, layout.last_bases)
    full = last
    if layout.channels > 1 and layout.last_bases < BASES_PER_WORD:
        full = _window_values(codes, BASES_PER_WORD)
    for c in range(layout.channels):
        windows = last if c == layout.channels - 1 else full
        np.take(windows, starts + BASES_PER_WORD * c, out=keys[c])
    return keys


def lexicographic_less(a, b):
    """bool [n]: key a[:, i] < key b[:, i], comparing channel 0 first."""
    less = np.zeros(a.shape[1], dtype=bool)
    equal = np.ones(a.shape[1], dtype=bool)
    for c in range(a.shape[0]):
        less |= equal & (a[c] < b[c])
        equal &= a[c] == b[c]
    return less


def _lexicographic_min(a, b):
    if a.shape[0] == 1:
        return np.minimum(a, b)
    return np.where(lexicographic_less(b, a), b, a)


def extract(codes, layout, canonical):
    """Every N-free k-mer of `codes` (uint8, 4 = N) as keys uint64 [C, m], in order of position."""
    k = layout.k
    n = len(codes)
    if n < k:
        return np.empty((layout.channels, 0), dtype=np.uint64)
    n_before = np.zeros(n + 1, dtype=np.int32 if n < 2 ** 31 else np.int64)
    np.cumsum(codes >= CODE_N, out=n_before[1:])
    starts = np.flatnonzero(n_before[k:] == n_before[:-k])
    keys = _channels_at(codes, layout, starts)
    if canonical:
        # The reverse complement of the k-mer at p is the k-mer at n - k - p of the reverse complement.
        rc = _channels_at(COMPLEMENT[codes[::-1]], layout, (n - k) - starts)
        keys = _lexicographic_min(keys, rc)
    return keys


def keys_from_strings(kmers, layout):
    """keys uint64 [C, n] of equal-length ACGT strings (either case); ValueError names a bad one."""
    for kmer in kmers:
        if len(kmer) != layout.k or not set(kmer.upper()) <= set(BASES):
            raise ValueError(f"{kmer!r} is not a k-mer of {layout.k} bases A, C, G, T")
    codes = ENCODE[np.frombuffer("".join(kmers).encode("ascii"), dtype=np.uint8)]
    return keys_from_codes(codes.reshape(len(kmers), layout.k), layout)


def keys_from_codes(codes, layout):
    """keys uint64 [C, n] of the k-mers in the rows of codes uint8 [n, k] (0..3)."""
    if not codes.size:
        return np.empty((layout.channels, len(codes)), dtype=np.uint64)
    return _channels_at(codes.reshape(-1), layout, np.arange(0, codes.size, layout.k))


def reverse_complement_keys(keys, layout):
    """keys uint64 [C, n] -> the keys of the reverse complements (used by `canonical_keys`)."""
    return keys_from_codes(COMPLEMENT[keys_to_codes(keys, layout)[:, ::-1]], layout)


def canonical_keys(keys, layout):
    """min(key, reverse complement) per column, as `extract(..., canonical=True)` gives."""
    return _lexicographic_min(keys, reverse_complement_keys(keys, layout))


def keys_to_codes(keys, layout):
    """uint8 [n, k] base codes (0..3) of keys uint64 [C, n]."""
    n = keys.shape[1]
    codes = np.empty((n, layout.k), dtype=np.uint8)
    for c in range(layout.channels):
        width = layout.bases(c)
        shifts = np.arange(2 * (width - 1), -1, -2, dtype=np.uint64)
        block = (keys[c][:, None] >> shifts) & np.uint64(3)
        codes[:, BASES_PER_WORD * c:BASES_PER_WORD * c + width] = block
    return codes
