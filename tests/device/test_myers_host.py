"""mapper/myers.py (the host's Myers, which verifies the cpu backend's windows and refines loci) against a
plain dynamic programme for every end column, and against edlib for the leftmost starts."""
import edlib
import numpy as np

from mapper.alphabet import READ_ASCII, REF_ASCII
from mapper.myers import last_rows, leftmost_starts


def dp_last_row(read, text):
    """D[L][j] for every column j by the textbook recurrence (free start: row 0 all zeros)."""
    prev = np.zeros(len(text) + 1, dtype=np.int64)
    for i in range(1, len(read) + 1):
        cur = np.empty_like(prev)
        cur[0] = i
        for j in range(1, len(text) + 1):
            match = read[i - 1] == text[j - 1] and read[i - 1] < 4
            cur[j] = min(prev[j - 1] + (0 if match else 1), prev[j] + 1, cur[j - 1] + 1)
        prev = cur
    return prev[1:]


def pairs(seed=1, n=40):
    """Reads of 5-149 bases (1-3 words) taken from a random genome with Ns, mutated, with texts around them."""
    rng = np.random.default_rng(seed)
    genome = rng.integers(0, 4, 5000).astype(np.uint8)
    genome[rng.integers(0, 5000, 50)] = 4
    codes, rs, rl, ts, tl, pos = [], [], [], [], [], 0
    for _ in range(n):
        L, t0 = int(rng.integers(5, 150)), int(rng.integers(0, 4000))
        read = genome[t0:t0 + L].copy()
        for _ in range(int(rng.integers(0, 4))):
            read[rng.integers(0, L)] = rng.integers(0, 5)
        codes.append(read)
        rs.append(pos)
        rl.append(L)
        pos += L
        ts.append(max(0, t0 - int(rng.integers(0, 20))))
        tl.append(int(rng.integers(1, 250)))
    return genome, np.concatenate(codes), *(np.array(a, dtype=np.int64) for a in (rs, rl, ts, tl))


def test_last_rows_equal_the_dynamic_programme():
    genome, codes, rs, rl, ts, tl = pairs()
    D, offsets = last_rows(genome, codes, rs, rl, ts, tl, 255)
    for p in range(len(rs)):
        want = np.minimum(dp_last_row(codes[rs[p]:rs[p] + rl[p]], genome[ts[p]:ts[p] + tl[p]]), 255)
        assert (D[offsets[p]:offsets[p + 1]] == want).all(), p


def test_leftmost_starts_equal_edlib():
    genome, codes, rs, rl, ts, tl = pairs(seed=2)
    end, edits, read_start, read_len, lowest, want = [], [], [], [], [], []
    for p in range(len(rs)):
        result = edlib.align(READ_ASCII[codes[rs[p]:rs[p] + rl[p]]].tobytes(),
                             REF_ASCII[genome[ts[p]:ts[p] + tl[p]]].tobytes(), mode="HW", task="locations")
        for first, last in result["locations"]:
            end.append(ts[p] + last)
            edits.append(result["editDistance"])
            read_start.append(rs[p])
            read_len.append(rl[p])
            lowest.append(ts[p])
            want.append(ts[p] + first)
    got = leftmost_starts(genome, codes, *(np.array(a) for a in (read_start, read_len, end, edits, lowest)))
    assert len(want) > 40 and (got == np.array(want)).all()
