"""Improved GateKeeper: never a false reject against the verifier's own distance (edlib, N never matching), its
estimate a lower bound of that distance, and at most half of faithful's false accepts on the shared sets."""
import edlib
import numpy as np
import pytest

from filter_common import SETS, adversarial, pairs_text, shared_set, shared_truth
from mapper.alphabet import READ_ASCII, REF_ASCII
from mapper.filters.gatekeeper import filter_pairs, make_filter
from mapper.filters.pairs import parse_pairs
from mapper.filters.truth import edit_distances

SHARED_ES = [(name, e) for name in SETS for e in range(0, 16)]  # 10 % of L and beyond


def check_sound(accept, estimate, truth, e):
    """No false reject; on accept a lower bound in 0..e; on reject -1. (The walk is exact within the band, so
    the estimate is also the distance itself whenever that is <= e.)"""
    within = truth <= e
    assert not (within & ~accept).any(), f"false rejects at rows {np.flatnonzero(within & ~accept)[:10]}"
    assert ((estimate >= 0) & (estimate <= e) & (estimate <= truth))[accept].all()
    assert (estimate[~accept] == -1).all()
    np.testing.assert_array_equal(estimate[within], truth[within])


@pytest.mark.parametrize("name,e", SHARED_ES, ids=[f"{n}-e{e}" for n, e in SHARED_ES])
def test_shared_sets_sound(name, e, device):
    pairs, _ = shared_set(name)
    result = filter_pairs(pairs, e, mode="improved", device=device)
    check_sound(result.accept, result.estimate, shared_truth(name), e)


@pytest.mark.parametrize("name", SETS)
def test_half_of_faithful_false_accepts(name):
    """At every e from 2 to 10 % of L, improved lets through at most half the false accepts of faithful."""
    pairs, _ = shared_set(name)
    truth = shared_truth(name)
    L = int(pairs.len2[0])
    for e in range(2, -(-L // 10) + 1):
        faithful = filter_pairs(pairs, e, mode="faithful").accept
        improved = filter_pairs(pairs, e, mode="improved").accept
        false_faithful = int((faithful & (truth > e)).sum())
        false_improved = int((improved & (truth > e)).sum())
        assert false_improved <= false_faithful / 2, (e, false_improved, false_faithful)


ADVERSARIAL = [(L, e) for L in (37, 101, 150, 250) for e in range(0, L // 10 + 1)]
# on the GPU every (L, W, e) is a kernel compilation: the ends of the range and one in between
ADVERSARIAL_CUDA = [(L, e) for L in (37, 101, 150, 250) for e in sorted({0, 1, L // 20, L // 10})]


def check_adversarial(L, e, device, widths):
    """Edits at both ends and at 16/32/64-base word boundaries, Ns (an N facing an N included), distances at
    e-1, e and e+1; equal lengths (global distance) and windows with flanks (the read anywhere in them)."""
    rng = np.random.default_rng(1000 * L + e)
    filt = make_filter("improved", device)
    for W in widths:
        reads, windows = adversarial(rng, 40, L, W, e)
        truth = edit_distances(reads, windows)
        if W == L:  # the pairs-file reading: equal lengths are judged by the global distance
            result = filter_pairs(parse_pairs(pairs_text(windows, reads), "x"), e, mode="improved", device=device)
            check_sound(result.accept, result.estimate, truth, e)
        else:
            accept, estimate = filt(reads, windows, e)
            check_sound(accept, estimate, truth, e)


@pytest.mark.parametrize("L,e", ADVERSARIAL, ids=[f"L{L}-e{e}" for L, e in ADVERSARIAL])
def test_adversarial_pairs(L, e):
    check_adversarial(L, e, "cpu", (L, L + 1, L + 2 * e + 3, L + 3 * e + 7))


@pytest.mark.gpu
@pytest.mark.parametrize("L,e", ADVERSARIAL_CUDA, ids=[f"L{L}-e{e}" for L, e in ADVERSARIAL_CUDA])
def test_adversarial_pairs_cuda(L, e):
    check_adversarial(L, e, "cuda", (L, L + 2 * e + 3))


def test_mapper_callable_is_semi_global(device):
    """make_filter('improved') reads W == L windows as windows (read anywhere in them), not as global pairs."""
    rng = np.random.default_rng(5)
    reads, windows = adversarial(rng, 200, 60, 60, 4)
    accept, estimate = make_filter("improved", device)(reads, windows, 4)
    hw = np.array([edlib.align(READ_ASCII[r].tobytes(), REF_ASCII[w].tobytes(), mode="HW")["editDistance"]
                   for r, w in zip(reads, windows)])
    check_sound(accept, estimate, hw, 4)


def test_n_never_matches():
    """An N in the read and an N in the window at the same place is a mismatch: ACGTN vs ACGTN costs 1."""
    reads = np.array([[0, 1, 2, 3, 4, 0, 1, 2]], dtype=np.uint8)
    accept, estimate = make_filter("improved", "cpu")(reads, reads.copy(), 1)
    assert accept[0] and estimate[0] == 1
    assert not make_filter("improved", "cpu")(reads, reads.copy(), 0)[0][0]


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 7, 70001])
@pytest.mark.parametrize("mode", ["improved", "faithful"])
def test_cuda_equals_cpu_at_any_batch_size(n, mode):
    """Batch sizes of one pair, an odd number and more than one grid of blocks; both encodings; reads with N."""
    rng = np.random.default_rng(n)
    L, e = 101, 6
    reads, windows = adversarial(rng, min(n, 500), L, L, e)
    reads, windows = np.resize(reads, (n, L)), np.resize(windows, (n, L))
    flip = rng.random(n) < 0.3  # plus unrelated pairs, the filter's usual business
    windows[flip] = rng.integers(0, 4, size=(flip.sum(), L))
    pairs = parse_pairs(pairs_text(windows, reads), "x")
    want = filter_pairs(pairs, e, mode=mode, device="cpu")
    for encoding in ("host", "device"):
        got = filter_pairs(pairs, e, mode=mode, device="cuda", encoding=encoding)
        np.testing.assert_array_equal(got.accept, want.accept)
        np.testing.assert_array_equal(got.estimate, want.estimate)


def test_popcount_table_equals_bitwise_count():
    """The numpy < 2 fallback counts the same bits as np.bitwise_count (both word types, several words)."""
    from mapper.filters import _bitvec
    rng = np.random.default_rng(2)
    for dtype in (np.uint32, np.uint64):
        x = rng.integers(0, np.iinfo(dtype).max, size=(3, 1000), dtype=dtype, endpoint=True)
        want = np.array([sum(bin(int(v)).count("1") for v in x[:, i]) for i in range(x.shape[1])])
        np.testing.assert_array_equal(_bitvec.popcount_table(x), want)
        np.testing.assert_array_equal(_bitvec.popcount(x), want)
