"""Memory of a batch is bounded by the backend, not by what its reads hit (issue #17).

Pathological reads (poly-A, microsatellites, SINE-rich windows, N-rich reads: scripts/genome_proxy.py)
against a small genome proxy full of repeats: the cpu backend maps them under an address-space cap with
every read once in the SAM, and the numpy backend's read groups (seeding.hit_groups) give the same mappings
whatever their budget.
"""
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from mapper.backends import cpu
from mapper.index import build_index
from mapper.pipeline import Counters, find_mappings, per_read_e
from mapper.reads import read_batches
from mapper.seeding import strand_rows

sys.path.insert(0, str(ROOT / "scripts"))
import genome_proxy  # noqa: E402

CAP = 3 << 30  # bytes of address space: the index here is ~50 MB, Python + numpy + threads ~1 GB


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, shared):
    folder = tmp_path_factory.mktemp("proxy")
    fasta = folder / "proxy.fa"
    genome_proxy.build(fasta, 0.01, "human", 11, 0, 100, None, 300, folder / "patho.fq")
    return fasta, folder / "patho.fq", build_index(fasta, 12, folder / "idx")


def test_pathological_reads_map_under_a_memory_cap(proxy, tmp_path):
    fasta, reads, index = proxy
    out = tmp_path / "out.sam"
    cap = lambda: resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))
    done = subprocess.run([sys.executable, "-m", "mapper", "map", "--quiet", "--device", "cpu", "-t", "2", "-e", "5",
                           "--index", str(index.folder), "-o", str(out), str(fasta), str(reads)],
                          preexec_fn=cap, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    flags = [int(line.split("\t")[1]) for line in out.read_text().splitlines() if not line.startswith("@")]
    primary = [f for f in flags if not f & 0x900]
    assert len(primary) == 300 and len(flags) > 3000  # every read once; the repeats give many loci


def test_read_groups_give_the_same_mappings(proxy, monkeypatch):
    fasta, reads, index = proxy
    batch = next(read_batches(str(reads), 100))
    whole = find_mappings(batch, index, cpu.NumpyBackend(), None, 5, str(reads), Counters())[1]
    monkeypatch.setattr(cpu, "HIT_BUDGET", 20_000)
    rows = strand_rows(batch.codes(), batch.starts, per_read_e(batch, 5, str(reads)))
    assert len(cpu.NumpyBackend().row_groups(rows, index)) > 5  # the budget really cuts the batch
    grouped = find_mappings(batch, index, cpu.NumpyBackend(), None, 5, str(reads), Counters())[1]
    key = lambda m: np.lexsort((m.start, m.end, m.edits, m.row))
    for field in ("row", "contig", "start", "end", "edits"):
        assert np.array_equal(getattr(whole, field)[key(whole)], getattr(grouped, field)[key(grouped)]), field


def test_cpu_memory_budget_writes_the_same_sam(proxy, tmp_path, gkmap):
    """`gkmap map --memory` (the cpu backend's working budget): a 1 MiB budget seeds and verifies the repeat
    reads in many groups and launches, and the SAM is the default budget's (the @PG line aside)."""
    fasta, reads, index = proxy
    sams = []
    for memory in ("2G", "1M"):
        out = tmp_path / f"{memory}.sam"
        code, err = gkmap("map", "--quiet", "--device", "cpu", "-t", "1", "-e", "5", "--memory", memory,
                          "--index", index.folder, "-o", out, fasta, reads)
        assert code == 0, err
        sams.append([line for line in out.read_text().splitlines() if not line.startswith("@PG")])
    assert sams[0] == sams[1] and len(sams[0]) > 3000
    batch = next(read_batches(str(reads), 300))
    rows = strand_rows(batch.codes(), batch.starts, per_read_e(batch, 5, str(reads)))
    assert len(cpu.CpuBackend(1, 1 << 20).row_groups(rows, index)) > 5  # the budget really cuts the batch


def test_memory_below_a_megabyte_is_a_usage_error(proxy, gkmap):
    fasta, reads, index = proxy
    code, err = gkmap("map", "--device", "cpu", "--memory", "1000", "--index", index.folder, fasta, reads)
    assert code != 0 and "--memory must be at least 1M" in err and len(err.strip().splitlines()) == 1
