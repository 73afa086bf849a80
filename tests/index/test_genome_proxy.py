"""scripts/genome_proxy.py (issue 17): the whole-genome proxy is deterministic, sized and named like the asked
genome, holds what its docstring says it models (diverged chr20 copies in the asked divergence range, a
SINE family of many 5-20 % diverged copies, microsatellites and low-complexity tracts), and its reads
come from the whole proxy with the right truth; the pathological set has every kind. Small proxies
(5 Mbp), a few seconds on a CPU."""
import sys
from collections import Counter

import dnaio
import edlib
import numpy as np
import pytest

from conftest import ROOT
from mapper.alphabet import CODE_N, COMPLEMENT, ENCODE, READ_ASCII
from mapper.reference import read_fasta
from mapper.simulate import parse_truth

sys.path.insert(0, str(ROOT / "scripts"))
import genome_proxy as gp  # noqa: E402

GBP = 0.005
READS, PATHOLOGICAL = 3000, 120
K = 12


def build(folder, recipe="human", reads=READS, pathological=PATHOLOGICAL):
    folder.mkdir(parents=True, exist_ok=True)
    fa = folder / f"{recipe}.fa"
    proxy = gp.build(fa, GBP, recipe, reads=reads, reads_out=folder / "reads.fq", pathological=pathological,
                     pathological_out=folder / "patho.fq")
    return fa, proxy


@pytest.fixture(scope="module")
def human(tmp_path_factory):
    folder = tmp_path_factory.mktemp("human")
    fa, proxy = build(folder)
    return folder, fa, proxy, read_fasta(fa, folder / "fai")


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    folder = tmp_path_factory.mktemp("copies48")
    fa, proxy = build(folder, "copies48", reads=500, pathological=60)
    return folder, fa, proxy, read_fasta(fa, folder / "fai")


@pytest.fixture(scope="module")
def chr20(tmp_path_factory):
    return read_fasta(gp.CHR20, tmp_path_factory.mktemp("chr20") / "fai").codes


def kmers(codes, k=K):
    """Codes of every k-mer without N (int64), in sequence order."""
    windows = np.lib.stride_tricks.sliding_window_view(codes, k)
    ok = (windows != CODE_N).all(axis=1)
    return (windows[ok].astype(np.int64) << (2 * np.arange(k - 1, -1, -1))).sum(axis=1)


def letters(codes):
    return READ_ASCII[codes].tobytes().decode()


def tandem_tracts(codes, min_len):
    """Exact tandem runs of period 1-6 at least min_len bases long."""
    total = 0
    for p in range(1, 7):
        same = (codes[p:] == codes[:-p]) & (codes[p:] != CODE_N)
        edges = np.diff(np.concatenate([[0], same.view(np.int8), [0]]))
        total += int(((np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)) >= min_len - p).sum())
    return total


def two_letter_windows(codes, w=50):
    """N-free windows of w bases (tiled) spelled with at most two letters."""
    grid = codes[:len(codes) // w * w].reshape(-1, w)
    distinct = sum((grid == b).any(axis=1).astype(int) for b in range(4))
    return int(((distinct <= 2) & ~(grid == CODE_N).any(axis=1)).sum())


def test_deterministic(tmp_path, human):
    folder, fa, _, _ = human
    again, _ = build(tmp_path / "again")
    assert again.read_bytes() == fa.read_bytes()
    assert (tmp_path / "again" / "reads.fq").read_bytes() == (folder / "reads.fq").read_bytes()
    assert (tmp_path / "again" / "patho.fq").read_bytes() == (folder / "patho.fq").read_bytes()
    # the genome does not depend on which reads are asked for
    alone, _ = build(tmp_path / "alone", reads=0, pathological=0)
    assert alone.read_bytes() == fa.read_bytes()


def test_sizes_and_names(human, copies):
    _, fa, proxy, ref = human
    assert ref.names == list(gp.GRCH37) and int(ref.lengths.sum()) == round(GBP * 1e9)
    assert [n for n, _ in proxy.contigs] == ref.names and proxy.length == int(ref.lengths.sum())
    scaled = np.array(list(gp.GRCH37.values())) * GBP * 1e9 / sum(gp.GRCH37.values())
    assert np.abs(ref.lengths - scaled).max() <= 24
    with open(fa) as f:
        assert {len(line) for line in f if not line.startswith(">")} <= set(range(1, gp.LINE + 2))
    _, _, proxy, ref = copies
    assert ref.names == ["chr20"] + [f"chr20_c{i:02d}" for i in range(1, 49)]
    assert abs(int(ref.lengths.sum()) - GBP * 1e9) < 0.01 * GBP * 1e9
    assert gp.human_sizes(round(3.1e9))[0][1] <= 250e6 and 3.1e9 < 2**32


def divergence(copy, source):
    """Edits per base of `copy` placed anywhere in `source` (edlib infix)."""
    return edlib.align(letters(copy), letters(source), mode="HW", task="distance")["editDistance"] / len(copy)


def test_copies48_divergence(copies, chr20):
    _, _, proxy, ref = copies
    unit = ref.codes[:ref.lengths[0]]
    at = proxy.blocks[0].source
    assert np.array_equal(unit, chr20[at:at + len(unit)])
    rates = [b.divergence for b in proxy.blocks[1:]]
    assert rates[0] == 0.01 and rates[-1] == 0.15 and rates == sorted(rates)
    for i in (1, 12, 24, 36, 48):
        start = int(ref.starts[i]) + 40_000
        measured = divergence(ref.codes[start:start + 1000], unit[37_000:44_000])
        assert 0.6 * rates[i - 1] <= measured <= 1.4 * rates[i - 1] + 0.005, (i, measured)


def test_human_copies_diverged_in_range(human, chr20):
    _, _, proxy, ref = human
    ratios = []
    for block in proxy.blocks:
        assert gp.COPY_DIVERGENCE[0] <= block.divergence <= gp.COPY_DIVERGENCE[1]
        if block.length < 3000:
            continue
        contig = ref.names.index(block.contig)
        start = int(ref.starts[contig]) + block.start + 1000
        copy = ref.codes[start:start + 1000]
        source = chr20[block.source:block.source + block.source_length]
        source = COMPLEMENT[source[::-1]] if block.reverse else source
        if (copy == CODE_N).any():
            continue
        ratios.append(divergence(copy, source[:4000]) / block.divergence)
    assert len(ratios) >= 15
    assert 0.6 <= np.median(ratios) <= 1.6, ratios  # inserted repeats add to some windows


def test_sine_family(human):
    _, _, proxy, ref = human
    consensus = gp.sine_consensus()
    assert 280 <= len(consensus) <= 300
    assert proxy.inserted["SINE"] >= 0.7 * GBP * 1e9 / gp.SINE_SPACING
    found = np.sort(kmers(ref.codes))
    own = np.concatenate([kmers(consensus), kmers(COMPLEMENT[consensus[::-1]])])
    counts = np.searchsorted(found, own, side="right") - np.searchsorted(found, own)
    chance = 2 * len(found) / 4**K
    assert np.median(counts) >= 50 * max(chance, 1), np.median(counts)
    # copies around hits of the consensus' middle are 5-20 % diverged: within 25 % edits, none exact
    middle = letters(consensus[100:200])
    text = letters(ref.codes)
    probe = middle[45:57]
    hits = list(_find_all(text, probe))[:100]
    distances = [edlib.align(middle, text[max(h - 45 - 40, 0):h + 55 + 40], mode="HW", task="distance")["editDistance"]
                 for h in hits]
    assert len(hits) >= 30
    assert np.mean(np.array(distances) <= 25) >= 0.8 and np.median(distances) >= 3, distances


def _find_all(text, probe):
    at = text.find(probe)
    while at >= 0:
        yield at
        at = text.find(probe, at + 1)


def test_microsatellites_and_low_complexity(human, chr20):
    _, _, proxy, ref = human
    assert proxy.inserted["STR"] >= 0.7 * GBP * 1e9 / gp.STR_SPACING
    assert proxy.inserted["low-complexity"] >= 0.7 * GBP * 1e9 / gp.LC_SPACING
    baseline = chr20[30_000_000:35_000_000]
    per_mbp = lambda f, codes: f(codes) / len(codes) * 1e6
    assert per_mbp(lambda c: tandem_tracts(c, 40), ref.codes) >= 2 * per_mbp(lambda c: tandem_tracts(c, 40), baseline)
    assert per_mbp(two_letter_windows, ref.codes) >= 2 * per_mbp(two_letter_windows, baseline)
    for p, unit in ((1, "A"), (2, "CA"), (4, "TTTC")):  # every period is drawn; these three at least occur
        assert (unit * (24 // p)) in letters(ref.codes) or (unit * (24 // p)) in letters(COMPLEMENT[ref.codes[::-1]])


def test_reads_from_the_whole_proxy(human):
    folder, _, _, ref = human
    with dnaio.open(folder / "reads.fq") as f:
        reads = [(r.name, r.sequence) for r in f]
    assert len(reads) == READS and [n.split("|")[0] for n, _ in reads] == [f"sim{i}" for i in range(READS)]
    truths = [parse_truth(n) for n, _ in reads]
    by_contig = Counter(t[0] for t in truths)
    assert set(by_contig) == set(ref.names)
    # contigs in proportion to their length (within sampling noise)
    share = np.array([by_contig[n] for n in ref.names]) / READS
    assert np.abs(share - ref.lengths / ref.lengths.sum()).max() < 0.03
    assert not any(by_contig[t[0]] == READS for t in truths[:100])  # the file's start is not one contig
    for (name, seq), (contig, pos, strand, edits) in list(zip(reads, truths))[:200]:
        start = int(ref.starts[ref.names.index(contig)]) + pos - 1
        window = ref.codes[start:start + len(seq) + 2]
        window = COMPLEMENT[window[::-1]] if strand == "-" else window
        assert edlib.align(seq, letters(window), mode="HW", task="distance")["editDistance"] <= edits, name


def test_pathological_kinds(human, copies):
    for folder, n, ref in ((human[0], PATHOLOGICAL, human[3]), (copies[0], 60, copies[3])):
        with dnaio.open(folder / "patho.fq") as f:
            reads = [(r.name, r.sequence) for r in f]
        assert len(reads) == n
        kinds = Counter(name.split("|")[0].split("-")[1] for name, _ in reads)
        assert kinds == {k: n // len(gp.PATHOLOGICAL) for k in gp.PATHOLOGICAL}
        consensus = gp.sine_consensus()
        sine_kmers = set(kmers(consensus, 10)) | set(kmers(COMPLEMENT[consensus[::-1]], 10))
        sine_hits = []
        for name, seq in reads:
            kind = name.split("|")[0].split("-")[1]
            codes = ENCODE[np.frombuffer(seq.encode(), np.uint8)]
            assert len(seq) == 100
            if kind == "polyA":
                assert max(seq.count("A"), seq.count("T")) >= 95
            elif kind in ("CA", "TTTC", "STR"):
                assert max(np.mean(codes[p:] == codes[:-p]) for p in range(1, 7)) >= 0.8, seq
            elif kind == "N":
                assert 1 <= seq.count("N") <= 20
            elif folder == human[0]:  # SINE: windows on the inserted family (a copy 20 % diverged may keep no 10-mer)
                sine_hits.append(len(set(kmers(codes, 10)) & sine_kmers) > 0)
            else:  # copies48: windows on chr20's real Alus, whose motif lies within an Alu's length
                contig, pos, _, _ = parse_truth(name)
                start = int(ref.starts[ref.names.index(contig)]) + pos - 1
                around = letters(ref.codes[max(start - gp.ALU_LENGTH, 0):start + 100 + gp.ALU_LENGTH])
                sine_hits.append(gp.ALU_MOTIF in around or gp.ALU_MOTIF in letters(COMPLEMENT[ENCODE[
                    np.frombuffer(around.encode(), np.uint8)][::-1]]))
        assert np.mean(sine_hits) >= 0.85  # about 7 % of random proxy windows
