"""Faithful GateKeeper: every decision and estimate of the published program (shared pair sets, every e), and
the vectorised implementation against a literal transcription of the spec where the oracle has no files."""
import numpy as np
import pytest

from filter_common import SETS, published_es, shared_set
from gatekeeper_spec import amend as spec_amend, gatekeeper as spec_gatekeeper
from mapper.alphabet import BASES
from mapper.filters import _faithful
from mapper.filters.gatekeeper import encode_faithful, filter_pairs, make_filter
from mapper.filters.pairs import parse_pairs

ORACLE = [(name, e) for name in SETS for e in published_es(name)]


@pytest.mark.parametrize("name,e", ORACLE, ids=[f"{n}-e{e}" for n, e in ORACLE])
def test_published_decisions(name, e, device):
    pairs, table = shared_set(name)
    result = filter_pairs(pairs, e, mode="faithful", device=device)
    np.testing.assert_array_equal(result.accept, table[:, 2 * e].astype(bool))
    np.testing.assert_array_equal(result.estimate, table[:, 2 * e + 1])


@pytest.mark.parametrize("encoding", ["host", "device"])
def test_published_decisions_both_encodings(encoding, device):
    pairs, table = shared_set("shigella_ERR6005894_L150")
    result = filter_pairs(pairs, 7, mode="faithful", device=device, encoding=encoding)
    np.testing.assert_array_equal(result.estimate, table[:, 15])


def test_amend_matches_spec_loop():
    """Bit-parallel amend (in-word fill with the bit-30 quirk, all word boundaries at once) == the LUT loop."""
    rng = np.random.default_rng(7)
    for A in (1, 2, 3, 5):
        # sparse and dense words, and words built from short runs, where the rules and quirks bite
        dense = rng.integers(0, 1 << 32, size=(A, 2000), dtype=np.uint64).astype(np.uint32)
        sparse = dense & rng.integers(0, 1 << 32, size=(A, 2000), dtype=np.uint64).astype(np.uint32)
        runs = np.where(rng.random((A, 2000, 32)) < 0.6, 1, 0).astype(np.uint32)
        runs = (runs << np.arange(32, dtype=np.uint32)).sum(axis=2, dtype=np.uint32)
        for x in (dense, sparse, runs, ~sparse):
            got = _faithful.amend(x.copy())
            want = np.array([spec_amend(list(map(int, x[:, j]))) for j in range(x.shape[1])], dtype=np.uint32).T
            np.testing.assert_array_equal(got, want)


def _similar_pairs(rng, n, L):
    """ASCII pairs that differ by a few substitutions and indels, so that shifted masks, amend and the end
    fixes all matter (random pairs would be rejected by the Hamming step already)."""
    first = rng.integers(0, 4, size=(n, L + 8))
    second = first.copy()
    for i in range(n):
        for _ in range(rng.integers(0, 6)):
            p = rng.integers(0, L)
            kind = rng.integers(3)
            if kind == 0:
                second[i, p] = rng.integers(4)
            elif kind == 1:
                second[i, p + 1:] = second[i, p:-1].copy()
            else:
                second[i, p:-1] = second[i, p + 1:].copy()
    letters = np.frombuffer(BASES.encode(), dtype=np.uint8)
    return letters[first[:, :L]], letters[second[:, :L]]


@pytest.mark.parametrize("L", [17, 31, 32, 33, 37, 48, 64, 100, 101, 112, 150, 160, 250])
def test_matches_spec_transcription(L, device):
    """Lengths that are not multiples of 16, odd and even word counts, L = 16W (nothing to pad)."""
    rng = np.random.default_rng(L)
    first, second = _similar_pairs(rng, 60, L)
    pairs = parse_pairs(b"".join(a.tobytes() + b"\t" + b.tobytes() + b"\n" for a, b in zip(first, second)), "x")
    for e in sorted({0, 1, 2, 3, 5, L // 10, L // 8}):
        result = filter_pairs(pairs, e, mode="faithful", device=device)
        want = [spec_gatekeeper(a.tobytes(), b.tobytes(), e) for a, b in zip(first, second)]
        np.testing.assert_array_equal(result.accept, [w[0] for w in want], err_msg=f"L={L} e={e}")
        np.testing.assert_array_equal(result.estimate, [w[1] for w in want], err_msg=f"L={L} e={e}")


def test_undefined_pairs_pass():
    """N, lower case or any other letter in either string, or L <= 16: pass with -2 (the published rule)."""
    lines = [b"ACGTACGTACGTACGTACGTA\tACGTACGTACGTACGTACGTN", b"acgtacgtacgtacgtacgta\tACGTACGTACGTACGTACGTA",
             b"ACGTACGTACGTACGTACGTA\tTTTTTTTTTTTTTTTTTTTTT", b"ACGTACGTACGTACGT\tTTTTTTTTTTTTTTTT"]
    result = filter_pairs(parse_pairs(b"\n".join(lines), "x"), 2, mode="faithful")
    assert result.accept.tolist() == [True, True, False, True]
    assert result.estimate.tolist() == [-2, -2, -1, -2]


def test_mapper_callable_shifts_the_segment():
    """make_filter('faithful') takes (reads, segments): the segment is column 1, the shifted string."""
    pairs, table = shared_set("ERR240727_1_E2")
    (_, first, second), = pairs.groups()
    segments, reads, _ = encode_faithful(first, second)
    accept, estimate = make_filter("faithful", "cpu")(reads, segments, 4)
    np.testing.assert_array_equal(estimate, table[:, 9])
    reads[0, 5] = 4
    assert make_filter("faithful", "cpu")(reads[:1], segments[:1], 4)[1][0] == -2
