"""Shared pieces of the GateKeeper tests: the shared pair sets with the published program's output and
adversarial pair generators (the cpu/cuda `device` fixture is conftest.py's)."""
import functools

import numpy as np

from conftest import SHARED
from mapper.alphabet import ENCODE, READ_ASCII
from mapper.filters.pairs import read_pairs
from mapper.filters.truth import edit_distances

PAIRS_DIR = SHARED / "filter-pairs"  # conftest.SHARED: ../shared/data, or $GKMAP_SHARED_DATA
SETS = ["ERR240727_1_E2", "ERR240727_1_E5", "shigella_ERR6005894_L150"]


@functools.lru_cache(maxsize=None)
def shared_set(name):
    """(Pairs, published uint8/int16 table [n, 2 * (emax + 1)] as pass_e0, edit_e0, ...)."""
    table = np.loadtxt(PAIRS_DIR / f"{name}.gatekeeper-gpu.tsv", skiprows=1, dtype=np.int16, ndmin=2)
    return read_pairs(PAIRS_DIR / f"{name}.pairs.txt"), table


def published_es(name):
    return range(shared_set(name)[1].shape[1] // 2)


@functools.lru_cache(maxsize=None)
def shared_truth(name):
    """The global edit distance of every pair of a shared set (column 2 the read, column 1 the segment)."""
    pairs, _ = shared_set(name)
    (_, first, second), = pairs.groups()
    return edit_distances(ENCODE[second], ENCODE[first])


HOT_SPOTS = (0, 1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65)


def mutate(rng, seq, edits, L):
    """seq (codes) with `edits` random edits, half of them at the ends and at 16/32/64-base word boundaries."""
    s = list(seq)
    for _ in range(edits):
        if rng.random() < 0.5:
            spot = int(rng.choice(HOT_SPOTS))
            pos = spot if rng.random() < 0.5 else len(s) - spot
        else:
            pos = int(rng.integers(0, len(s) + 1))
        pos = min(max(pos, 0), len(s))
        op = rng.integers(3)
        if op == 0 and pos < len(s):
            s[pos] = (s[pos] + int(rng.integers(1, 4))) % 4
        elif op == 1 or not s:
            s.insert(pos, int(rng.integers(4)))
        elif pos < len(s):
            del s[pos]
    return s


def adversarial(rng, n, L, W, e):
    """n (read, window) pairs, reads [n, L], windows [n, W]: each read cut from its window at a random offset
    with e-1, e or e+1 edits (ends, word boundaries), some Ns on either side. W == L: the read's length is
    restored from the window's own continuation, so that pairs sit near the threshold of the global distance."""
    reads = np.zeros((n, L), dtype=np.uint8)
    windows = rng.integers(0, 4, size=(n, W + L)).astype(np.uint8)
    for i in range(n):
        off = int(rng.integers(0, W - L + 1))
        s = mutate(rng, windows[i, off:off + L], max(0, e + int(rng.integers(-1, 2))), L)
        s = (s + list(windows[i, off + L:]))[:L] if rng.random() < 0.5 else (list(windows[i, W:]) + s)[-L:]
        reads[i] = s
    windows = np.ascontiguousarray(windows[:, :W])
    for arr, p in ((reads, 0.1), (windows, 0.1)):
        hit = rng.random(n) < p
        arr[hit, rng.integers(0, arr.shape[1], hit.sum())] = 4
    both_n = rng.random(n) < 0.05  # an N facing an N: still a mismatch
    col = rng.integers(0, L, both_n.sum())
    reads[both_n, col] = 4
    windows[both_n, np.minimum(col, W - 1)] = 4
    return reads, windows


def pairs_text(first, second):
    """Codes [n, l1] and [n, l2] -> the bytes of a pairs file (N spelled N)."""
    return b"".join(READ_ASCII[a].tobytes() + b"\t" + READ_ASCII[b].tobytes() + b"\n" for a, b in zip(first, second))
