"""The mapper against exhaustive oracles on real data (issue #3's contract).

Read level: each read's best semi-global distance d over the whole genome, both strands (edlib). Every
read with d <= e must be mapped with NM = d on its primary record; every record must replay (CIGAR/MD/NM)
and be within e. Locus level: every seeding window in which edlib finds the read within e has a reported
locus. Known truth: simulated reads are found at their true locus.
"""
from collections import defaultdict

import dnaio
import edlib
import pytest

from conftest import CHR22Q, ECOLI, LAMBDA, MEASLES, READS, SHIGELLA, first_reads, need_tool
from mapper.alphabet import READ_ASCII, REF_ASCII
from mapper.index import load_index
from mapper.reads import read_batches
from mapper.seeding import seed, strand_rows
from mapper.pipeline import per_read_e
from mapper.simulate import parse_truth, simulate, write_fastq
from oracle import best_distance, check_record, default_e, load_genome, read_sam, ref_span


def map_and_check(gkmap, index_dir, tmp_path, genome_path, reads_path, expect_mapped, *extra):
    out = tmp_path / "out.sam"
    code, err = gkmap("map", "--quiet", "--index", index_dir(genome_path), "-o", out, *extra, genome_path, reads_path)
    assert code == 0, err
    subprocess_check = need_tool("samtools")
    import subprocess
    subprocess.run([subprocess_check, "quickcheck", str(out)], check=True)
    header, records = read_sam(out)
    genome = load_genome(genome_path)
    with dnaio.open(reads_path) as reader:
        reads = {r.name.split()[0]: r.sequence for r in reader}
    # every input read exactly once as primary-or-unmapped
    primaries = [r["qname"] for r in records if not r["flag"] & 256]
    assert sorted(primaries) == sorted(reads)
    by_read = defaultdict(list)
    for rec in records:
        by_read[rec["qname"]].append(rec)
    mapped = 0
    for name, seq in reads.items():
        e = default_e(len(seq)) if not extra else int(extra[extra.index("-e") + 1])
        recs = by_read[name]
        d = best_distance(seq, genome, e)
        if d is None:
            assert recs[0]["flag"] & 4, f"{name}: mapped, but no locus within e={e} exists"
            continue
        mapped += 1
        assert not recs[0]["flag"] & 4, f"{name}: best distance {d} <= e={e}, but unmapped"
        assert recs[0]["NM"] == d, f"{name}: primary NM {recs[0]['NM']}, best distance {d}"
        assert all(r["NH"] == len(recs) for r in recs)
        for rec in recs:
            check_record(rec, genome, e)
    assert mapped == expect_mapped, f"{mapped} reads within e (oracle), expected {expect_mapped}"
    return records


def test_measles_complete(gkmap, index_dir, tmp_path):
    map_and_check(gkmap, index_dir, tmp_path, MEASLES, READS / "measles_Hm2_HiSeq_R1.fastq.gz", 1171)


def test_na12878_chr22_complete(gkmap, index_dir, tmp_path, na12878_fastq):
    map_and_check(gkmap, index_dir, tmp_path, CHR22Q, na12878_fastq, 2496)


def test_shigella_complete(gkmap, index_dir, tmp_path):
    reads = first_reads(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 300, tmp_path / "r.fq")
    map_and_check(gkmap, index_dir, tmp_path, SHIGELLA, reads, 110)


def test_fixed_e_complete(gkmap, index_dir, tmp_path):
    """A fixed -e above the default, where more reads and more secondary loci appear."""
    map_and_check(gkmap, index_dir, tmp_path, MEASLES, READS / "measles_Hm2_HiSeq_R1.fastq.gz", 1189, "-e", "10")


@pytest.mark.parametrize("genome", [MEASLES, SHIGELLA])
def test_no_candidate_within_e_is_lost(gkmap, index_dir, tmp_path, genome):
    """Locus level: every window seeding produced in which edlib finds the read within e is reported."""
    reads = first_reads(READS / ("measles_Hm2_HiSeq_R1.fastq.gz" if genome == MEASLES
                                 else "shigella_dysenteriae_ERR6005894_R1.fastq.gz"), 400, tmp_path / "r.fq")
    out = tmp_path / "out.sam"
    assert gkmap("map", "--quiet", "--index", index_dir(genome), "-o", out, genome, reads)[0] == 0
    _, records = read_sam(out)
    index = load_index(genome, index_dir(genome))
    batch = next(read_batches(reads))
    rows = strand_rows(batch.codes(), batch.starts, per_read_e(batch, None, reads))
    cands, _ = seed(rows, index)
    start, end = cands.windows(rows, index.reference)
    reported = defaultdict(list)
    for rec in records:
        if not rec["flag"] & 4:
            s = rec["pos"] - 1
            reported[(rec["qname"], bool(rec["flag"] & 16), rec["rname"])].append((s + ref_span(rec["cigar"]), rec["NM"]))
    found = 0
    for i in range(len(cands)):
        row = cands.row[i]
        q = READ_ASCII[rows.codes[rows.start[row]:rows.start[row] + rows.length[row]]].tobytes()
        t = REF_ASCII[index.reference.codes[start[i]:end[i]]].tobytes()
        e = int(rows.e[row])
        hit = edlib.align(q, t, mode="HW", task="locations", k=e)
        if hit["editDistance"] < 0:
            continue
        found += 1
        contig = index.reference.names[cands.contig[i]]
        key = (batch.names[rows.read_of(row)], bool(rows.strand_of(row)), contig)
        ends = [start[i] - index.reference.starts[cands.contig[i]] + last + 1 for _, last in hit["locations"]]
        assert any(nm <= hit["editDistance"] and min(abs(x - end_) for x in ends) <= rows.length[row]
                   for end_, nm in reported[key]), (key, hit)
    assert found > 100


@pytest.mark.parametrize("genome,lengths", [(LAMBDA, (100,)), (ECOLI, (60, 150))])
def test_simulated_reads_found_at_true_locus(gkmap, index_dir, tmp_path, genome, lengths):
    """Known truth (CONVENTIONS.md simulation, seed 11); mixed read lengths in one file for E. coli."""
    from mapper.reference import read_fasta
    reference = read_fasta(genome, tmp_path / "ref.fai")
    reads = [r for i, L in enumerate(lengths) for r in simulate(reference, 300, L, seed=11 + i)]
    reads = [(f"{name}_{i}", seq) for i, (name, seq) in enumerate(reads)]
    fq = tmp_path / "sim.fq"
    with open(fq, "w") as f:
        write_fastq(reads, f)
    out = tmp_path / "out.sam"
    assert gkmap("map", "--quiet", "--index", index_dir(genome), "-o", out, genome, fq)[0] == 0
    _, records = read_sam(out)
    by_read = defaultdict(list)
    for rec in records:
        by_read[rec["qname"]].append(rec)
    checked = 0
    for name, seq in reads:
        contig, pos, strand, edits = parse_truth(name.rsplit("_", 1)[0])
        e = default_e(len(seq))
        if edits > e:
            continue
        checked += 1
        hits = [r for r in by_read[name] if not r["flag"] & 4 and r["rname"] == contig
                and bool(r["flag"] & 16) == (strand == "-") and abs(r["pos"] - pos) <= e]
        assert hits, f"{name}: not found at its true locus"
        assert hits[0]["NM"] <= edits
    assert checked > 0.8 * len(reads)
