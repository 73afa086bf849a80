"""The cpu backend's sort + run-length encoding: k-mer occurrences -> sorted distinct k-mers and counts.

In : keys    uint64 [C, n]  (encode.py layout), any order, repeats allowed
     weights uint64 [n] or None: how many occurrences each column stands for (None: one each). Weights
             let the same routine merge runs that are already counted (merge.py).
Out: keys    uint64 [C, u]  distinct, in lexicographic order (channel 0 first)
     counts  uint64 [u]     the sum of the weights of each distinct key

Sorting: one channel and no weights is a plain np.sort (numpy's SIMD sort, the fast common case);
otherwise an index sort on channel 0 (np.argsort), after which only the keys that share their channel 0
with another are ordered by the remaining channels (np.lexsort within those groups). In a genome few
32-base prefixes repeat, so k > 32 costs little more than k <= 32.
RLE: a run starts where any channel differs from the previous column; np.diff of the run starts gives
the counts, np.add.reduceat sums weights.
"""
import numpy as np


def _order(keys):
    """int64 [n]: the permutation that sorts keys uint64 [C, n] lexicographically."""
    order = np.argsort(keys[0])
    if keys.shape[0] == 1:
        return order
    first = keys[0][order]
    tie = first[1:] == first[:-1]
    if not tie.any():
        return order
    # only keys whose channel 0 is shared need the other channels: lexsort those, group by group
    in_group = np.zeros(len(order), dtype=bool)
    in_group[1:] |= tie
    in_group[:-1] |= tie
    group_start = in_group.copy()
    group_start[1:] &= ~tie
    members = np.flatnonzero(in_group)
    group = np.cumsum(group_start)[members]
    tied = order[members]
    order[members] = tied[np.lexsort([keys[c][tied] for c in range(keys.shape[0] - 1, 0, -1)] + [group])]
    return order


def _sort(keys, weights, own):
    if keys.shape[0] == 1 and weights is None:
        if own:
            keys.sort(axis=1)
            return keys, None
        return np.sort(keys, axis=1), None
    order = _order(keys)
    return np.take(keys, order, axis=1), (None if weights is None else weights[order])


def run_starts(sorted_keys):
    """int64 [u]: the first column of each run of equal keys in sorted_keys uint64 [C, n]."""
    n = sorted_keys.shape[1]
    differs = np.zeros(n, dtype=bool)
    differs[:1] = True
    for channel in sorted_keys:
        differs[1:] |= channel[1:] != channel[:-1]
    return np.flatnonzero(differs)


def sort_count(keys, weights=None, own=False):
    """(distinct keys uint64 [C, u] sorted, counts uint64 [u]); see the module docstring. `own`: the caller
    lets keys be sorted in place (one copy of the bin's keys fewer)."""
    keys, weights = _sort(keys, weights, own)
    starts = run_starts(keys)
    if weights is None:
        counts = np.empty(len(starts), dtype=np.uint64)
        np.subtract(starts[1:], starts[:-1], out=counts[:-1], casting="unsafe")
        counts[-1:] = keys.shape[1] - starts[-1:]
    else:
        counts = np.add.reduceat(weights, starts) if len(starts) else np.empty(0, dtype=np.uint64)
    return np.take(keys, starts, axis=1), counts
