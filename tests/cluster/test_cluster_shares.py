"""The share path of a local-cluster run (mapper/runners/cluster.py, issue #22): each worker reads its own byte range
of a plain FASTQ file and writes a part file that the client copies into the output. The SAM must be the
single process's byte for byte (the @PG line aside), and any error of a share must come out as the single
process words it (the run goes again on the chunk path).
"""
import gzip
import re

import pytest

from cli_checks import without_pg
from conftest import SHIGELLA, SHIGELLA_R1
from mapper.runners.cluster import SHARES_PER_WORKER, record_start, share_cuts


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The Shigella R1 reads as a plain FASTQ file (the share path reads byte ranges of it)."""
    path = tmp_path_factory.mktemp("plain") / "r1.fq"
    path.write_bytes(gzip.decompress(SHIGELLA_R1.read_bytes()))
    return path


@pytest.fixture(scope="module")
def single(tmp_path_factory, index_dir, plain):
    from mapper.cli import main
    out = tmp_path_factory.mktemp("single") / "out.sam"
    assert main(["map", "--quiet", "--index", str(index_dir(SHIGELLA)), "-o", str(out), str(SHIGELLA),
                 str(plain)]) == 0
    return out


def shares_line(err):
    found = re.search(r"cluster: (\d+) shares of the reads file.*shares per worker: ([^;]+); retried shares: (\d+)",
                      err)
    assert found, err
    return int(found.group(1)), found.group(2)


@pytest.mark.parametrize("extra", [(), ("-t", 2)])
def test_shares_equal_single_process(gkmap, index_dir, tmp_path, plain, single, extra):
    code, err = gkmap("map", "--index", index_dir(SHIGELLA), "-o", tmp_path / "out.sam", "--local-cluster", 2,
                      *extra, SHIGELLA, plain)
    assert code == 0, err
    assert without_pg(tmp_path / "out.sam") == without_pg(single)
    shares, per_worker = shares_line(err)
    assert shares == 2 * SHARES_PER_WORKER and "worker0" in per_worker and "worker1" in per_worker, err
    assert [p.name for p in tmp_path.iterdir()] == ["out.sam"]  # no part file left behind


def test_chunk_reads_keeps_the_chunk_path(gkmap, index_dir, tmp_path, plain, single):
    code, err = gkmap("map", "--index", index_dir(SHIGELLA), "-o", tmp_path / "out.sam", "--local-cluster", 2,
                      "--chunk-reads", 5000, SHIGELLA, plain)
    assert code == 0, err
    assert without_pg(tmp_path / "out.sam") == without_pg(single)
    assert "chunks per worker" in err and "shares" not in err, err


def test_a_bad_record_in_a_later_share_is_reported_as_by_one_process(gkmap, index_dir, tmp_path, plain):
    """A truncated quality line in the last quarter: the share's block parser is unsure, the run goes through
    the client (dnaio), and the error and exit code are the single process's; no output is left."""
    lines = plain.read_text().splitlines(keepends=True)
    at = 4 * (len(lines) // 4 * 7 // 32) + 3
    lines[at] = lines[at][:10] + "\n"
    bad = tmp_path / "bad.fq"
    bad.write_text("".join(lines))
    expected = gkmap("map", "--index", index_dir(SHIGELLA), "-o", tmp_path / "one.sam", SHIGELLA, bad)
    code, err = gkmap("map", "--index", index_dir(SHIGELLA), "-o", tmp_path / "out.sam", "--local-cluster", 2,
                      SHIGELLA, bad)
    assert expected[0] != 0 and code == expected[0], err
    assert err.strip().splitlines()[-1] == expected[1].strip().splitlines()[-1]
    assert not (tmp_path / "out.sam").exists()


def test_record_start_skips_quality_lines_that_start_with_at(tmp_path):
    records = b"@r1\nACGT\n+\n@@II\n@r2\nACGA\n+r2\n@III\n@r3\nAC\n+\nII"  # no final newline
    path = tmp_path / "x.fq"
    path.write_bytes(records)
    size = len(records)
    starts = [0, records.index(b"@r2"), records.index(b"@r3")]
    for offset in range(size + 1):
        expected = next((s for s in starts if s >= offset), size)
        assert record_start(path, offset, size) == expected, offset
    assert share_cuts(str(path), 3) == [0, starts[1], starts[2], size]
    assert share_cuts(str(path), 1) == [0, size]


def test_share_cuts_refuse_what_the_chunk_path_reads(tmp_path):
    fasta = tmp_path / "x.fa"
    fasta.write_bytes(b">r1\nACGT\n")
    packed = tmp_path / "x.fq.gz"
    packed.write_bytes(gzip.compress(b"@r1\nACGT\n+\nIIII\n"))
    assert share_cuts(str(fasta), 2) is None and share_cuts(str(packed), 2) is None
