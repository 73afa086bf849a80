"""`gkmap index --device cuda`: the k-mer index built on the GPU (mapper/backends/cuda_index.py,
kernels/kmer_index.cu) equals the numpy build, array for array. On the host (CI) the kernels run through
tests/host_cuda.py with numpy standing in for the counter's scan and radix sort (their kernels use shared
memory); on a GPU (`gpu`) everything runs on the device, the counter's kernels included."""
import numpy as np
import pytest

import host_cuda
from conftest import LAMBDA, MEASLES, SHIGELLA
from mapper.backends import cuda_index
from mapper.device import cuda_available, using
from mapper.index import build_arrays, build_index, load_index
from mapper.reference import Reference, read_fasta


class NumpyKernels:
    """The two primitives build_arrays takes from mapper/kmers/gpu.py's CudaKernels, on host 'device' buffers."""

    def compaction(self, flags, n):
        f = flags.view(np.uint32)[:n].astype(np.int64)
        return host_cuda.to_device((np.cumsum(f) - f).astype(np.uint32)), int(f.sum())

    def sort_keys(self, keys, n, bits, low=0, alt=None):
        """By bits [low, bits) only, stably, as the radix sort does (a plain sort of the whole words would
        hide an order the build relies on)."""
        words = keys.view(np.uint64)[:n]
        order = np.argsort((words >> np.uint64(low)) & np.uint64((1 << (bits - low)) - 1), kind="stable")
        return host_cuda.to_device(words[order])


@pytest.fixture(params=["host", pytest.param("gpu", marks=pytest.mark.gpu)])
def build(request):
    if request.param == "host":
        with using(host_cuda):
            yield lambda reference, ws, **limits: cuda_index.build_arrays(reference, ws, NumpyKernels(), **limits)
    else:
        yield cuda_index.build_arrays


def with_ns_and_contigs():
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 4, 5000).astype(np.uint8)
    codes[[7, 8, 900, 2500, 4990]] = 4
    lengths = np.array([1200, 11, 3789])  # one contig shorter than ws... and one k-mer crossing each end
    return Reference(["a", "b", "c"], np.array([0, 1200, 1211]), lengths, codes)


@pytest.mark.parametrize("ws", [10, 12])
def test_gpu_build_equals_numpy(build, tmp_path, ws):
    for reference in (read_fasta(MEASLES, tmp_path / "m.fai"), with_ns_and_contigs()):
        want = build_arrays(reference, ws)
        got = build(reference, ws)
        assert got[0].dtype == want[0].dtype and got[1].dtype == want[1].dtype
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("budget,segment", [(20 * 97, 211), (20 * 5000, 1000), (20 * 2**40, 3)])
def test_gpu_build_in_key_ranges_and_segments(build, tmp_path, budget, segment):
    """A budget of a few k-mers cuts the keys into many ranges (some empty, one bucket above the budget:
    measles' poly-A), each gathered from the genome in segments of starts; the arrays are the same."""
    for reference in (read_fasta(MEASLES, tmp_path / "m.fai"), with_ns_and_contigs()):
        want = build_arrays(reference, 10)
        got = build(reference, 10, budget=budget, segment=segment)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_genome_without_kmers(build):
    reference = Reference(["n"], np.array([0]), np.array([30]), np.full(30, 4, dtype=np.uint8))
    offsets, positions = build(reference, 10)
    assert len(positions) == 0 and not offsets.any() and len(offsets) == 4**10 + 1


@pytest.mark.gpu
def test_gkmap_index_device_cuda_writes_the_same_folder(gkmap, tmp_path):
    for genome in (LAMBDA, SHIGELLA):
        a, b = tmp_path / f"{genome.name}.cpu", tmp_path / f"{genome.name}.cuda"
        assert gkmap("index", "--quiet", "--index", a, genome)[0] == 0
        assert gkmap("index", "--quiet", "--device", "cuda", "--index", b, genome)[0] == 0
        for name in ("offsets", "positions", "seq2bit", "nmask"):
            assert (a / f"{name}.npy").read_bytes() == (b / f"{name}.npy").read_bytes(), name
        load_index(genome, b)


@pytest.mark.skipif(cuda_available(), reason="the machine has a GPU")
def test_device_cuda_without_a_gpu_is_a_one_line_error(gkmap, tmp_path):
    code, err = gkmap("index", "--quiet", "--device", "cuda", "--index", tmp_path / "x", MEASLES)
    assert code == 2 and "--device cuda: no CUDA GPU" in err and len(err.strip().splitlines()) == 1
