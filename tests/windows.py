"""Verification windows built to sit at distances e-1, e and e+1 from their read, and the host's answer
for them (mapper/verify.py window_covers, itself checked against a plain dynamic programme and edlib in
tests/device/test_myers_host.py): the oracle for kernels/myers.cu (on the GPU, and compiled as host C++ in CI).

Each window is random flank + the read with k in {e-1, e, e+1} substitutions (a reference N now and then),
plus one insertion or deletion in some windows + random flank. Generated with numpy, whole groups at once.
"""
import numpy as np

from mapper.verify import window_covers

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


def host_answers(reads, genome, read_start, read_len, max_e, win_start, win_len):
    """[(best or -1, [(end, edits, start), ...] sorted by end)] per window, window-relative, end inclusive."""
    window, end, edits, start = window_covers(genome, reads, read_start, read_len, max_e, win_start, win_len)
    out = [(-1, []) for _ in range(len(read_start))]
    for w, x, d, s in zip(window.tolist(), (end - win_start[window]).tolist(), edits.tolist(),
                          (start - win_start[window]).tolist()):
        best, taken = out[w]
        out[w] = (d if best < 0 else min(best, d), taken + [(x, d, s)])
    return out


def compare(answers, best, n_ends, ends, starts, edits, max_ends):
    """Number of windows whose kernel result differs from the host's (windows over max_ends ends: count only)."""
    bad = 0
    for i, (d, taken) in enumerate(answers):
        if best[i] != d or n_ends[i] != len(taken):
            bad += 1
            continue
        if n_ends[i] > max_ends:
            continue
        got = sorted((int(ends[j, i]), int(edits[j, i]), int(starts[j, i])) for j in range(int(n_ends[i])))
        bad += got != taken
    return bad
