"""Paired-end mapping (issue #9) on real read pairs, against oracles.

The slow twin: R1 and R2 are mapped single-end (every locus: the contract the single-end oracle tests
check), then paired by an obvious per-pair Python loop over every mate combination. The paired SAM, the OEA
SAM and the DIVET lines must be exactly what the twin predicts (DIVET's probability to 6 digits, recomputed
by replaying each alignment over the reference). Independently of the twin: every concordant mate replays
(CIGAR/MD/NM) and is within e by edlib with TLEN in range; an OEA pair's unmapped mate has no locus within e
anywhere in the genome (edlib); samtools quickcheck accepts the SAM files; the class counts are plausible.
"""
import math
import re
import subprocess
from collections import defaultdict

import dnaio
import pytest

from cli_checks import one_line_error
from conftest import MEASLES, MEASLES_PAIR, SHIGELLA, SHIGELLA_PAIR, first_reads, need_tool
from oracle import best_distance, check_record, default_e, load_genome, revcomp
from paired_common import estimated_range, kind, sam_lines, single_end, write_pairs


def run_paired(gkmap, index, genome, r1, r2, out, *extra):
    """gkmap map --pe ...; returns (stderr, main records, OEA records, DIVET rows, the TLEN range it used)."""
    code, err = gkmap("map", "--pe", "--index", index, "-o", out, *extra, genome, r1, r2)
    assert code == 0, err
    oea, divet = out.with_name(out.stem + "_OEA.sam"), out.with_name(out.stem + "_DIVET.vh")
    subprocess.run([need_tool("samtools"), "quickcheck", str(out), str(oea)], check=True)
    lo, hi = map(int, re.search(r"concordant TLEN (\d+)\.\.(\d+)", err).groups())
    rows = [line.split("\t") for line in divet.read_text().splitlines()]
    return err, sam_lines(out), sam_lines(oea), rows, (lo, hi)


def record(name, which, own, other, rank=0, proper=False, nh=None, mapq=None, unmapped=None):
    """The SAM fields the twin expects for one mate: `own` Locus or None (then `unmapped` is its SE record)."""
    flag = 1 | (2 if proper else 0) | (64 if which == 0 else 128) | (256 if rank else 0)
    flag |= (8 if other is None else 32 if other.rev else 0)
    if own is None:
        flag |= 4
        rname, pos = (other.contig, other.pos) if other else ("*", 0)
        return [name, str(flag), rname, str(pos), "0", "*", "=" if other else "*", str(pos), "0",
                unmapped[9], unmapped[10]]
    flag |= 16 if own.rev else 0
    tlen = 0
    if other is not None and other.contig == own.contig:
        tlen = max(own.end, other.end) - min(own.start, other.start)
        tlen = tlen if own.start < other.start or (own.start == other.start and which == 0) else -tlen
    f = own.fields
    # NM, MD, AS (the locus') and XS (the read's second-best) as single-end; NH and HI the pair's
    tags = [t for t in f[11:] if t[:3] in ("NM:", "MD:", "AS:", "XS:")]
    return [name, str(flag), own.contig, str(own.pos), str(mapq), own.cigar,
            "=" if other is None or other.contig == own.contig else other.contig,
            str(other.pos if other else own.pos), str(tlen), f[9], f[10], *tags, f"NH:i:{nh}", f"HI:i:{rank + 1}"]


def probability(locus, genome):
    """mrFAST's mapping score, replayed: 0.0003 per indel base, 0.001 + 10^(-Q/10) per mismatched base."""
    seq, qual, ref = locus.fields[9], locus.fields[10], genome[locus.contig]
    p, q, r = 1.0, 0, locus.start
    for n, op in re.findall(r"(\d+)([MID])", locus.cigar):
        n = int(n)
        if op == "M":
            for i in range(n):
                if seq[q + i] != ref[r + i] or seq[q + i] not in "ACGT":
                    p *= 0.001 + 10 ** (-(ord(qual[q + i]) - 33) / 10)
        else:
            p *= 0.0003 ** n
        q += n if op != "D" else 0
        r += n if op != "I" else 0
    return p


def twin(pairs1, pairs2, quals, genome, mode, lo, hi, max_records=None, max_oea=100, max_dis=300):
    """(main SAM records, OEA records, DIVET rows, class counts) by brute force over each pair's combinations."""
    main, oea, divet, counts = [], [], [], defaultdict(int)
    for (name, loci1, se1), (_, loci2, se2), q in zip(pairs1, pairs2, quals):
        combos = [(j, k, kind(x, y, mode, lo, hi)) for j, x in enumerate(loci1) for k, y in enumerate(loci2)]
        concordant = [(loci1[j].nm + loci2[k].nm, j, k) for j, k, t in combos if t == "C"]
        if concordant:
            counts["concordant"] += 1
            best = [(j, k) for total, j, k in concordant if total == min(concordant)[0]]
            mapq = 60 if len(best) == 1 else 0
            for rank, (j, k) in enumerate(best[:max_records]):
                main.append(record(name, 0, loci1[j], loci2[k], rank, True, len(best), mapq))
                main.append(record(name, 1, loci2[k], loci1[j], rank, True, len(best), mapq))
            continue
        x, y = (loci1 or [None])[0], (loci2 or [None])[0]   # a mate's primary: its single-end MAPQ
        main.append(record(name, 0, x, y, nh=len(loci1), mapq=x and x.fields[4], unmapped=se1))
        main.append(record(name, 1, y, x, nh=len(loci2), mapq=y and y.fields[4], unmapped=se2))
        if loci1 and loci2:
            counts["discordant"] += 1
            for j, k, t in combos[:max_dis]:
                a, b = loci1[j], loci2[k]
                divet.append([name, a.contig, str(a.start + 1), str(a.end), "FR"[a.rev],
                              "=" if a.contig == b.contig else b.contig, str(b.start + 1), str(b.end), "FR"[b.rev],
                              t, str(a.nm + b.nm), f"{q:.0f}", probability(a, genome) * probability(b, genome)])
        elif loci1 or loci2:
            counts["oea"] += 1
            which, loci, mate = (0, loci1, se2) if loci1 else (1, loci2, se1)
            if len(loci) <= max_oea:
                for rank, locus in enumerate(loci):
                    fields = record(name, which, locus, None, rank, nh=len(loci), mapq=locus.fields[4])
                    oea.append(fields + [f"NS:Z:{mate[9]}", f"NQ:Z:{mate[10]}"])  # unmapped: as sequenced
        else:
            counts["unmapped"] += 1
    return main, oea, divet, counts


def mean_qualities(r1, r2):
    with dnaio.open(r1) as a, dnaio.open(r2) as b:
        return [(sum(map(ord, x.qualities + y.qualities)) / (len(x.qualities) + len(y.qualities))) - 33
                for x, y in zip(a, b)]


def compare_with_twin(gkmap, index_dir, tmp_path, genome, r1, r2, *extra):
    """Run gkmap --pe and the twin on the same reads; assert equality; return gkmap's outputs and counts."""
    index = index_dir(genome)
    pairs1 = single_end(gkmap, index, genome, r1, tmp_path / "r1.sam")
    pairs2 = single_end(gkmap, index, genome, r2, tmp_path / "r2.sam")
    err, main, oea, divet, (lo, hi) = run_paired(gkmap, index, genome, r1, r2, tmp_path / "pe.sam", *extra)
    if "--min" not in extra:
        assert (lo, hi) == estimated_range(pairs1, pairs2, "pe")
    options = dict(zip(extra[::2], extra[1::2]))
    genome_seq = load_genome(genome)
    want_main, want_oea, want_divet, counts = twin(
        pairs1, pairs2, mean_qualities(r1, r2), genome_seq, "pe", lo, hi, max_records=int(options.get("-n", 0)) or None,
        max_oea=int(options.get("--maxoea", 100)), max_dis=int(options.get("--maxdis", 300)))
    assert main == want_main
    assert oea == want_oea
    assert [row[:12] for row in divet] == [row[:12] for row in want_divet]
    for got, want in zip(divet, want_divet):
        assert math.isclose(float(got[12]), want[12], rel_tol=2e-6), (got, want)
    summary = re.search(r"(\d+) read pairs: (\d+) concordant, (\d+) discordant .* (\d+) one-end anchored .* "
                        r"(\d+) unmapped", err)
    total, *found = map(int, summary.groups())
    assert total == len(pairs1) and found == [counts[k] for k in ("concordant", "discordant", "oea", "unmapped")]
    return main, divet, counts, genome_seq, (lo, hi)


def check_concordant(main, genome, lo, hi, reads):
    """Independent of the twin: each pair exactly once as a primary pair; concordant mates within e (edlib)."""
    primaries = [(f[0], int(f[1]) & 192) for f in main if not int(f[1]) & 256]
    assert sorted(primaries) == sorted((name, bit) for name in reads for bit in (64, 128))
    records = read_sam_fields(main)
    checked = 0
    for a, b in zip(records[::2], records[1::2]):
        if a["flag"] & 2:
            for rec in (a, b):
                check_record(rec, genome, default_e(len(rec["seq"])))
            assert lo <= abs(a["tlen"]) <= hi and a["tlen"] == -b["tlen"] and a["rname"] == b["rname"]
            checked += not a["flag"] & 256
    return checked


def read_sam_fields(lines):
    """oracle.read_sam's dicts (with TLEN) for already split lines."""
    out = []
    for f in lines:
        rec = dict(qname=f[0], flag=int(f[1]), rname=f[2], pos=int(f[3]), cigar=f[5], tlen=int(f[8]), seq=f[9])
        for tag in f[11:]:
            key, kind_, value = tag.split(":", 2)
            rec[key] = int(value) if kind_ == "i" else value
        out.append(rec)
    return out


def read_names(path):
    with dnaio.open(path) as reader:
        return [r.name.split()[0] for r in reader]


@pytest.mark.parametrize("extra", [
    (), ("--batch-size", "500"), ("--min", "300", "--max", "420", "--maxdis", "2", "-n", "1")])
def test_measles_pairs(gkmap, index_dir, tmp_path, extra):
    main, divet, counts, genome, (lo, hi) = compare_with_twin(gkmap, index_dir, tmp_path, MEASLES, *MEASLES_PAIR,
                                                              *extra)
    assert check_concordant(main, genome, lo, hi, read_names(MEASLES_PAIR[0])) == counts["concordant"]
    # plausible: R2 of this run often starts with a primer (many OEA pairs), the rest pairs concordantly
    assert 100 < counts["oea"] < 400 and counts["unmapped"] < 250
    if "--min" in extra:   # a narrow range turns the pairs outside it into D and I
        assert {row[9] for row in divet} == {"D", "I"} and counts["discordant"] > 300
        assert counts["concordant"] + counts["discordant"] == 1499 - counts["oea"] - counts["unmapped"]
    else:
        assert counts["concordant"] > 0.6 * 1499 and counts["discordant"] < 0.01 * 1499


def test_measles_oea_mates_have_no_locus(gkmap, index_dir, tmp_path):
    """edlib over the whole genome: the unmapped mate of every OEA pair aligns nowhere within e."""
    index = index_dir(MEASLES)
    _, main, _, _, _ = run_paired(gkmap, index, MEASLES, *MEASLES_PAIR, tmp_path / "pe.sam")
    genome = load_genome(MEASLES)
    unmapped = [f for f in main if int(f[1]) & 4 and not int(f[1]) & 8]
    assert len(unmapped) > 100
    for f in unmapped:
        assert best_distance(f[9], genome, default_e(len(f[9]))) is None, f[0]


@pytest.mark.parametrize("extra", [(), ("--maxoea", "2", "--maxdis", "5")])
def test_shigella_pairs(gkmap, index_dir, tmp_path, extra):
    r1 = first_reads(SHIGELLA_PAIR[0], 3000, tmp_path / "r1.fq")
    r2 = first_reads(SHIGELLA_PAIR[1], 3000, tmp_path / "r2.fq")
    main, divet, counts, genome, (lo, hi) = compare_with_twin(gkmap, index_dir, tmp_path, SHIGELLA, r1, r2, *extra)
    assert check_concordant(main, genome, lo, hi, read_names(r1)) == counts["concordant"]
    # plausible: Nextera reads with short inserts; the library's TLEN median is near 300
    assert 90 <= lo < 300 < hi <= 600
    assert counts["concordant"] > 1000 and counts["oea"] > 300 and counts["discordant"] > 0
    assert counts["discordant"] < 0.01 * counts["concordant"]


def reverse_complemented(src, dst):
    """Both strands swapped: each read reverse-complemented, its qualities reversed (FR pairs become RF)."""
    with dnaio.open(src) as reader, dnaio.open(dst, mode="w") as writer:
        for r in reader:
            writer.write(dnaio.SequenceRecord(r.name, revcomp(r.sequence), r.qualities[::-1]))
    return dst


def test_mate_pairs_mirror_paired_ends(gkmap, index_dir, tmp_path):
    """--mp on the reverse-complemented mates gives --pe's output with every strand swapped: same TLEN range
    (estimated), same pairs, classes and DIVET lines; SEQ of unmapped mates and NS/NQ are as sequenced."""
    index = index_dir(MEASLES)
    rc = [reverse_complemented(path, tmp_path / f"rc{k}.fq") for k, path in enumerate(MEASLES_PAIR)]
    pe = run_paired(gkmap, index, MEASLES, *MEASLES_PAIR, tmp_path / "pe.sam", "--min", "300", "--max", "420")
    code, err = gkmap("map", "--mp", "--index", index, "-o", tmp_path / "mp.sam", "--min", "300", "--max", "420",
                      MEASLES, *rc)
    assert code == 0, err
    assert re.search(r"\d+ read pairs.*", err).group() == re.search(r"\d+ read pairs.*", pe[0]).group()

    def mirrored(f):
        flag = int(f[1])
        flag ^= (0 if flag & 4 else 16) | (0 if flag & 8 else 32)
        f = [f[0], str(flag), *f[2:]]
        if flag & 4:
            f[9:11] = revcomp(f[9]), f[10][::-1]
        return [f"NS:Z:{revcomp(t[5:])}" if t.startswith("NS:Z:") else f"NQ:Z:{t[5:][::-1]}" if t.startswith("NQ:Z:")
                else t for t in f]
    assert sam_lines(tmp_path / "mp.sam") == [mirrored(f) for f in pe[1]]
    assert sam_lines(tmp_path / "mp_OEA.sam") == [mirrored(f) for f in pe[2]]
    flip = {"F": "R", "R": "F"}
    want = [[*f[:4], flip[f[4]], *f[5:8], flip[f[8]], *f[9:]] for f in pe[3]]
    assert [line.split("\t") for line in (tmp_path / "mp_DIVET.vh").read_text().splitlines()] == want
    assert {f[9] for f in want} == {"D", "I"}


@pytest.mark.parametrize("names1,names2,where", [
    (["p1", "p2", "p3"], ["p1", "p2"], ("a_1.fq", "record 3", "'p3' has no mate", "a_2.fq ends after read 2")),
    (["p1"], ["p1", "p2"], ("a_2.fq", "record 2", "'p2' has no mate", "a_1.fq ends after read 1")),
    (["p1/1", "p2/1", "p3/1"], ["p1/2", "q2/2", "p3/2"],
     ("a_2.fq", "record 2", "'q2/2' is not the mate of read 'p2/1'")),
])
def test_pair_files_that_do_not_pair(gkmap, index_dir, tmp_path, names1, names2, where):
    r1, r2 = write_pairs(tmp_path, names1, names2)
    out = tmp_path / "out.sam"
    code, err = gkmap("map", "--pe", "--quiet", "--index", index_dir(MEASLES), "--min", "1", "--max", "500",
                      "--batch-size", "2", "-o", out, MEASLES, r1, r2)
    assert code == 1
    one_line_error(err, *where)
    assert not any(tmp_path.glob("out*"))


@pytest.mark.parametrize("args,needle", [
    (("--pe", "R1"), "1 reads files given, expected 2 (R1 and R2 with --pe)"),
    (("R1", "R2"), "2 reads files given, expected 1 (two need --pe or --mp)"),
    (("--pe", "--mp", "R1", "R2"), "not allowed with argument"),
    (("--pe", "--min", "400", "--max", "300", "R1", "R2"), "--min 400 is more than --max 300"),
    (("--mp", "--maxdis", "-1", "R1", "R2"), "--maxdis must be at least 0"),
    (("--pe", "--unmapped", "u.fq", "R1", "R2"), "--unmapped is for single-end reads"),
    (("--min", "100", "R1"), "--min/--max need --pe or --mp"),
])
def test_paired_usage_errors(gkmap, tmp_path, args, needle):
    files = {"R1": MEASLES_PAIR[0], "R2": MEASLES_PAIR[1]}
    code, err = gkmap("map", "--quiet", "--index", tmp_path / "idx", "-o", tmp_path / "out.sam", MEASLES,
                      *[files.get(a, a) for a in args])
    assert code == 2
    one_line_error(err, needle)


@pytest.mark.parametrize("names,extra,needle", [
    (["p1", "p2"], (), "cannot estimate the insert size: only 0 read pairs map uniquely in FR orientation"),
    (None, ("--min", "2000"), "the TLEN range would be 2000.."),  # the estimate's bound follows the data
])
def test_insert_size_that_cannot_be_estimated(gkmap, index_dir, tmp_path, names, extra, needle):
    reads = write_pairs(tmp_path, names, names) if names else MEASLES_PAIR
    code, err = gkmap("map", "--pe", "--quiet", "--index", index_dir(MEASLES), "-o", tmp_path / "out.sam", *extra,
                      MEASLES, *reads)
    assert code == 2
    one_line_error(err, needle, "give")
    assert not any(tmp_path.glob("out*"))


def test_paired_needs_an_output_file(gkmap, tmp_path):
    code, err = gkmap("map", "--pe", "--quiet", "--index", tmp_path / "idx", MEASLES, *MEASLES_PAIR)
    assert code == 2
    one_line_error(err, "--pe needs -o OUT.sam")
