"""The cuda backend of `gkmap kmers` (kernels/kmer_*.cu) against the cpu one, exactly.

Run on the GPU machine:  .venv/bin/python -m pytest tests/kmers/test_kmers_gpu.py -q -m gpu
(skipped where there is no GPU or no pycuda; the cpu backend is itself checked against jellyfish, and
tests/kmers/test_kmers_host_gpu.py runs the cuda backend's Python and element-wise kernels on the host).
"""
import gzip

import numpy as np
import pytest

from conftest import SHIGELLA
from mapper.device import cuda_available
from kmer_reads import half_repeated_fasta, user_fastq
from mapper.cli import main
from mapper.kmers import backend
from mapper.kmers.count import sort_count
from mapper.kmers.counter import count_kmers


def gpu(test):
    """Marked `gpu`, and skipped where there is no usable GPU (also without the suite's conftest)."""
    return pytest.mark.gpu(pytest.mark.skipif(not cuda_available(), reason="no CUDA GPU / pycuda here")(test))


@pytest.fixture(scope="module")
def sorter():
    from mapper.kmers.gpu import CudaKernels
    return CudaKernels()


def random_keys(rng, channels, n, distinct):
    """n keys drawn from `distinct` random full-width keys (repeats, equal channel-0 prefixes)."""
    pool = rng.integers(0, 2 ** 64 - 1, (channels, distinct), dtype=np.uint64, endpoint=True)
    pool[0, ::3] = pool[0, 0]  # many keys share channel 0: the later channels decide
    return pool[:, rng.integers(0, distinct, n)]


@gpu
@pytest.mark.parametrize("channels", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 2, 777, 2048, 2049, 100_003, 4_300_000])
@pytest.mark.parametrize("weighted", [False, True])
def test_sort_count_equals_cpu(sorter, channels, n, weighted):
    """Sizes: one key, one tile (2048) and one more, many tiles, and beyond 2048^2 (a two-level scan)."""
    rng = np.random.default_rng(n + channels)
    keys = random_keys(rng, channels, n, max(1, n // 3))
    weights = rng.integers(1, 2 ** 40, n, dtype=np.uint64) if weighted else None
    got_keys, got_counts = sorter.sort_count(keys, weights)
    want_keys, want_counts = sort_count(keys, weights)
    assert np.array_equal(got_keys, want_keys)
    assert np.array_equal(got_counts, want_counts)


@gpu
@pytest.mark.parametrize("channels", [1, 2])
def test_sort_count_of_wide_random_keys(sorter, channels):
    """Every digit of 64-bit keys, 30 M keys (many tiles, three levels of scans), mostly distinct."""
    rng = np.random.default_rng(channels)
    keys = rng.integers(0, 2 ** 64 - 1, (channels, 30_000_000 // channels), dtype=np.uint64, endpoint=True)
    keys[:, ::7] = keys[:, :1]
    got, want = sorter.sort_count(keys), sort_count(keys)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@gpu
def test_sort_count_short_keys_and_all_equal(sorter):
    """Channel values with few bits (few radix passes) and a buffer of one repeated key (no pass at all)."""
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 4 ** 5, (1, 50_000), dtype=np.uint64)
    for k in (keys, np.zeros((2, 3000), dtype=np.uint64)):
        got, want = sorter.sort_count(k), sort_count(k)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@gpu
@pytest.mark.parametrize("k, canonical", [(21, False), (31, True), (32, False), (33, True), (63, False), (127, True)])
@pytest.mark.parametrize("memory", ["2", "0.01"], ids=["in-memory", "spilling"])
def test_cuda_table_is_byte_identical_to_cpu(shigella_fastq, tmp_path, k, canonical, memory):
    """The whole pipeline on the device: the table files are the same bytes (the cpu one matches jellyfish,
    tests/kmers/test_kmers.py); with a small budget the runs are spilled and merged with weights on the GPU."""
    assert_cpu_equals_cuda([shigella_fastq], tmp_path, k, canonical, memory)


@pytest.fixture(scope="module")
def shigella_genome(tmp_path_factory):
    """The Shigella genome, uncompressed, once with line ends as they are and once with CRLF ends and a
    comment line (the blocks that the GPU hands back to the host's exact parser)."""
    text = gzip.decompress(SHIGELLA.read_bytes())
    folder = tmp_path_factory.mktemp("shigella_genome")
    (folder / "plain.fa").write_bytes(text)
    (folder / "crlf.fa").write_bytes(text.replace(b"\n", b"\r\n").replace(b"\r\n>", b"\r\n# note\r\n>", 1))
    return folder / "plain.fa", folder / "crlf.fa"


@gpu
@pytest.mark.parametrize("k, canonical", [(15, False), (31, True), (32, False), (65, True), (127, False)])
@pytest.mark.parametrize("memory", ["2", "0.02"], ids=["in-memory", "spilling"])
def test_cuda_genome_table_is_byte_identical_to_cpu(shigella_genome, tmp_path, k, canonical, memory):
    """FASTA text parsed on the device in blocks (several blocks and spilled runs with the small budget)."""
    assert_cpu_equals_cuda(shigella_genome, tmp_path, k, canonical, memory)


def assert_cpu_equals_cuda(inputs, tmp_path, k, canonical, memory):
    """`gkmap kmers count` writes the same table on both backends: the cpu one with --memory `memory` GB;
    the cuda one with its default budget for "2", else with `memory` GB of device buffers (count_kmers'
    budget: through --gpu-memory a budget this small would be all CUDA context)."""
    tables = {device: tmp_path / f"{device}.kmers" for device in ("cpu", "cuda")}
    args = ["kmers", "count", "--quiet", "-k", str(k), *(["--canonical"] if canonical else []), *map(str, inputs)]
    assert main(args + ["--device", "cpu", "--memory", memory, "-o", str(tables["cpu"])]) == 0
    if memory == "2":
        assert main(args + ["--device", "cuda", "-o", str(tables["cuda"])]) == 0
    else:
        count_kmers(inputs, tables["cuda"], k, canonical, 1, backend.select("cuda")[0], int(float(memory) * 2 ** 30),
                    tmp_path)
    assert tables["cpu"].read_bytes() == tables["cuda"].read_bytes()


@pytest.fixture(scope="module")
def odd_reads(tmp_path_factory):
    """FASTQ reads the GPU parses (N-rich, lower case, a read 12,000 times: counts above 10,000), gzipped,
    and the same with CRLF line ends (blocks the GPU hands back to the host)."""
    text = user_fastq(13, 3000, 4000, 150, n_every=3, n_count=30, lower_every=4, lower_upto=70, qual=b"#")
    folder = tmp_path_factory.mktemp("odd_reads")
    (folder / "reads.fq.gz").write_bytes(gzip.compress(text, compresslevel=1))
    (folder / "crlf.fq").write_bytes(text.replace(b"\n", b"\r\n"))
    return folder / "reads.fq.gz", folder / "crlf.fq"


@gpu
@pytest.mark.parametrize("k, canonical", [(1, True), (31, True), (33, False), (150, True)])
@pytest.mark.parametrize("memory", ["2", "0.005"], ids=["in-memory", "held-or-spilled"])
def test_cuda_fastq_table_is_byte_identical_to_cpu(odd_reads, tmp_path, k, canonical, memory):
    """FASTQ parsed on the device (gzip input; CRLF blocks parsed on the host): the cpu backend's table."""
    assert_cpu_equals_cuda(odd_reads, tmp_path, k, canonical, memory)


@gpu
@pytest.mark.parametrize("k, canonical, min_count", [(21, True, 1), (40, False, 2)])
def test_cuda_merges_held_runs_a_range_of_bins_at_a_time(tmp_path, monkeypatch, k, canonical, min_count):
    """Runs held on the device that the buffer cannot take together (nothing spilled) are merged a range of
    bins at a time on the GPU (CudaBackend.merge_pieces): the cpu backend's table."""
    from mapper.kmers import gpu, layout
    monkeypatch.setattr("mapper.kmers.counter.MIN_CAPACITY", 1 << 9)
    monkeypatch.setattr("mapper.kmers.counter.MAX_BLOCK_BYTES", 10_000)
    monkeypatch.setattr(layout, "GROUP_BYTES", 20_000)
    reads = half_repeated_fasta(tmp_path / "r.fa", 7, 120_000)
    memory = 50_000 * gpu.CudaBackend.bytes_per_kmer(1 + (k > 32))  # ~90,000 distinct k-mers, 1.8 buffers: none spilled
    tables = {}
    for device in ("cpu", "cuda"):
        tables[device] = tmp_path / f"{device}.kmers"
        stats = count_kmers([reads], tables[device], k, canonical, min_count, backend.select(device)[0], memory,
                            tmp_path)
    assert stats.runs_spilled == 0 and "merging" in stats.phases
    assert tables["cpu"].read_bytes() == tables["cuda"].read_bytes()


@gpu
def test_cuda_count_keeps_within_gpu_memory(tmp_path, monkeypatch):
    """--gpu-memory 1G (CudaBackend.device_budget) on 16 M k-mers, far more than its buffers take: runs
    spilled and merged, and the memory pool (every device buffer of the count as the pool rounds it, and
    the blocks it keeps for reuse) never holds more than 1 GiB less the CUDA context; the cpu backend's
    table."""
    from mapper.device import cuda
    from mapper.kmers.counter import MAX_BLOCK_BYTES
    monkeypatch.setattr(cuda, "_POOL_LIMIT", [None])  # device_budget bounds the pool for this test only
    peak, scratch = [0], cuda.scratch

    def measured(nbytes):
        buffer = scratch(nbytes)
        peak[0] = max(peak[0], cuda._pool().managed_bytes)
        return buffer
    monkeypatch.setattr(cuda, "scratch", measured)
    rng = np.random.default_rng(5)
    bases = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, 16_000_000)].reshape(-1, 200)
    reads = tmp_path / "r.fa"
    reads.write_bytes(b"".join(b">r%d\n%s\n" % (i, row.tobytes()) for i, row in enumerate(bases)))
    make_cuda = backend.select("cuda")[0]
    memory = make_cuda.device_budget(1 << 30, MAX_BLOCK_BYTES)
    stats = count_kmers([reads], tmp_path / "cuda.kmers", 31, True, 1, make_cuda, memory, tmp_path)
    assert stats.runs_spilled > 0
    assert peak[0] <= (1 << 30) - cuda.CONTEXT, peak[0]
    count_kmers([reads], tmp_path / "cpu.kmers", 31, True, 1, backend.CpuBackend, 2 << 30, tmp_path)
    assert (tmp_path / "cpu.kmers").read_bytes() == (tmp_path / "cuda.kmers").read_bytes()


@pytest.mark.skipif(cuda_available(), reason="checks the message given where there is no GPU")
def test_device_cuda_without_a_gpu_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "x.fa").write_text(">a\nACGTACGT\n")
    assert main(["kmers", "count", "--device", "cuda", "-k", "3", "-o", str(tmp_path / "t"),
                 str(tmp_path / "x.fa")]) == 2
    assert "--device cuda: no CUDA GPU" in capsys.readouterr().err
