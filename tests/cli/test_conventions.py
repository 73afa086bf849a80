"""Pipeline conventions (issue #18 items 3-5) on real reads: read groups (-R, bwa's syntax) on every record,
the header (@HD, @RG, @PG with its command line escaped, @CO), reads on standard input ('-', plain and
gzipped FASTQ, FASTA), MAPQ and the tags NM/MD/AS/XS/NH/HI checked against the records themselves (all loci
are written, so a read's records give its best and second-best distances), --best's FLAG 256, and the help
text. samtools reads every output; Picard ValidateSamFile too (Debian picard-tools, installed by `make test`).
"""
import gzip
import re
import subprocess
import sys
from collections import defaultdict

import dnaio
import pytest

from conftest import MEASLES, MEASLES_PAIR, ROOT, SHIGELLA, SHIGELLA_PAIR, SHIGELLA_R1, first_reads, need_tool
from oracle import assert_bare_secondaries, default_e

RG = r"@RG\tID:run 1\tSM:ERR6005894\tPL:ILLUMINA\tDS:a\\tb"   # as typed in a shell: backslash-t escapes
RG_LINE = "@RG\tID:run 1\tSM:ERR6005894\tPL:ILLUMINA\tDS:a\\tb"  # '\\t' (an escaped backslash) stays literal
RG_ID = "run 1"


def mapper(*args, stdin=None):
    """`python -m mapper ARGS` in a subprocess (a real command line for @PG); returns CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "mapper", *map(str, args)], input=stdin, capture_output=True,
                          cwd=ROOT)


def records(path_or_text):
    lines = path_or_text.read_text() if hasattr(path_or_text, "read_text") else path_or_text
    return [line.split("\t") for line in lines.splitlines() if line and not line.startswith("@")]


def tags(fields):
    return dict((t[:2], t[5:]) for t in fields[11:])


def samtools_agrees(path):
    """samtools accepts the file and reads back exactly its records and header."""
    samtools = need_tool("samtools")
    subprocess.run([samtools, "quickcheck", str(path)], check=True)
    body = subprocess.run([samtools, "view", str(path)], check=True, capture_output=True, text=True).stdout
    assert body.splitlines() == [line for line in path.read_text().splitlines() if not line.startswith("@")]
    head = subprocess.run([samtools, "view", "-H", "--no-PG", str(path)], check=True, capture_output=True,
                          text=True).stdout
    assert head.splitlines() == [line for line in path.read_text().splitlines() if line.startswith("@")]


def picard_validates(path, *ignore):
    """Picard ValidateSamFile (an oracle tool, installed by `make test`): no error. Warnings: only those in
    `ignore` may appear."""
    picard = need_tool("PicardCommandLine")
    done = subprocess.run([picard, "ValidateSamFile", f"I={path}", "MODE=SUMMARY"], capture_output=True, text=True)
    report = done.stdout + done.stderr
    histogram = re.findall(r"^(ERROR|WARNING):([A-Z_]+)\t\d+$", report, re.MULTILINE)   # MODE=SUMMARY's table
    assert not [kind for level, kind in histogram if level == "ERROR"], report[-3000:]
    warnings = {kind for level, kind in histogram if level == "WARNING"}
    assert warnings <= set(ignore), report[-3000:]
    assert "No errors found" in report or warnings, report[-3000:]
    return report


@pytest.fixture(scope="module")
def shigella_reads(tmp_path_factory):
    return first_reads(SHIGELLA_R1, 2000, tmp_path_factory.mktemp("reads") / "r1.fq")


@pytest.fixture(scope="module")
def single(index_dir, shigella_reads, tmp_path_factory):
    """A single-end run with -R, two --comment and an output name holding a tab and a line break."""
    folder = tmp_path_factory.mktemp("se")
    out = folder / "out\tx\ny.sam"
    done = mapper("map", "--quiet", "--device", "cpu", "--index", index_dir(SHIGELLA), "-R", RG,
                  "--comment", "first comment", "--comment", "second, with 'quotes'", "-o", out, SHIGELLA,
                  shigella_reads)
    assert done.returncode == 0, done.stderr
    plain = folder / "out.sam"   # the same SAM under a plain name, for the tools
    plain.write_bytes(out.read_bytes())
    return plain


def test_header_tells_the_truth(single):
    header = [line for line in single.read_text().splitlines() if line.startswith("@")]
    assert header[0] == "@HD\tVN:1.6\tSO:unsorted\tGO:query"
    assert header[1].startswith("@SQ\tSN:NZ_CP026774.1\tLN:") and header[2].startswith("@SQ\tSN:NZ_CP026775.1")
    assert header[3] == RG_LINE
    pg = header[4].split("\t")
    assert pg[:4] == ["@PG", "ID:gkmap", "PN:gkmap", pg[3]] and pg[3].startswith("VN:") and len(pg) == 5
    assert pg[4].startswith("CL:gkmap map ")
    # the tab and the line break of the output's name are escapes, so the line stays one line of 5 fields
    assert "out\\tx\\ny.sam" in pg[4] and r"-R '@RG\tID:run 1" in pg[4]
    assert header[5:] == ["@CO\tfirst comment", "@CO\tsecond, with 'quotes'"]
    assert len(header) == 7


def test_read_group_on_every_record(single):
    recs = records(single)
    assert len(recs) >= 2000 and any(int(f[1]) & 4 for f in recs) and any(int(f[1]) & 256 for f in recs)
    for f in recs:
        assert [t for t in f[11:] if t.startswith("RG:")] == [f"RG:Z:{RG_ID}"], f[0]


def test_records_of_a_read_are_grouped_in_input_order(single, shigella_reads):
    with dnaio.open(shigella_reads) as reader:
        names = [r.name.split()[0] for r in reader]
    seen = []
    for f in records(single):
        if not seen or seen[-1] != f[0]:
            seen.append(f[0])
    assert seen == names    # GO:query: every read's records together, reads in input order


def test_samtools_and_picard_accept_single_end(single):
    samtools_agrees(single)
    # Picard's only remark (MODE=SUMMARY) could be about secondary records' NM/MD under FLAG 256:
    # none expected; the run fails on any ERROR
    picard_validates(single)


def test_mapq_and_tags_follow_the_readme(single):
    """From the records alone (every locus is written): d1 <= d2 <= ... are the NMs of the read's records."""
    by_read = defaultdict(list)
    for f in records(single):
        by_read[f[0]].append(f)
    kinds = defaultdict(int)
    for name, recs in by_read.items():
        if int(recs[0][1]) & 4:
            assert len(recs) == 1 and recs[0][4] == "0" and tags(recs[0]) == {"RG": RG_ID}
            continue
        t = [tags(f) for f in recs]
        nms = [int(x["NM"]) for x in t]
        assert nms == sorted(nms) and [int(f[1]) & 256 for f in recs] == [0] + [256] * (len(recs) - 1)
        assert [int(x["HI"]) for x in t] == list(range(1, len(recs) + 1))
        assert all(int(x["NH"]) == len(recs) for x in t)
        assert all(int(x["AS"]) == -n for x, n in zip(t, nms))
        e = default_e(len(recs[0][9]))
        if len(recs) > 1:
            assert all(int(x["XS"]) == -nms[1] for x in t)
            second = nms[1]
        else:
            assert "XS" not in t[0]
            second = e + 1
        mapq = min(60, 20 * (second - nms[0]))
        assert int(recs[0][4]) == mapq, name
        assert all(f[4] == "0" for f in recs[1:])
        kinds["tie" if len(recs) > 1 and mapq == 0 else "gap" if len(recs) > 1 else "one"] += 1
        kinds[("mapq", mapq)] += 1
    # the real data has reads with 2+ equally good loci, reads with a worse second locus, and unique ones
    assert kinds["tie"] >= 10 and kinds["gap"] >= 3 and kinds["one"] >= 500
    assert kinds[("mapq", 60)] and kinds[("mapq", 40)] and kinds[("mapq", 20)] and kinds[("mapq", 0)]


def test_best_marks_secondaries(gkmap, index_dir, shigella_reads, single, tmp_path):
    out = tmp_path / "best.sam"
    code, err = gkmap("map", "--quiet", "--device", "cpu", "--index", index_dir(SHIGELLA), "--best", "-R", RG,
                      "-o", out, SHIGELLA, shigella_reads)
    assert code == 0, err
    by_read = defaultdict(list)
    for f in records(out):
        by_read[f[0]].append(f)
    full = defaultdict(list)
    for f in records(single):
        full[f[0]].append(f)
    ties = 0
    for name, recs in by_read.items():
        assert [int(f[1]) & 256 for f in recs] == [0] + [256] * (len(recs) - 1)
        if len(recs) > 1:
            ties += 1
            assert {tags(f)["NM"] for f in recs} == {tags(recs[0])["NM"]} and all(f[4] == "0" for f in recs)
        # MAPQ, NH and XS come from every locus found, as without --best
        assert recs[0][4] == full[name][0][4] and tags(recs[0]) == tags(full[name][0])
    assert ties >= 10
    samtools_agrees(out)


def test_no_secondary_seq(index_dir, shigella_reads, single, tmp_path):
    """--no-secondary-seq: the run's SAM less SEQ/QUAL on its secondaries, accepted by samtools and Picard,
    and a BAM of the same records."""
    sam, bam = tmp_path / "bare.sam", tmp_path / "bare.bam"
    for out in (sam, bam):
        done = mapper("map", "--quiet", "--device", "cpu", "--index", index_dir(SHIGELLA), "-R", RG, "--comment",
                      "first comment", "--comment", "second, with 'quotes'", "--no-secondary-seq", "-o", out,
                      SHIGELLA, shigella_reads)
        assert done.returncode == 0, done.stderr
    body = lambda path: [line for line in path.read_text().splitlines() if not line.startswith("@")]
    assert assert_bare_secondaries(body(sam), body(single)) >= 100
    assert sam.stat().st_size < 0.8 * single.stat().st_size
    samtools_agrees(sam)
    picard_validates(sam, "QUALITY_NOT_STORED")  # the secondaries' QUAL '*', as asked (README)
    view = subprocess.run([need_tool("samtools"), "view", str(bam)], check=True, capture_output=True, text=True)
    assert view.stdout.splitlines() == body(sam)


@pytest.fixture(scope="module")
def paired(index_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pe")
    out = folder / "pe.sam"
    done = mapper("map", "--quiet", "--device", "cpu", "--index", index_dir(MEASLES), "--pe", "-R", RG,
                  "--comment", "paired", "-o", out, MEASLES, *MEASLES_PAIR)
    assert done.returncode == 0, done.stderr
    return out, folder / "pe_OEA.sam"


def test_paired_end_read_groups_and_header(paired):
    for path in paired:
        text = path.read_text()
        header = [line for line in text.splitlines() if line.startswith("@")]
        assert header[0] == "@HD\tVN:1.6\tSO:unsorted\tGO:query" and RG_LINE in header
        assert header[-1] == "@CO\tpaired" and len(header[-2].split("\t")) == 5    # @PG, then @CO
        recs = records(path)
        assert recs
        for f in recs:
            assert [t for t in f[11:] if t.startswith("RG:")] == [f"RG:Z:{RG_ID}"], f[0]
        samtools_agrees(path)
    main = records(paired[0])
    assert {int(f[1]) & 192 for f in main} == {64, 128}
    assert any(int(f[1]) & 4 for f in main) and any(int(f[1]) & 2 for f in main)
    for f in main:
        t = tags(f)
        if int(f[1]) & 4:
            assert t == {"RG": RG_ID}
        else:
            assert int(t["AS"]) == -int(t["NM"]) and 1 <= int(t["HI"]) <= int(t["NH"])
            if int(f[1]) & 2:
                assert f[4] == ("60" if t["NH"] == "1" else "0")
    # the mates of pairs that are not concordant carry their single-end MAPQ (0 on a tie: XS = AS)
    for f in main:
        t = tags(f)
        if not int(f[1]) & 6 and "XS" in t:
            assert (f[4] == "0") == (t["XS"] == t["AS"])


def test_paired_end_without_secondary_seq(index_dir, tmp_path):
    """Shigella's pairs (IS elements: pairs with several best placements) with and without --no-secondary-seq."""
    pairs = [first_reads(path, 1000, tmp_path / f"r{k}.fq") for k, path in enumerate(SHIGELLA_PAIR, 1)]
    body = lambda path: [line for line in path.read_text().splitlines() if not line.startswith("@")]
    for name, extra in (("full", ()), ("bare", ("--no-secondary-seq",))):
        done = mapper("map", "--quiet", "--device", "cpu", "--index", index_dir(SHIGELLA), "--pe", "-R", RG, *extra,
                      "-o", tmp_path / f"{name}.sam", SHIGELLA, *pairs)
        assert done.returncode == 0, done.stderr
    for name in ("{}.sam", "{}_OEA.sam"):
        bare, full = (body(tmp_path / name.format(run)) for run in ("bare", "full"))
        assert assert_bare_secondaries(bare, full) >= 10
    picard_validates(tmp_path / "bare.sam", "QUALITY_NOT_STORED")


def test_picard_accepts_paired_end(paired):
    # MATE_NOT_FOUND / MISMATCH_FLAG_MATE_* would be errors; OUT_OEA.sam holds only the mapped mates of
    # one-end anchored pairs (mrFAST's layout), so Picard finds no mate there: validated as the main SAM only
    picard_validates(paired[0])


@pytest.mark.parametrize("form", ["fastq", "fastq.gz", "fasta"])
def test_reads_on_stdin(index_dir, tmp_path, form):
    reads = first_reads(MEASLES_PAIR[0], 300, tmp_path / "r.fq")
    source = reads
    if form == "fasta":
        source = tmp_path / "r.fa"
        with dnaio.open(reads) as reader, dnaio.open(source, mode="w", fileformat="fasta") as writer:
            for r in reader:
                writer.write(r)
    data = source.read_bytes()
    if form.endswith(".gz"):
        data = gzip.compress(data)
    common = ("map", "--quiet", "--device", "cpu", "--index", index_dir(MEASLES), MEASLES)
    from_file = mapper(*common, source)
    from_stdin = mapper(*common, "-", stdin=data)
    assert from_file.returncode == 0 and from_stdin.returncode == 0, from_stdin.stderr
    assert records(from_stdin.stdout.decode()) == records(from_file.stdout.decode())
    assert len(records(from_stdin.stdout.decode())) >= 300
    out = tmp_path / "stdin.sam"
    out.write_bytes(from_stdin.stdout)
    samtools_agrees(out)


def test_paired_r1_on_stdin(index_dir, tmp_path):
    r1, r2 = (first_reads(p, 200, tmp_path / f"r{k}.fq") for k, p in enumerate(MEASLES_PAIR, 1))
    common = ("map", "--quiet", "--device", "cpu", "--index", index_dir(MEASLES), "--pe", "--min", "200",
              "--max", "800")
    assert mapper(*common, "-o", tmp_path / "a.sam", MEASLES, r1, r2).returncode == 0
    done = mapper(*common, "-o", tmp_path / "b.sam", MEASLES, "-", r2, stdin=gzip.compress(r1.read_bytes()))
    assert done.returncode == 0, done.stderr
    assert records(tmp_path / "a.sam") == records(tmp_path / "b.sam")
    both = mapper(*common, "-o", tmp_path / "c.sam", MEASLES, "-", "-", stdin=b"")
    assert both.returncode == 2 and b"standard input" in both.stderr


@pytest.mark.parametrize("value,message", [
    (r"ID:x\tSM:y", "starting with '@RG"),
    (r"@RG\tSM:y", "exactly one ID field, not 0"),
    (r"@RG\tID:x\tID:y", "exactly one ID field, not 2"),
    (r"@RG\tID:x\nSM:y", "line break"),
    ("@RG\tID:x\nSM:y", "line break"),
    (r"@RG\tID:x\tSM", "not a TAG:VALUE field"),
    (r"@RG\tID:x\tSM:a\tSM:b", "SM field twice"),
])
def test_bad_read_groups_are_refused(gkmap, tmp_path, value, message):
    code, err = gkmap("map", "-R", value, "-o", tmp_path / "o.sam", MEASLES, MEASLES_PAIR[0])
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "o.sam").exists()


@pytest.mark.parametrize("value", ["a\tb", "a\nb", "a\rb"])
def test_bad_comments_are_refused(gkmap, tmp_path, value):
    code, err = gkmap("map", "--comment", value, "-o", tmp_path / "o.sam", MEASLES, MEASLES_PAIR[0])
    assert code == 2 and "--comment" in err and err.count("\n") == 1, err


def test_help_shows_each_default_once_and_examples(capsys):
    from mapper.cli import main
    assert main(["map", "--help"]) == 0
    text = capsys.readouterr().out
    assert "(default: None)" not in text and "(default: False)" not in text and "(default: True)" not in text
    options = text.split("\n  -")
    assert all(block.count("(default:") <= 1 for block in options[1:] if "--threads" not in block)
    for shown in ("(default: 100000)", "(default: 300)", "(default: auto)", "(default: stdout)"):
        assert text.count(shown) == 1, shown
    examples = text[text.index("examples:"):]
    for example in ("REF.fa reads.fq.gz", "--pe", "-R '@RG", "--gpus", "REF.fa -"):
        assert example in examples
    assert text.rstrip().endswith(examples.rstrip())


@pytest.mark.parametrize("command", [["index"], ["filter"], ["kmers", "count"], ["kmers", "dump"],
                                     ["kmers", "histo"], ["kmers", "query"]])
def test_every_command_shows_defaults_once(capsys, command):
    """The other commands' help follows map's: no "(default: None)" or "(default: False)" and at most one
    default an option."""
    from mapper.cli import main
    assert main([*command, "--help"]) == 0
    text = capsys.readouterr().out
    assert "(default: None)" not in text and "(default: False)" not in text and "(default: True)" not in text, text
    assert all(block.count("(default:") <= 1 for block in text.split("\n  -")[1:]), text


@pytest.mark.parametrize("paired", [False, True], ids=["single", "paired"])
def test_distributed_runs_write_read_groups_and_comments(gkmap, tmp_path, paired):
    """-R and --comment on Dask workers (--local-cluster): the header and every record as in one process."""
    pytest.importorskip("distributed")
    reads = MEASLES_PAIR if paired else MEASLES_PAIR[:1]
    extra = ("-R", r"@RG\tID:x\tSM:y\tPL:ILLUMINA", "--comment", "c") + (("--pe",) if paired else ())
    outputs = {}
    for where in ((), ("--local-cluster", "2")):
        out = tmp_path / f"{len(where)}.sam"
        code, err = gkmap("map", *extra, *where, "-o", out, MEASLES, *reads)
        assert code == 0, err
        outputs[where] = [line for line in out.read_text().splitlines() if not line.startswith("@PG")]
    local, cluster = outputs.values()
    assert cluster == local
    assert "@RG\tID:x\tSM:y\tPL:ILLUMINA" in local and "@CO\tc" in local
    body = [line for line in local if not line.startswith("@")]
    assert body and all(line.endswith("\tRG:Z:x") or "\tRG:Z:x\t" in line for line in body)


def test_progress_bar_on_a_terminal_and_not_with_quiet(tmp_path):
    """The tqdm bar goes to stderr when it is a terminal (a pty here), and --quiet silences it; a run whose
    stderr is a file or a pipe shows none (the other tests)."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import termios
    shown = []
    for quiet in ([], ["--quiet"]):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # tqdm draws nothing in 0 columns
        subprocess.run([sys.executable, "-m", "mapper", "map", "--device", "cpu", *quiet, "-o", str(tmp_path / "o.sam"),
                        str(ROOT / "reference" / "measles_virus_Edmonston_K01711.1.fa"),
                        str(ROOT / "reference" / "measles_Hm2_HiSeq_R1.fastq.gz")],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, cwd=ROOT, check=True)
        os.close(slave)
        text = b""
        while select.select([master], [], [], 1)[0]:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the pty is closed once its output is read
                break
            if not chunk:
                break
            text += chunk
        os.close(master)
        shown.append("mapping:" in text.decode(errors="replace"))  # tqdm's desc; the run summary has no such word
    assert shown == [True, False]
