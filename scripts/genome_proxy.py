#!/usr/bin/env python3
"""A whole-genome proxy built from human chr20: what makes the human genome hard for an all-mapper, at any
size up to 3.1 Gbp, deterministically (the same bytes for the same arguments, on any machine).

    scripts/genome_proxy.py OUT.fa [--gbp 3.1] [--recipe human|copies48] [--seed 11]
        [--reads N [--length 100] [--reads-out OUT.reads.fq]] [--pathological N [--pathological-out OUT.pathological.fq]]

Why: a whole human genome cannot be shipped with the project and random sequence is too easy (issue 17):
an all-mapper's cost at genome scale comes from repeats, i.e. from the seed hits and candidate windows
that diverged copies of the same sequence give every read. The proxy brings those copies in from real
sequence (GRCh37 chr20, ../shared/data/genomes) and adds the repeat classes chr20 alone has too few of.

Recipe `human` (default) models:
  (a) segmental copies: every contig is a mosaic of chr20 windows of 1-10 Mbp (random place, random
      strand, at most half N), each diverged by its own rate drawn uniformly from 1-15 %: per base,
      90 % of the events are substitutions and 10 % indels of 1-3 bp (half insertions). At 3.1 Gbp every
      chr20 locus has about 49 copies; chr20's own repeats (its real Alus, L1s, satellites, N gaps) come along.
  (b) an interspersed SINE family: a synthetic dimeric Alu-like consensus (two related ~120-150 bp arms
      joined by an A-rich linker, 284 bp; random sequence, not the real AluY) inserted once per 6 kb on
      average (about 500,000 copies at 3.1 Gbp, scaled with the size), each copy diverged 5-20 % (the same
      event mix), 30 % of them 5'-truncated, on a random strand, ending in an A-rich tail of 8-40 bp.
  (c) microsatellites (period 1-6, 12-120 bp, 3 % impurities) once per 10 kb and low-complexity tracts
      (two-letter sequence such as purine runs, 50-300 bp) once per 50 kb, inserted like the SINEs.
  (d) 24 contigs named and sized like GRCh37's chromosomes (chr1..chr22, chrX, chrY) scaled to --gbp:
      at most ~250 Mbp each, 3.1e9 bases (< 2^32) at most.
Recipe `copies48` is the issue's duplication-heavy proxy: chr20 (named chr20) followed by 48 copies of
itself (chr20_c01..chr20_c48) diverged 1 + 14 (i - 1) / 47 % (the same event mix), no inserted
repeats: 49 contigs, 3.09 Gbp at --gbp 3.1. Below that size a window of chr20 (from 35 Mbp) stands for
chr20, so the recipe keeps its 49-contig structure at toy sizes.

It does not model: the real segmental-duplication structure (copy lengths, identities above 99 %,
tandem and intrachromosomal clusters) beyond these copies; centromeric alpha satellites and other
large satellite arrays beyond what chr20 holds; LINEs, LTRs and DNA transposons as families of their own
(only chr20's copies of them); GC isochores, CpG depletion, sex chromosomes' biology, unplaced contigs and
alt haplotypes. Every base comes from chr20 or from the models above.

--reads N simulates N reads from the whole proxy (uniform over its N-free windows, so repeats come in
their natural share) with mapper/simulate.py's model (CONVENTIONS.md: 1 % substitutions, 10 % of reads
with a 1-2 bp indel, half reverse-complemented, the truth in the name), in a shuffled contig order so any
prefix of the file samples the whole genome. --pathological N writes N repeat reads in equal shares of
six kinds, tagged in the name (`patho<i>-<kind>`): polyA (poly-A or poly-T), CA ((CA)n / (TG)n), TTTC
((TTTC)n / (GAAA)n), STR (other microsatellites, period 1-6), SINE (windows on SINE copies of the proxy:
the inserted family in `human`, chr20's real Alus, found by their conserved TGTAATCCCAGC motif, in
`copies48`) and N (proxy windows with 1-20 bases turned into N; the named truth's edits exclude them).
Reads depend only on the seed and their count, never on other outputs asked for.

Memory: chr20 and one contig (<= 250 Mbp) at a time, a few bytes a base of them, written out in chunks;
reads are held as strings until written (about 250 bytes each). Speed (numpy throughout, one core of the
development machine): 0.25 Gbp in 4.5 s and 1 Gbp in 15 s (~68 Mbp/s), so ~45 s for 3.1 Gbp, at 0.35 GB
peak RSS; simulated reads add ~26-32 us each (mapper/simulate.py's per-read loop), ~30 s a million.
"""
import argparse
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mapper.alphabet import CODE_N, COMPLEMENT, ENCODE, READ_ASCII
from mapper.outputs import atomic_output
from mapper.reference import Reference, read_fasta
from mapper.simulate import SUBSTITUTION_RATE, simulate_at, write_fastq

ROOT = Path(__file__).resolve().parents[1]
CHR20 = Path(os.environ.get("GKMAP_SHARED_DATA") or ROOT.parent / "shared" / "data") / "genomes" / "human_GRCh37_chr20.fa.gz"
MAX_GBP = 3.1
LINE = 60
WRITE_CHUNK = 100_000 * LINE    # bases converted to text at a time: bounds the writer's memory

# GRCh37 chromosome lengths, scaled to the asked size (recipe `human`).
GRCH37 = {
    "chr1": 249250621, "chr2": 243199373, "chr3": 198022430, "chr4": 191154276, "chr5": 180915260,
    "chr6": 171115067, "chr7": 159138663, "chr8": 146364022, "chr9": 141213431, "chr10": 135534747,
    "chr11": 135006516, "chr12": 133851895, "chr13": 115169878, "chr14": 107349540, "chr15": 102531392,
    "chr16": 90354753, "chr17": 81195210, "chr18": 78077248, "chr19": 59128983, "chr20": 63025520,
    "chr21": 48129895, "chr22": 51304566, "chrX": 155270560, "chrY": 59373566,
}

# (a) copies of chr20
BLOCK_MIN, BLOCK_MAX = 1_000_000, 10_000_000
COPY_DIVERGENCE = (0.01, 0.15)
INDEL_SHARE = 0.10              # of the divergence events; the rest are substitutions
MAX_INDEL = 3
MAX_N_SHARE = 0.5               # a source window may be at most half N (chr20's gaps come along, not whole contigs of N)
# (b) the SINE family: about one copy per 6 kb is ~500,000 at 3.1 Gbp, half the human Alu count (chr20's own
# Alus, copied with it, bring the rest)
SINE_SPACING = 6_000
SINE_DIVERGENCE = (0.05, 0.20)
SINE_TRUNCATED = 0.30
TAIL = (8, 40)
TAIL_IMPURITY = 0.15            # non-A bases in the A-rich tail
# (c) microsatellites and low-complexity tracts
STR_SPACING, STR_LENGTH, STR_PERIOD, STR_IMPURITY = 10_000, (12, 120), (1, 6), 0.03
LC_SPACING, LC_LENGTH = 50_000, (50, 300)
# recipe copies48
COPIES = 48
COPIES_WINDOW_AT = 35_000_000   # where chr20's stand-in window starts below full size
ALU_MOTIF = "TGTAATCCCAGC"      # conserved in every Alu subfamily: finds chr20's real Alus
ALU_MOTIF_AT, ALU_LENGTH = 23, 300

SINE, STR, LOW_COMPLEXITY = 0, 1, 2
PATHOLOGICAL = ("polyA", "CA", "TTTC", "STR", "SINE", "N")
# rng streams: each contig and each output draws from its own, so the genome's bytes do not depend on
# which reads are asked for, and the reads not on the genome's generation order
GENOME, READS, PATHO, CONSENSUS = range(4)


@dataclass
class Block:
    """One diverged chr20 window of a `human` contig (or one copy of copies48): where it lies and what it is."""
    contig: str
    start: int                  # 0-based, in the contig (after the earlier blocks' insertions)
    length: int                 # bases in the contig, inserted repeats included (the last block is cut)
    source: int                 # 0-based start of the window in chr20 (forward strand)
    source_length: int
    reverse: bool
    divergence: float


@dataclass
class Proxy:
    """What a build wrote: contigs (name, length), the copied blocks and the count of each inserted repeat."""
    contigs: list = field(default_factory=list)
    blocks: list = field(default_factory=list)
    inserted: dict = field(default_factory=lambda: dict.fromkeys(("SINE", "STR", "low-complexity"), 0))

    @property
    def length(self):
        return sum(n for _, n in self.contigs)


def ranges(starts, lengths):
    """Concatenated ranges [starts[i], starts[i] + lengths[i]) as one int64 array."""
    lengths = np.asarray(lengths, dtype=np.int64)
    before = np.cumsum(lengths) - lengths
    return np.repeat(np.asarray(starts, dtype=np.int64) - before, lengths) + np.arange(int(lengths.sum()))


def splice(seq, at, payload, lengths):
    """seq with segment i of `payload` (consecutive, lengths[i] bases) inserted before seq[at[i]]; `at`
    sorted. Returns (new sequence, start of each inserted segment in it)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    where = np.arange(len(payload)) + np.repeat(at, lengths)
    out = np.empty(len(seq) + len(payload), dtype=np.uint8)
    inserted = np.zeros(len(out), dtype=bool)
    inserted[where] = True
    out[where] = payload
    out[~inserted] = seq
    return out, np.asarray(at, dtype=np.int64) + np.cumsum(lengths) - lengths


def substitute(codes, at, rng):
    """Change the bases at `at` to one of the other three (N stays N), in place."""
    old = codes[at]
    codes[at] = np.where(old == CODE_N, CODE_N, (old + rng.integers(1, 4, old.shape, dtype=np.uint8)) & 3)


def diverge(seq, rate, rng):
    """A copy of seq with `rate` events per base (module docstring: substitutions, 1-3 bp indels)."""
    seq = seq.copy()
    n = len(seq)
    substitute(seq, rng.integers(0, n, rng.binomial(n, rate * (1 - INDEL_SHARE))), rng)
    k = rng.binomial(n, rate * INDEL_SHARE / 2)
    keep = np.ones(n, dtype=bool)
    keep[ranges(rng.integers(0, max(n - MAX_INDEL, 1), k), rng.integers(1, MAX_INDEL + 1, k))] = False
    seq = seq[keep]
    k = rng.binomial(n, rate * INDEL_SHARE / 2)
    lengths = rng.integers(1, MAX_INDEL + 1, k)
    return splice(seq, np.sort(rng.integers(0, len(seq) + 1, k)), rng.integers(0, 4, int(lengths.sum()), dtype=np.uint8),
                  lengths)[0]


def sine_consensus(seed=11):
    """The SINE family's consensus (uint8 codes, 284 bp): an Alu-like dimer, left arm (120 bp), an A-rich
    linker, right arm (the left arm 8 % diverged with 31 extra bases), so the two halves of a copy seed
    against each other as Alu's do."""
    rng = np.random.default_rng([seed, CONSENSUS])
    left = rng.integers(0, 4, 120, dtype=np.uint8)
    right = left.copy()
    substitute(right, rng.choice(120, 10, replace=False), rng)
    right = np.concatenate([right[:60], rng.integers(0, 4, 31, dtype=np.uint8), right[60:]])
    return np.concatenate([left, ENCODE[np.frombuffer(b"AAAAATACAAAAA", dtype=np.uint8)], right])


def sine_copies(consensus, m, rng):
    """m diverged copies of the consensus (module docstring (b)), as (concatenated codes, lengths).
    One (m x width) grid: each cell is kept (1), deleted (0) or kept and followed by a random base (2)."""
    width = len(consensus) + TAIL[1]
    col = np.arange(width)
    grid = np.tile(np.concatenate([consensus, np.zeros(TAIL[1], np.uint8)]), (m, 1))
    rate = np.where(col < len(consensus), rng.uniform(*SINE_DIVERGENCE, (m, 1)), TAIL_IMPURITY)
    u = rng.random((m, width)) / rate
    sub = (u >= INDEL_SHARE) & (u < 1)
    grid[sub] = (grid[sub] + rng.integers(1, 4, int(sub.sum()), dtype=np.uint8)) & 3
    five = np.where(rng.random(m) < SINE_TRUNCATED, rng.integers(0, len(consensus) - 100, m), 0)
    tail = rng.integers(TAIL[0], TAIL[1] + 1, m)
    present = (col >= five[:, None]) & (col < len(consensus) + tail[:, None])
    count = (present & (u >= INDEL_SHARE / 2)).astype(np.int64) + (present & (u >= INDEL_SHARE / 2) & (u < INDEL_SHARE))
    reverse = rng.random(m) < 0.5
    grid[reverse] = COMPLEMENT[grid[reverse, ::-1]]
    count[reverse] = count[reverse, ::-1]
    flat = np.repeat(grid.ravel(), count.ravel())
    doubled = (np.cumsum(count.ravel()) - 1)[count.ravel() == 2]
    flat[doubled] = rng.integers(0, 4, len(doubled), dtype=np.uint8)
    return flat, count.sum(axis=1)


def microsatellites(m, rng, length=STR_LENGTH):
    """m tandem repeats of random units of period 1-6 with STR_IMPURITY substitutions: (codes, lengths)."""
    lengths = rng.integers(length[0], length[1] + 1, m)
    period = rng.integers(STR_PERIOD[0], STR_PERIOD[1] + 1, m)
    units = rng.integers(0, 4, (m, STR_PERIOD[1]), dtype=np.uint8)
    col = np.arange(length[1])
    grid = units[np.arange(m)[:, None], col % period[:, None]]
    impure = rng.random(grid.shape) < STR_IMPURITY
    substitute(grid, np.nonzero(impure), rng)
    return grid[col < lengths[:, None]], lengths


def low_complexity(m, rng):
    """m tracts drawn from two letters each (purine runs, AT-rich runs...) with a random bias: (codes, lengths)."""
    lengths = rng.integers(LC_LENGTH[0], LC_LENGTH[1] + 1, m)
    pair = rng.integers(0, 4, (m, 2), dtype=np.uint8)
    col = np.arange(LC_LENGTH[1])
    first = rng.random((m, LC_LENGTH[1])) < rng.uniform(0.3, 0.7, (m, 1))
    grid = np.where(first, pair[:, :1], pair[:, 1:])
    return grid[col < lengths[:, None]], lengths


def insert_repeats(seq, consensus, rng, inserted):
    """seq with SINE copies, microsatellites and low-complexity tracts inserted at random places outside
    N runs; returns (new sequence, [start, end) of each SINE copy in it) and counts them in `inserted`."""
    n = len(seq)
    if n == 0:  # a block of 1-3 bases can lose them all to deletions
        return seq, np.zeros((0, 2), dtype=np.int64)
    parts = [sine_copies(consensus, rng.poisson(n / SINE_SPACING), rng),
             microsatellites(rng.poisson(n / STR_SPACING), rng), low_complexity(rng.poisson(n / LC_SPACING), rng)]
    payload = np.concatenate([p for p, _ in parts])
    lengths = np.concatenate([n_ for _, n_ in parts])
    kind = np.repeat([SINE, STR, LOW_COMPLEXITY], [len(n_) for _, n_ in parts])
    at = rng.integers(0, n + 1, len(lengths))
    ok = seq[np.minimum(at, n - 1)] != CODE_N
    order = np.flatnonzero(ok)[np.argsort(at[ok], kind="stable")]
    payload = payload[ranges((np.cumsum(lengths) - lengths)[order], lengths[order])]
    out, starts = splice(seq, at[order], payload, lengths[order])
    for name, k in zip(inserted, (SINE, STR, LOW_COMPLEXITY)):
        inserted[name] += int((kind[order] == k).sum())
    sine = kind[order] == SINE
    return out, np.stack([starts[sine], starts[sine] + lengths[order][sine]], axis=1)


def source_window(chr20, n, rng):
    """Start of a random chr20 window of n bases that is at most MAX_N_SHARE N."""
    for _ in range(1000):
        s = int(rng.integers(0, len(chr20) - n + 1))
        if np.count_nonzero(chr20[s:s + n] == CODE_N) <= MAX_N_SHARE * n:
            return s
    raise ValueError(f"no chr20 window of {n} bases is at most {MAX_N_SHARE:.0%} N")


def human_contig(name, length, chr20, consensus, rng, proxy):
    """One `human` contig (module docstring): (codes, [start, end) of its SINE copies); its blocks go to `proxy`."""
    codes = np.empty(length, dtype=np.uint8)
    sines, filled = [], 0
    while filled < length:
        n = min(int(rng.integers(BLOCK_MIN, BLOCK_MAX + 1)), length - filled, len(chr20))
        source, reverse, rate = source_window(chr20, n, rng), bool(rng.random() < 0.5), float(rng.uniform(*COPY_DIVERGENCE))
        window = chr20[source:source + n]
        seq = diverge(COMPLEMENT[window[::-1]] if reverse else window, rate, rng)
        seq, sine = insert_repeats(seq, consensus, rng, proxy.inserted)
        take = min(len(seq), length - filled)
        codes[filled:filled + take] = seq[:take]
        sines.append(filled + sine[sine[:, 1] <= take])
        proxy.blocks.append(Block(name, filled, take, source, n, reverse, round(rate, 4)))
        filled += take
    return codes, np.concatenate(sines)


def copies48_unit(chr20_length, total):
    """(start, length) of the chr20 window the copies48 recipe copies: all of chr20 at full size."""
    n = min(chr20_length, total // (COPIES + 1))
    return (0 if n == chr20_length else min(COPIES_WINDOW_AT, chr20_length - n)), n


def copies48_contigs(chr20, total, rng, proxy):
    """(name, codes, None) for chr20 (or its stand-in window) and its 48 diverged copies, one at a time."""
    at, n = copies48_unit(len(chr20), total)
    unit = chr20[at:at + n]
    proxy.blocks.append(Block("chr20", 0, n, at, n, False, 0.0))
    yield "chr20", unit, None
    for i in range(1, COPIES + 1):
        rate = COPY_DIVERGENCE[0] + (COPY_DIVERGENCE[1] - COPY_DIVERGENCE[0]) * (i - 1) / (COPIES - 1)
        name = f"chr20_c{i:02d}"
        codes = diverge(unit, rate, rng)
        proxy.blocks.append(Block(name, 0, len(codes), at, n, False, round(rate, 4)))
        yield name, codes, None


def human_sizes(total):
    """Contig names and lengths: GRCh37's chromosomes scaled to `total` bases (the last takes the rounding)."""
    scale = total / sum(GRCH37.values())
    lengths = [max(1, round(n * scale)) for n in GRCH37.values()]
    lengths[-1] += total - sum(lengths)
    return list(zip(GRCH37, lengths))


def write_record(out, name, codes):
    """One FASTA record, LINE bases a line, converted WRITE_CHUNK bases at a time."""
    out.write(f">{name}\n".encode())
    for s in range(0, len(codes), WRITE_CHUNK):
        text = READ_ASCII[codes[s:s + WRITE_CHUNK]]
        full = len(text) // LINE * LINE
        lines = np.empty((full // LINE, LINE + 1), dtype=np.uint8)
        lines[:, :LINE] = text[:full].reshape(-1, LINE)
        lines[:, LINE] = ord("\n")
        out.write(lines.tobytes())
        if full < len(text):
            out.write(text[full:].tobytes() + b"\n")


def window_starts(codes, n, span, rng):
    """n starts of N-free windows of `span` bases in one contig, uniform over such windows (rejection, so
    no array of the contig's size is built; simulate.draw_starts reads the genome twice in pieces instead)."""
    found = []
    have, tries = 0, 0
    while have < n:
        s = rng.integers(0, len(codes) - span + 1, 2 * (n - have) + 8)
        s = s[(codes[s[:, None] + np.arange(span)] != CODE_N).all(axis=1)][:n - have]
        found.append(s)
        have += len(s)
        tries = 0 if len(s) else tries + 1
        if tries > 20:
            raise ValueError(f"a contig of {len(codes)} bases has (almost) no N-free window of {span} bases")
    return np.concatenate(found)


def alu_spans(codes):
    """[start, end) of chr20's real Alus in a contig, about 300 bp placed by where the conserved motif (either
    strand) occurs: it lies ALU_MOTIF_AT bases from an Alu's 5' end."""
    motif = ALU_MOTIF.encode()
    rc = READ_ASCII[COMPLEMENT[ENCODE[np.frombuffer(motif, np.uint8)][::-1]]].tobytes()
    hits = re.finditer(re.escape(motif) + b"|" + re.escape(rc), READ_ASCII[codes].tobytes())
    at, forward = np.array([(m.start(), m.group() == motif) for m in hits], dtype=np.int64).reshape(-1, 2).T
    start = np.where(forward, at - ALU_MOTIF_AT, at + len(motif) + ALU_MOTIF_AT - ALU_LENGTH)
    return np.stack([start, start + ALU_LENGTH], axis=1)


def tandem_reads(kind, n, length, rng):
    """n synthetic microsatellite reads of one pathological kind, random phase, SUBSTITUTION_RATE errors
    (STR: on top of the inserted microsatellites' impurities), half on the reverse strand: uint8 code rows."""
    units = {"polyA": "A", "CA": "CA", "TTTC": "TTTC"}
    if kind in units:
        unit = ENCODE[np.frombuffer(units[kind].encode(), np.uint8)]
        reads = unit[(rng.integers(0, len(unit), (n, 1)) + np.arange(length)) % len(unit)]
    else:
        codes, _ = microsatellites(n, rng, (length, length))
        reads = codes.reshape(n, length)
    substitute(reads, np.nonzero(rng.random(reads.shape) < SUBSTITUTION_RATE), rng)
    reverse = rng.random(n) < 0.5
    reads[reverse] = COMPLEMENT[reads[reverse, ::-1]]
    return list(reads)


def n_rich(read, rng):
    """The read with 1-20 of its bases turned into N."""
    name, seq = read
    letters = bytearray(seq.encode())
    for i in rng.choice(len(letters), int(rng.integers(1, 21)), replace=False):
        letters[i] = ord("N")
    return name, letters.decode()


def pathological_sine_starts(codes, sines, n, length, rng):
    """n read starts on SINE copies (`sines`: the inserted copies' [start, end), or None for chr20's real
    Alus), N-free, each read overlapping its copy by at least 2/3 of its length (or the whole copy)."""
    spans = alu_spans(codes) if sines is None else sines
    span = length + 2
    pick = spans[rng.integers(0, len(spans), 4 * n + 16)]
    low = pick[:, 0] - length // 3
    starts = low + (rng.random(len(pick)) * np.maximum(pick[:, 1] - 2 * length // 3 - low, 1)).astype(np.int64)
    starts = starts[(starts >= 0) & (starts + span <= len(codes))]
    starts = starts[(codes[starts[:, None] + np.arange(span)] != CODE_N).all(axis=1)]
    if len(starts) < n:
        raise ValueError(f"too few SINE windows in a contig of {len(codes)} bases for {n} reads")
    return starts[:n]


def build(out_path, gbp=MAX_GBP, recipe="human", seed=11, reads=0, length=100, reads_out=None,
          pathological=0, pathological_out=None, chr20_path=CHR20, log=None):
    """Write the proxy FASTA (and the reads asked for); returns the Proxy. Module docstring: the model."""
    if not 0 < gbp <= MAX_GBP:
        raise ValueError(f"--gbp must be in (0, {MAX_GBP}], not {gbp}")
    total = round(gbp * 1e9)
    with tempfile.TemporaryDirectory() as tmp:
        chr20 = read_fasta(chr20_path, Path(tmp) / "chr20.fai").codes
    proxy = Proxy()
    recipe_id = ("human", "copies48").index(recipe)
    # keys of one length: numpy's SeedSequence gives [.., x] and [.., x, 0] the same stream
    rng_of = lambda stream, a=0, b=0: np.random.default_rng([seed, recipe_id, stream, a, b])
    if recipe == "human":
        sizes = human_sizes(total)
        consensus = sine_consensus(seed)
        contigs = ((name, *human_contig(name, n, chr20, consensus, rng_of(GENOME, i + 1), proxy))
                   for i, (name, n) in enumerate(sizes))
    else:
        n = copies48_unit(len(chr20), total)[1]
        sizes = [("chr20", n)] + [(f"chr20_c{i:02d}", n) for i in range(1, COPIES + 1)]  # planned: indels move the copies' lengths
        contigs = copies48_contigs(chr20, total, rng_of(GENOME), proxy)
    # which contig each read comes from, in proportion to the planned lengths; a read's number is its rank in the file
    weights = np.array([n for _, n in sizes], dtype=float) / sum(n for _, n in sizes)
    read_contig = rng_of(READS).choice(len(sizes), reads, p=weights)
    kinds = np.arange(pathological) % len(PATHOLOGICAL)
    from_proxy = np.isin(kinds, [PATHOLOGICAL.index("SINE"), PATHOLOGICAL.index("N")])
    patho_contig = np.where(from_proxy, rng_of(PATHO).choice(len(sizes), pathological, p=weights), -1)
    read_list, patho_list = [None] * reads, [None] * pathological
    t0 = time.perf_counter()
    with atomic_output(str(out_path), "wb") as out:
        for i, (name, codes, sines) in enumerate(contigs):
            write_record(out, name, codes)
            proxy.contigs.append((name, len(codes)))
            view = Reference([name], np.zeros(1, np.int64), np.array([len(codes)]), codes)
            ids = np.flatnonzero(read_contig == i)
            if len(ids):
                rng = rng_of(READS, i + 1)
                for j, read in zip(ids, simulate_at(view, window_starts(codes, len(ids), length + 2, rng), length, rng,
                                                    labels=[f"sim{j}" for j in ids])):
                    read_list[j] = read
            for kind in ("SINE", "N"):
                ids = np.flatnonzero((patho_contig == i) & (kinds == PATHOLOGICAL.index(kind)))
                if len(ids):
                    rng = rng_of(PATHO, i + 1, PATHOLOGICAL.index(kind))
                    starts = (pathological_sine_starts(codes, sines, len(ids), length, rng) if kind == "SINE"
                              else window_starts(codes, len(ids), length + 2, rng))
                    for j, read in zip(ids, simulate_at(view, starts, length, rng, labels=[f"patho{j}-{kind}" for j in ids])):
                        patho_list[j] = n_rich(read, rng) if kind == "N" else read
            if log:
                log(f"{name}: {len(codes):,} bp, {time.perf_counter() - t0:.1f} s")
    if reads:
        with atomic_output(str(reads_out)) as f:
            write_fastq(read_list, f)
    if pathological:
        rng = rng_of(PATHO, len(sizes) + 1)
        for k, kind in enumerate(PATHOLOGICAL):
            ids = np.flatnonzero(kinds == k)
            if kind in ("SINE", "N") or not len(ids):
                continue
            for j, codes in zip(ids, tandem_reads(kind, len(ids), length, rng)):
                patho_list[j] = (f"patho{j}-{kind}", READ_ASCII[codes].tobytes().decode())
        with atomic_output(str(pathological_out)) as f:
            write_fastq(patho_list, f)
    return proxy


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("output", help="proxy FASTA to write")
    p.add_argument("--gbp", type=float, default=MAX_GBP, help="size in billions of bases")
    p.add_argument("--recipe", choices=("human", "copies48"), default="human")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--chr20", default=str(CHR20), help="human chr20 FASTA the proxy is built from")
    p.add_argument("--reads", type=int, default=0, help="simulate this many reads from the whole proxy")
    p.add_argument("--length", type=int, default=100, help="read length")
    p.add_argument("--reads-out", help="FASTQ of --reads (default: OUTPUT's stem + .reads.fq)")
    p.add_argument("--pathological", type=int, default=0, help="write this many repeat reads")
    p.add_argument("--pathological-out", help="FASTQ of --pathological (default: OUTPUT's stem + .pathological.fq)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args()
    stem = Path(args.output).with_suffix("")
    log = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    t = time.perf_counter()
    try:
        proxy = build(args.output, args.gbp, args.recipe, args.seed, args.reads, args.length,
                      args.reads_out or f"{stem}.reads.fq", args.pathological,
                      args.pathological_out or f"{stem}.pathological.fq", args.chr20, log)
    except ValueError as e:
        p.error(str(e))
    seconds = time.perf_counter() - t
    inserted = ", ".join(f"{v:,} {k}" for k, v in proxy.inserted.items())
    print(f"{args.output}: recipe {args.recipe}, {len(proxy.contigs)} contigs, {proxy.length:,} bp, "
          f"{len(proxy.blocks)} chr20 blocks, inserted {inserted}; {args.reads:,} reads, {args.pathological:,} "
          f"pathological; {seconds:.1f} s ({proxy.length / seconds / 1e6:.1f} Mbp/s)")


if __name__ == "__main__":
    sys.exit(main())
