"""DIVET output (OUT_DIVET.vh): the discordant mate combinations, one line each, in the columns mrFAST writes
and VariationHunter reads (whitespace-separated, 13 columns):

    1 read pair name    2 contig of mate 1   3 start of mate 1 (1-based)   4 its end (1-based, inclusive)
    5 strand of mate 1 (F/R)                 6 contig of mate 2, or '=' when it is mate 1's
    7 start of mate 2   8 its end            9 strand of mate 2 (F/R)
    10 mapping type: D deletion (TLEN > MAX), I insertion (TLEN < MIN), V inversion (mates on one strand),
       E everted (mates facing away from the library's orientation: tandem duplication),
       T translocation (mates on two contigs)
    11 edit distance of mate 1 + mate 2      12 mean base quality of the pair (Phred, both mates, rounded)
    13 probability of the two mappings, the product of their `mapping_probabilities` (printf's %e)

Differences from mrFAST, which maps one chromosome at a time and assumes one read length: mrFAST never
writes T lines (gkmap names the second contig in column 6, as VariationHunter expects); the ends are those
of the mappings (mrFAST: start + read length - 1); the columns keep R1 and R2 apart (mate 1 is R1), and F/R
is each mate's own strand on the reference.
"""
import re

import numpy as np

from mapper.align import all_m_mismatches, decimals
from mapper.sam import value_texts

INDEL_FACTOR = 0.0003        # per inserted or deleted base (mrFAST: indel rate 1e-4 + Illumina indel errors 2e-4)
MISMATCH_FLOOR = 0.001       # a mismatch costs 0.001 + its base's error probability 10^(-Q/10)
PHRED_OFFSET = 33
_CIGAR = re.compile(r"(\d+)([MID])")
_MD = re.compile(r"(\d+)|\^[A-Z]+|([A-Z])")


def _probability(cigar, md, phred):
    """mrFAST's score of one mapping: 0.0003 per indel base times, per mismatched base (N included),
    0.001 + 10^(-Q/10) with Q that base's quality. `phred` lists the read's qualities on its mapped strand."""
    columns, q, indels = [], 0, 0   # read offset of each M column, in reference order
    for n, op in _CIGAR.findall(cigar):
        n = int(n)
        if op == "M":
            columns.extend(range(q, q + n))
        if op != "D":
            q += n
        if op != "M":
            indels += n
    p, column = INDEL_FACTOR ** indels, 0
    for matches, mismatch in _MD.findall(md):
        if matches:
            column += int(matches)
        elif mismatch:
            p *= MISMATCH_FLOOR + 10.0 ** (-phred[columns[column]] / 10)
            column += 1
    return p


# what a mismatched base of Phred quality q costs (_probability's factor), by q: the same float expression,
# so that the products below are _probability's to the last bit
_MISMATCH_COST = np.array([MISMATCH_FLOOR + 10.0 ** (-q / 10) for q in range(256)])
CHUNK = 1 << 16  # loci scored together, at most (a [CHUNK, read length] table of codes at a time)


def mapping_probabilities(mate, idx, described, reference):
    """float [len(idx)]: `_probability` of the loci `idx` of a paired.Mate (FASTA reads count as Q0), each
    distinct locus scored once. Those whose reported alignment is ungapped (a span of the read's length with
    as many mismatches as edits: align.describe's all-M rule) are scored together from the codes, their
    factors multiplied in column order as _probability does; the gapped ones one by one from their CIGAR
    and MD (few: a discordant-heavy run has tens of thousands of combinations a batch)."""
    if not len(idx):
        return np.ones(0)
    loci, inverse = np.unique(idx, return_inverse=True)
    batch, rows, found = mate.batch, mate.found.rows, mate.found.loci
    qual = batch.qual if batch.qual is not None else np.full(len(batch.seq), PHRED_OFFSET, np.uint8)
    p, done = np.ones(len(loci)), np.zeros(len(loci), dtype=bool)
    length = rows.length[found.row[loci]]
    spans = np.flatnonzero(found.end[loci] - found.start[loci] == length)
    for L in np.unique(length[spans]).tolist():
        group = spans[length[spans] == L]
        for a in range(0, len(group), CHUNK):
            g = group[a:a + CHUNK]
            at = loci[g]
            exact, mismatch, _ = all_m_mismatches(rows, found.row[at], found.start[at], found.edits[at], reference, L)
            g, at, mismatch = g[exact], at[exact], mismatch[exact]
            owner, column = np.nonzero(mismatch)  # row-major: each locus's mismatches in column order
            reverse = mate.strand[at[owner]] == 1
            base = batch.starts[mate.read[at[owner]]] + np.where(reverse, L - 1 - column, column)
            cost = _MISMATCH_COST[qual[base].astype(np.int64) - PHRED_OFFSET]
            rank = np.arange(len(owner)) - np.searchsorted(owner, owner)
            score = np.ones(len(g))
            for k in range(int(rank.max()) + 1 if len(rank) else 0):
                kth = rank == k
                score[owner[kth]] *= cost[kth]
            p[g], done[g] = score, True
    rest = np.flatnonzero(~done)
    for i, k, r, rv in zip(rest.tolist(), described.at(loci[rest]), mate.read[loci[rest]].tolist(),
                           mate.strand[loci[rest]].tolist()):
        phred = qual[batch.starts[r]:batch.starts[r + 1]].astype(np.int64) - PHRED_OFFSET
        p[i] = _probability(described.cigars[k], described.mds[k], (phred[::-1] if rv else phred).tolist())
    return p[inverse]


def mean_qualities(b1, b2):
    """float [n]: mean Phred quality over both mates of each pair (0 for FASTA input)."""
    if b1.qual is None or b2.qual is None:
        return np.zeros(len(b1))
    total = np.zeros(len(b1))
    for batch in (b1, b2):
        cumulative = np.concatenate([[0], np.cumsum(batch.qual, dtype=np.int64)])
        total += cumulative[batch.starts[1:]] - cumulative[batch.starts[:-1]]
    length = b1.lengths + b2.lengths
    return np.where(length > 0, total / np.maximum(length, 1) - PHRED_OFFSET, 0.0)


def divet_text(qnames, reference, m1, a, m2, b, letters, codes, probabilities, quality):
    """DIVET lines for the combinations (locus a of mate 1, locus b of mate 2) with type `letters[codes]`.

    Built column by column, as the SAM lines are (sam_pairs.mate_lines): a table of text pieces, the contig
    names, strands and types taken from small tables, the numbers spelled all at once, each distinct mean
    quality and probability formatted once (a probability is a product of a few factors: most repeat),
    joined in one call."""
    n = len(a)
    if not n:
        return ""
    pair = m1.read[a]
    c1, c2 = m1.contig[a], m2.contig[b]
    # the five numbers of a line (starts 1-based, ends inclusive, the pair's edits), spelled in one call
    numbers = np.stack([m1.start[a] - reference.starts[c1] + 1, m1.end[a] - reference.starts[c1],
                        m2.start[b] - reference.starts[c2] + 1, m2.end[b] - reference.starts[c2],
                        m1.edits[a].astype(np.int64) + m2.edits[b]], axis=1)
    spelled = np.array(decimals(numbers.ravel()), dtype=object).reshape(n, 5)
    strand = np.array(["\tF\t", "\tR\t"], dtype=object)
    names = np.array([f"{name}\t" for name in reference.names] + ["=\t"], dtype=object)
    table = np.empty((n, 16), dtype=object)
    table[:, 0] = np.asarray(qnames, dtype=object)[pair]
    table[:, 1] = table[:, 4] = table[:, 9] = "\t"
    table[:, 2] = names[c1]
    table[:, [3, 5, 8, 10, 13]] = spelled
    table[:, 6] = strand[m1.strand[a].astype(np.int64)]
    table[:, 7] = names[np.where(c1 == c2, len(reference.names), c2)]
    table[:, 11] = strand[m2.strand[b].astype(np.int64)]
    table[:, 12] = np.array([f"{letter}\t" for letter in letters], dtype=object)[codes]
    table[:, 14] = value_texts(quality[pair], "\t{:.0f}\t".format)
    table[:, 15] = value_texts(probabilities[0] * probabilities[1], "{:e}\n".format)
    return "".join(table.ravel().tolist())
