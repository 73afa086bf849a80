"""Simulated reads with a known truth, for sensitivity tests and benchmarks (CONVENTIONS.md model).

Uniform start positions over N-free windows of a real genome, half of the reads on each strand;
substitutions at 1 % per base; 10 % of the reads carry one indel of 1-2 bases (half of them insertions);
qualities 'I'. Read i is named `sim<i>|<contig>:<1-based start>:<strand>:<edits>`, where start is the
leftmost reference base of the fragment and edits the number of simulated edits (the true edit distance
can be lower). Deterministic for a seed (benchmarks use seed 11).
"""
import numpy as np

from mapper.alphabet import CODE_N, COMPLEMENT, READ_ASCII

SUBSTITUTION_RATE = 0.01
INDEL_READS = 0.10


CHUNK = 1 << 24  # window starts draw_starts looks at a time (its memory: about 12 bytes a start of a piece)


def draw_starts(reference, span, n, rng):
    """n global starts of N-free windows of `span` bases inside one contig, drawn uniformly with replacement:
    rng.choice over every such start (the draw `rng.integers(0, how many, n)`, the k-th start in genome
    order), without an array of the genome's size: the genome is read in CHUNK pieces twice, once to count
    each piece's starts and once to pick those drawn, so a human genome simulates in a few hundred MB."""
    pieces = range(0, max(len(reference.codes) - span + 1, 0), CHUNK)
    counts = np.array([np.count_nonzero(_valid(reference, span, a)) for a in pieces], dtype=np.int64)
    total = int(counts.sum())
    if total == 0 and n:
        raise ValueError(f"no N-free window of {span} bases inside a contig to draw reads from")
    drawn = rng.integers(0, total, size=n) if n else np.zeros(0, dtype=np.int64)
    before = np.cumsum(counts) - counts
    piece = np.searchsorted(before, drawn, side="right") - 1
    out = np.empty(n, dtype=np.int64)
    for k in np.unique(piece).tolist():
        mine = np.flatnonzero(piece == k)
        out[mine] = pieces[k] + np.flatnonzero(_valid(reference, span, pieces[k]))[drawn[mine] - before[k]]
    return out


def _valid(reference, span, a):
    """bool per start in [a, a + CHUNK) (up to the genome's last): whether its `span` bases hold no N and
    lie inside one contig."""
    codes = reference.codes
    b = min(a + CHUNK, len(codes) - span + 1)
    n_before = np.zeros(b - a + span, dtype=np.int32)
    np.cumsum(codes[a:b + span - 1] == CODE_N, out=n_before[1:])
    ok = n_before[span:] == n_before[:b - a]
    inside = np.zeros(b - a, dtype=bool)
    first = np.searchsorted(reference.ends, a, side="right")  # the contigs that reach into [a, b)
    last = np.searchsorted(reference.starts, b, side="left")
    for lo, hi in zip(reference.starts[first:last].tolist(), reference.ends[first:last].tolist()):
        inside[max(lo, a) - a:max(min(hi - span + 1, b), a) - a] = True
    return ok & inside


def simulate(reference, n, length, seed=11):
    """List of (name, sequence) for n reads of `length` bases."""
    rng = np.random.default_rng(seed)
    starts = draw_starts(reference, length + 2, n, rng)
    return simulate_at(reference, starts, length, rng)


def simulate_at(reference, starts, length, rng, labels=None):
    """List of (name, sequence): one read of `length` bases from each global start in `starts` (windows of
    length + 2 N-free bases inside one contig), errors drawn from `rng` by the module's model. `labels` (one
    string per read, no '|') replace the names' `sim<i>` part, for callers that number or tag reads
    themselves; the truth after the '|' is unchanged, so parse_truth reads it."""
    n = len(starts)
    reverse = rng.random(n) < 0.5
    indel = np.where(rng.random(n) < INDEL_READS, rng.integers(1, 3, size=n), 0)
    insertion = rng.random(n) < 0.5
    out = []
    for i in range(n):  # simulation is not a hot path; one read at a time keeps the model obvious
        k = int(indel[i])
        span = length - k if (k and insertion[i]) else length + k
        fragment = reference.codes[starts[i]:starts[i] + span].copy()
        subs = rng.random(span) < SUBSTITUTION_RATE
        fragment[subs] = (fragment[subs] + rng.integers(1, 4, size=int(subs.sum()))) % 4
        if k:
            at = int(rng.integers(1, span - k))
            if insertion[i]:
                fragment = np.concatenate([fragment[:at], rng.integers(0, 4, size=k).astype(np.uint8), fragment[at:]])
            else:
                fragment = np.concatenate([fragment[:at], fragment[at + k:]])
        if reverse[i]:
            fragment = COMPLEMENT[fragment[::-1]]
        contig = int(np.searchsorted(reference.starts, starts[i], side="right") - 1)
        pos = int(starts[i] - reference.starts[contig]) + 1
        label = f"sim{i}" if labels is None else labels[i]
        name = f"{label}|{reference.names[contig]}:{pos}:{'-' if reverse[i] else '+'}:{int(subs.sum()) + k}"
        out.append((name, READ_ASCII[fragment].tobytes().decode()))
    return out


def parse_truth(name):
    """(contig, 1-based start, strand '+'/'-', edits) from a simulated read's name."""
    contig, pos, strand, edits = name.split("|", 1)[1].rsplit(":", 3)
    return contig, int(pos), strand, int(edits)


def write_fastq(reads, handle):
    for name, seq in reads:
        handle.write(f"@{name}\n{seq}\n+\n{'I' * len(seq)}\n")
