"""kernels/myers.cu against the host verifier (mapper/verify.py window_covers) on windows at distances e-1, e, e+1.

In CI the kernel runs on the CPU through tests/host_cuda.py; on a GPU (`gpu` marker) the real kernel is
checked on up to 10^6 windows, with batch sizes 1, odd, and many grids.
"""
import pytest

from mapper.backends import cuda_mapping
from windows import compare, host_answers, make_windows


def run(data):
    reads, genome, *rest = data
    return cuda_mapping.verify_windows(genome, reads, *rest)


@pytest.mark.parametrize("device_layer", ["host"], indirect=True)
@pytest.mark.parametrize("lengths,thresholds", [((100, 150), (2, 4, 5, 6, 7)), ((37, 64, 65, 128, 129, 250), (0, 1, 3, 9))])
def test_kernel_source_equals_host_on_host(device_layer, lengths, thresholds):
    data = make_windows(6000, seed=3, lengths=lengths, thresholds=thresholds)
    answers = host_answers(*data)
    within = sum(d >= 0 for d, _ in answers)
    assert 0.2 * len(answers) < within < 0.95 * len(answers), "windows should straddle e"
    assert compare(answers, *run(data), cuda_mapping.MAX_ENDS) == 0


@pytest.mark.gpu
@pytest.mark.parametrize("batch", [1, 333, 1_000_000])
def test_gpu_kernel_equals_host(batch):
    data = make_windows(batch, seed=batch)
    answers = host_answers(*data)
    assert compare(answers, *run(data), cuda_mapping.MAX_ENDS) == 0
    print(f"myers kernel == host verifier on {batch} windows ({sum(d >= 0 for d, _ in answers)} within e)")


def test_compiled_covers_equal_numpy(monkeypatch):
    """Locus refinement's path (verify.compiled_covers: verify_wide on the host, leading columns that are not
    ends) against the numpy twin, on band windows straddling e and tandem-repeat windows mixed, with skips
    of 0 to 40 columns: every window goes to verify_wide once, and the covers equal numpy's."""
    import numpy as np
    from mapper import verify
    from mapper.device import host
    if not host.available():
        pytest.skip("no C++ compiler: compiled_covers is the numpy twin itself")
    band, tandem = make_windows(3000, seed=5), tandem_windows(60, seed=7)
    reads = np.concatenate([band[0], tandem[0]])
    genome = np.concatenate([band[1], tandem[1]])
    read_start = np.r_[band[2], tandem[2] + len(band[0])]
    win_start = np.r_[band[5], tandem[5] + len(band[1])]
    read_len, max_e, win_len = (np.r_[band[i], tandem[i]] for i in (3, 4, 6))
    skip = np.minimum(np.random.default_rng(5).integers(0, 41, len(read_start)), win_len)
    sent = []
    wide_covers = verify.wide_covers
    monkeypatch.setattr(verify, "wide_covers", lambda layer, genome, codes, read_start, *rest, **kw:
                        sent.append(len(read_start)) or wide_covers(layer, genome, codes, read_start, *rest, **kw))
    got = verify.compiled_covers(genome, reads, read_start, read_len, max_e, win_start, win_len, skip)
    want = verify.window_covers(genome, reads, read_start, read_len, max_e, win_start, win_len, skip)
    assert sent == [len(read_start)]
    assert len(want[0]) > 1000 and all(np.array_equal(a, b) for a, b in zip(got, want))
    ends = np.bincount(want[0], minlength=len(read_start))
    assert (ends > verify.MAX_ENDS).sum() > 10 and ((ends > 0) & (ends <= verify.MAX_ENDS)).sum() > 1000


def tandem_windows(n, seed):
    """Windows of 100-3,000 bases inside tandem repeats (period 1-6, 2 % impurities) with reads of the same
    repeat: covers of tens to hundreds of ends, the windows verify_windows leaves to verify_wide."""
    import numpy as np
    rng = np.random.default_rng(seed)
    reads, texts, read_len, max_e = [], [], [], []
    for _ in range(n):
        motif = rng.integers(0, 4, int(rng.integers(1, 7)), dtype=np.uint8)
        L, e = int(rng.choice([36, 100, 150])), int(rng.integers(1, 8))
        text = np.resize(motif, int(rng.integers(L, 3000)))
        text[rng.random(len(text)) < 0.02] = rng.integers(0, 4)
        read = np.resize(motif, L)
        read[rng.integers(0, L, int(rng.integers(0, e + 2)))] = rng.integers(0, 4)
        reads.append(read), texts.append(text), read_len.append(L), max_e.append(e)
    read_len, max_e = np.array(read_len), np.array(max_e)
    win_len = np.array([len(t) for t in texts])
    return (np.concatenate(reads), np.concatenate(texts), np.cumsum(read_len) - read_len, read_len, max_e,
            np.cumsum(win_len) - win_len, win_len)


@pytest.mark.parametrize("hashed", [True, False], ids=["hashed", "one-hash"])
@pytest.mark.parametrize("budget", [1 << 25, 5000])
def test_wide_kernel_equals_numpy_on_tandem_repeats(device_layer, monkeypatch, budget, hashed):
    """verify_wide (verify.wide_covers) against the numpy twin on tandem-repeat windows of any width, with
    leading columns skipped as locus refinement does; budget 5000 cuts the windows into many launches.
    one-hash: every end's text hashes alike (myers.cu START_HASH_MASK 0), so an end's start is reused
    from another's only where the byte comparison finds the same cost, span and text."""
    import numpy as np
    from mapper import verify
    from mapper.verify import wide_covers, window_covers
    if not hashed:
        defines = verify.kernel_defines
        monkeypatch.setattr(verify, "kernel_defines", lambda L: {**defines(L), "START_HASH_MASK": 0})
    reads, genome, read_start, read_len, max_e, win_start, win_len = tandem_windows(300, seed=budget)
    skip = np.minimum(np.random.default_rng(1).integers(0, 60, len(win_len)), win_len)
    want = window_covers(genome, reads, read_start, read_len, max_e, win_start, win_len, skip)
    got = wide_covers(device_layer, device_layer.to_device(genome), device_layer.to_device(reads), read_start,
                      read_len, max_e, win_start, win_len, skip, budget=budget)
    order = np.lexsort((got[1], got[0]))
    ends_per_window = np.bincount(want[0], minlength=len(win_len))
    assert ends_per_window.max() > 50, "some covers should have many ends"
    assert all(np.array_equal(a[order], b) for a, b in zip(got, want))


def test_windows_sharing_reads_across_launches(device_layer):
    """Many windows of one read, as seeding makes them (the host keeps a read's Peq masks from one window to
    the next, myers.cu build_peq), in two launches over one reads buffer whose bases change between them:
    what the first launch built must not serve the second, on either layer."""
    import numpy as np
    reads, genome, read_start, read_len, max_e, win_start, win_len = make_windows(200, seed=11)
    r = next(i for i, (d, _) in enumerate(host_answers(reads, genome, read_start, read_len, max_e, win_start,
                                                        win_len)) if d >= 0)
    rng = np.random.default_rng(11)
    n, longest = 600, int(read_len.max())
    shift, cut = rng.integers(0, 4, n), rng.integers(0, 4, n)  # the read's own window, moved and cut a little
    windows = (np.full(n, read_start[r]), np.full(n, read_len[r]), np.full(n, max_e[r]),
               win_start[r] + shift, win_len[r] - shift - cut)
    up = lambda a, dtype: device_layer.scratch_copy(np.asarray(a).astype(dtype))
    d_reads, d_genome = up(reads, np.uint8), up(genome, np.uint8)
    args = [up(a, t) for a, t in zip(windows, (np.int64, np.int32, np.int32, np.int64, np.int32))]
    shapes = ((n,), (n,), *[(cuda_mapping.MAX_ENDS, n)] * 3)
    other = (reads + 1) % 4  # the second launch's reads: every base changed (no window within e), same buffer
    for bases, first in ((reads, True), (other, False)):
        device_layer.copy_into(d_reads, bases.astype(np.uint8))
        answers = host_answers(bases, genome, *windows)
        out = cuda_mapping._verify_device(d_genome, d_reads, *args, n, longest)
        got = [device_layer.from_device(b, shape, np.int32) for b, shape in zip(out, shapes)]
        within = sum(d >= 0 for d, _ in answers)
        assert within > n // 10 if first else within == 0
        assert compare(answers, *got, cuda_mapping.MAX_ENDS) == 0


def test_many_kernel_builds_load_in_one_process():
    """A process that verifies reads of many lengths loads a myers.cu build per MAX_WORDS, and other kernel
    libraries after them: their thread-local storage must not exhaust the process's static TLS block
    (arrays of masks there did after five builds: "cannot allocate memory in static TLS block")."""
    import subprocess
    import sys
    script = ("from mapper.device import host\n"
              "from mapper.verify import kernel_defines\n"
              "for L in range(64, 64 * 9, 64):\n"
              "    host.function('myers.cu', 'verify_windows', **kernel_defines(L))\n"
              "host.function('seed.cu', 'seed_select', WS=12, SEED_LANES=1)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-500:]
