"""scripts/reproduce_paper.py --quick (issue #6): the cpu stages on small inputs, the report and its tables.

The script runs once per session in a subprocess (it puts scripts/ on its own sys.path); the tests read what it
wrote: measured rows in results/, the tables with the published columns joined, and REPORT.md.
"""
import csv
import importlib.util
import subprocess
import sys

import pytest

from conftest import ROOT, SHARED

SCRIPT = ROOT / "scripts" / "reproduce_paper.py"


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def paper(tmp_path_factory, shared):
    out = tmp_path_factory.mktemp("paper")
    run = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--device", "cpu", "--out", str(out),
                          "--data", str(SHARED)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return out


def test_report_lists_every_table_and_the_missing_gpu_stage(paper):
    report = (paper / "REPORT.md").read_text()
    for heading in ("## 6. Summary of the headline claims", "## 1. Filter accuracy", "## 2-3. Filter throughput",
                    "## 4. End-to-end mapping", "## Missing or incomplete stages"):
        assert heading in report
    assert "(`power`): missing: no CUDA GPU here" in report  # --device cpu: power needs NVML on a GPU
    assert "(`end-to-end-genome`): missing: the whole-genome rows run on the cuda backend only" in report
    assert "*Measured " in report and "command `reproduce_paper.py --quick" in report
    for name in ("table0_candidate_sets", "table1_filter_accuracy", "table2_filter_throughput", "table4_end_to_end",
                 "table6_summary"):
        assert rows(paper / f"{name}.csv"), name
    if importlib.util.find_spec("matplotlib"):
        assert (paper / "fig1_false_accepts.png").stat().st_size > 0
    else:
        assert "Figures skipped: matplotlib is not installed" in report


def test_candidate_sets_come_from_the_mapper_and_the_shared_samples(paper):
    sets = {r["set"]: r for r in rows(paper / "results" / "sets.csv")}
    ours = [r for r in sets.values() if r["origin"].startswith("gkmap map")]
    assert {r["genome"] for r in ours} >= {"shigella_dysenteriae_ATCC13313_GCF_002949675.1.fna.gz",
                                           "ecoli_K12_MG1655_NC_000913.2.fa.gz", "human_GRCh37_chr20.fa.gz"}
    assert all(int(r["pairs"]) > 0 for r in ours)
    assert {"ERR240727_1_E2", "ERR240727_1_E5", "shigella_ERR6005894_L150"} <= set(sets)


def test_accuracy_improved_never_rejects_and_faithful_matches_the_published_program(paper):
    table = rows(paper / "table1_filter_accuracy.csv")
    assert len({r["set"] for r in table}) >= 10
    assert all(r["improved_false_rejects"] == "0" and r["improved_false_accepts_incl_undefined"] == "0"
               for r in table)
    shared = [r for r in table if r.get("published_program_accepts")]
    assert len(shared) == 2 * 11 + 16  # ERR240727_1_E2/E5 at E = 0..10, the Shigella sample at E = 0..15
    assert all(r["faithful_accepts"] == r["published_program_accepts"] for r in shared)
    assert all(r["faithful_differs_from_published_program"] == "0" for r in shared)
    assert any(r.get("published_gkgpu_false_accept_rate_pct") for r in table)  # paper Tables S.2/S.3 joined


def test_throughput_and_end_to_end_rows_are_measured(paper):
    throughput = rows(paper / "table2_filter_throughput.csv")
    assert {int(r["read_length"]) for r in throughput} == {100, 150, 250}
    assert all(float(r["filter_mpairs_per_s"]) > 0 for r in throughput)
    assert any(r.get("published_source") for r in throughput)  # GateKeeper-CPU 1 core, Table 2
    e2e = rows(paper / "table4_end_to_end.csv")
    assert {r["filter"] for r in e2e} == {"none", "gatekeeper", "gatekeeper-faithful"}
    improved = [r for r in e2e if r["filter"] == "gatekeeper"]
    assert improved and all(r["sam_identical_to_none"] == "True" and r["lost_mappings"] == "0" for r in improved)
    assert all(int(r["rejected_pairs"]) > 0 for r in improved)


def test_cached_stages_are_reused(paper):
    again = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--device", "cpu", "--out", str(paper),
                            "--data", str(SHARED)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    for stage in ("sets", "filter-accuracy", "filter-throughput", "end-to-end"):
        assert f"stage {stage}: cached" in again.stderr
