"""The compiled renderer (kernels/render.cu through mapper/sam_kernel.py) against the numpy one (align.describe +
sam.batch_records, the oracle), byte for byte, on synthetic batches made to reach every branch: both strands,
reads with Ns, lower-case and IUPAC letters (SEQ keeps them, the reverse strand complements what
COMPLEMENT_ASCII knows), empty and unmapped reads, reads with several records (FLAG 256, HI, MAPQ 0),
ungapped and gapped spans (insertions, deletions, both in one read, spans of the read's length that are not
ungapped, edit distances up to MAX_E), several contigs, FASTA input, -R, and 1 and 2 threads. Real reads:
tests/mapping/test_render_speed_equivalence.py renders them both ways against its per-record oracle."""
import edlib
import numpy as np
import pytest

from mapper import render as render_module
from mapper import sam_kernel
from mapper.align import describe
from mapper.alphabet import COMPLEMENT, COMPLEMENT_ASCII, ENCODE, READ_ASCII, REF_ASCII
from mapper.options import MAX_E
from mapper.reads import ReadBatch
from mapper.reference import Reference
from mapper.sam import batch_records
from mapper.seeding import strand_rows
from mapper.verify import Mappings
from oracle import assert_bare_secondaries

pytestmark = pytest.mark.skipif(not sam_kernel.available(), reason="no C++ compiler for the host kernels")

CONTIGS = ("chrA", "chr B2", "c")  # a space: RNAME is copied as it is


def synthetic(rng, n, L, K, fasta=False):
    """(batch, rows, reference, read, strand, loci, nh, mapq, second) of n reads of length about L, each
    mapped at most once at a span it was mutated from (edit distance d <= K by edlib, the verifier's
    value), some mapped records repeated as the read's secondaries, some reads unmapped or empty."""
    lengths = (50_000, 20_000, 30_000)
    genome = rng.integers(0, 4, sum(lengths)).astype(np.uint8)
    genome[rng.integers(0, len(genome), 300)] = 4
    contig_starts = np.r_[0, np.cumsum(lengths)[:-1]]
    reference = Reference(list(CONTIGS), contig_starts, np.array(lengths), genome)
    texts, records = [], []
    for r in range(n):
        length = int(rng.integers(1, 2 * L)) if rng.random() < 0.1 else L
        contig = int(rng.integers(0, 3))
        w = max(1, length + int(rng.integers(-K, K + 1)))
        s = int(contig_starts[contig] + rng.integers(0, lengths[contig] - w))
        strand_codes = genome[s:s + w].copy()  # mutated by at most K substitutions, insertions and deletions
        at, kind = rng.integers(0, w, int(rng.integers(0, K + 1))), rng.integers(0, 3, K + 1)
        changed, inserted, deleted = at[kind[:len(at)] == 0], at[kind[:len(at)] == 1], at[kind[:len(at)] == 2]
        strand_codes[changed] = rng.integers(0, 5, len(changed))
        strand_codes = np.insert(strand_codes, inserted, rng.integers(0, 4, len(inserted)).astype(np.uint8))
        strand_codes = np.delete(strand_codes, deleted + np.searchsorted(np.sort(inserted), deleted, side="right"))
        strand_codes = np.r_[strand_codes, np.zeros(length, dtype=np.uint8)][:length]
        strand = int(rng.integers(0, 2))
        letters = READ_ASCII[strand_codes].copy()
        n_at = np.flatnonzero(strand_codes == 4)
        letters[n_at] = rng.choice(np.frombuffer(b"NRYKM.", dtype=np.uint8), len(n_at))  # all code N
        lower = (rng.random(length) < 0.05) & (letters != ord("."))
        letters[lower] += 32
        if strand:
            letters = COMPLEMENT_ASCII[letters[::-1]]
        # the verifier's distance: of the read's codes on its strand (a lower-case letter is complemented by
        # its code, though SEQ keeps it), N matching nothing
        on_strand = COMPLEMENT[ENCODE[letters[::-1]]] if strand else ENCODE[letters]
        d = edlib.align(READ_ASCII[on_strand].tobytes(), REF_ASCII[genome[s:s + w]].tobytes(),
                        mode="NW")["editDistance"]
        if rng.random() < 0.05:
            letters = letters[:0]  # an empty read: unmapped
        texts.append(letters)
        if len(letters) and d <= K and rng.random() < 0.9:
            records += [(r, strand, contig, s, s + w, d)] * int(rng.choice([1, 1, 1, 2, 3]))
    seq = np.concatenate(texts)
    starts = np.r_[0, np.cumsum([len(t) for t in texts])].astype(np.int64)
    qual = None if fasta else rng.integers(33, 75, len(seq)).astype(np.uint8)
    batch = ReadBatch([f"read{r}/{rng.integers(0, 10 ** rng.integers(1, 12))}" for r in range(n)], seq, qual, starts)
    rows = strand_rows(ENCODE[seq], starts, np.full(n, K, dtype=np.int64))
    read, strand, contig, start, end, edits = (np.array(c, dtype=np.int64).reshape(-1) for c in zip(*records))
    loci = Mappings(read + n * strand, contig, start, end, edits)
    kept = np.bincount(read, minlength=n)
    nh = kept + (kept > 0) * rng.integers(0, 3, n)  # loci found beyond those reported (-n)
    mapq = rng.integers(0, 61, n) * (nh > 0)
    second = np.where(nh > 1, rng.integers(0, K + 1, n), -1)
    return batch, rows, reference, read, strand, loci, nh, mapq, second


@pytest.mark.parametrize("L,K,fasta", [(36, 2, False), (101, 5, False), (101, 5, True), (150, 8, False),
                                       (60, MAX_E, False), (250, 3, False)])
def test_compiled_records_equal_numpy(L, K, fasta):
    batch, rows, reference, read, strand, loci, nh, mapq, second = synthetic(np.random.default_rng(L + K), 700, L, K,
                                                                             fasta)
    cigars, mds, nms = describe(rows, loci, reference)
    assert any(c != f"{L}M" for c in cigars) and (nh == 0).any() and (np.bincount(read) > 1).any()
    for group, secondary_seq in ((None, True), ("grp 1", True), ("grp 1", False)):
        want = batch_records(batch, reference, read, strand, loci, cigars, mds, nms, nh, mapq, second, group,
                             secondary_seq)
        for threads in (1, 2):
            got = sam_kernel.records_text(batch, rows, reference, read, strand, loci, nh, mapq, second, group, threads,
                                          secondary_seq)
            assert str(got, "utf-8") == want
    full = batch_records(batch, reference, read, strand, loci, cigars, mds, nms, nh, mapq, second, "grp 1")
    assert assert_bare_secondaries(want.splitlines(), full.splitlines())



def test_gapped_records_beyond_one_launch(monkeypatch):
    """More gapped records than GAPPED_CHUNK: the kernel's scratch is reused launch after launch."""
    monkeypatch.setattr(sam_kernel, "GAPPED_CHUNK", 7)
    batch, rows, reference, read, strand, loci, nh, mapq, second = synthetic(np.random.default_rng(5), 300, 80, 4)
    want = batch_records(batch, reference, read, strand, loci, *describe(rows, loci, reference), nh, mapq, second)
    assert str(sam_kernel.records_text(batch, rows, reference, read, strand, loci, nh, mapq, second), "utf-8") == want


def test_empty_batch_and_no_records():
    batch, rows, reference, read, strand, loci, nh, mapq, second = synthetic(np.random.default_rng(2), 50, 40, 2)
    none = loci.take(np.zeros(len(loci), dtype=bool))
    zero = np.zeros(len(batch), dtype=np.int64)
    want = batch_records(batch, reference, read[:0], strand[:0], none, [], [], [], zero, zero, zero - 1)
    got = sam_kernel.records_text(batch, rows, reference, read[:0], strand[:0], none, zero, zero, zero - 1)
    assert str(got, "utf-8") == want and want.count("\n") == len(batch)


def test_render_falls_back_to_numpy_without_a_compiler(monkeypatch):
    """Where no C++ compiler is present render() uses the numpy renderer and never the kernel."""
    monkeypatch.setattr(sam_kernel, "available", lambda: False)
    monkeypatch.setattr(sam_kernel, "records_text", None)
    batch, rows, reference, read, strand, loci, nh, mapq, second = synthetic(np.random.default_rng(3), 60, 50, 3)
    maps = Mappings(loci.row, loci.contig, loci.start, loci.end, loci.edits)
    assert render_module.render(batch, rows, maps, reference, False, None, False).records > 0


def test_gapped_records_along_a_tandem_run(monkeypatch):
    """One read with a deletion mapped at every period of a tandem run (a repeat read's records: consecutive
    gapped records of one read against spans of the same letters) and across impurities of the run, where a
    span of the same length holds other letters: byte for byte numpy's, on 1 and 2 threads. Only the first
    record of each set of spans with the same letters is aligned (span_keys, twin_check); the others share
    its text."""
    rng = np.random.default_rng(11)
    motif = np.array([0, 1, 2, 1, 3], dtype=np.uint8)
    run = np.resize(motif, 2000)
    run[[403, 404, 1211, 1650]] = [3, 3, 0, 2]  # impurities
    genome = np.r_[rng.integers(0, 4, 300), run, rng.integers(0, 4, 300)].astype(np.uint8)
    reference = Reference(["tandem"], np.array([0]), np.array([len(genome)]), genome)
    L, W, K = 80, 81, 3
    codes = np.delete(run[:W], 40)  # the run's letters less one: a deletion against any span of the run
    seq = READ_ASCII[codes]
    batch = ReadBatch(["tandem/1"], seq, rng.integers(33, 75, L).astype(np.uint8), np.array([0, L], dtype=np.int64))
    rows = strand_rows(ENCODE[seq], batch.starts, np.full(1, K, dtype=np.int64))
    starts = 300 + np.arange(0, len(run) - W, len(motif))
    edits = np.array([edlib.align(READ_ASCII[codes].tobytes(), REF_ASCII[genome[s:s + W]].tobytes(),
                                  mode="NW")["editDistance"] for s in starts])
    starts, edits = starts[edits <= K], edits[edits <= K]
    m = len(starts)
    loci = Mappings(np.zeros(m, dtype=np.int64), np.zeros(m, dtype=np.int64), starts, starts + W, edits)
    read, strand = np.zeros(m, dtype=np.int64), np.zeros(m, dtype=np.int64)
    nh, mapq, second = np.array([m]), np.array([0]), np.array([int(np.sort(edits)[1])])
    cigars, mds, nms = describe(rows, loci, reference)
    assert m > 300 and len(set(mds)) > 1 and all(c != f"{L}M" for c in cigars)
    want = batch_records(batch, reference, read, strand, loci, cigars, mds, nms, nh, mapq, second)
    distinct = len({genome[s:s + W].tobytes() for s in starts})  # every record: one row, width and edits
    aligned = []
    launch = sam_kernel.host.launch

    def counted(kernel, n, *args, **options):
        if getattr(kernel, "name", None) == "align_gapped":
            aligned.append(n)
        return launch(kernel, n, *args, **options)
    monkeypatch.setattr(sam_kernel.host, "launch", counted)
    for threads in (1, 2):
        aligned.clear()
        got = sam_kernel.records_text(batch, rows, reference, read, strand, loci, nh, mapq, second, None, threads)
        assert str(got, "utf-8") == want
        assert sum(aligned) == distinct < m / 4


def test_twin_check_keeps_only_true_twins():
    """twin_check on proposals as a hash collision would make them: a record proposed as the twin of one with
    other span letters, another width, other edits or another read row is aligned on its own; a true twin
    keeps its proposal."""
    genome = np.array([0, 1, 2, 3] * 50 + [1] * 40, dtype=np.uint8)
    rec_at = np.array([0, 0, 0, 0, 0, 7, 0], dtype=np.int64)
    read = np.array([0, 0, 0, 0, 0, 1, 2], dtype=np.int64)  # 2: another read whose row starts at 0 (empty)
    start = np.array([0, 4, 200, 8, 12, 16, 20], dtype=np.int64)  # 200: the run of 1s, other letters
    end = start + np.array([20, 20, 20, 24, 20, 20, 20])
    edits = np.array([2, 2, 2, 2, 3, 2, 2], dtype=np.int64)
    gapped = np.arange(7, dtype=np.int64)
    source = np.zeros(7, dtype=np.int64)  # every record proposed as record 0's twin
    sam_kernel.host.launch(sam_kernel._kernel("twin_check"), 7, rec_at, read, start, end, edits, genome, gapped, 7,
                           source)
    assert source.tolist() == [0, 0, 2, 3, 4, 5, 6]


def test_an_empty_read_is_no_twin_of_the_read_whose_row_it_shares():
    """An empty read's strand rows start where the next read's rows do (seeding.strand_rows): its gapped
    records are not that read's twins, though their span letters, edits and row start agree."""
    reference = Reference(["c"], np.array([0]), np.array([8]), ENCODE[np.frombuffer(b"CCCAGTAC", dtype=np.uint8)])
    seq = np.frombuffer(b"A", dtype=np.uint8).copy()
    batch = ReadBatch(["empty", "one"], seq, np.full(1, 40, dtype=np.uint8), np.array([0, 0, 1], dtype=np.int64))
    rows = strand_rows(ENCODE[seq], batch.starts, np.full(2, 3, dtype=np.int64))
    loci = Mappings(np.array([0, 1]), np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64),
                    np.full(2, 3, dtype=np.int64), np.full(2, 3, dtype=np.int64))
    read, strand = np.array([0, 1]), np.zeros(2, dtype=np.int64)
    nh, mapq, second = np.ones(2, dtype=np.int64), np.zeros(2, dtype=np.int64), np.full(2, -1, dtype=np.int64)
    assert rows.start[0] == rows.start[1]
    want = batch_records(batch, reference, read, strand, loci, *describe(rows, loci, reference), nh, mapq, second)
    got = sam_kernel.records_text(batch, rows, reference, read, strand, loci, nh, mapq, second)
    assert str(got, "utf-8") == want and "\t3D\t" in want and "\t2D1M\t" in want


def test_text_buffer_reused_only_when_asked():
    """records_text with a TextBuffer writes each batch into the buffer's kept memory (a render process
    writes the text out before its next batch), grown as needed, never beyond its limit; without one, into
    memory of its own; every text is the batch's own."""
    kept, texts = sam_kernel.TextBuffer(), []
    for seed, n in ((1, 300), (2, 100), (3, 500)):
        batch, rows, reference, read, strand, loci, nh, mapq, second = synthetic(np.random.default_rng(seed), n, 80, 4)
        want = batch_records(batch, reference, read, strand, loci, *describe(rows, loci, reference), nh, mapq, second)
        got = sam_kernel.records_text(batch, rows, reference, read, strand, loci, nh, mapq, second, buffer=kept)
        assert str(got, "utf-8") == want  # read before the next call, as the render process does
        alone = sam_kernel.records_text(batch, rows, reference, read, strand, loci, nh, mapq, second)
        assert str(alone, "utf-8") == want and not np.shares_memory(alone, kept.kept)
        texts.append(got)
    assert np.shares_memory(texts[0], texts[1])  # the second, smaller, in the first's buffer
    assert np.shares_memory(texts[2], kept.kept) and not np.shares_memory(texts[2], texts[0])  # grown
    small = sam_kernel.TextBuffer(limit=64)
    assert np.shares_memory(small.take(64), small.kept) and not np.shares_memory(small.take(65), small.kept)
