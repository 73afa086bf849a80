"""The cuda backend's seeding must return exactly the numpy seeder's candidates and counts, and its
verification exactly edlib's mappings, including when rows are split into several launches. Each test runs
the backend's own code twice (conftest.py's `device_layer`): with its kernels on the CPU through
tests/host_cuda.py (always, CI included) and on the GPU (`gpu`)."""
import numpy as np
import pytest

from conftest import CHR22Q, MEASLES, READS, SHIGELLA
from mapper.backends import cuda_mapping
from mapper.alphabet import CODE_N
from mapper.index import load_index
from mapper.pipeline import per_read_e
from mapper.reads import read_batches
from mapper.seeding import seed, strand_rows
from mapper.verify import FOUND_DTYPES, select_loci, verify
from repeats import tandem_genome


@pytest.fixture
def backend(device_layer):
    return cuda_mapping.CudaBackend()


def batch_rows(reads, n, e=None):
    batch = next(read_batches(reads, n))
    return batch, strand_rows(batch.codes(), batch.starts, per_read_e(batch, e, reads))


def same(a, b):
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("row", "contig", "lo", "hi"))


@pytest.mark.parametrize("genome,reads,e", [
    (MEASLES, READS / "measles_Hm2_HiSeq_R1.fastq.gz", None),
    (SHIGELLA, READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", None),
    (SHIGELLA, READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 9),
    (CHR22Q, None, 3),
], ids=["measles", "shigella", "shigella-e9", "na12878"])
@pytest.mark.parametrize("capacity", [1 << 25, 50], ids=["one-launch", "chunked"])
@pytest.mark.parametrize("by_row", [False, True], ids=["per-hit", "per-row"])
def test_gpu_seeding_equals_numpy(backend, device_layer, monkeypatch, request, index_dir, genome, reads, e, capacity,
                                  by_row):
    """Both placements of seed.cu (seed_place, a thread per 4 hits, the GPU's; seed_place_rows, a thread a row, the
    host's) on either layer; chunked: launches of at most 50 hits, and rows chained in segments cut every 3
    slots where they may be (seed_segments), so most rows are chained in many pieces."""
    monkeypatch.setattr(cuda_mapping, "BAND_CAPACITY", capacity)
    monkeypatch.setattr(cuda_mapping, "SEGMENT", 1024 if capacity > 50 else 3)
    monkeypatch.setattr(device_layer, "SEED_BY_ROW", by_row)
    index = load_index(genome, index_dir(genome))
    batch, rows = batch_rows(reads or request.getfixturevalue("na12878_fastq"), 600, e)
    want, want_stats = seed(rows, index)
    got, got_stats = backend.seed(rows, index)
    assert len(want) > 100
    assert same(got, want)
    assert got_stats == want_stats


def test_gpu_memory_budget_maps_in_groups_and_chunks(backend, device_layer, monkeypatch, index_dir):
    """With --gpu-memory the batch is seeded and verified in groups of reads whose candidates fit the working
    budget, in launches it bounds too (here a budget of 16 KiB: many groups, launches of a few dozen
    slots); the loci and counts are the unbounded run's."""
    from mapper.pipeline import Counters, find_mappings
    index = load_index(SHIGELLA, index_dir(SHIGELLA))
    batch = next(read_batches(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 400))
    runs, selected = [], []
    select = cuda_mapping.CudaBackend._select
    monkeypatch.setattr(cuda_mapping.CudaBackend, "_select", lambda *a: selected.append(a[1]) or select(*a))
    for memory in (None, 5 * (1 << 14)):
        with monkeypatch.context() as patch:
            if memory:
                patch.setattr(cuda_mapping, "CONTEXT", 0)
                patch.setattr(cuda_mapping.index_parts, "device_bytes", lambda index: 1)  # the index fits
            run = cuda_mapping.CudaBackend()
            run.load(index, memory)
            counters = Counters()
            selected.clear()
            rows, maps = find_mappings(batch, index, run, None, 6, "r1", counters)
            assert run._selected is None  # the batch's selection went with its last group
            runs.append((maps, counters.seeding, run.row_groups(rows, index), run))
    (whole, whole_stats, one, _), (bounded, bounded_stats, groups, run) = runs
    assert len(one) == 1 and len(groups) > 5 and run._work == 1 << 14
    # the batch's rows selected once (and once more by row_groups above): every group seeds from that selection
    assert len(selected) == 2 and all(r is rows for r in selected)
    launch_slots, part_windows = run._capacity()
    assert cuda_mapping.BAND_CAPACITY > launch_slots > part_windows > 10
    order = lambda m: np.lexsort((m.edits, m.end, m.start, m.contig, m.row))
    for f in ("row", "contig", "start", "end", "edits"):
        assert np.array_equal(getattr(bounded, f)[order(bounded)], getattr(whole, f)[order(whole)]), f
    assert bounded_stats == whole_stats and len(whole.row) > 300
    dev = run._rows_on_device(rows)  # the groups share the batch's upload (they differ only in `active`)
    assert all(run._rows_on_device(group.rows) is dev for group in groups)


def test_gpu_memory_too_small_is_a_usage_error(backend, index_dir):
    from mapper.errors import UsageError
    with pytest.raises(UsageError, match="too small"):
        backend.load(load_index(SHIGELLA, index_dir(SHIGELLA)), cuda_mapping.CONTEXT)


def test_device_rows_equal_host_rows(backend):
    """The strand rows the GPU builds from the forward codes (gather.cu strand_codes) are the host's,
    N included; the host never builds its own copy for that."""
    batch, rows = batch_rows(READS / "measles_Hm2_HiSeq_R1.fastq.gz", 300, 3)
    rows.forward[::37] = 4  # some Ns
    dev = backend._rows_on_device(rows)
    assert "codes" not in vars(rows)
    got = cuda_mapping.cuda.from_device(dev.codes, (2 * len(rows.forward),), np.uint8)
    assert np.array_equal(got, rows.codes)



@pytest.mark.parametrize("piece_words", [5, 1 << 24], ids=["pieces", "whole"])
def test_reference_unpacked_on_the_device(device_layer, monkeypatch, tmp_path, piece_words):
    """An index's reference goes to the device packed and is unpacked there (cuda_mapping._device_codes), in
    pieces of UNPACK_WORDS words; the host's codes are unpacked by a thread of their own (unpack_behind),
    which `codes` waits for. Both equal the FASTA's codes, with N runs, a lone N and contigs that end inside
    a word."""
    monkeypatch.setattr(cuda_mapping, "UNPACK_WORDS", piece_words)
    from mapper.index import build_index
    from mapper.reference import read_fasta
    rng = np.random.default_rng(8)
    spell = lambda n: "".join(rng.choice(list("ACGT"), n))
    (tmp_path / "g.fa").write_text(f">a\n{spell(150)}NNNNN{spell(37)}\n>b\n{'N' * 20}{spell(203)}N{spell(9)}\n")
    want = read_fasta(tmp_path / "g.fa", tmp_path / "g.fai").codes
    build_index(tmp_path / "g.fa", 10, tmp_path / "idx")
    reference = load_index(tmp_path / "g.fa", tmp_path / "idx").reference
    assert reference.packed is not None and (want == CODE_N).sum() == 26
    codes = cuda_mapping._device_codes(reference)
    assert np.array_equal(cuda_mapping.cuda.from_device(codes, (len(want),), np.uint8), want)
    reference.unpack_behind()
    assert np.array_equal(reference.codes, want) and reference.packed is None

def test_gpu_verification_equals_edlib(backend, index_dir):
    index = load_index(SHIGELLA, index_dir(SHIGELLA))
    batch, rows = batch_rows(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 400, 8)
    cands, _ = seed(rows, index)
    want = select_loci(rows, verify(rows, cands, index.reference), index.reference)
    got = select_loci(rows, backend.verify(rows, cands, index.reference), index.reference)
    assert len(want) > 100
    for f in ("row", "contig", "start", "end", "edits"):
        assert np.array_equal(getattr(got, f), getattr(want, f)), f


@pytest.mark.parametrize("capacity", [1 << 25, 300], ids=["one-launch", "chunked"])
def test_device_candidates_verified_in_place(backend, monkeypatch, index_dir, capacity):
    """Seeding's candidates stay on the device and go straight to the verifier (in parts when seeding ran
    in chunks); the loci equal the numpy seeder + edlib's, and the host never needed the candidate list."""
    monkeypatch.setattr(cuda_mapping, "BAND_CAPACITY", capacity)
    index = load_index(SHIGELLA, index_dir(SHIGELLA))
    batch, rows = batch_rows(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 300, 6)
    cands, _ = seed(rows, index)
    want = select_loci(rows, verify(rows, cands, index.reference), index.reference)
    dev, _ = backend.seed(rows, index)
    assert isinstance(dev, cuda_mapping.DeviceCandidates) and len(dev) == len(cands)
    assert capacity > 1000 or len(dev.parts) > 1
    got = select_loci(rows, backend.verify(rows, dev, index.reference), index.reference)
    assert "host" not in vars(dev)  # verified without fetching the candidates
    assert len(want) > 50
    for f in ("row", "contig", "start", "end", "edits"):
        assert np.array_equal(getattr(got, f), getattr(want, f)), f


@pytest.mark.parametrize("parts_of", [None, 25], ids=["launches-of-60", "parts-of-25"])
def test_seeding_launches_fill_shared_parts(backend, monkeypatch, index_dir, parts_of):
    """The bands of many seeding launches are compacted into shared parts (fewer parts than launches, each
    within a verification part's size unless one launch overfilled it), and a part larger than that size is
    verified in pieces; candidates and loci are the numpy seeder's + edlib's. A working budget of verification
    parts of 25 windows, beside launches of 60 slots, makes some launches overfill their part."""
    monkeypatch.setattr(cuda_mapping, "BAND_CAPACITY", 60)
    backend._work = parts_of and 4 * parts_of * cuda_mapping.VERIFY_BYTES
    launches, cuts = [], []
    chunks, pieces = cuda_mapping._chunks, cuda_mapping._pieces
    monkeypatch.setattr(cuda_mapping, "_chunks",
                        lambda hits, n: launches.extend(chunks(hits, n)) or launches)
    monkeypatch.setattr(cuda_mapping, "_pieces", lambda parts, most: cuts.append(
        (most, [p[0] for p in parts], list(pieces(parts, most)))) or cuts[-1][2])
    index = load_index(SHIGELLA, index_dir(SHIGELLA))
    batch, rows = batch_rows(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 300, 6)
    cands, _ = seed(rows, index)
    dev, _ = backend.seed(rows, index)
    launch_slots, part_windows = backend._capacity()
    sizes = [p[0] for p in dev.parts]
    assert len(launches) > 2 * len(sizes) > 2 and max(sizes) >= part_windows // 2
    assert same(dev.host, cands)
    got = select_loci(rows, backend.verify(rows, dev, index.reference), index.reference)
    most, whole, cut = cuts[-1]
    assert whole == sizes and all(p[0] <= most for p in cut) and sum(p[0] for p in cut) == len(cands)
    if parts_of:
        assert max(sizes) > part_windows and len(cut) > len(sizes)  # a launch overfilled a part: cut in pieces
    want = select_loci(rows, verify(rows, cands, index.reference), index.reference)
    for f in ("row", "contig", "start", "end", "edits"):
        assert np.array_equal(getattr(got, f), getattr(want, f)), f


@pytest.mark.parametrize("mode", ["improved", "faithful"])
@pytest.mark.parametrize("e", [None, 9])
def test_gpu_filter_equals_cpu(backend, index_dir, mode, e):
    """The filter stage on the GPU (windows gathered from the resident genome) decides as the cpu one."""
    from mapper.backends.cpu import NumpyBackend
    index = load_index(SHIGELLA, index_dir(SHIGELLA))
    batch, rows = batch_rows(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 500, e)
    cands, _ = seed(rows, index)
    want = NumpyBackend().filter(mode, rows, cands, index.reference)
    assert 0 < want.sum() < len(want)
    assert np.array_equal(backend.filter(mode, rows, cands, index.reference), want)


@pytest.mark.parametrize("mode", ["improved", "faithful"])
def test_filter_on_device_candidates(backend, monkeypatch, index_dir, mode):
    """Seeding's candidates filtered where they are (one read length and e), compacted on the device and
    verified: the decisions are the cpu filter's and the loci those of the cpu backend's kept windows."""
    from mapper.backends.cpu import NumpyBackend
    monkeypatch.setattr(cuda_mapping, "BAND_CAPACITY", 50)  # parts of at most 50 windows
    index = load_index(SHIGELLA, index_dir(SHIGELLA))
    batch, rows = batch_rows(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 300, 6)
    rows.length[:] = rows.length.min()  # one read length: the in-place path (reads are cut to it)
    cands, _ = seed(rows, index)
    want = NumpyBackend().filter(mode, rows, cands, index.reference)
    dev, _ = backend.seed(rows, index)
    assert len(dev.parts) > 1 and 0 < want.sum() < len(want)
    keep = backend.filter(mode, rows, dev, index.reference)
    assert np.array_equal(keep, want)
    kept = dev.subset(keep)
    assert isinstance(kept, cuda_mapping.DeviceCandidates) and len(kept) == want.sum()
    got = select_loci(rows, backend.verify(rows, kept, index.reference), index.reference)
    assert "host" not in vars(dev) and "host" not in vars(kept)
    ref = select_loci(rows, verify(rows, cands.subset(want), index.reference), index.reference)
    for f in ("row", "contig", "start", "end", "edits"):
        assert np.array_equal(getattr(got, f), getattr(ref, f)), f


@pytest.mark.parametrize("n", [1, 2048, 2049, 2048 * 2048 + 3])  # one tile, a tile's edge, two scan levels
@pytest.mark.parametrize("wide", [False, True])
def test_exclusive_scan(device_layer, n, wide):
    """The device layer's exclusive prefix sum in place (scan.cu on the GPU, numpy's cumsum on the host),
    whose tiles' totals are scanned again by recursion when there is more than one."""
    dtype = np.uint64 if wide else np.uint32
    values = np.random.default_rng(n).integers(0, 1 << (20 if wide else 2), n).astype(dtype)
    buf = device_layer.scratch_copy(values)
    device_layer.exclusive_scan(buf, n, wide)
    want = np.concatenate([[0], np.cumsum(values, dtype=dtype)[:-1]]).astype(dtype)
    assert np.array_equal(device_layer.from_device(buf, (n,), dtype), want)


@pytest.mark.parametrize("mode", ["improved", "faithful"])
@pytest.mark.parametrize("e", [3, 6])
def test_fused_filter_and_compaction(backend, monkeypatch, index_dir, e, mode):
    """Each filter fused with the compaction of its survivors (gatekeeper.cu gatekeeper_candidates,
    gatekeeper_faithful_candidates, then a scan and gather.cu keep_candidates): the same windows as the cpu
    filter keeps, in their seeded order (still `ordered`: the verifier joins them into stretches), and the
    same loci once verified."""
    from mapper.backends.cpu import NumpyBackend
    monkeypatch.setattr(cuda_mapping, "BAND_CAPACITY", 50)  # parts of at most 50 windows
    index = load_index(SHIGELLA, index_dir(SHIGELLA))
    batch, rows = batch_rows(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 300, e)
    rows.length[:] = rows.length.min()
    rows.forward[::397] = CODE_N  # some reads with an N: undefined for the published filter
    cands, _ = seed(rows, index)
    want = NumpyBackend().filter(mode, rows, cands, index.reference)
    dev, _ = backend.seed(rows, index)
    assert len(dev.parts) > 1 and 0 < want.sum() < len(want)
    kept, rejected = backend.filtered(mode, rows, dev, index.reference)
    assert isinstance(kept, cuda_mapping.DeviceCandidates) and rejected == (~want).sum() and kept.ordered
    assert same(dev.host, cands) and same(kept.host, cands.subset(want))
    got = select_loci(rows, backend.verify(rows, kept, index.reference), index.reference)
    ref = select_loci(rows, verify(rows, cands.subset(want), index.reference), index.reference)
    for f in ("row", "contig", "start", "end", "edits"):
        assert np.array_equal(getattr(got, f), getattr(ref, f)), f


def test_windows_with_many_optimal_ends(backend, tmp_path, monkeypatch):
    """In a tandem repeat a window's cover can hold more ends than the kernel keeps (MAX_ENDS; a band's
    window holds at most five, so the test lowers it to one): those windows are redone by verify_wide, in
    launches of WIDE_COLUMNS columns at most, and the result still equals the host verifier's."""
    monkeypatch.setattr(cuda_mapping, "MAX_ENDS", 1)
    from mapper.index import build_index
    rng = np.random.default_rng(5)
    flank = lambda n: "".join(rng.choice(list("ACGT"), n))
    (tmp_path / "rep.fa").write_text(f">rep\n{flank(300)}{'A' * 300}{flank(100)}{'AC' * 200}{flank(300)}\n")
    reads = {"homopolymer": "A" * 100, "tandem": "AC" * 50, "edge": flank(20) + "AC" * 40}
    (tmp_path / "r.fq").write_text("".join(f"@{n}\n{s}\n+\n{'I' * len(s)}\n" for n, s in reads.items()))
    index = build_index(tmp_path / "rep.fa", 12, tmp_path / "idx")
    batch, rows = batch_rows(tmp_path / "r.fq", 10, 10)
    cands, _ = seed(rows, index)
    _, n_ends, *_ = cuda_mapping.verify_windows(
        index.reference.codes, rows.codes, rows.start[cands.row], rows.length[cands.row], rows.e[cands.row],
        *(lambda s, e: (s, e - s))(*cands.windows(rows, index.reference)))
    assert (n_ends > cuda_mapping.MAX_ENDS).any()
    want = select_loci(rows, verify(rows, cands, index.reference), index.reference)
    got = select_loci(rows, backend.verify(rows, cands, index.reference), index.reference)
    for f in ("row", "contig", "start", "end", "edits"):
        assert np.array_equal(getattr(got, f), getattr(want, f)), f
    # the redone windows come as a part of their own, in the records' narrow dtypes (no widening join)
    monkeypatch.setattr(cuda_mapping, "WIDE_COLUMNS", 300)  # a few stretches a verify_wide launch
    chunked = select_loci(rows, backend.verify(rows, cands, index.reference), index.reference)
    assert all(np.array_equal(getattr(chunked, f), getattr(want, f)) for f in ("row", "contig", "start", "end"))
    assert len(backend.verify_parts(rows, cands, index.reference)) > 3
    monkeypatch.setattr(cuda_mapping, "WIDE_COLUMNS", 1 << 25)
    # within a working budget a launch takes at most its quarter (a wider stretch alone)
    launches, records = [], cuda_mapping.wide_records
    monkeypatch.setattr(cuda_mapping, "wide_records", lambda layer, genome, codes, windows, width, *a: launches.append(
        width) or records(layer, genome, codes, windows, width, *a))
    backend._work = 1 << 14
    bounded = select_loci(rows, backend.verify(rows, cands, index.reference), index.reference)
    assert all(np.array_equal(getattr(bounded, f), getattr(want, f)) for f in ("row", "contig", "start", "end"))
    most = (1 << 14) // 4 // cuda_mapping.WIDE_COLUMN_BYTES
    assert len(launches) > 3 and all(w.sum() <= most or len(w) == 1 for w in launches)
    backend._work = None
    parts = backend.verify_parts(rows, cands, index.reference)
    assert len(parts) == 2 and all(
        tuple(getattr(p, f).dtype for f in ("row", "contig", "start", "end", "edits", "settled"))
        == FOUND_DTYPES for p in parts)


@pytest.mark.parametrize("by_row", [False, True], ids=["per-hit", "per-row"])
def test_gpu_seeding_equals_numpy_across_many_contigs(backend, device_layer, monkeypatch, tmp_path, cut_measles,
                                                      by_row):
    """seed.cu places each hit by comparing (contig, diagonal) keys through contig bounds: a genome cut into
    many short contigs, some of them copies (equal diagonals on different contigs, diagonals before a
    contig's start), with reads drawn across the cuts, must still give the numpy seeder's candidates. The
    per-row placement answers the adjacency filter from its merge's heads only where the look-up's span
    lies inside the diagonal's contig: here many spans do not."""
    from mapper.index import build_index
    monkeypatch.setattr(device_layer, "SEED_BY_ROW", by_row)
    fasta, fastq = cut_measles
    index = build_index(fasta, 10, tmp_path / "idx")
    batch, rows = batch_rows(fastq, 400, 4)
    want, want_stats = seed(rows, index)
    got, got_stats = backend.seed(rows, index)
    assert len(want) > 400 and len(np.unique(want.contig)) > 30
    assert same(got, want)
    assert got_stats == want_stats


@pytest.mark.parametrize("by_row", [False, True], ids=["per-hit", "per-row"])
def test_seeding_equals_numpy_on_dense_repeats_at_contig_ends(backend, device_layer, monkeypatch, tmp_path, by_row):
    """The adjacency filter where its answers are on a knife's edge: 60 short contigs built from a few
    blocks (two of them tandem repeats of period 5 and 6), each copy with substitutions and 1-2 base indels,
    and reads with indels drawn across the contig ends, so that a k-mer's nearest occurrence often lies
    exactly e diagonals away, beyond a contig's end, or on the next contig; every placement must still give
    the numpy seeder's candidates and counts."""
    from mapper.alphabet import BASES
    from mapper.index import build_index
    monkeypatch.setattr(device_layer, "SEED_BY_ROW", by_row)
    rng = np.random.default_rng(17)
    blocks = [rng.integers(0, 4, 30) for _ in range(4)] + [np.tile(rng.integers(0, 4, p), 30 // p) for p in (5, 6)]

    def copy(block):
        out = block.copy()
        out[rng.random(len(out)) < 0.03] = rng.integers(0, 4)
        at = int(rng.integers(1, len(out) - 2))
        return np.delete(out, [at, at + 1][:rng.integers(0, 3)]) if rng.random() < 0.5 else \
            np.insert(out, at, rng.integers(0, 4, int(rng.integers(1, 3))))

    contigs = [np.concatenate([copy(blocks[b]) for b in rng.integers(0, 6, rng.integers(2, 12))])
               for _ in range(60)]
    letters = np.frombuffer(BASES.encode(), dtype=np.uint8)
    fasta = tmp_path / "dense.fa"
    fasta.write_text("".join(f">c{i}\n{letters[c].tobytes().decode()}\n" for i, c in enumerate(contigs)))
    whole = np.concatenate(contigs)
    reads = []
    for start in rng.integers(0, len(whole) - 120, 300):
        read = whole[start:start + 110].copy()
        for _ in range(int(rng.integers(0, 3))):
            at = int(rng.integers(5, 100))
            read = np.delete(read, at) if rng.random() < 0.5 else np.insert(read, at, rng.integers(0, 4))
        reads.append(read[:100])
    fastq = tmp_path / "dense.fq"
    fastq.write_text("".join(f"@r{i}\n{letters[r].tobytes().decode()}\n+\n{'I' * 100}\n" for i, r in enumerate(reads)))
    index = build_index(fasta, 10, tmp_path / "idx")
    batch, rows = batch_rows(fastq, 300, 5)
    want, want_stats = seed(rows, index)
    got, got_stats = backend.seed(rows, index)
    assert want_stats.adjacent < want_stats.diagonals and len(np.unique(want.contig)) > 40
    assert same(got, want)
    assert got_stats == want_stats


def test_buffer_sizes_are_few_and_never_short():
    """Launch buffers are allocated for n rounded up to a power of two, at most the largest launch's size
    (unless n is larger): a thousand launch sizes ask the pool for eleven sizes."""
    room = cuda_mapping._room
    assert {room(n, 1000) for n in range(1, 1001)} == {1 << k for k in range(10)} | {1000}
    assert all(n <= room(n, 1000) <= max(n, 1000) for n in range(3000))


def test_default_pool_keeps_twice_the_reserve_where_the_device_has_room(device_layer, monkeypatch, index_dir):
    """Without --gpu-memory, buffers freed by earlier row groups stay pooled up to 2 x RESERVE when the
    device holds that beside the index, else up to RESERVE; --gpu-memory's share bounds them otherwise.
    One backend loads in turn: each load decides anew (the last, without a budget, after one with)."""
    index = load_index(SHIGELLA, index_dir(SHIGELLA))
    _, rows = batch_rows(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 50)
    need, reserve = cuda_mapping.index_parts.device_bytes(index), cuda_mapping.RESERVE
    run = cuda_mapping.CudaBackend()
    for free, memory, want in ((need + 2 * reserve, None, 2 * reserve), (need + 2 * reserve - 1, None, reserve),
                               (1 << 50, 5 << 20, 1 << 20), (1 << 50, None, 2 * reserve)):
        monkeypatch.setattr(device_layer, "free_memory", lambda: free)
        if memory:  # the index fits the rest of the budget
            monkeypatch.setattr(cuda_mapping, "CONTEXT", 0)
            monkeypatch.setattr(cuda_mapping.index_parts, "device_bytes", lambda index: 1)
        run.load(index, memory)
        limits = []
        with monkeypatch.context() as patch:
            patch.setattr(device_layer, "trim_pool", limits.append)
            run.seed(rows, index)
        assert limits == [want]


def test_launch_row_ranges_skip_rows_without_hits_and_keep_to_spans():
    """_ranges covers every row with hits inside the spans (a row group's forward and reverse rows) once and
    none outside, in ranges of at most `capacity` hits (or one row) that start and end at rows with hits,
    lie in one span and span no more than GAP rows without hits; a range ends only where it must."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(1, 4000))
        hits = rng.integers(0, 40, n) * (rng.random(n) < rng.random())
        hits[rng.integers(0, n, 2)] *= 10 ** 5
        cuts = np.sort(rng.integers(0, n + 1, 4))
        spans = [(0, n)] if rng.random() < 0.3 else [(int(cuts[0]), int(cuts[1])), (int(cuts[2]), int(cuts[3]))]
        inside_spans = np.zeros(n, dtype=bool)
        for lo, hi in spans:
            inside_spans[lo:hi] = True
        capacity = int(rng.integers(1, 2000))
        ranges = list(cuda_mapping._ranges(hits, capacity, spans))
        covered = np.zeros(n, dtype=int)
        for begin, end in ranges:
            covered[begin:end] += 1
            inside = np.flatnonzero(hits[begin:end])
            assert inside[0] == 0 and inside[-1] == end - begin - 1
            assert hits[begin:end].sum() <= capacity or len(inside) == 1
            assert np.diff(inside).max(initial=0) <= cuda_mapping.GAP
            assert any(lo <= begin and end <= hi for lo, hi in spans)
        assert (covered[(hits > 0) & inside_spans] == 1).all() and covered.max(initial=0) <= 1
        assert not covered[~inside_spans].any()
        for (first, end), (begin, _) in zip(ranges, ranges[1:]):  # a range ends only where it must
            assert (hits[first:end].sum() + hits[begin] > capacity or begin - (end - 1) > cuda_mapping.GAP
                    or not any(lo <= first and begin < hi for lo, hi in spans))


def test_found_mappings_leave_out_ends_a_neighbour_beats(device_layer):
    """gather.cu found_mappings drops an end only when window t - 1 or t + 1 (the same row and contig) took
    the same end with fewer edits, or as many from a start as far left or further (the earlier window on a
    full tie): of every set of equal ends the one locus selection keeps (fewest edits, then leftmost start)
    stays. Random windows with shared ends against a brute-force count and record set; each record carries
    its window's `settled`."""
    from mapper.backends.cuda_mapping import MAX_ENDS
    assert MAX_ENDS <= 32  # the kernel marks a window's kept ends in a 32-bit mask
    rng = np.random.default_rng(3)
    cuda = device_layer
    kernel = cuda.function("gather.cu", "found_mappings")
    dropped = 0
    for _ in range(20):
        n = int(rng.integers(1, 300))
        best = np.where(rng.random(n) < 0.9, 0, -1).astype(np.int32)
        n_ends = rng.integers(1, MAX_ENDS + 3, n).astype(np.int32)  # some overflow
        # a cover's ends are distinct; the windows' starts 0-3 apart make equal ends across neighbours
        ends = np.stack([rng.choice(40, MAX_ENDS, replace=False) for _ in range(n)], axis=1).astype(np.int32)
        starts = (ends - 30 - rng.integers(0, 3, (MAX_ENDS, n))).astype(np.int32)
        edits = rng.integers(0, 6, (MAX_ENDS, n)).astype(np.int32)
        row = np.repeat(np.arange(n), rng.integers(1, 4, n))[:n].astype(np.int32)
        contig = (rng.random(n) < 0.1).astype(np.int32)
        win_start = (1000 + rng.integers(0, 4, n)).astype(np.int64)
        settled = rng.integers(0, 2, n).astype(np.int32)
        counts = cuda.to_device(np.zeros(2, np.uint64))
        common = [cuda.to_device(a) for a in (best, n_ends, ends, starts, edits)] + [n, MAX_ENDS] + \
                 [cuda.to_device(a) for a in (row, contig, win_start, settled)] + [counts]
        cuda.launch(kernel, n, *common, *(0,) * 7)
        n_maps, n_over = (int(c) for c in cuda.from_device(counts, (2,), np.uint64))
        out = [cuda.empty(np.dtype(t).itemsize * n_maps) for t in FOUND_DTYPES]
        cuda.memset(counts, 0, 16)
        cuda.launch(kernel, n, *common, *out, cuda.empty(8 * max(n_over, 1)))
        got = sorted(zip(*(cuda.from_device(b, (n_maps,), t).tolist() for b, t in zip(out, FOUND_DTYPES))))
        ok = lambda u: 0 <= u < n and best[u] >= 0 and n_ends[u] <= MAX_ENDS
        want = []
        for t in range(n):
            if not ok(t):
                continue
            for k in range(n_ends[t]):
                end, start, d = win_start[t] + ends[k, t], win_start[t] + starts[k, t], edits[k, t]
                beaten = any(ok(u) and row[u] == row[t] and contig[u] == contig[t] and any(
                    win_start[u] + ends[j, u] == end and (edits[j, u], win_start[u] + starts[j, u], u) < (d, start, t)
                    for j in range(n_ends[u])) for u in (t - 1, t + 1))
                if not beaten:
                    want.append((int(row[t]), int(contig[t]), int(start), int(end) + 1, int(d), bool(settled[t])))
        assert n_over == int(np.sum((best >= 0) & (n_ends > MAX_ENDS)))
        assert got == sorted(want)
        dropped += sum(int(n_ends[t]) for t in range(n) if ok(t)) - len(want)
    assert dropped > 100


def test_deduped_records_select_the_same_loci_in_repeats(backend, tmp_path):
    """Where overlapping windows take the same ends (tandem repeats), found_mappings leaves out the
    duplicates it may and the loci selected from its records are the ones selected from every window's
    cover (the numpy verifier, which keeps them all)."""
    from mapper.cli import main
    rng = np.random.default_rng(8)
    contigs = tandem_genome(rng)
    fasta = tmp_path / "repeats.fa"
    fasta.write_text("".join(f">{name}\n{seq}\n" for name, seq in contigs.items()))
    reads = tmp_path / "reads.fq"
    with open(reads, "w") as out:
        for i in range(200):
            genome = contigs[list(contigs)[i % 2]]
            start = int(rng.integers(0, len(genome) - 100))
            read = list(genome[start:start + 100])
            for k in rng.choice(100, int(rng.integers(0, 4)), replace=False):
                read[k] = "ACGT"[("ACGT".index(read[k]) + 1) % 4]
            out.write(f"@r{i}\n{''.join(read)}\n+\n{'I' * 100}\n")
    assert main(["index", "--quiet", "--index", str(tmp_path / "repeats.gkx"), str(fasta)]) == 0
    index = load_index(fasta, tmp_path / "repeats.gkx")
    batch = next(read_batches(reads, 200))
    rows = strand_rows(batch.codes(), batch.starts, per_read_e(batch, 5, reads))
    cands, _ = seed(rows, index)
    every, kept = verify(rows, cands, index.reference), backend.verify(rows, cands, index.reference)
    assert len(kept) < 0.8 * len(every)  # duplicates were left out
    want = select_loci(rows, every, index.reference)
    got = select_loci(rows, kept, index.reference)
    assert len(want) > 1000
    for f in ("row", "contig", "start", "end", "edits"):
        assert np.array_equal(getattr(got, f), getattr(want, f)), f


def test_candidate_stretches_join_each_rows_nearby_windows(device_layer):
    """gather.cu candidate_stretches against a model: the candidates' windows (clipped to their contigs), and
    in an ordered part a window joins the stretch before it when it has that stretch's row and contig and
    starts at most 3e after the window before it ends; each stretch once (any order), its width to the
    furthest end, settled unless it is the part's first or last. Unordered (after the fused filter): every
    window its own stretch, in place, none settled."""
    rng = np.random.default_rng(11)
    cuda = device_layer
    kernel = cuda.function("gather.cu", "candidate_stretches")
    n, rows = 3000, 40
    length, e = rng.integers(80, 120, rows).astype(np.int32), rng.integers(0, 6, rows).astype(np.int32)
    row_start = np.cumsum(length).astype(np.int64) - length
    contig_start, contig_end = np.array([0, 10_000_000], np.int64), np.array([10_000_000, 20_000_000], np.int64)
    row = np.sort(rng.integers(0, rows, n)).astype(np.int32)
    rank = np.arange(n) - np.searchsorted(row, row)  # a window's place among its row's
    contig = ((row % 2 == 1) & (rank >= np.bincount(row, minlength=rows)[row] // 2)).astype(np.int32)
    gaps = rng.choice([5, 9, 15, 30, 60, 150, 400], n)
    lo = contig_start[contig] + np.cumsum(gaps)
    hi = lo + rng.integers(0, e[row] + 1)
    lo[:3] = hi[:3] = contig_start[contig[:3]] + [0, 2, 4]  # windows clipped at the contig's start ...
    contig_end[1] = hi.max() + 60  # ... and at its end
    for ordered in (1, 0):
        count = cuda.to_device(np.zeros(1, np.uint64))
        outs = [cuda.to_device(np.full(n, -1, t)) for t in (np.int32, np.int32, np.int64, np.int32, np.int32,
                                                            np.int64, np.int32, np.int32)]
        cuda.launch(kernel, n, *(cuda.to_device(a) for a in (row, contig, lo, hi)), n,
                    *(cuda.to_device(a) for a in (row_start, length, e, contig_start, contig_end)), ordered, count,
                    *outs)
        m = int(cuda.from_device(count, (1,), np.uint64)[0]) if ordered else n
        got = list(zip(*(cuda.from_device(b, (m,), t).tolist() for b, t in zip(outs, (
            np.int32, np.int32, np.int64, np.int32, np.int32, np.int64, np.int32, np.int32)))))
        start = np.maximum(lo - e[row], contig_start[contig])
        end = np.minimum(hi + length[row] + e[row], contig_end[contig])
        want, head = [], 0
        for i in range(1, n + 1):
            if (i < n and ordered and row[i] == row[i - 1] and contig[i] == contig[i - 1]
                    and start[i] <= end[i - 1] + 3 * e[row[i]]):
                continue
            r = row[head]
            want.append((int(r), int(contig[head]), int(row_start[r]), int(length[r]), int(e[r]), int(start[head]),
                         int(end[head:i].max() - start[head]), int(bool(ordered and head > 0 and i < n))))
            head = i
        assert (sorted(got) if ordered else got) == (sorted(want) if ordered else want)
        assert (len(want) == n) if not ordered else (100 < len(want) < n // 2)


def test_stretch_covers_are_settled_and_select_the_same_loci(backend, tmp_path, monkeypatch):
    """Seeded in order (backend.seed), a tandem repeat's windows are verified as stretches: most records come
    settled, locus selection refines only the unsettled groups, and the loci are those it selects from every
    window's cover (the numpy verifier, every group refined)."""
    from mapper import verify as verify_module
    rng = np.random.default_rng(9)
    contigs = tandem_genome(rng)
    fasta, reads = tmp_path / "repeats.fa", tmp_path / "reads.fq"
    fasta.write_text("".join(f">{name}\n{seq}\n" for name, seq in contigs.items()))
    with open(reads, "w") as out:
        for i in range(200):
            genome = contigs[list(contigs)[i % 2]]
            start = int(rng.integers(0, len(genome) - 100))
            out.write(f"@r{i}\n{genome[start:start + 100]}\n+\n{'I' * 100}\n")
    from mapper.index import build_index
    index = build_index(fasta, 12, tmp_path / "repeats.gkx")
    batch, rows = batch_rows(reads, 200, 5)
    cands, _ = seed(rows, index)
    want = select_loci(rows, verify(rows, cands, index.reference), index.reference)
    seeded, _ = backend.seed(rows, index)
    assert seeded.ordered
    maps = backend.verify(rows, seeded, index.reference)
    assert maps.settled.mean() > 0.8
    refined = []
    real_refine = verify_module._refine
    monkeypatch.setattr(verify_module, "_refine", lambda rows, maps, *a: refined.append(maps) or real_refine(
        rows, maps, *a))
    got = select_loci(rows, maps, index.reference)
    assert len(want) > 1000
    for f in ("row", "contig", "start", "end", "edits"):
        assert np.array_equal(getattr(got, f), getattr(want, f)), f
    assert sum(len(m) for m in refined) < 0.2 * len(maps) and not any(m.settled.any() for m in refined)


def test_fetch_later_sees_the_buffer_in_stream_order(device_layer):
    """fetch_later's copy holds what the buffer held when it was queued, whatever is queued after it (seed()
    queues the next launch before it reads a launch's sums), and many fetches may wait at once."""
    buffer = device_layer.scratch(32)
    fetches = []
    for value in range(1, 9):
        device_layer.memset(buffer, value, 32)
        fetches.append(device_layer.fetch_later(buffer, (4,), np.int64))
    device_layer.memset(buffer, 0xFF, 32)
    for value, fetch in enumerate(fetches, 1):
        assert (fetch.get() == int.from_bytes(bytes([value]) * 8, "little")).all()
