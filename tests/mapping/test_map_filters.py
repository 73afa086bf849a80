"""The filter only saves work: `--filter gatekeeper` writes the same SAM as `--filter none` (the @PG line
aside); the published filter may lose mappings but never invents one; batch boundaries and host workers
change nothing."""
import gzip
import subprocess
import sys

import numpy as np
import pytest

from conftest import READS, SHIGELLA
from oracle import read_sam


@pytest.fixture(scope="module")
def shigella_reads(tmp_path_factory):
    path = tmp_path_factory.mktemp("reads") / "r.fq"
    with gzip.open(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", "rt") as f:
        path.write_text("".join(f.readline() for _ in range(4 * 3000)))
    return path


def body(path):
    return [l for l in path.read_text().splitlines() if not l.startswith("@PG")]


def run_map(gkmap, index_dir, tmp_path, reads, *extra):
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}.sam"
    code, err = gkmap("map", "--quiet", "--index", index_dir(SHIGELLA), "-o", out, *extra, SHIGELLA, reads)
    assert code == 0, err
    return out


@pytest.mark.parametrize("e", [None, "3", "9"])
def test_improved_filter_changes_nothing(gkmap, index_dir, tmp_path, shigella_reads, e):
    extra = ["-e", e] if e else []
    base = run_map(gkmap, index_dir, tmp_path, shigella_reads, *extra)
    filtered = run_map(gkmap, index_dir, tmp_path, shigella_reads, "--filter", "gatekeeper", *extra)
    assert body(base) == body(filtered)


def test_faithful_filter_only_loses(gkmap, index_dir, tmp_path, shigella_reads):
    base = run_map(gkmap, index_dir, tmp_path, shigella_reads, "-e", "9")
    faithful = run_map(gkmap, index_dir, tmp_path, shigella_reads, "-e", "9", "--filter", "gatekeeper-faithful")
    key = lambda r: (r["qname"], r["rname"], r["pos"], r["flag"] & 16, r["cigar"], r["NM"])
    _, a = read_sam(base)
    _, b = read_sam(faithful)
    assert {key(r) for r in b if not r["flag"] & 4} <= {key(r) for r in a if not r["flag"] & 4}
    assert sorted(r["qname"] for r in a if not r["flag"] & 256) == sorted(r["qname"] for r in b if not r["flag"] & 256)


@pytest.mark.parametrize("batch", ["1", "7", "1000"])
def test_batch_size_changes_nothing(gkmap, index_dir, tmp_path, shigella_reads, batch):
    base = run_map(gkmap, index_dir, tmp_path, shigella_reads)
    other = run_map(gkmap, index_dir, tmp_path, shigella_reads, "--batch-size", batch)
    assert body(base) == body(other)


@pytest.mark.parametrize("batch,threads", [("700", "3"), ("1", "2")])
def test_host_workers_change_nothing(gkmap, index_dir, tmp_path, shigella_reads, batch, threads):
    """SAM and --unmapped rendered by worker processes (mapper/render.py), slice by slice, are the inline
    run's, byte for byte and in input order."""
    base = run_map(gkmap, index_dir, tmp_path, shigella_reads, "-t", "1", "--unmapped", tmp_path / "u1.fq")
    other = run_map(gkmap, index_dir, tmp_path, shigella_reads, "-t", threads, "--batch-size", batch,
                    "--unmapped", tmp_path / "u2.fq")
    assert body(base) == body(other)
    assert (tmp_path / "u1.fq").read_bytes() == (tmp_path / "u2.fq").read_bytes()
    assert (tmp_path / "u1.fq").stat().st_size > 0


def test_host_workers_to_a_pipe(index_dir, tmp_path, shigella_reads):
    """Worker processes' SAM reaches standard output (a pipe, copied by os.sendfile) whole and in order."""
    want = tmp_path / "want.sam"
    command = [sys.executable, "-m", "mapper", "map", "--quiet", "--index", str(index_dir(SHIGELLA))]
    subprocess.run(command + ["-o", str(want), str(SHIGELLA), str(shigella_reads)], check=True)
    got = subprocess.run(command + ["-t", "3", "--batch-size", "500", str(SHIGELLA), str(shigella_reads)],
                         check=True, capture_output=True, text=True).stdout
    assert [l for l in got.splitlines() if not l.startswith("@PG")] == body(want)


def test_dump_candidates_feeds_gkmap_filter(gkmap, index_dir, tmp_path, shigella_reads):
    """--dump-candidates writes one pair per candidate window; the published filter run on that file by
    `gkmap filter` accepts exactly the windows the mapper's faithful filter let through."""
    dump = tmp_path / "cands.txt"
    code, err = gkmap("map", "-e", "6", "--filter", "gatekeeper-faithful", "--index", index_dir(SHIGELLA),
                      "--dump-candidates", dump, "-o", tmp_path / "o.sam", SHIGELLA, shigella_reads)
    assert code == 0, err
    windows = int(err.split(" candidate windows")[0].rsplit("; ", 1)[1])
    verified = int(err.split(" verified")[0].rsplit(", ", 1)[1])
    lines = dump.read_text().splitlines()
    assert len(lines) == windows > 1000
    assert all(len(a) == len(b) == 150 for a, b in (l.split("\t") for l in lines))
    decisions = tmp_path / "decisions.tsv"
    assert gkmap("filter", "--quiet", "--filter", "gatekeeper-faithful", "-e", "6", "--device", "cpu", "-o", decisions,
                 dump)[0] == 0
    accepted = sum(l.split("\t")[0] == "1" for l in decisions.read_text().splitlines())
    assert accepted == verified < windows


def test_candidate_pairs_are_written_in_pieces(index_dir, tmp_path, shigella_reads):
    """--dump-candidates' text goes to its writer in pieces of consecutive candidates (windows.DUMP_BYTES),
    never a batch's at once: the pieces joined are the batch's pair lines, each piece holds at most its
    bound plus one line, and reads of several lengths (lines put back in candidate order across the length
    groups) change neither."""
    from mapper.backends.cpu import CpuBackend
    from mapper.filters.windows import candidate_pair_texts, candidate_pairs
    from mapper.index import load_index
    from mapper.reads import read_batches
    from mapper.seeding import strand_rows
    lines = shigella_reads.read_text().splitlines()[:4 * 1000]
    for i in range(0, len(lines), 4):  # every third read cut to 120 bases, every fifth to 90
        cut = 90 if i // 4 % 5 == 0 else 120 if i // 4 % 3 == 0 else None
        lines[i + 1], lines[i + 3] = lines[i + 1][:cut], lines[i + 3][:cut]
    mixed = tmp_path / "mixed.fq"
    mixed.write_text("\n".join(lines) + "\n")
    index = load_index(str(SHIGELLA), index_dir(SHIGELLA))
    batch = next(read_batches(str(mixed), 1000))
    rows = strand_rows(batch.codes(), batch.starts, np.full(len(batch), 4))
    cands, _ = CpuBackend().seed(rows, index)
    whole = candidate_pairs(rows, cands, index.reference)
    n = whole.count("\n")
    assert n == len(cands) > 500 and len({len(line) for line in whole.splitlines()}) == 3
    longest = 2 * 150 + 2
    for bound in (1, longest, 7 * longest + 11, 1 << 30):
        pieces = list(candidate_pair_texts(rows, cands, index.reference, bound))
        assert "".join(pieces) == whole
        assert all(len(piece) <= bound + longest for piece in pieces)
        assert len(pieces) >= len(whole) // (bound + longest)  # no piece far below its bound
    assert len(list(candidate_pair_texts(rows, cands, index.reference, 1))) == n  # a line a piece
    assert len(list(candidate_pair_texts(rows, cands, index.reference, 1 << 30))) == 1


def test_dump_in_small_pieces_is_the_same_file(gkmap, index_dir, tmp_path, shigella_reads, monkeypatch):
    """The dump's pieces (windows.DUMP_BYTES: here about 13 lines each) reach the file in their order: the
    same bytes as the dump in one piece a batch."""
    from mapper.filters import windows
    files = []
    for piece_bytes in (windows.DUMP_BYTES, 4096):
        monkeypatch.setattr(windows, "DUMP_BYTES", piece_bytes)
        dump = tmp_path / f"cands{piece_bytes}.txt"
        code, err = gkmap("map", "--quiet", "--device", "cpu", "-e", "6", "--batch-size", "500", "--index",
                          index_dir(SHIGELLA), "--dump-candidates", dump, "-o", tmp_path / "o.sam", SHIGELLA,
                          shigella_reads)
        assert code == 0, err
        files.append(dump.read_bytes())
    assert files[0] == files[1] and files[0].count(b"\n") > 3000
