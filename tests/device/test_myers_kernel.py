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


def test_compiled_covers_with_skipped_columns_equal_numpy():
    """Locus refinement's path (verify.compiled_covers: the kernel on the host, leading columns that are not
    ends) against the numpy twin, on windows straddling e and with skips of 0 to 40 columns."""
    import numpy as np
    from mapper.verify import compiled_covers, window_covers
    reads, genome, read_start, read_len, max_e, win_start, win_len = make_windows(3000, seed=5)
    skip = np.random.default_rng(5).integers(0, 41, len(read_start))
    skip = np.minimum(skip, win_len)
    got = compiled_covers(genome, reads, read_start, read_len, max_e, win_start, win_len, skip)
    want = window_covers(genome, reads, read_start, read_len, max_e, win_start, win_len, skip)
    assert len(want[0]) > 1000 and all(np.array_equal(a, b) for a, b in zip(got, want))
