"""kernels/phf.cu against the numpy neighbourhood code (issue #8).

Host emulation (CI, no GPU; tests/host_cuda.py runs the kernels as C++ one thread at a time): the look-up
kernel for the three methods and every Hamming radius, and the seed-and-filter kernels that need no
__syncthreads (sf_walk's count and emit passes: every hit of every row, as a multiset). On a GPU (marked gpu): the same
look-ups, the whole seed-and-filter (with the on-device sort and de-duplication, chunking and rows larger
than a shared-memory sort) equal to seeding.seed exactly, and `gkmap map --index-kind neighbourhood
--device cuda` writing the cpu's SAM.
Index build (gpu_build.py): emulated with numpy standing in for pb_sort (the kernel with __syncthreads), and on
a GPU entirely, the arrays equal the cpu build's bit for bit (J re-draws, N, contig ends, buckets sorted in
shared and in global memory), and `gkmap index --device cuda` writes the cpu's folder.
"""
import numpy as np
import pytest

import host_cuda
from cli_checks import without_pg
from conftest import LAMBDA, MEASLES, READS, SHIGELLA, SPACED
from mapper.device import using
from mapper.neighbourhood import gpu, gpu_build, lookup, seeding
from mapper.neighbourhood.index import build_arrays, packed_keys
from mapper.reference import read_fasta
from mapper.reads import read_batches
from mapper.seeding import strand_rows, ragged_arange


def queries(index, n, seed=5):
    """(block, key): half keys present in the index, half random (absent ones and empty blocks too)."""
    rng = np.random.default_rng(seed)
    block_of_slot = np.repeat(np.arange(len(index.nboff) - 1), np.diff(index.nboff))
    pick = rng.integers(0, len(index.nbkeys), n // 2)
    block = np.concatenate([block_of_slot[pick], rng.integers(0, len(index.nboff) - 1, n - n // 2)])
    key = np.concatenate([index.nbkeys[pick], rng.integers(0, 4**index.ln, n - n // 2)]).astype(np.uint32)
    return block, key


def numpy_lookup(index, block, key, nb_errors):
    """(slot of the exact key, positions over every neighbourhood within nb_errors) with lookup.py."""
    masks = seeding.substitution_masks(index.ln, nb_errors)
    slots = lookup.slots(index, "binary", np.repeat(block, len(masks)), (key[:, None] ^ masks[None, :]).ravel())
    sizes = np.where(slots >= 0, index.posoff[slots + 1] - index.posoff[np.maximum(slots, 0)], 0)
    return slots.reshape(-1, len(masks))[:, 0], sizes.reshape(-1, len(masks)).sum(axis=1)


@pytest.fixture
def emulated(monkeypatch):
    """gpu.py on tests/host_cuda.py (the current device layer for the test); a row-per-block launch becomes
    one single-thread launch per row."""
    def rows_one_by_one(kernel, first_row, n, *args):
        for row in range(first_row, first_row + n):
            host_cuda.launch(kernel, 1, *args, np.int32(row), block=1)
    monkeypatch.setattr(gpu, "launch_rows", rows_one_by_one)
    with using(host_cuda):
        yield


@pytest.mark.parametrize("method", lookup.LOOKUPS)
@pytest.mark.parametrize("nb_errors", [0, 1, 2])
def test_lookup_kernel_on_the_host(emulated, nb_index, method, nb_errors):
    index = nb_index(LAMBDA, SPACED, 7)
    block, key = queries(index, 301)
    slot0, hits, _ = gpu.ResidentIndex(index).lookup(method, block, key, nb_errors)
    expect_slot, expect_hits = numpy_lookup(index, block, key, nb_errors)
    assert (slot0 == expect_slot).all() and (hits == expect_hits).all()
    assert (expect_slot >= 0).sum() >= 150 and (expect_slot < 0).sum() > 0


def some_rows(path, n, e=3):
    batch = next(read_batches(path, n))
    return strand_rows(batch.codes(), batch.starts, np.full(len(batch), e))


def numpy_hits(rows, index, step, nb_errors):
    """Every (row, contig, diagonal) hit before de-duplication, sorted (the multiset sf_walk must emit)."""
    row, offset, seed_key, nb = seeding.patterns(rows, index, step)
    masks = seeding.substitution_masks(index.ln, nb_errors)
    slot = lookup.slots(index, "phf", np.repeat(seed_key, len(masks)), (nb[:, None] ^ masks[None, :]).ravel())
    hit = np.flatnonzero(slot >= 0)
    pattern = hit // len(masks)
    r, contig, diag = seeding.diagonals(index, row[pattern], offset[pattern], slot[hit])
    order = np.lexsort((diag, contig, r))
    return r[order], contig[order], diag[order], len(row)


def test_seed_kernels_on_the_host(emulated, nb_index):
    """sf_walk (no __syncthreads) emulated, both passes: each row's hits, as a multiset, equal numpy's."""
    index = nb_index(MEASLES, SPACED, 7)
    rows = some_rows(READS / "measles_Hm2_HiSeq_R1.fastq.gz", 23)
    rows.codes[rows.start[3] + 5] = 4  # an N in a seed
    step, nb_errors = 2, 1
    seeder = gpu.DeviceSeeder()
    kernel, args, _ = seeder.walk(rows, index, step, nb_errors, "phf")
    n_rows = len(rows.start)
    looked, hits = seeder.count(kernel, args, n_rows)
    r, contig, diag, n_patterns = numpy_hits(rows, index, step, nb_errors)
    assert (hits == np.bincount(r, minlength=n_rows)).all() and looked.sum() == n_patterns
    keys, _ = seeder.emit(kernel, args, hits, 0, n_rows)
    packed = host_cuda.from_device(keys, (int(hits.sum()),), np.uint64)
    owner, _ = ragged_arange(hits)
    got = np.lexsort(((packed & np.uint64((1 << 40) - 1)).astype(np.int64), packed >> np.uint64(40), owner))
    packed = packed[got]
    assert (owner == r).all()
    assert ((packed >> np.uint64(40)).astype(np.int64) == contig).all()
    assert ((packed & np.uint64((1 << 40) - 1)).astype(np.int64) - gpu.DIAG_BIAS == diag).all()
    assert len(diag) > 500


def test_pattern_keys_match_the_index_layout(nb_index):
    """The read-side keys (seeding.patterns) use the index's packing: a read copied from the genome finds
    its own position through every one of its patterns."""
    index = nb_index(LAMBDA, SPACED, 7)
    start = 1234
    codes = index.reference.codes[start:start + 50].copy()
    rows = strand_rows(codes, np.array([0, 50]), np.array([0]))
    row, offset, seed_key, nb = seeding.patterns(rows, index, 1)
    forward = row == 0
    slot = lookup.slots(index, "phf", seed_key[forward], nb[forward])
    assert (slot >= 0).all()
    for k, i in zip(slot.tolist(), offset[forward].tolist()):
        assert start + i in index.positions[index.posoff[k]:index.posoff[k + 1]]
    seed_ref, _ = packed_keys(index.reference.codes, index.seed_offsets, np.array([start]))
    assert seed_ref[0] == seed_key[0]


@pytest.mark.gpu
@pytest.mark.parametrize("method", lookup.LOOKUPS)
@pytest.mark.parametrize("nb_errors", [0, 1, 2])
def test_lookup_kernel_on_the_gpu(nb_index, method, nb_errors):
    index = nb_index(MEASLES, "####", 8)
    block, key = queries(index, 100_003)
    slot0, hits, _ = gpu.ResidentIndex(index).lookup(method, block, key, nb_errors)
    expect_slot, expect_hits = numpy_lookup(index, block, key, nb_errors)
    assert (slot0 == expect_slot).all() and (hits == expect_hits).all()


@pytest.mark.gpu
@pytest.mark.parametrize("mask,ln,nb_errors,step,n,capacity", [
    (SPACED, 7, 1, 1, 1, gpu.CAPACITY), (SPACED, 7, 2, 1, 997, gpu.CAPACITY), ("########", 7, 0, 3, 3001, 5000),
    ("####", 4, 2, 1, 64, 10_000),   # rows of > SORT_CAP hits: sorted in global memory; small chunks
])
def test_device_seeder_equals_numpy(nb_index, monkeypatch, mask, ln, nb_errors, step, n, capacity):
    index = nb_index(LAMBDA if ln == 4 else MEASLES, mask, ln)
    rows = some_rows(READS / "measles_Hm2_HiSeq_R1.fastq.gz", n)
    monkeypatch.setattr(gpu, "CAPACITY", capacity)
    for method in lookup.LOOKUPS if n < 100 else ("phf",):
        got, got_stats = gpu.DeviceSeeder().seed(rows, index, step, nb_errors, method)
        expect, expect_stats = seeding.seed(rows, index, step, nb_errors, method)
        assert got_stats == expect_stats
        for field in ("row", "contig", "lo", "hi"):
            assert (getattr(got, field) == getattr(expect, field)).all(), (method, field)
    if ln == 4:
        assert np.bincount(expect.row).max() > 2048


@pytest.mark.gpu
def test_cuda_map_writes_the_cpu_sam(gkmap, nb_index, tmp_path):
    index = nb_index(MEASLES, SPACED, 7)
    reads = READS / "measles_Hm2_HiSeq_R1.fastq.gz"
    texts = []
    for device in ("cpu", "cuda"):
        out = tmp_path / f"{device}.sam"
        code, err = gkmap("map", "--quiet", "--index-kind", "neighbourhood", "--index", index.folder, "--device", device,
                          "--nb-errors", 2, "-e", 4, "--batch-size", 5000, "-o", out, MEASLES, reads)
        assert code == 0, err
        texts.append(without_pg(out))
    assert texts[0] == texts[1]


def assert_same_build(reference, mask, ln):
    """The cuda build's arrays equal the cpu build's, dtype and bits; returns the cpu's."""
    cpu, cuda = build_arrays(reference, mask, ln), build_arrays(reference, mask, ln, "cuda")
    for name, a, b in zip(("nboff", "nbkeys", "posoff", "positions"), cpu[:4], cuda[:4]):
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for name in ("seed_j", "voff", "g", "vslot"):
        a, b = getattr(cpu[4], name), getattr(cuda[4], name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    return cpu


def two_contigs_with_n(tmp_path):
    fasta = tmp_path / "two.fa"
    rng = np.random.default_rng(3)
    a, b = ("".join(rng.choice(list("ACGT"), n)) for n in (3000, 1700))
    fasta.write_text(f">a\n{a[:1200]}NN{a[1200:]}\n>b\n{b}\n>c\nACGTA\n")
    return read_fasta(fasta, tmp_path / "two.fai")


def numpy_sort_buckets(kernel, words, d_boff, n_buckets):
    """pb_sort's result with numpy: each bucket of words ascending."""
    w, boff = words.view(np.uint64), d_boff.view(np.int64)
    owner = np.repeat(np.arange(n_buckets), np.diff(boff))
    w[:] = w[np.lexsort((w, owner))]


@pytest.mark.parametrize("genome,mask,ln", [(MEASLES, SPACED, 7), (LAMBDA, "####", 4), ("two", "###", 3)])
def test_build_kernels_on_the_host(monkeypatch, tmp_path, genome, mask, ln):
    monkeypatch.setattr(gpu_build, "sort_buckets", numpy_sort_buckets)
    reference = two_contigs_with_n(tmp_path) if genome == "two" else read_fasta(genome, tmp_path / "g.fai")
    with using(host_cuda):
        cpu = assert_same_build(reference, mask, ln)
    assert cpu[4].seed_j.max() > 0  # some blocks needed a second hash member


@pytest.mark.gpu
@pytest.mark.parametrize("mask,ln", [(SPACED, 7), ("####", 8)])  # "####": buckets sorted in global memory
def test_cuda_build_equals_the_cpu_build(tmp_path, mask, ln):
    reference = read_fasta(SHIGELLA, tmp_path / "s.fai")
    nboff, *_ = assert_same_build(reference, mask, ln)
    assert np.diff(nboff).max() > 0
    assert_same_build(two_contigs_with_n(tmp_path), "###", 3)


@pytest.mark.gpu
def test_cuda_index_command_writes_the_cpu_folder(gkmap, tmp_path):
    folders = []
    for device in ("cpu", "cuda"):
        folders.append(tmp_path / f"{device}.nbx")
        code, err = gkmap("index", "--quiet", "--index-kind", "neighbourhood", "--spaced", SPACED, "--device", device,
                          "--index", folders[-1], LAMBDA)
        assert code == 0, err
    for path in sorted(folders[0].glob("*.npy")):
        assert path.read_bytes() == (folders[1] / path.name).read_bytes(), path.name
