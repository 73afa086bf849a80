"""The vectorised pairing against slow obvious twins on random loci (fixed seed): candidate combinations
(windows, the per-pair cap, chunks) and the best concordant pairs; chunking leaves the output unchanged."""
from types import SimpleNamespace

import numpy as np
import pytest

from cli_checks import without_pg
from conftest import MEASLES, MEASLES_PAIR, SHIGELLA, SHIGELLA_PAIR, first_reads
from mapper import paired
from mapper.paired import Mate, best_concordant
from mapper.verify import Mappings
from paired_common import kind

CONTIG_STARTS = (0, 5000)
GENOME = 9000


def random_mate(rng, nh):
    """A paired.Mate over random loci: nh[i] loci for pair i, on two contigs, in report order per pair."""
    read = np.repeat(np.arange(len(nh)), nh)
    contig = rng.integers(0, 2, len(read))
    start = np.array(CONTIG_STARTS)[contig] + rng.integers(0, 3800, len(read))
    edits = rng.integers(0, 4, len(read))
    strand = rng.integers(0, 2, len(read))
    order = np.lexsort((strand, start, contig, edits, read))
    read, contig, start, edits, strand = read[order], contig[order], start[order], edits[order], strand[order]
    end = start + 100 + rng.integers(-2, 3, len(read))
    loci = Mappings(np.zeros(len(read), np.int64), contig, start, end, edits)
    return Mate(None, SimpleNamespace(loci=loci, read=read, strand=strand, nh=np.asarray(nh)))


def locus(mate, i):
    return SimpleNamespace(contig=mate.contig[i], start=mate.start[i], end=mate.end[i], rev=bool(mate.strand[i]))


@pytest.fixture
def mates():
    rng = np.random.default_rng(5)
    n = 300
    return random_mate(rng, rng.integers(0, 9, n)), random_mate(rng, rng.integers(0, 9, n))


@pytest.mark.parametrize("cap,chunk", [(10_000, 1 << 21), (10_000, 7), (5, 1), (1, 13)])
def test_combinations(monkeypatch, mates, cap, chunk):
    """Every mate-2 locus of the pair within reach, at most `cap` a pair (the first in mate-1 report order, each
    one's mate-2 loci from left to right); chunks hold whole pairs."""
    monkeypatch.setattr(paired, "PAIR_CANDIDATES", cap)
    monkeypatch.setattr(paired, "CHUNK", chunk)
    m1, m2 = mates
    reach = 400
    chunks = list(paired._combinations(m1, m2, reach, GENOME))
    got = [(int(a), int(b)) for ca, cb in chunks for a, b in zip(ca, cb)]
    want = []
    for p in range(len(m1.nh)):
        found = [(a, b) for a in range(m1.first[p], m1.first[p] + m1.nh[p])
                 for b in sorted(range(m2.first[p], m2.first[p] + m2.nh[p]), key=lambda b: (m2.start[b], b))
                 if abs(m1.start[a] - m2.start[b]) <= reach]
        want += found[:cap]
    assert got == want
    pairs_of_chunks = [set(m1.read[ca].tolist()) for ca, _ in chunks]
    assert sum(map(len, pairs_of_chunks)) == len(set().union(*pairs_of_chunks))
    if chunk == 1:
        assert len(chunks) > 100


@pytest.mark.parametrize("orientation", ["FR", "RF"])
def test_best_concordant(mates, orientation):
    m1, m2 = mates
    lo, hi = 150, 450
    a, b = best_concordant(m1, m2, orientation, lo, hi, GENOME)
    want = []
    for p in range(len(m1.nh)):
        found = [(m1.edits[i] + m2.edits[j], i, j) for i in range(m1.first[p], m1.first[p] + m1.nh[p])
                 for j in range(m2.first[p], m2.first[p] + m2.nh[p])
                 if kind(locus(m1, i), locus(m2, j), "pe" if orientation == "FR" else "mp", lo, hi) == "C"]
        want += [(i, j) for total, i, j in sorted(found) if total == min(found)[0]]
    assert list(zip(a.tolist(), b.tolist())) == want
    assert len(want) > 30


def test_chunks_leave_the_output_unchanged(monkeypatch, gkmap, index_dir, tmp_path):
    """Tiny chunks and batches of 7 pairs: the same three files, byte for byte (but @PG)."""
    def outputs(name, *extra):
        out = tmp_path / f"{name}.sam"
        code, err = gkmap("map", "--pe", "--quiet", "--index", index_dir(MEASLES), "-o", out, *extra, MEASLES,
                          *MEASLES_PAIR)
        assert code == 0, err
        return [without_pg(tmp_path / f"{name}{suffix}") for suffix in (".sam", "_OEA.sam", "_DIVET.vh")]
    want = outputs("default", "--min", "300", "--max", "420")
    monkeypatch.setattr(paired, "CHUNK", 3)
    assert outputs("chunked", "--min", "300", "--max", "420", "--batch-size", "7") == want
    assert all(want)   # DIVET lines too: the narrow range makes D and I pairs


def test_mapping_probabilities_equal_the_per_mapping_score(monkeypatch, gkmap, index_dir, tmp_path):
    """divet.mapping_probabilities (ungapped loci scored together from the codes, in chunks) writes the DIVET
    file that _probability, mapping by mapping from CIGAR and MD, writes: mate pairs of Shigella read as
    --mp are discordant by the thousand, a few of them gapped."""
    from mapper import divet
    pairs = [first_reads(path, 3000, tmp_path / f"r{k}.fq") for k, path in enumerate(SHIGELLA_PAIR, 1)]
    scored = []

    def one_by_one(mate, idx, described, reference):
        batch, out = mate.batch, np.ones(len(idx))
        qual = batch.qual.astype(np.int64) - divet.PHRED_OFFSET
        for i, (k, r, rv) in enumerate(zip(described.at(idx), mate.read[idx].tolist(), mate.strand[idx].tolist())):
            phred = qual[batch.starts[r]:batch.starts[r + 1]]
            out[i] = divet._probability(described.cigars[k], described.mds[k], (phred[::-1] if rv else phred).tolist())
        return out

    def counted(cigar, md, phred):
        scored.append(cigar)
        return score(cigar, md, phred)
    score = divet._probability
    runs = {}
    for name in ("together", "one by one"):
        if name == "one by one":
            monkeypatch.setattr(paired, "mapping_probabilities", one_by_one)
        monkeypatch.setattr(divet, "CHUNK", 500)
        monkeypatch.setattr(divet, "_probability", counted)
        out = tmp_path / f"{name}.sam"
        code, err = gkmap("map", "--mp", "--quiet", "--device", "cpu", "--index", index_dir(SHIGELLA), "-o", out,
                          SHIGELLA, *pairs)
        assert code == 0, err
        runs[name] = (tmp_path / f"{name}_DIVET.vh").read_text(), len(scored)
        scored.clear()
    (together, scalar_calls), (one_by_one_text, every) = runs["together"], runs["one by one"]
    assert together == one_by_one_text and together.count("\n") > 1000
    assert 0 < scalar_calls < every / 20  # the gapped ones only
