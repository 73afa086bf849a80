"""kernels/myers.cu against edlib on windows at distances e-1, e, e+1.

CI has no GPU, so the kernel's source is also compiled as host C++ (g++, which nvcc needs anyway) with a
small shim for the CUDA keywords, and run one "thread" at a time: the algorithm is checked on every CI run;
on the GPU (`gpu` marker) the real kernel is checked on 10^6 windows.
"""
import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import ROOT
from windows import compare, edlib_answers, make_windows

MAX_ENDS = 8
SHIM = """
#include <algorithm>
using std::min;
struct Dim { int x; };
static Dim blockIdx{0}, blockDim{1}, threadIdx{0};
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#include "myers.cu"
extern "C" void run_all(const uint8_t *genome, const uint8_t *reads, const long long *rs, const int *rl,
    const int *me, const long long *ws, const int *wl, int n, int *best, int *ne, int *ends, int *starts) {
  for (int i = 0; i < n; ++i) {
    threadIdx.x = i;
    verify_windows(genome, reads, rs, rl, me, ws, wl, n, best, ne, ends, starts);
  }
}
"""


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.fail("g++ is needed to run the kernel source on the host (nvcc needs it too)")
    folder = tmp_path_factory.mktemp("myers")
    (folder / "shim.cpp").write_text(SHIM)
    lib = folder / "libmyers.so"
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", f"-I{ROOT / 'kernels'}", "-DMAX_WORDS=4",
                    f"-DMAX_ENDS={MAX_ENDS}", "-o", str(lib), str(folder / "shim.cpp")], check=True)
    return ctypes.CDLL(str(lib))


def run_host(lib, reads, genome, read_start, read_len, max_e, win_start, win_len):
    n = len(read_start)
    c = lambda a, t: np.ascontiguousarray(a, dtype=t)
    args = [c(genome, np.uint8), c(reads, np.uint8), c(read_start, np.int64), c(read_len, np.int32),
            c(max_e, np.int32), c(win_start, np.int64), c(win_len, np.int32)]
    best, n_ends = np.zeros(n, np.int32), np.zeros(n, np.int32)
    ends, starts = np.zeros(MAX_ENDS * n, np.int32), np.zeros(MAX_ENDS * n, np.int32)
    ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)
    lib.run_all(*map(ptr, args), ctypes.c_int(n), ptr(best), ptr(n_ends), ptr(ends), ptr(starts))
    return best, n_ends, ends.reshape(MAX_ENDS, n), starts.reshape(MAX_ENDS, n)


@pytest.mark.parametrize("lengths,thresholds", [((100, 150), (2, 4, 5, 6, 7)), ((37, 64, 65, 128, 129, 250), (0, 1, 3, 9))])
def test_kernel_source_equals_edlib_on_host(host_kernel, lengths, thresholds):
    data = make_windows(6000, seed=3, lengths=lengths, thresholds=thresholds)
    answers = edlib_answers(*data)
    result = run_host(host_kernel, *data)
    within = sum(d >= 0 for d, _ in answers)
    assert 0.2 * len(answers) < within < 0.95 * len(answers), "windows should straddle e"
    assert compare(answers, *result, MAX_ENDS) == 0


@pytest.mark.gpu
@pytest.mark.parametrize("batch", [1, 333, 1_000_000])
def test_gpu_kernel_equals_edlib(batch):
    from mapper.backends.cuda_mapping import MAX_ENDS as GPU_MAX_ENDS, verify_windows
    data = make_windows(batch, seed=batch)
    answers = edlib_answers(*data, workers=os.cpu_count() or 1)
    result = verify_windows(data[1], *(data[i] for i in (0, 2, 3, 4, 5, 6)))
    assert compare(answers, *result, GPU_MAX_ENDS) == 0
    print(f"myers kernel == edlib on {batch} windows ({sum(d >= 0 for d, _ in answers)} within e)")
