"""The public API: the README's example runs as printed, and `map_records` gives the records of `gkmap map`."""
import re
import shutil
import subprocess
import sys

import pytest

import mapper
from conftest import ROOT

DEMO_REF = ROOT / "reference" / "measles_virus_Edmonston_K01711.1.fa"
DEMO_READS = ROOT / "reference" / "measles_Hm2_HiSeq_R1.fastq.gz"


def readme_example():
    """(the README's Python block, the output the README says it prints)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    printed = re.search(r"It prints `([^`]+)`", section).group(1)
    return code, printed


def test_readme_example_prints_what_the_readme_says(tmp_path):
    """Run in a folder of its own (the index goes beside the copied FASTA, never into the checkout)."""
    code, printed = readme_example()
    (tmp_path / "reference").mkdir()
    for path in (DEMO_REF, DEMO_READS):
        shutil.copy(path, tmp_path / "reference" / path.name)
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == printed


def test_map_records_are_the_sam_records(gkmap, tmp_path):
    index = tmp_path / "idx"
    out = tmp_path / "out.sam"
    code, err = gkmap("map", "-e", 3, "--device", "cpu", "--index", index, "-o", out, DEMO_REF, DEMO_READS)
    assert code == 0, err
    lines = [line for line in out.read_text().splitlines() if not line.startswith("@")]
    records = list(mapper.map_records(DEMO_REF, DEMO_READS, e=3, device="cpu", index_dir=str(index)))
    assert records == [mapper.Record.from_sam(line) for line in lines]
    first = next(r for r in records if r.is_mapped)
    assert first.edits == first.tags["NM"] and first.pos >= 1 and first.contig.startswith("ENA|K01711")


def test_api_names_and_refusals():
    assert set(mapper.__all__) >= {"build_index", "open_index", "MapOptions", "map_reads", "map_records", "Record"}
    with pytest.raises(AttributeError):
        mapper.no_such_name
    with pytest.raises(ValueError, match="single-end"):
        next(mapper.map_records(DEMO_REF, DEMO_READS, paired="pe", reads2=str(DEMO_READS), output="x.sam"))
