"""The three ways to find a neighbourhood in its seed block, on numpy (the GPU versions are kernels/phf.cu).

Input : a `NeighbourhoodIndex`, block int64 [n] (the seed keys) and key uint32 [n] (the neighbourhoods).
Output: slot int64 [n], the key's slot in the index (its positions are positions[posoff[slot]:...]), or -1.

- `phf`: the block's perfect hash (hashing.py): constant time, three g reads, one vslot read, one key check.
- `binary`: binary search of the block's sorted keys: log2(block size) dependent reads (numpy: one
  searchsorted over every slot's (block, key), which are sorted too).
- `list`: the block's keys read one after the other until the key or a larger one: block size / 2 reads.

All three give the same slots (tests/neighbourhood/test_neighbourhood.py); they differ in how many memory reads a look-up
costs, which is what scripts/bench_neighbourhood.py measures on the GPU (the paper's Figure 8).
"""
import numpy as np

from mapper.neighbourhood.hashing import phf_slots
from mapper.options import LOOKUPS  # noqa: F401 (the choices, defined with the other options)


def binary_slots(index, block, key):
    """Binary search (numpy's searchsorted) of (block, key) among all slots' (block, key), which are sorted:
    the same answer as a search inside the block, which is what the kernel does."""
    if getattr(index, "_block_keys", None) is None:
        owner = np.repeat(np.arange(len(index.nboff) - 1, dtype=np.int64), np.diff(index.nboff))
        index._block_keys = owner << 32 | np.asarray(index.nbkeys, dtype=np.int64)
    at = np.searchsorted(index._block_keys, block << 32 | key.astype(np.int64))
    return _found(index, at, index.nboff[block + 1].astype(np.int64), key)


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
