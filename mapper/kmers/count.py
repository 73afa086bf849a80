"""The cpu backend's sort + run-length encoding: k-mer occurrences -> sorted distinct k-mers and counts.

In : keys    uint64 [C, n]  (encode.py layout), any order, repeats allowed
     weights uint64 [n] or None: how many occurrences each column stands for (None: one each). Weights
             let the same routine merge runs that are already counted (merge.py).
Out: keys    uint64 [C, u]  distinct, in lexicographic order (channel 0 first)
     counts  uint64 [u]     the sum of the weights of each distinct key

Sorting: one channel and no weights is a plain np.sort (numpy's SIMD sort, the fast common case);
otherwise an index sort (np.argsort for one channel, np.lexsort over the channels, last key primary).
RLE: a run starts where any channel differs from the previous column; np.diff of the run starts gives
the counts, np.add.reduceat sums weights.
"""
import numpy as np


def _sort(keys, weights):
    if keys.shape[0] == 1 and weights is None:
        return np.sort(keys, axis=1), None
    order = np.argsort(keys[0]) if keys.shape[0] == 1 else np.lexsort(keys[::-1])
    return keys[:, order], (None if weights is None else weights[order])


def run_starts(sorted_keys):
    """int64 [u]: the first column of each run of equal keys in sorted_keys uint64 [C, n]."""
    n = sorted_keys.shape[1]
    differs = np.zeros(n, dtype=bool)
    differs[:1] = True
    for channel in sorted_keys:
        differs[1:] |= channel[1:] != channel[:-1]
    return np.flatnonzero(differs)


def sort_count(keys, weights=None):
    """(distinct keys uint64 [C, u] sorted, counts uint64 [u]); see the module docstring."""
    keys, weights = _sort(keys, weights)
    starts = run_starts(keys)
    if weights is None:
        counts = np.diff(starts, append=keys.shape[1]).astype(np.uint64)
    else:
        counts = np.add.reduceat(weights, starts) if len(starts) else np.empty(0, dtype=np.uint64)
    return keys[:, starts], counts
