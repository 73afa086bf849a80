"""Shared fixtures: the real data in ../shared/data, in-process CLI runs, indexes built once per session,
the Dask cluster of the cluster tests.

Oracle tools (edlib, samtools) are hard requirements: a missing one fails the test, never skips it.
Test modules share through this file and plain helper modules (cli_checks.py, oracle.py, paired_common.py,
...), never by importing another test module (test_suite_layout.py checks it).
"""
import itertools
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mapper.cli import main

ROOT = Path(__file__).resolve().parents[1]
# ../shared/data beside the checkout; GKMAP_SHARED_DATA points elsewhere (the GPU machine gets a copy).
SHARED = Path(os.environ.get("GKMAP_SHARED_DATA") or ROOT.parent / "shared" / "data")
GENOMES = SHARED / "genomes"
READS = SHARED / "reads"

MEASLES = GENOMES / "measles_virus_Edmonston_K01711.1.fa.gz"
SHIGELLA = GENOMES / "shigella_dysenteriae_ATCC13313_GCF_002949675.1.fna.gz"
CHR22Q = GENOMES / "human_chr22_fragment_freebayes_q.fa.gz"
HONEYBEE = GENOMES / "honeybee_viruses_DWV_NC_004830.2_VDV1_NC_006494.1.fa.gz"
LAMBDA = GENOMES / "lambda_phage_NC_001416.1.fa.gz"
ECOLI = GENOMES / "ecoli_K12_MG1655_NC_000913.2.fa.gz"

MEASLES_PAIR = [READS / f"measles_Hm2_HiSeq_R{k}.fastq.gz" for k in (1, 2)]
SHIGELLA_PAIR = [READS / f"shigella_dysenteriae_ERR6005894_R{k}.fastq.gz" for k in (1, 2)]
SHIGELLA_R1 = SHIGELLA_PAIR[0]

SPACED = "######-##"  # a spaced seed mask of the neighbourhood index tests


def pytest_collection_modifyitems(config, items):
    """`gpu` tests run only where pycuda and a GPU are present (and must pass there)."""
    from mapper.device import cuda_available
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU / pycuda here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request):
    """The backend a test runs on, by its --device name: cpu always, cuda (`gpu`) where there is a GPU."""
    return request.param


@pytest.fixture(params=["host", pytest.param("gpu", marks=pytest.mark.gpu)])
def device_layer(request):
    """The device layer that the GPU-style code (backends/cuda_mapping.py, filters/_gpu.py) runs on during the
    test, injected with mapper.device.using as the cpu backend injects its own, so that no module global is
    patched: the kernels as host C++ through host_cuda.py (fresh buffers poisoned, so that output a kernel
    failed to write shows), CI included; and, marked `gpu`, the GPU's layer. A test meant for the host only
    narrows it with `@pytest.mark.parametrize("device_layer", ["host"], indirect=True)`."""
    from mapper.device import cuda, using
    if request.param == "host":
        import host_cuda as layer
    else:
        layer = cuda
    with using(layer):
        yield layer


@pytest.fixture(scope="session")
def shared():
    if not SHARED.is_dir():
        pytest.fail(f"shared data not found at {SHARED}")
    return SHARED


def need_tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"oracle tool {name} is not installed (make test installs it from Debian)")
    return path


def first_reads(path, n, out):
    """The first n reads of a FASTQ file, written to `out`."""
    import dnaio
    with dnaio.open(path) as reader, dnaio.open(out, mode="w") as writer:
        for record in itertools.islice(reader, n):
            writer.write(record)
    return out


@pytest.fixture
def gkmap(capsys):
    """Run `gkmap ARGS` in-process; returns (exit code, stderr)."""
    def run(*args):
        code = main([str(a) for a in args])
        return code, capsys.readouterr().err
    return run


@pytest.fixture(scope="session")
def index_dir(tmp_path_factory, shared):
    """Index folder of a shared genome, built once per session (never beside ../shared)."""
    built = {}

    def get(genome):
        if genome not in built:
            folder = tmp_path_factory.mktemp("idx") / "ref.gkx"
            assert main(["index", "--quiet", "--index", str(folder), str(genome)]) == 0
            built[genome] = folder
        return built[genome]
    return get


@pytest.fixture(scope="session")
def nb_index(tmp_path_factory, shared):
    """Neighbourhood indexes built once per session: (genome, mask, ln) -> NeighbourhoodIndex."""
    from mapper.neighbourhood.index import build_index
    built = {}

    def get(genome, mask="########", ln=7):
        if (genome, mask, ln) not in built:
            folder = tmp_path_factory.mktemp("nbx") / "ref.nbx"
            built[genome, mask, ln] = build_index(genome, mask, ln, folder)
        return built[genome, mask, ln]
    return get


@pytest.fixture(scope="module")
def cluster():
    """A Dask Client of a scheduler and two worker processes, each with its own extra environment variable
    GKMAP_TEST_SLOT (the mechanism --gpus pins a worker to its GPU with); one per test module. The scheduler
    and the nannies live in this test process, where they log as a gkmap run ends (a client gone): their
    records stay off the root logger, whose handler holds the stderr of the test that ran gkmap last (closed
    by then, or another test's)."""
    import distributed
    from mapper.runners.cluster import local_cluster
    logger = logging.getLogger("distributed")
    propagate, logger.propagate = logger.propagate, False
    try:
        with local_cluster([{"GKMAP_TEST_SLOT": "a"}, {"GKMAP_TEST_SLOT": "b"}], "worker") as cluster, \
                distributed.Client(cluster, set_as_default=False) as client:
            yield client
    finally:
        logger.propagate = propagate


@pytest.fixture
def client(cluster):
    """The module's cluster Client once both its workers are up (a killed worker comes back between tests)."""
    cluster.wait_for_workers(2, timeout=60)
    return cluster


@pytest.fixture(scope="session")
def na12878_fastq(tmp_path_factory, shared):
    """The NA12878 chr22 reads as FASTQ (samtools fastq of the shared BAM). A data folder may carry that
    conversion as reads/human_NA12878_chr22_tiny_HiSeqX.fastq (the GPU machine has no samtools)."""
    converted = SHARED / "reads" / "human_NA12878_chr22_tiny_HiSeqX.fastq"
    if converted.exists():
        return converted
    samtools = need_tool("samtools")
    out = tmp_path_factory.mktemp("na12878") / "reads.fq"
    with open(out, "w") as f:
        subprocess.run([samtools, "fastq", str(READS / "human_NA12878_chr22_tiny_HiSeqX.bam")],
                       stdout=f, stderr=subprocess.DEVNULL, check=True)
    return out


@pytest.fixture(scope="session")
def shigella_fastq(tmp_path_factory, shared):
    """The Shigella R1 reads uncompressed (jellyfish reads plain files only)."""
    import gzip
    out = tmp_path_factory.mktemp("shigella") / "R1.fastq"
    with gzip.open(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


@pytest.fixture(scope="session")
def cut_measles(tmp_path_factory, shared):
    """(FASTA, FASTQ): the first 6 kb of the measles genome cut into 41 contigs of 30 bp and more, plus three
    copies of some (equal diagonals on different contigs), and 400 reads of 100 bp with 1 % substitutions
    drawn from the concatenation, so that many cross a cut: inputs where contig bounds matter."""
    import numpy as np
    from mapper.alphabet import BASES
    from mapper.reference import read_fasta
    folder = tmp_path_factory.mktemp("cut")
    rng = np.random.default_rng(5)
    codes = read_fasta(MEASLES, folder / "m.fai").codes[:6000]
    cuts = np.sort(rng.choice(np.arange(30, len(codes) - 30), 40, replace=False))
    pieces = np.split(codes, cuts)
    pieces += [pieces[3], pieces[7], pieces[7][5:]]  # repeated contigs
    letters = np.frombuffer(BASES.encode(), dtype=np.uint8)
    fasta = folder / "cut.fa"
    fasta.write_text("".join(f">c{i}\n{letters[p].tobytes().decode()}\n" for i, p in enumerate(pieces)))
    whole = np.concatenate(pieces)
    starts = rng.integers(0, len(whole) - 100, 400)
    reads = whole[starts[:, None] + np.arange(100)]
    flip = rng.random(reads.shape) < 0.01
    reads[flip] = (reads[flip] + 1) % 4
    fastq = folder / "r.fq"
    fastq.write_text("".join(f"@r{i}\n{letters[r].tobytes().decode()}\n+\n{'I' * 100}\n" for i, r in enumerate(reads)))
    return fasta, fastq
