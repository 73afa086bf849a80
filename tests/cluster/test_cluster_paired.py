"""Paired-end runs (--pe/--mp) spread over Dask workers (issues #9 and #10) write the single-process outputs
byte for byte (OUT.sam, OUT_OEA.sam, OUT_DIVET.vh; the @PG line aside) and the same summary of pairs,
with the insert size estimated as a single process estimates it, with a worker killed while it maps or
while it pairs, and with files that do not pair refused as a single process refuses them.

The cluster these tests own is conftest.py's (worker processes on loopback); the worker-side fault functions
come from cluster_faults.py (shipped by value), as for test_cluster.py.
"""
import re

import pytest

from cli_checks import one_line_error, without_pg
from cluster_faults import chunks_per_worker, kill_worker_on_first_call, raise_on_first_call
from conftest import MEASLES, MEASLES_PAIR, SHIGELLA, SHIGELLA_PAIR
from mapper import paired
from mapper.options import MapOptions
from mapper.runners import map_reads
from paired_common import estimated_range, kind, single_end, write_pairs

OUTPUTS = ("out.sam", "out_OEA.sam", "out_DIVET.vh")


def summary_lines(err):
    """The run's insert-size line (absent with --min and --max), the counts of its summary of reads (up to
    the timings) and its summary of read pairs."""
    return re.findall(r"insert size from .*|\d+ reads: .* verified|\d+ read pairs: .*", err)


def assert_same_outputs(folder, want_folder):
    for name in OUTPUTS:
        assert without_pg(folder / name) == without_pg(want_folder / name), name


def assert_same_run(folder, err, want_folder, want_err):
    assert_same_outputs(folder, want_folder)
    assert summary_lines(err) == summary_lines(want_err)


@pytest.fixture(scope="module")
def single_pairs(tmp_path_factory, index_dir):
    """The single-process outputs of the Shigella read pairs (TLEN range estimated) and their PairCounters."""
    out = tmp_path_factory.mktemp("single_pe")
    opts = MapOptions(str(SHIGELLA), str(SHIGELLA_PAIR[0]), reads2=str(SHIGELLA_PAIR[1]), paired="pe", quiet=True,
                      index_dir=str(index_dir(SHIGELLA)), output=str(out / "out.sam"))
    return out, map_reads(opts)


def shigella_args(index_dir, tmp_path, *extra):
    return ("map", "--pe", "--index", index_dir(SHIGELLA), "-o", tmp_path / "out.sam", "--chunk-reads", 2000,
            *extra, SHIGELLA, *SHIGELLA_PAIR)


def assert_equals_single(tmp_path, err, single_pairs):
    """The three outputs of the single process, its summary of pairs (with the TLEN range), 12 chunks."""
    folder, pairs = single_pairs
    assert_same_outputs(tmp_path, folder)
    assert summary_lines(err)[1:] == summary_lines(f"{pairs.mates.summary()}\n{pairs.summary()}"), err
    assert pairs.concordant > 9000 and pairs.discordant > 0 and pairs.oea > 3000  # every output has records
    per_worker, retried = chunks_per_worker(err)
    assert sum(per_worker.values()) == 12, err  # 22,084 pairs in chunks of 2,000
    return per_worker, retried


def test_local_cluster_equals_single_process(gkmap, index_dir, tmp_path, single_pairs):
    code, err = gkmap(*shigella_args(index_dir, tmp_path, "--local-cluster", 2))
    assert code == 0, err
    per_worker, retried = assert_equals_single(tmp_path, err, single_pairs)
    assert sorted(per_worker) == ["worker0", "worker1"] and all(per_worker.values()) and retried == 0, err


@pytest.mark.parametrize("fault, where", [
    (kill_worker_on_first_call, "map_on_worker"),
    (kill_worker_on_first_call, "render_on_worker"),  # it dies holding mapped chunks: they are mapped again elsewhere
    (raise_on_first_call, "render_on_worker"),
])
def test_fault_is_retried_without_losing_pairs(gkmap, index_dir, tmp_path, single_pairs, client, fault, where):
    victim = sorted(client.nthreads())[0]
    client.run(fault, where, workers=[victim])
    code, err = gkmap(*shigella_args(index_dir, tmp_path, "--scheduler", client.scheduler.address))
    assert code == 0, err
    _, retried = assert_equals_single(tmp_path, err, single_pairs)
    assert retried >= 1, err


def confident_prefix(pairs1, pairs2, wanted):
    """The number of first pairs that hold `wanted` confident pairs (the twin's rule: each mate one locus,
    facing each other on one contig), or all of them."""
    count = 0
    for n, ((_, x, _), (_, y, _)) in enumerate(zip(pairs1, pairs2), 1):
        count += len(x) == 1 and len(y) == 1 and kind(x[0], y[0], "pe", 0, float("inf")) == "C"
        if count == wanted:
            return n
    return len(pairs1)


@pytest.mark.parametrize("scan, confident", [(700, None), (None, 400), (None, None)])
def test_insert_size_is_estimated_from_the_same_pairs(monkeypatch, gkmap, index_dir, tmp_path, client, scan,
                                                      confident):
    """The range comes from the first ESTIMATE_PAIRS confident pairs among the first ESTIMATE_SCAN pairs,
    whatever the batches (500 pairs) or chunks (300): the twin's estimate over exactly those pairs, the same
    outputs. Both limits fall inside a batch and inside a chunk."""
    index = index_dir(MEASLES)
    if scan:
        monkeypatch.setattr(paired, "ESTIMATE_SCAN", scan)
    if confident:
        monkeypatch.setattr(paired, "ESTIMATE_PAIRS", confident)
    pairs1, pairs2 = (single_end(gkmap, index, MEASLES, reads, tmp_path / f"se{k}.sam")
                      for k, reads in enumerate(MEASLES_PAIR))
    taken = scan or confident_prefix(pairs1, pairs2, confident)
    lo, hi = estimated_range(pairs1[:taken], pairs2[:taken], "pe")
    runs = {}
    for name, extra in (("single", ("--batch-size", 500)),
                        ("cluster", ("--chunk-reads", 300, "--scheduler", client.scheduler.address))):
        (tmp_path / name).mkdir()
        code, err = gkmap("map", "--pe", "--index", index, "-o", tmp_path / name / "out.sam", *extra,
                          MEASLES, *MEASLES_PAIR)
        assert code == 0, err
        assert f"concordant pairs have {lo} <= TLEN <= {hi}" in err, (taken, err)
        runs[name] = err
    assert_same_run(tmp_path / "cluster", runs["cluster"], tmp_path / "single", runs["single"])
    if confident:
        assert f"from the first {confident} uniquely mapped" in runs["cluster"]


def test_mate_pairs_with_a_given_range(gkmap, index_dir, tmp_path, client):
    """--mp, --min/--max given (nothing estimated), -n and --maxdis: the single-process outputs."""
    runs = {}
    for name, extra in (("single", ()), ("cluster", ("--chunk-reads", 400, "--scheduler", client.scheduler.address))):
        (tmp_path / name).mkdir()
        code, err = gkmap("map", "--mp", "--index", index_dir(MEASLES), "-o", tmp_path / name / "out.sam",
                          "--min", 300, "--max", 420, "-n", 1, "--maxdis", 2, *extra, MEASLES, *MEASLES_PAIR)
        assert code == 0, err
        runs[name] = err
    assert_same_run(tmp_path / "cluster", runs["cluster"], tmp_path / "single", runs["single"])
    assert "insert size from" not in runs["cluster"]


@pytest.mark.parametrize("names1,names2,extra,where", [
    (["p1", "p2", "p3"], ["p1", "p2"], ("--min", 1, "--max", 500),
     ("a_1.fq", "record 3", "'p3' has no mate", "a_2.fq ends after read 2")),
    (["p1/1", "p2/1", "p3/1"], ["p1/2", "q2/2", "p3/2"], ("--min", 1, "--max", 500),
     ("a_2.fq", "record 2", "'q2/2' is not the mate of read 'p2/1'")),
    (["p1", "p2"], ["p1", "p2"], (), ("cannot estimate the insert size: only 0 read pairs", "give --min and --max")),
])
def test_pairs_refused_as_a_single_process_refuses_them(gkmap, index_dir, tmp_path, client, names1, names2, extra,
                                                        where):
    r1, r2 = write_pairs(tmp_path, names1, names2)
    code, err = gkmap("map", "--pe", "--quiet", "--index", index_dir(MEASLES), "--chunk-reads", 1, *extra,
                      "--scheduler", client.scheduler.address, "-o", tmp_path / "out.sam", MEASLES, r1, r2)
    assert code == (2 if not extra else 1), err
    one_line_error(err, *where)
    assert not any(tmp_path.glob("out*"))
