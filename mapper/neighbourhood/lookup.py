"""The three ways to find a neighbourhood in its seed block, on numpy (the GPU versions are kernels/phf.cu).

Input : a `NeighbourhoodIndex`, block int64 [n] (the seed keys) and key uint32 [n] (the neighbourhoods).
Output: slot int64 [n], the key's slot in the index (its positions are positions[posoff[slot]:...]), or -1.

- `phf`: the block's perfect hash (hashing.py): constant time, three g reads, one vslot read, one key check.
- `binary`: binary search of the block's sorted keys: log2(block size) dependent reads.
- `list`: the block's keys read one after the other until the key or a larger one: block size / 2 reads.

All three give the same slots (tests/test_neighbourhood.py); they differ in how many memory reads a look-up
costs, which is what scripts/bench_neighbourhood.py measures on the GPU (the paper's Figure 8).
"""
import numpy as np

from mapper.neighbourhood.hashing import phf_slots
from mapper.options import LOOKUPS  # noqa: F401 (the choices, defined with the other options)


def binary_slots(index, block, key):
    """Lower bound of each key in its block, vectorised over all queries (one numpy pass per halving)."""
    lo = index.nboff[block].astype(np.int64)
    end = index.nboff[block + 1].astype(np.int64)
    hi = end.copy()
    todo = np.flatnonzero(lo < hi)
    while len(todo):
        mid = (lo[todo] + hi[todo]) >> 1
        below = index.nbkeys[mid] < key[todo]
        lo[todo] = np.where(below, mid + 1, lo[todo])
        hi[todo] = np.where(below, hi[todo], mid)
        todo = todo[lo[todo] < hi[todo]]
    return _found(index, lo, end, key)


def list_slots(index, block, key):
    """Walk each block from its first key while the keys are smaller (one numpy pass per step)."""
    at = index.nboff[block].astype(np.int64)
    end = index.nboff[block + 1].astype(np.int64)
    todo = np.flatnonzero(at < end)
    while len(todo):
        todo = todo[index.nbkeys[at[todo]] < key[todo]]
        at[todo] += 1
        todo = todo[at[todo] < end[todo]]
    return _found(index, at, end, key)


def _found(index, at, end, key):
    slot = np.full(len(at), -1, dtype=np.int64)
    inside = np.flatnonzero(at < end)
    hit = index.nbkeys[at[inside]] == key[inside]
    slot[inside[hit]] = at[inside[hit]]
    return slot


def slots(index, method, block, key):
    """Slots of (block, key) queries through look-up `method` (one of LOOKUPS)."""
    block = np.asarray(block, dtype=np.int64)
    key = np.asarray(key, dtype=np.uint32)
    if method == "phf":
        return phf_slots(index.phf, index.nbkeys, block, key)
    if method == "binary":
        return binary_slots(index, block, key)
    if method == "list":
        return list_slots(index, block, key)
    raise ValueError(f"unknown look-up {method!r}")
