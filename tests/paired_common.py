"""The slow twin's pieces that the paired-end tests share (test_paired.py maps on real pairs against it,
test_cluster_paired.py checks the insert-size estimate of a Dask run with it, test_paired_units.py holds the
vectorised pairing to its classification), and a writer of pair files that do not pair."""
import math
from collections import defaultdict

import numpy as np

from oracle import ref_span


def sam_lines(path):
    """The records of a SAM file, split into fields."""
    return [line.split("\t") for line in path.read_text().splitlines() if not line.startswith("@")]


class Locus:
    """One single-end SAM record of a mapped read, with its 0-based span."""

    def __init__(self, fields):
        self.fields = fields
        self.contig, self.pos, self.cigar = fields[2], int(fields[3]), fields[5]
        self.start, self.end = self.pos - 1, self.pos - 1 + ref_span(self.cigar)
        self.rev = bool(int(fields[1]) & 16)
        self.nm = int(fields[11].split(":")[2])


def single_end(gkmap, index, genome, reads, out):
    """[(name, [Locus...] in report order, forward SEQ/QUAL fields of an unmapped read)] in input order."""
    assert gkmap("map", "--quiet", "--index", index, "-o", out, genome, reads)[0] == 0
    grouped = defaultdict(list)
    for f in sam_lines(out):
        grouped[f[0]].append(f)
    return [(name, [Locus(f) for f in recs if not int(f[1]) & 4], recs[0]) for name, recs in grouped.items()]


def kind(x, y, mode, lo, hi):
    """The twin's classification of a mate combination: 'C' concordant, or the DIVET type."""
    if x.contig != y.contig:
        return "T"
    if x.rev == y.rev:
        return "V"
    fwd, rev = (y, x) if x.rev else (x, y)
    facing = fwd.start <= rev.end - 1 if mode == "pe" else rev.start <= fwd.end - 1
    if not facing:
        return "E"
    tlen = max(x.end, y.end) - min(x.start, y.start)
    return "D" if tlen > hi else "I" if tlen < lo else "C"


def estimated_range(pairs1, pairs2, mode):
    """The documented rule (bwa-mem's) on the twin's confident pairs."""
    tlens = [max(x[0].end, y[0].end) - min(x[0].start, y[0].start)
             for (_, x, _), (_, y, _) in zip(pairs1, pairs2)
             if len(x) == 1 and len(y) == 1 and kind(x[0], y[0], mode, 0, math.inf) == "C"]
    q1, q3 = np.percentile(tlens, [25, 75])
    return max(1, math.floor(q1 - 3 * (q3 - q1))), math.ceil(q3 + 3 * (q3 - q1))


def write_pairs(folder, names1, names2, seq="ACGTACGTTAGCTAGCTAGGATCCAGTTCAGGACCA"):
    """(R1, R2) files in `folder` with these read names, every read `seq`: pairs made to break a rule."""
    paths = folder / "a_1.fq", folder / "a_2.fq"
    for path, names in zip(paths, (names1, names2)):
        path.write_text("".join(f"@{n}\n{seq}\n+\n{'I' * len(seq)}\n" for n in names))
    return paths
