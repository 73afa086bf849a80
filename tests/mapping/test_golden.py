"""Golden outputs: the bundled demo mapped by the CLI must give, byte for byte, the files in tests/data that
the code wrote before the run loops were redesigned (issue #20), on every backend and runner: the cpu
backend (the kernels as host C++), the numpy fallback (no C++ compiler), a local Dask cluster, and the cuda
backend on a GPU (`gpu`). The other equivalence tests compare two runs of today's code with each other;
only these files remember what the output was, so a change that moves every runner the same way shows.

Inputs (in the repository, so a fresh clone without ../shared runs this module): the demo genome
reference/measles_virus_Edmonston_K01711.1.fa and tests/data/demo_R1.fastq.gz, demo_R2.fastq.gz, the first
250 read pairs of reference/measles_Hm2_HiSeq_R{1,2}.fastq.gz (cut to keep the golden files small). The
options are `make demo`'s, the defaults, single-end (with --unmapped) and paired-end (--pe; its OEA SAM and
DIVET file too), and paired-end with a narrow insert range (the demo has no discordant pair otherwise).

Header rule: the @PG line carries the command line (CL:, with this run's temporary paths) and the version
(VN:, which moves with every release), so in @PG lines the values of those two fields are replaced by
`*` before comparing; every other byte of every file (the @HD and @SQ lines, every record) is compared
as written.

Regenerating, when the output format changes on purpose (never otherwise):

    GKMAP_REGENERATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/mapping/test_golden.py -k cpu

rewrites the golden files from the cpu backend's runs and then fails, so that no run passes on files it
has just written; review `git diff tests/data` and commit the files with the change that explains them.
"""
import os
import shutil

import pytest

from conftest import ROOT

DATA = ROOT / "tests" / "data"
DEMO_REF = ROOT / "reference" / "measles_virus_Edmonston_K01711.1.fa"
REGENERATE = os.environ.get("GKMAP_REGENERATE_GOLDEN") == "1"

# Layout -> (extra map options, reads, files written: the SAM first, named as the golden files are).
LAYOUTS = {
    "single": ((), ("demo_R1.fastq.gz",), ("demo_se.sam", "demo_se_unmapped.fastq")),
    "paired": (("--pe",), ("demo_R1.fastq.gz", "demo_R2.fastq.gz"),
               ("demo_pe.sam", "demo_pe_OEA.sam", "demo_pe_DIVET.vh")),
    # The demo has no discordant pair: a narrow insert range makes some, for the DIVET lines and their FLAGs.
    "paired-narrow": (("--pe", "--min", 340, "--max", 400), ("demo_R1.fastq.gz", "demo_R2.fastq.gz"),
                      ("demo_pe_narrow.sam", "demo_pe_narrow_OEA.sam", "demo_pe_narrow_DIVET.vh")),
}
# Runner -> options; several chunks per Dask worker, so that chunk order matters.
RUNNERS = {
    "cpu": ("--device", "cpu"),
    "numpy": ("--device", "cpu"),  # with no g++ on the PATH (set in the test)
    "dask": ("--device", "cpu", "--local-cluster", 2, "--chunk-reads", 60),
    "cuda": ("--device", "cuda"),
}


def normalised(data):
    """The file's bytes with the @PG line's CL: and VN: values replaced by `*` (the module's header rule)."""
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        if line.startswith(b"@PG\t"):
            lines[i] = b"\t".join(field[:3] + b"*" if field[:3] in (b"CL:", b"VN:") else field
                                  for field in line.split(b"\t"))
    return b"\n".join(lines)


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory):
    """The demo genome's index, built once in a temporary folder (never beside reference/)."""
    from mapper.cli import main
    folder = tmp_path_factory.mktemp("golden") / "demo.gkx"
    assert main(["index", "--quiet", "--index", str(folder), str(DEMO_REF)]) == 0
    return folder


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("runner", ["cpu", "numpy", "dask", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_demo_matches_golden_files(runner, layout, gkmap, demo_index, tmp_path, monkeypatch):
    extra, reads, names = LAYOUTS[layout]
    side = ("--unmapped", tmp_path / names[1]) if layout == "single" else ()
    if runner == "numpy":
        monkeypatch.setenv("PATH", str(tmp_path))  # no g++ on the PATH: the cpu backend falls back to numpy
    elif runner == "cpu" and shutil.which("g++") is None:
        pytest.fail("g++ is not installed: the cpu backend cannot build its kernels (make test installs it)")
    code, err = gkmap("map", "--quiet", "--index", demo_index, *RUNNERS[runner], *extra, *side,
                      "-o", tmp_path / names[0], DEMO_REF, *(DATA / r for r in reads))
    assert code == 0, err
    if runner == "numpy":
        assert "the cpu backend runs on numpy" in err  # the fallback really ran, not the host kernels
    if REGENERATE and runner == "cpu":
        for name in names:
            (DATA / name).write_bytes(normalised((tmp_path / name).read_bytes()))
        pytest.fail(f"GKMAP_REGENERATE_GOLDEN=1: rewrote tests/data/{{{','.join(names)}}}; review git diff tests/data")
    for name in names:
        got, want = normalised((tmp_path / name).read_bytes()), (DATA / name).read_bytes()
        # Lines with their ends: equal exactly when the bytes are, and a failure names the first line that differs.
        assert got.splitlines(keepends=True) == want.splitlines(keepends=True), name
