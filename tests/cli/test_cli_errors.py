"""Bad input: one-line error naming the file (and line/record), non-zero exit, no traceback, no partial
output. And the bookkeeping promise: every input read appears exactly once as primary or unmapped."""
import gzip
import json
import os
import subprocess
import sys

import pytest

from cli_checks import one_line_error
from conftest import MEASLES, READS, SHIGELLA
from oracle import read_sam

GOOD = "@r1\nACGTACGTTAGCTAGCTAGGATCCAGT\n+\nIIIIIIIIIIIIIIIIIIIIIIIIIII\n"


@pytest.fixture
def mapped(gkmap, index_dir, tmp_path):
    """Map `reads` (a string, written to a file) to measles; returns (code, stderr, output path)."""
    def run(text, *extra, name="reads.fq", compress=False):
        path = tmp_path / name
        data = text.encode()
        path.write_bytes(gzip.compress(data) if compress else data)
        out = tmp_path / "out.sam"
        code, err = gkmap("map", "--quiet", "--index", index_dir(MEASLES), "-o", out, *extra, MEASLES, path)
        return code, err, out
    return run


def test_missing_reference(gkmap, tmp_path):
    code, err = gkmap("map", "--quiet", "--index", tmp_path / "x", tmp_path / "nope.fa", READS / "measles_Hm2_HiSeq_R1.fastq.gz")
    assert code == 1
    one_line_error(err, "nope.fa", "no such file")


def test_missing_reads(gkmap, index_dir, tmp_path):
    code, err = gkmap("map", "--index", index_dir(MEASLES), MEASLES, tmp_path / "none.fq")
    assert code == 1
    one_line_error(err, "none.fq", "no such file")


def test_empty_reads(mapped):
    code, err, out = mapped("")
    assert code == 1
    one_line_error(err, "reads.fq", "no reads")
    assert not out.exists()


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_truncated_fastq_names_file_line_record(mapped, cut):
    """A file that ends inside the second record: the error names the file, a line and record 2."""
    lines = (GOOD + GOOD.replace("r1", "r2")).splitlines()[:4 + cut]
    code, err, out = mapped("\n".join(lines) + "\n")
    assert code == 1
    one_line_error(err, "reads.fq", "line", "(record 2)")
    assert not out.exists(), "a partial SAM was left behind"


def test_quality_length_mismatch(mapped):
    code, err, out = mapped(GOOD + "@r2\nACGTACGTACGTACGTACGTACGTACGT\n+\nIII\n", compress=True, name="reads.fq.gz")
    assert code == 1
    one_line_error(err, "reads.fq.gz", "line 8", "record 2")
    assert not out.exists()


def test_not_fastq(mapped):
    code, err, _ = mapped("this is not a read file\n")
    assert code == 1
    one_line_error(err, "reads.fq")


@pytest.mark.parametrize("e", ["26", "-1"])
def test_e_out_of_range(mapped, e):
    code, err, _ = mapped(GOOD, "-e", e)
    assert code == 2
    one_line_error(err, "-e")


def test_e_more_than_quarter_of_read(mapped):
    code, err, _ = mapped(GOOD, "-e", "7")  # 27 bp read: 7 > 27/4
    assert code == 2
    one_line_error(err, "-e 7", "r1", "record 1")


def test_index_of_another_version(gkmap, tmp_path):
    folder = tmp_path / "idx"
    assert gkmap("index", "--quiet", "--index", folder, MEASLES)[0] == 0
    meta = json.loads((folder / "meta.json").read_text())
    meta["format_version"] = 999
    (folder / "meta.json").write_text(json.dumps(meta))
    code, err = gkmap("map", "--index", folder, MEASLES, READS / "measles_Hm2_HiSeq_R1.fastq.gz")
    assert code == 1
    one_line_error(err, "version 999", "gkmap index")


@pytest.mark.parametrize("device", ["cpu", "cuda", "auto"])
def test_index_error_comes_before_the_device(gkmap, tmp_path, device):
    """The index opens in a thread while the backend starts (pipeline._open_index_and_backend): a damaged
    index is still the error reported, on a machine with a GPU or without one (where `--device cuda` fails
    too), and a missing reference before either."""
    folder = tmp_path / "idx"
    assert gkmap("index", "--quiet", "--index", folder, MEASLES)[0] == 0
    (folder / "meta.json").write_text("{")
    code, err = gkmap("map", "--device", device, "--index", folder, MEASLES, READS / "measles_Hm2_HiSeq_R1.fastq.gz")
    assert code == 1
    one_line_error(err, str(folder))
    code, err = gkmap("map", "--device", device, "--index", folder, tmp_path / "nope.fa",
                      READS / "measles_Hm2_HiSeq_R1.fastq.gz")
    assert code == 1
    one_line_error(err, "nope.fa", "no such file")


def test_a_broken_compiler_is_one_line(gkmap, index_dir, tmp_path, monkeypatch):
    """The host kernels are compiled on a machine's first run (kernel cache empty): a g++ that fails is an
    installation problem, reported as one line naming the compiler and the kernel (exit 1, no output), not
    a traceback."""
    from mapper.device import host
    tools = tmp_path / "bin"
    tools.mkdir()
    fake = tools / "g++"
    fake.write_text("#!/bin/sh\necho 'x.cpp:1:2: fatal error: the compiler is broken' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    host._library.cache_clear()
    try:
        out = tmp_path / "out.sam"
        code, err = gkmap("map", "--device", "cpu", "--index", index_dir(MEASLES), "-o", out, MEASLES,
                          READS / "measles_Hm2_HiSeq_R1.fastq.gz")
    finally:
        host._library.cache_clear()
    assert code == 1 and not out.exists()
    one_line_error(err, "g++ could not compile kernels/", "the compiler is broken")


def test_index_of_another_reference(gkmap, index_dir, tmp_path):
    other = tmp_path / "other.fa"
    other.write_text(">x\n" + "ACGT" * 100 + "\n")
    code, err = gkmap("map", "--index", index_dir(MEASLES), other, READS / "measles_Hm2_HiSeq_R1.fastq.gz")
    assert code == 1
    one_line_error(err, "another reference")


def test_ws_out_of_range(gkmap, tmp_path):
    code, err = gkmap("index", "--ws", "9", "--index", tmp_path / "i", MEASLES)
    assert code == 2
    one_line_error(err, "--ws")


def test_bad_reference_fasta(gkmap, tmp_path):
    bad = tmp_path / "bad.fa"
    bad.write_text("ACGT\n")
    code, err = gkmap("index", "--index", tmp_path / "i", bad)
    assert code == 1
    one_line_error(err, "bad.fa")


def test_reads_with_n_lowercase_and_iupac(mapped, tmp_path):
    """Lower case maps like upper case; IUPAC letters count as mismatches; more Ns than e: unmapped."""
    seq = "TTGCTTAATTCTATACTCATCCTCTACAGGGAGTTGGCAAGATTCAAAGACAACCAAAGAAGTCAACAAGGGATGTTCCACGCTTACCCCGTATTGGTAAG"
    q = "I" * len(seq)
    many_n = seq[:10] + "N" * 6 + seq[16:]
    reads = (f"@upper\n{seq}\n+\n{q}\n@lower\n{seq.lower()}\n+\n{q}\n@iupac\n{seq[:50]}R{seq[51:]}\n+\n{q}\n"
             f"@manyN\n{many_n}\n+\n{q}\n")
    code, err, out = mapped(reads)
    assert code == 0, err
    _, recs = read_sam(out)
    by = {r["qname"]: r for r in recs}
    assert by["upper"]["pos"] == by["lower"]["pos"] == 15399 and by["upper"]["NM"] == by["lower"]["NM"] == 0
    assert by["lower"]["seq"] == seq
    assert by["iupac"]["NM"] == 1 and by["iupac"]["seq"][50] == "R"
    assert by["manyN"]["flag"] == 4  # 6 Ns > e = 5


def test_every_read_once_and_unmapped_file(gkmap, index_dir, tmp_path):
    out, un = tmp_path / "o.sam", tmp_path / "un.fq"
    reads = READS / "measles_Hm2_HiSeq_R1.fastq.gz"
    code, err = gkmap("map", "--index", index_dir(MEASLES), "-o", out, "--unmapped", un, MEASLES, reads)
    assert code == 0
    assert "1499 reads" in err
    _, recs = read_sam(out)
    primaries = [r["qname"] for r in recs if not r["flag"] & 256]
    assert len(primaries) == len(set(primaries)) == 1499
    unmapped = {r["qname"] for r in recs if r["flag"] & 4}
    names = [l[1:].strip() for i, l in enumerate(un.read_text().splitlines()) if i % 4 == 0]
    assert set(names) == unmapped and len(names) == len(unmapped) > 0


def test_best_and_n(gkmap, index_dir, tmp_path):
    """On Shigella reads (IS elements: many multi-mapped reads)."""
    reads = tmp_path / "r.fq"
    with gzip.open(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", "rt") as f:
        reads.write_text("".join(f.readline() for _ in range(4 * 1500)))
    base, best, capped = (tmp_path / f"{n}.sam" for n in ("a", "b", "c"))
    args = ["map", "--quiet", "--index", index_dir(SHIGELLA), SHIGELLA, reads]
    for out, extra in ((base, []), (best, ["--best"]), (capped, ["-n", "1"])):
        assert gkmap(*args[:1], *extra, "-o", out, *args[1:])[0] == 0
    _, a = read_sam(base)
    _, b = read_sam(best)
    _, c = read_sam(capped)
    multi = {r["qname"] for r in a if r["flag"] & 256}
    assert len(multi) > 10, "expected multi-mapped reads"
    assert len(b) < len(a)
    assert len(c) == 1500 and not any(r["flag"] & 256 for r in c)
    by_a = {}
    for r in a:
        by_a.setdefault(r["qname"], []).append(r)
    for r in b:
        if not r["flag"] & 4:
            assert r["NM"] == by_a[r["qname"]][0]["NM"]
            assert r["NH"] == len(by_a[r["qname"]])  # NH counts loci before any cap


def test_stdout_and_python_m(index_dir, tmp_path):
    env = dict(os.environ, PYTHONWARNINGS="error")
    done = subprocess.run([sys.executable, "-m", "mapper", "map", "--quiet", "--index", str(index_dir(MEASLES)),
                           str(MEASLES), str(READS / "measles_Hm2_HiSeq_R1.fastq.gz")],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("@HD\tVN:1.6")
    assert sum(1 for l in done.stdout.splitlines() if not l.startswith("@")) >= 1499
    assert done.stderr == ""


def test_read_only_reference_folder_uses_cache(gkmap, tmp_path, monkeypatch):
    folder = tmp_path / "ro"
    folder.mkdir()
    ref = folder / "m.fa"
    ref.write_text(">m\n" + "ACGTTGCAAGCT" * 50 + "\n")
    folder.chmod(0o555)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    try:
        code, err = gkmap("index", ref)
        assert code == 0, err
        assert sorted(os.listdir(folder)) == ["m.fa"], "wrote beside a read-only input"
        assert list((tmp_path / "cache" / "gkmap").glob("*/meta.json"))
    finally:
        folder.chmod(0o755)


def test_short_and_empty_reads_come_out_unmapped(mapped):
    code, err, out = mapped("@short\nACGT\n+\nIIII\n@empty\n\n+\n\n" + GOOD)
    assert code == 0, err
    _, recs = read_sam(out)
    assert [(r["qname"], r["flag"], r["seq"]) for r in recs[:2]] == [("short", 4, "ACGT"), ("empty", 4, "*")]
    assert recs[2]["qname"] == "r1"


def test_reads_from_a_pipe(gkmap, index_dir, tmp_path):
    """A FIFO (what a shell's process substitution gives) is a valid reads input; a folder is not."""
    import threading
    fifo = tmp_path / "reads.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(GOOD))  # blocks until gkmap opens the pipe
    writer.start()
    out = tmp_path / "o.sam"
    code, err = gkmap("map", "--quiet", "--index", index_dir(MEASLES), "-o", out, MEASLES, fifo)
    writer.join()
    assert code == 0, err
    assert read_sam(out)[1][0]["qname"] == "r1"
    code, err = gkmap("map", "--quiet", "--index", index_dir(MEASLES), MEASLES, tmp_path)
    assert code == 1
    one_line_error(err, "is a folder")
