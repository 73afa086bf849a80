"""`gkmap map` writing BAM (issue #18): -o OUT.bam, --output-fmt bam on stdout, --sort, paired-end and Dask
runs. Each BAM must hold exactly the records of the SAM the same run writes (`samtools view` of it equals
the SAM's records), pass `samtools quickcheck`, and a sorted one must be `samtools sort`'s order and be
indexable. mapper/bam.py's encoder itself is tested against samtools byte for byte in test_bam.py."""
import gzip
import subprocess

import pytest

from conftest import MEASLES, MEASLES_PAIR, need_tool
from mapper.cli import main

RG = r"@RG\tID:x\tSM:y\tPL:ILLUMINA"


def samtools(*args):
    return subprocess.run([need_tool("samtools"), *map(str, args)], check=True, capture_output=True,
                          text=True).stdout


def records(sam_path):
    return [line for line in sam_path.read_text().splitlines() if not line.startswith("@")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, index_dir):
    """One SAM and the BAM outputs of the same measles run."""
    folder = tmp_path_factory.mktemp("bam")
    base = ["map", "--quiet", "--index", str(index_dir(MEASLES)), "-R", RG]
    for out, extra in (("a.sam", []), ("b.bam", []), ("c.bam", ["--sort", "--sort-memory", "1M"]),
                       ("d.out", ["--output-fmt", "bam"])):
        assert main(base + extra + ["-o", str(folder / out), str(MEASLES), str(MEASLES_PAIR[0])]) == 0
    return folder


def test_bam_holds_the_sam_records(runs):
    samtools("quickcheck", runs / "b.bam", runs / "d.out")
    want = records(runs / "a.sam")
    assert len(want) > 1000
    assert samtools("view", runs / "b.bam").splitlines() == want
    assert samtools("view", runs / "d.out").splitlines() == want  # --output-fmt wins over the name
    header = samtools("view", "-H", runs / "b.bam").splitlines()
    assert header[0] == "@HD\tVN:1.6\tSO:unsorted\tGO:query" and RG.replace(r"\t", "\t") in header


def test_sorted_bam_is_samtools_sort_order_and_indexable(runs, tmp_path):
    samtools("quickcheck", runs / "c.bam")
    samtools("sort", "-o", tmp_path / "ref.bam", runs / "b.bam")
    assert samtools("view", runs / "c.bam").splitlines() == samtools("view", tmp_path / "ref.bam").splitlines()
    assert samtools("view", "-H", runs / "c.bam").splitlines()[0] == "@HD\tVN:1.6\tSO:coordinate"
    samtools("index", runs / "c.bam")
    contig = samtools("view", "-H", runs / "c.bam").split("SN:")[1].split("\t")[0]
    assert int(samtools("view", "-c", runs / "c.bam", f"{contig}:1-5000")) > 0


def test_bam_on_stdout(index_dir, capfdbinary, runs):
    assert main(["map", "--quiet", "--index", str(index_dir(MEASLES)), "-R", RG, "--output-fmt", "bam",
                 str(MEASLES), str(MEASLES_PAIR[0])]) == 0
    out = capfdbinary.readouterr().out
    assert out[:4] == b"\x1f\x8b\x08\x04"   # a BGZF block
    assert subprocess.run([need_tool("samtools"), "view", "-"], input=out, capture_output=True,
                          check=True).stdout.decode().splitlines() == records(runs / "a.sam")


def test_paired_end_bam(index_dir, tmp_path):
    """The pairs' records as BAM; the side outputs (OUT_OEA.sam, OUT_DIVET.vh, named from OUT) as with SAM."""
    for name in ("sam", "bam"):
        (tmp_path / name).mkdir()
        out = tmp_path / name / f"p.{name}"
        assert main(["map", "--quiet", "--pe", "--index", str(index_dir(MEASLES)), "-o", str(out), str(MEASLES),
                     *map(str, MEASLES_PAIR)]) == 0
    assert samtools("view", tmp_path / "bam" / "p.bam").splitlines() == records(tmp_path / "sam" / "p.sam")
    assert sorted(p.name for p in (tmp_path / "bam").iterdir()) == ["p.bam", "p_DIVET.vh", "p_OEA.sam"]
    for side in ("p_DIVET.vh", "p_OEA.sam"):
        got, want = ((tmp_path / name / side).read_text().splitlines() for name in ("bam", "sam"))
        assert [x for x in got if not x.startswith("@PG")] == [x for x in want if not x.startswith("@PG")]


def test_dask_bam_equals_local(index_dir, tmp_path, runs):
    pytest.importorskip("distributed")
    assert main(["map", "--quiet", "--local-cluster", "2", "--index", str(index_dir(MEASLES)), "-R", RG,
                 "-o", str(tmp_path / "k.bam"), str(MEASLES), str(MEASLES_PAIR[0])]) == 0
    assert samtools("view", tmp_path / "k.bam").splitlines() == records(runs / "a.sam")


@pytest.mark.parametrize("args,message", [
    (["--sort", "-o", "x.sam"], "--sort writes a coordinate-sorted BAM"),
    (["--sort-memory", "100K", "-o", "x.bam"], "--sort-memory must be at least 1M"),
])
def test_bad_bam_options(gkmap, tmp_path, args, message):
    code, err = gkmap("map", *args[:-1], tmp_path / args[-1], MEASLES, MEASLES_PAIR[0])
    assert code == 2 and message in err and not list(tmp_path.iterdir()), err


@pytest.mark.parametrize("extra", [[], ["--sort", "--sort-memory", "1M"]], ids=["bam", "sorted"])
def test_a_failed_run_leaves_no_bam_and_no_temporary_file(gkmap, index_dir, tmp_path, extra):
    """A bad record after several batches (some already encoded, sorted runs already spilled beside the
    output): a one-line error, and the folder holds only what was there before (no OUT.bam, no temporary
    BAM, no sort run)."""
    reads = tmp_path / "reads.fq"
    with gzip.open(MEASLES_PAIR[0], "rt") as good:
        text = good.read()
    reads.write_text(text * 6 + "@bad\nACGT\n+\nII\n")  # ~2.7 MB of records: --sort-memory 1M spills runs
    code, err = gkmap("map", "--quiet", "--index", index_dir(MEASLES), "--batch-size", 200, *extra,
                      "-o", tmp_path / "out.bam", MEASLES, reads)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reads.fq"]


def test_format_benchmark_runs_every_format(tmp_path, index_dir):
    """scripts/bench_formats.py (issue #18's whole-command rates) on the measles reads: each format's line,
    each BAM checked against the SAM's records by the script itself."""
    import sys
    from pathlib import Path
    need_tool("samtools")
    reads = tmp_path / "r.fq"
    with gzip.open(MEASLES_PAIR[0], "rt") as src:
        reads.write_text("".join(line for _, line in zip(range(4000), src)))
    script = Path(__file__).resolve().parents[2] / "scripts" / "bench_formats.py"
    out = subprocess.run([sys.executable, str(script), str(MEASLES), str(reads), "--index", str(index_dir(MEASLES)),
                          "--device", "cpu", "-t", "1", "--repeat", "1", "--tmp", str(tmp_path)],
                         capture_output=True, text=True, check=True).stdout
    rows = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert sorted(rows) == ["bam", "sam", "sam-bare", "sorted", "view-b"], out
    assert all(line.endswith("records = sam") for line in rows.values()), out
    assert out.startswith("1,000 reads"), out
    # the bare SAM first: the full formats are still checked against full records
    out = subprocess.run([sys.executable, str(script), str(MEASLES), str(reads), "--index", str(index_dir(MEASLES)),
                          "--device", "cpu", "-t", "1", "--repeat", "1", "--tmp", str(tmp_path), "--formats",
                          "sam-bare,sam"], capture_output=True, text=True, check=True).stdout
    assert [line.split()[-1] for line in out.splitlines()[2:]] == ["sam", "sam"], out


def test_bam_blocks_made_by_render_processes(tmp_path, index_dir, monkeypatch):
    """With render processes an unsorted BAM's records are encoded and compressed by the processes
    (render.SpilledText with bgzf) and appended by the sink; a sorted BAM still gets SAM text. Either way
    `samtools view` gives the SAM of an inline run, and the BAM passes quickcheck."""
    import mapper.sinks as sinks
    from mapper.options import MapOptions
    from mapper.runners import local, map_reads
    monkeypatch.setattr(local, "_early_processes", lambda opts: True)
    appended = []
    real = sinks._bam_write
    monkeypatch.setattr(sinks, "_bam_write", lambda bam, text: appended.append(getattr(text, "bgzf", False))
                        or real(bam, text))
    common = dict(reference=str(MEASLES), reads=str(MEASLES_PAIR[0]), device="cpu", quiet=True,
                  index_dir=str(index_dir(MEASLES)), batch_size=500)
    map_reads(MapOptions(**common, output=str(tmp_path / "a.sam"), threads=1))
    map_reads(MapOptions(**common, output=str(tmp_path / "b.bam"), threads=3))
    assert appended and all(appended), "the processes should hand over BGZF blocks"
    appended.clear()
    map_reads(MapOptions(**common, output=str(tmp_path / "c.bam"), threads=3, sort=True))
    assert appended and not any(appended), "a sorted BAM needs the records as text"
    samtools("quickcheck", tmp_path / "b.bam", tmp_path / "c.bam")
    want = records(tmp_path / "a.sam")
    assert len(want) > 1000 and samtools("view", tmp_path / "b.bam").splitlines() == want
    assert sorted(samtools("view", tmp_path / "c.bam").splitlines()) == sorted(want)
