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


@pytest.mark.parametrize("threads", ["1", "3"])  # rendered inline, and in render processes
def test_pieces_write_the_same_sam(proxy, tmp_path, gkmap, monkeypatch, threads):
    """A batch mapped in row groups is handed on in pieces of whole reads (pipeline.PIECE_READS): with
    every group a piece of its own (a 1 MiB budget: many groups), the SAM and the dumped candidates are
    those of the batch in one piece (the candidates come group by group, and here in pieces of a few lines:
    compared as sets of lines), whether the pieces render inline or in processes."""
    from mapper import pipeline
    from mapper.filters import windows
    fasta, reads, index = proxy
    runs, pieces = [], []
    find = pipeline.find_mapping_pieces

    def counted(*args):
        found = list(find(*args))
        pieces.append([(piece.a, piece.b) for piece in found])
        return iter(found)
    monkeypatch.setattr("mapper.jobs.find_mapping_pieces", counted)
    for memory, piece_reads, dump_bytes in (("2G", pipeline.PIECE_READS, windows.DUMP_BYTES), ("1M", 1, 4096)):
        monkeypatch.setattr(pipeline, "PIECE_READS", piece_reads)
        monkeypatch.setattr(windows, "DUMP_BYTES", dump_bytes)  # the dump written in pieces of ~20 lines
        out, dump = tmp_path / f"{memory}.sam", tmp_path / f"{memory}.pairs"
        code, err = gkmap("map", "--quiet", "--device", "cpu", "-t", threads, "-e", "5", "--memory", memory,
                          "--batch-size", "200", "--dump-candidates", dump, "--index", index.folder, "-o", out,
                          fasta, reads)
        assert code == 0, err
        runs.append(([line for line in out.read_text().splitlines() if not line.startswith("@PG")],
                     sorted(dump.read_text().splitlines())))
    assert runs[0] == runs[1] and len(runs[0][0]) > 3000
    one, many = pieces[:2], pieces[2:]
    assert one == [[(0, 200)], [(0, 100)]]
    assert len(many[0]) > 5 and all(p[0][0] == 0 and all(x[1] == y[0] for x, y in zip(p, p[1:])) for p in many)
    assert [p[-1][1] for p in many] == [200, 100]  # pieces tile each batch in read order


def test_memory_below_a_megabyte_is_a_usage_error(proxy, gkmap):
    fasta, reads, index = proxy
    code, err = gkmap("map", "--device", "cpu", "--memory", "1000", "--index", index.folder, fasta, reads)
    assert code != 0 and "--memory must be at least 1M" in err and len(err.strip().splitlines()) == 1


def test_row_groups_know_their_reads_and_spans():
    """read_groups' groups carry their read range, and their rows' spans (a group's forward and reverse runs,
    which the cuda backend seeds over) hold every row the group may seed and no other; a whole batch spans
    all its rows."""
    from mapper.seeding import read_groups
    rng = np.random.default_rng(3)
    n = 500
    lengths = rng.integers(50, 150, n)
    starts = np.r_[0, np.cumsum(lengths)]
    codes = rng.integers(0, 4, int(starts[-1])).astype(np.uint8)
    rows = strand_rows(codes, starts, np.full(n, 3))
    rows.active[rng.random(2 * n) < 0.1] = False
    assert rows.spans == ((0, 2 * n),)
    per_row = rng.integers(0, 1000, 2 * n)
    groups = read_groups(rows, per_row, 20_000)
    assert len(groups) > 5 and groups[0].a == 0 and groups[-1].b == n
    for group in groups:
        assert group.rows.reads == (group.a, group.b)
        assert group.rows.spans == ((group.a, group.b), (n + group.a, n + group.b))
        inside = np.zeros(2 * n, dtype=bool)
        for lo, hi in group.rows.spans:
            inside[lo:hi] = True
        assert np.array_equal(group.rows.active, rows.active & inside)
