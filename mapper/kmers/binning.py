"""Bins: k-mers are split by their most significant bits, so each bin is a contiguous range of the sorted
order and can be sorted, merged and stored on its own (the unit of out-of-core work).

A key's bin is the top `bits` bits of its first channel (channel 0 holds min(k, 32) bases,
right-aligned), with bits = min(MAX_BIN_BITS, 2 min(k, 32)): 256 bins, or 4^k for k < 4. Concatenating
the bins in order gives the whole table in lexicographic order.
"""
import numpy as np

from mapper.kmers.encode import BASES_PER_WORD

MAX_BIN_BITS = 8


def bin_bits(k):
    return min(MAX_BIN_BITS, 2 * min(k, BASES_PER_WORD))


def shift_of(k):
    """A key's bin is its channel 0 shifted right by this many bits."""
    return 2 * min(k, BASES_PER_WORD) - bin_bits(k)


def bin_of(keys, k):
    """int64 [n]: the bin of each key of keys uint64 [C, n]."""
    return (keys[0] >> np.uint64(shift_of(k))).astype(np.int64)


def bin_bounds(sorted_keys, k):
    """int64 [bins + 1]: bin b of a sorted key array is sorted_keys[:, bounds[b]:bounds[b + 1]]."""
    firsts = np.arange(2 ** bin_bits(k), dtype=np.uint64) << np.uint64(shift_of(k))
    bounds = np.searchsorted(sorted_keys[0], firsts).astype(np.int64)
    return np.append(bounds, sorted_keys.shape[1])
