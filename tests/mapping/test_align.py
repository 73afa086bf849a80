"""align.py's gapped path: the banded global alignment of a read against exactly its span, for many
mappings at once. Against edlib (NW, N never matching) on random spans with substitutions, insertions,
deletions and Ns: the distance is edlib's, the CIGAR covers the read and the span, and MD/NM replay from
CIGAR + read + reference as the SAM spec defines them (oracle.replay)."""
import edlib
import numpy as np
import pytest

from mapper.align import _align_global
from mapper.alphabet import READ_ASCII, REF_ASCII
from oracle import replay


def spans(rng, n, L, K):
    genome = rng.integers(0, 4, 50_000).astype(np.uint8)
    genome[rng.integers(0, len(genome), 200)] = 4
    reads, starts, ends = [], [], []
    for _ in range(n):
        s, w = int(rng.integers(50, 49_000)), L + int(rng.integers(-K, K + 1))
        r = list(genome[s:s + w])
        for _ in range(int(rng.integers(0, K + 1))):
            kind, p = rng.integers(0, 3), int(rng.integers(0, len(r)))
            if kind == 0:
                r[p] = rng.integers(0, 5)
            elif kind == 1:
                r.insert(p, rng.integers(0, 4))
            else:
                del r[p]
        reads.append((r + [0] * L)[:L])
        starts.append(s)
        ends.append(s + w)
    return genome, np.array(reads, dtype=np.uint8), np.array(starts), np.array(ends)


@pytest.mark.parametrize("L,K", [(36, 1), (60, 4), (101, 6)])
def test_gapped_alignment_replays(L, K):
    genome, read, start, end = spans(np.random.default_rng(L), 600, L, K)
    d = np.array([edlib.align(READ_ASCII[r].tobytes(), REF_ASCII[genome[a:b]].tobytes(), mode="NW")["editDistance"]
                  for r, a, b in zip(read, start, end)])
    ok = np.flatnonzero(d <= K)
    assert len(ok) > 100
    cigars, mds, nms = _align_global(read[ok], genome, start[ok], end[ok], K)
    assert np.array_equal(nms, d[ok])
    contig = {"g": READ_ASCII[genome].tobytes().decode()}
    for i, g in enumerate(ok.tolist()):
        rec = {"rname": "g", "pos": int(start[g]) + 1, "cigar": cigars[i], "seq": READ_ASCII[read[g]].tobytes().decode()}
        md, nm = replay(rec, contig)
        span = sum(int(n) for n, op in __import__("re").findall(r"(\d+)([MD])", cigars[i]))
        assert span == end[g] - start[g], cigars[i]
        assert (md, nm) == (mds[i], nms[i]), (cigars[i], mds[i], md)
