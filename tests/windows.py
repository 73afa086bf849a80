"""Verification windows built to sit at distances e-1, e and e+1 from their read, and edlib's answer for
them: the oracle for kernels/myers.cu (on the GPU, and compiled as host C++ in CI).

Each window is random flank + the read with k in {e-1, e, e+1} substitutions (a reference N now and then),
plus one insertion or deletion in some windows + random flank. Generated with numpy, whole groups at once.
"""
from concurrent.futures import ProcessPoolExecutor

import edlib
import numpy as np

READ_LETTERS = np.frombuffer(b"ACGTN", dtype=np.uint8)
REF_LETTERS = np.frombuffer(b"ACGTn", dtype=np.uint8)


def _group(rng, n, L, e):
    flank = e + 3
    reads = rng.integers(0, 4, size=(n, L), dtype=np.uint8)
    reads[rng.random(n) < 0.05, rng.integers(0, L)] = 4  # some reads carry an N
    k = np.clip(e + rng.integers(-1, 2, size=n), 0, None)
    mutated = reads.copy()
    order = np.argsort(rng.random((n, L)), axis=1)
    hit = np.arange(L)[None, :] < k[:, None]
    rows, cols = np.nonzero(hit)
    cols = order[rows, cols]
    mutated[rows, cols] = (mutated[rows, cols] + rng.integers(1, 4, size=len(rows))) % 4
    mutated[rng.random(n) < 0.03, rng.integers(0, L)] = 4  # a reference N now and then
    body = np.concatenate([rng.integers(0, 4, (n, flank), dtype=np.uint8), mutated,
                           rng.integers(0, 4, (n, flank), dtype=np.uint8)], axis=1)
    width = body.shape[1]
    indel = rng.integers(-1, 2, size=n)  # -1 deletion, 0 none, +1 insertion
    at = flank + rng.integers(1, L - 1, size=n)
    j = np.arange(width + 1)[None, :]
    src = j + ((indel[:, None] == -1) & (j >= at[:, None])) - ((indel[:, None] == 1) & (j > at[:, None]))
    windows = body[np.arange(n)[:, None], np.minimum(src, width - 1)]
    inserted = (indel == 1)
    windows[inserted, at[inserted]] = rng.integers(0, 4, size=int(inserted.sum()))
    return reads, windows, np.full(n, width + 1) + np.minimum(indel, 0) - (indel == 0)


def make_windows(n, seed=7, lengths=(100, 150), thresholds=(2, 4, 5, 6, 7)):
    """Flat arrays: reads, genome (windows back to back), read_start, read_len, e, win_start, win_len."""
    rng = np.random.default_rng(seed)
    groups = [(L, e) for L in lengths for e in thresholds]
    parts = [(_group(rng, n // len(groups) + (i < n % len(groups)), L, e), L, e) for i, (L, e) in enumerate(groups)]
    read_rows, win_rows, read_len, max_e, win_len = [], [], [], [], []
    for (reads, windows, widths), L, e in parts:
        read_rows += list(reads)
        win_rows += [w[:wl] for w, wl in zip(windows, widths)]
        read_len.append(np.full(len(reads), L))
        max_e.append(np.full(len(reads), e))
        win_len.append(widths)
    read_len, max_e, win_len = (np.concatenate(a).astype(np.int64) for a in (read_len, max_e, win_len))
    reads = np.concatenate(read_rows)
    genome = np.concatenate(win_rows)
    read_start = np.concatenate([[0], np.cumsum(read_len)[:-1]])
    win_start = np.concatenate([[0], np.cumsum(win_len)[:-1]])
    return reads, genome, read_start, read_len, max_e, win_start, win_len


def _edlib_chunk(args):
    reads, genome, read_start, read_len, max_e, win_start, win_len = args
    out = []
    for rs, rl, e, ws, wl in zip(read_start.tolist(), read_len.tolist(), max_e.tolist(), win_start.tolist(), win_len.tolist()):
        r = edlib.align(READ_LETTERS[reads[rs:rs + rl]].tobytes(), REF_LETTERS[genome[ws:ws + wl]].tobytes(),
                        mode="HW", task="locations", k=e)
        out.append((r["editDistance"], sorted(r["locations"], key=lambda x: x[1]) if r["editDistance"] >= 0 else []))
    return out


def edlib_answers(reads, genome, read_start, read_len, max_e, win_start, win_len, workers=1):
    """[(best or -1, [(start, end), ...] sorted by end)] per window, end inclusive, window-relative."""
    n = len(read_start)
    chunks = np.array_split(np.arange(n), max(1, workers * 4))
    args = [(reads, genome, read_start[c], read_len[c], max_e[c], win_start[c], win_len[c]) for c in chunks]
    if workers == 1:
        return [x for a in args for x in _edlib_chunk(a)]
    with ProcessPoolExecutor(workers) as pool:
        return [x for part in pool.map(_edlib_chunk, args) for x in part]


def compare(answers, best, n_ends, ends, starts, max_ends):
    """Number of windows whose kernel result differs from edlib's (windows over max_ends ends: count only)."""
    bad = 0
    for i, (d, locations) in enumerate(answers):
        if best[i] != d or n_ends[i] != len(locations):
            bad += 1
            continue
        k = min(int(n_ends[i]), max_ends)
        got = [(int(starts[j, i]), int(ends[j, i])) for j in range(k)]
        if got != locations[:k]:
            bad += 1
    return bad
