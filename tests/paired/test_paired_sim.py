"""Paired-end mapping with a known truth: read pairs simulated from S. dysenteriae (two contigs), fixed seed.

Concordant pairs come from the reference itself; structural-variant pairs from a donor genome that carries a
planted deletion, tandem duplication, inversion or translocation between the two contigs, each pair spanning
the breakpoint with both mates whole on either side. The true pair must be reported concordant at its true
loci; each SV pair must be discordant, with a DIVET line of the type VariationHunter expects (D, E, V, T)
at the true loci of both mates.
"""
import re
from collections import defaultdict

import numpy as np
import pytest

from conftest import SHIGELLA
from oracle import load_genome, revcomp

L = 100          # read length (e = 4)
WING = 600       # donor sequence kept on each side of a breakpoint
EVENTS = 30      # planted events per SV type
PER_EVENT = 2    # pairs spanning each breakpoint
# A mate inside an IS element has dozens of loci: let DIVET list every combination (the --maxdis cap is
# tested against the twin in test_paired.py).
OPTIONS = ("--min", "200", "--max", "500", "--maxdis", "100000")


class Simulator:
    def __init__(self, genome, seed):
        self.rng = np.random.default_rng(seed)
        self.names = list(genome)
        self.genome = genome
        self.reads1, self.reads2, self.truth = [], [], {}

    def _mutate(self, seq):
        """Substitutions at 1 % per base, at most 2 per read (e = 4 for 100 bp stays ahead of them)."""
        seq = list(seq)
        for i in np.flatnonzero(self.rng.random(len(seq)) < 0.01)[:2]:
            seq[i] = "ACGT"[("ACGT".index(seq[i]) + int(self.rng.integers(1, 4))) % 4]
        return "".join(seq)

    def pair(self, name, donor, f, size, left, right):
        """Mates of the donor fragment [f, f + size): R1 its first L bases and R2 the reverse complement of its
        last L, or (half of the time, the fragment read from its other strand) the other way round.
        `left(o)`/`right(o)` give the true (contig, 0-based start, reverse) of donor[o:o + L] on the reference."""
        g = f + size - L
        contig, start, reverse = right(g)
        mates = [(donor[f:f + L], left(f)), (revcomp(donor[g:g + L]), (contig, start, not reverse))]
        if self.rng.random() < 0.5:
            mates.reverse()
        (r1, t1), (r2, t2) = mates
        self.reads1.append((name, self._mutate(r1)))
        self.reads2.append((name, self._mutate(r2)))
        self.truth[name] = [t1, t2]

    def fragment_size(self):
        return int(np.clip(round(self.rng.normal(350, 30)), 260, 440))

    def spanning(self, name, donor, junction, left, right):
        """PER_EVENT pairs whose fragments span `junction`, each mate whole on one side of it."""
        for k in range(PER_EVENT):
            size = self.fragment_size()
            f = int(self.rng.integers(junction - size + L, junction - L + 1))
            self.pair(f"{name}_{k}", donor, f, size, left, right)

    def position(self, contig, margin):
        return int(self.rng.integers(margin, len(self.genome[self.names[contig]]) - margin))

    def simulate(self):
        chrom, plasmid = (self.genome[n] for n in self.names)
        c, p = self.names
        for i in range(200):  # concordant: straight from the reference
            x = self.position(0, 1000)
            size = self.fragment_size()
            self.pair(f"conc{i}", chrom, x, size, lambda o: (c, o, False), lambda o: (c, o, False))
        for i in range(EVENTS):
            x, s = self.position(0, 10_000), int(self.rng.integers(1000, 5000))
            donor = chrom[x - WING:x] + chrom[x + s:x + s + WING]        # deletion of [x, x + s)
            self.spanning(f"del{i}", donor, WING, lambda o, x=x: (c, x - WING + o, False),
                          lambda o, x=x, s=s: (c, x + s + o - WING, False))
            donor = chrom[x + s - WING:x + s] + chrom[x:x + WING]        # tandem copy of [x, x + s)
            self.spanning(f"dup{i}", donor, WING, lambda o, x=x, s=s: (c, x + s - WING + o, False),
                          lambda o, x=x: (c, x + o - WING, False))
            donor = chrom[x - WING:x] + revcomp(chrom[x + s - WING:x + s])  # inversion of [x, x + s)
            self.spanning(f"inv{i}", donor, WING, lambda o, x=x: (c, x - WING + o, False),
                          lambda o, x=x, s=s: (c, x + s - (o - WING) - L, True))
            y = self.position(1, 2000)                                   # chromosome joined to the plasmid
            donor = chrom[x - WING:x] + plasmid[y:y + WING]
            self.spanning(f"tra{i}", donor, WING, lambda o, x=x: (c, x - WING + o, False),
                          lambda o, y=y: (p, y + o - WING, False))
        return self


def write_fastq(reads, path):
    path.write_text("".join(f"@{name}\n{seq}\n+\n{'I' * len(seq)}\n" for name, seq in reads))
    return path


@pytest.fixture(scope="module")
def simulated(tmp_path_factory, index_dir):
    sim = Simulator(load_genome(SHIGELLA), seed=9).simulate()
    folder = tmp_path_factory.mktemp("sim")
    return sim, write_fastq(sim.reads1, folder / "r1.fq"), write_fastq(sim.reads2, folder / "r2.fq")


def test_simulated_pairs(gkmap, index_dir, tmp_path, simulated):
    sim, r1, r2 = simulated
    out = tmp_path / "pe.sam"
    code, err = gkmap("map", "--pe", "--quiet", "--index", index_dir(SHIGELLA), "-o", out, *OPTIONS, SHIGELLA, r1, r2)
    assert code == 0, err
    records = defaultdict(list)
    for line in out.read_text().splitlines():
        if not line.startswith("@"):
            f = line.split("\t")
            records[f[0]].append(f)
    divet = defaultdict(list)
    for line in (tmp_path / "pe_DIVET.vh").read_text().splitlines():
        f = line.split("\t")
        divet[f[0]].append(f)
    found, expected = defaultdict(int), {"del": "D", "dup": "E", "inv": "V", "tra": "T"}
    for name, truth in sim.truth.items():
        kind = re.match(r"[a-z]+", name).group()
        if kind == "conc":
            pairs = [(a, b) for a, b in zip(records[name][::2], records[name][1::2]) if int(a[1]) & 2]
            got = [[(f[2], int(f[3]) - 1, bool(int(f[1]) & 16)) for f in pair] for pair in pairs]
            assert any(at_truth(loci, truth) for loci in got), (name, truth, records[name])
            found[kind] += 1
        else:
            assert not int(records[name][0][1]) & 2, (name, "reported concordant")
            got = [[(f[1], int(f[2]) - 1, f[4] == "R"), (f[1] if f[5] == "=" else f[5], int(f[6]) - 1, f[8] == "R")]
                   for f in divet[name] if f[9] == expected[kind]]
            assert any(at_truth(loci, truth) for loci in got), (name, truth, divet[name])
            found[kind] += 1
    assert found == {"conc": 200, **{kind: EVENTS * PER_EVENT for kind in expected}}


def at_truth(loci, truth, e=4):
    """Both mates on their true contig and strand, starting within e of the truth (an edit at a read's
    end may shift the start)."""
    return all(c == tc and r == tr and abs(s - ts) <= e for (c, s, r), (tc, ts, tr) in zip(loci, truth))
