"""One run spread over Dask workers (issue #10) writes the single-process SAM byte for byte (the @PG line
aside), with faults injected into the workers: a worker killed while it maps a chunk, a task that raises,
a worker whose gkmap reads another index format version.

The clusters are local, on loopback, with worker processes (processes=True, as on a real host). The fault
tests run `gkmap map --scheduler ADDRESS` against a cluster the test owns, so that it can reach into one
worker (Client.run) before the run: the worker-side functions are shipped by value (cloudpickle), since
the workers cannot import this test module.
"""
import sys

import cloudpickle
import pytest

from cli_checks import without_pg
from cluster_faults import chunks_per_worker, kill_worker_on_first_call, raise_on_first_call
from conftest import SHIGELLA, SHIGELLA_R1
from mapper.runners.cluster import gpu_environments
from mapper.options import MapOptions
from mapper.runners import one_local_gpu

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def single_sam(tmp_path_factory, index_dir):
    """The single-process SAM, unmapped reads and candidate pairs of the Shigella reads."""
    from mapper.cli import main
    out = tmp_path_factory.mktemp("single")
    assert main(["map", "--quiet", "--index", str(index_dir(SHIGELLA)), "-o", str(out / "out.sam"),
                 "--unmapped", str(out / "unmapped.fq"), "--dump-candidates", str(out / "candidates.txt"),
                 str(SHIGELLA), str(SHIGELLA_R1)]) == 0
    return out


def map_args(index_dir, tmp_path, *extra):
    return ("map", "--index", index_dir(SHIGELLA), "-o", tmp_path / "out.sam", "--chunk-reads", 2000, *extra,
            SHIGELLA, SHIGELLA_R1)


def test_local_cluster_equals_single_process(gkmap, index_dir, tmp_path, single_sam):
    code, err = gkmap(*map_args(index_dir, tmp_path, "--local-cluster", 2, "--unmapped", tmp_path / "unmapped.fq",
                                "--dump-candidates", tmp_path / "candidates.txt"))
    assert code == 0, err
    assert without_pg(tmp_path / "out.sam") == without_pg(single_sam / "out.sam")
    assert (tmp_path / "unmapped.fq").read_text() == (single_sam / "unmapped.fq").read_text()
    # The same candidate pairs; within a batch they are listed by strand row, so their order follows the batches.
    assert sorted((tmp_path / "candidates.txt").read_text().splitlines()) == \
        sorted((single_sam / "candidates.txt").read_text().splitlines())
    per_worker, retried = chunks_per_worker(err)
    assert sorted(per_worker) == ["worker0", "worker1"] and all(per_worker.values()), err
    assert sum(per_worker.values()) == 12 and retried == 0  # 22,084 reads in chunks of 2,000


def test_render_processes_in_workers_change_nothing(gkmap, index_dir, tmp_path, single_sam):
    """-t 2: each local worker renders its chunks' SAM in 2 processes of its own; the output is the same."""
    code, err = gkmap(*map_args(index_dir, tmp_path, "--local-cluster", 2, "-t", 2))
    assert code == 0, err
    assert without_pg(tmp_path / "out.sam") == without_pg(single_sam / "out.sam")


def test_each_worker_gets_its_own_environment(client):
    assert sorted(client.run(lambda: __import__("os").environ["GKMAP_TEST_SLOT"]).values()) == ["a", "b"]


@pytest.mark.parametrize("fault", [kill_worker_on_first_call, raise_on_first_call])
def test_fault_is_retried_without_losing_reads(gkmap, index_dir, tmp_path, single_sam, client, fault):
    victim = sorted(client.nthreads())[0]
    client.run(fault, "drive_on_worker", workers=[victim])
    code, err = gkmap(*map_args(index_dir, tmp_path, "--scheduler", client.scheduler.address))
    assert code == 0, err
    assert without_pg(tmp_path / "out.sam") == without_pg(single_sam / "out.sam")
    per_worker, retried = chunks_per_worker(err)
    assert sum(per_worker.values()) == 12 and retried >= 1, err


def test_worker_with_another_index_version_is_refused(gkmap, index_dir, tmp_path, client):
    def set_version(version):
        import mapper.index
        mapper.index.FORMAT_VERSION = version
    victim = sorted(client.nthreads())[0]
    client.run(set_version, 99, workers=[victim])
    try:
        code, err = gkmap(*map_args(index_dir, tmp_path, "--scheduler", client.scheduler.address))
    finally:
        client.run(set_version, 1, workers=[victim])
    assert code == 1, err
    message = err.strip().splitlines()[-1]
    assert message.startswith("gkmap: error: worker ") and "refused the run" in message, err
    assert "index format version 1, but this gkmap" in message and "reads version 99" in message, err
    assert not (tmp_path / "out.sam").exists()


@pytest.mark.parametrize("args, message", [
    (("--gpus", "2", "--device", "cpu"), "--gpus runs one worker per GPU, not with --device cpu"),
    (("--gpus", "0"), "--gpus must be a number of GPUs (at least 1) or 'auto', not 0"),
    (("--gpus", "many"), "--gpus must be a number of GPUs (at least 1) or 'auto', not 'many'"),
    (("--local-cluster", "0"), "--local-cluster must be at least 1, not 0"),
    (("--local-cluster", "2", "--chunk-reads", "0"), "--chunk-reads must be at least 1, not 0"),
    (("--chunk-reads", "100"), "--chunk-reads needs --gpus, --scheduler or --local-cluster"),
    (("--gpus", "1", "--local-cluster", "2"), "not allowed with argument"),
])
def test_cluster_option_errors(gkmap, args, message, tmp_path):
    code, err = gkmap("map", *args, "-o", tmp_path / "out.sam", SHIGELLA, SHIGELLA_R1)
    assert code == 2 and message in err, err


@pytest.mark.parametrize("visible, gpus, chunk_reads, local", [
    ("3", 1, None, True), ("3", "auto", None, True), ("3,4", 1, None, True), ("3,4", "auto", None, False),
    ("3,4", 2, None, False), ("3", 1, 100, False), ("", 1, None, False), ("", "auto", None, False)])
def test_one_gpu_is_mapped_in_this_process(monkeypatch, visible, gpus, chunk_reads, local):
    """--gpus 1 (or auto with one GPU visible) runs the single process on that GPU, unless --chunk-reads asks
    for Dask's chunks; no GPU visible keeps the Dask path, which words the error."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert one_local_gpu(MapOptions(reference="r.fa", reads="r.fq", gpus=gpus, chunk_reads=chunk_reads)) is local


@pytest.mark.gpu
def test_one_gpu_in_this_process_and_on_a_dask_worker(gkmap, index_dir, tmp_path, single_sam):
    """The two ways to one GPU write the single process's SAM: --gpus 1 in this process (no cluster), and
    --gpus 1 --chunk-reads through a Dask worker that owns the GPU's context."""
    code, err = gkmap("map", "--index", index_dir(SHIGELLA), "-o", tmp_path / "one.sam", "--gpus", 1, SHIGELLA,
                      SHIGELLA_R1)
    assert code == 0 and "cluster:" not in err and "seed: cuda" in err, err
    assert without_pg(tmp_path / "one.sam") == without_pg(single_sam / "out.sam")
    code, err = gkmap(*map_args(index_dir, tmp_path, "--gpus", 1))
    assert code == 0 and "chunks per worker: gpu0" in err and "seed: cuda" in err, err
    assert without_pg(tmp_path / "out.sam") == without_pg(single_sam / "out.sam")


def test_gpus_pin_one_visible_gpu_per_worker(monkeypatch, gkmap, index_dir, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert gpu_environments("auto") == [{"CUDA_VISIBLE_DEVICES": "2"}, {"CUDA_VISIBLE_DEVICES": "5"}]
    assert gpu_environments(1) == [{"CUDA_VISIBLE_DEVICES": "2"}]
    code, err = gkmap(*map_args(index_dir, tmp_path, "--gpus", 3))
    assert code == 2 and "--gpus 3: only 2 GPU(s) visible here (2,5)" in err, err
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code, err = gkmap(*map_args(index_dir, tmp_path, "--gpus", "auto"))
    assert code == 2 and "--gpus: no GPU is visible here" in err, err
