"""scripts/seed_choices.py: its optimal choice of e + 1 disjoint ws-mers against brute force, and the script
on a real genome (the three choices ordered: optimal <= shifted <= fixed), its longer tiles' counts against a
scan of the genome."""
import itertools
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from conftest import READS, SHIGELLA
from mapper.index import open_index

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import seed_choices  # noqa: E402


def brute_force(sizes, ws, seeds):
    """Least total over every set of `seeds` k-mer starts at least ws apart."""
    best = None
    for starts in itertools.combinations(range(len(sizes)), seeds):
        if all(b - a >= ws for a, b in zip(starts, starts[1:])):
            total = int(sum(sizes[s] for s in starts))
            best = total if best is None else min(best, total)
    return best


def test_optimal_choice_equals_brute_force():
    rng = np.random.default_rng(4)
    for _ in range(60):
        ws, seeds = int(rng.integers(2, 5)), int(rng.integers(1, 4))
        sizes = rng.integers(0, 50, int(rng.integers(seeds * ws, seeds * ws + 8)) - ws + 1)
        assert seed_choices.optimal_cost(sizes, ws, seeds) == brute_force(sizes, ws, seeds)
        assert seed_choices.optimal_cost(sizes, ws, seeds) <= seed_choices.tiling_cost(sizes, 0, ws, seeds)


def test_script_on_shigella(index_dir):
    out = subprocess.run([sys.executable, str(SCRIPTS / "seed_choices.py"), str(SHIGELLA),
                          str(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz"), "--index",
                          str(index_dir(SHIGELLA)), "-e", "6", "--reads", "200", "--longer", "14"],
                         capture_output=True, text=True, check=True).stdout
    hits = {line.split()[0]: float(line.split()[1].replace(",", "")) for line in out.splitlines()[1:]}
    assert set(hits) == {"fixed", "shifted", "optimal", "fixed14"}
    assert 0 < hits["optimal"] <= hits["shifted"] <= hits["fixed"]
    assert hits["fixed14"] > 0
    refused = subprocess.run([sys.executable, str(SCRIPTS / "seed_choices.py"), str(SHIGELLA), str(SHIGELLA),
                              "--index", str(index_dir(SHIGELLA)), "--longer", "12"], capture_output=True, text=True)
    assert refused.returncode == 2 and "must exceed" in refused.stderr


def test_longer_tiles_counted_as_a_scan_of_the_genome_counts_them(index_dir):
    """Each 14-mer tile's count (its 12-mer's bucket narrowed by two bases) equals the genome's occurrences."""
    index = open_index(SHIGELLA, None, index_dir(SHIGELLA))
    genome = np.asarray(index.reference.codes).tobytes()
    codes = np.frombuffer(genome[1_000_000:1_000_100], dtype=np.uint8)
    for s in (12, 14, 16):
        tiles = [codes[at:at + s].tobytes() for at in range(0, len(codes) - s + 1, s)]
        expected = [len(re.findall(b"(?=" + re.escape(tile) + b")", genome)) for tile in tiles]
        assert seed_choices.longer_sizes(index, codes, s).tolist() == expected
