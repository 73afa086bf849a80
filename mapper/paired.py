"""Paired-end mapping (`--pe`, `--mp`): both mates through the single-end core, then pairing, vectorised
across the whole batch (no per-pair Python loop).

Input : R1 and R2 read in lockstep (`read_pairs`: read i of one is the mate of read i of the other), each
        batch mapped by `pipeline.find_loci` to all its loci (`Mate`: flat arrays, grouped by pair in report
        order).
Output: per batch, the main SAM text (every pair exactly once as a primary pair, sam_pairs.py), the OEA SAM
        text and the DIVET lines (divet.py); the counts of `PairCounters`.

Pairing:
1. candidates: mate-2 loci sorted by key = pair * stride + global start; each mate-1 locus finds, with two
   searchsorted, the mate-2 loci of its pair that start within MAX of it (a longer pair cannot be
   concordant). At most `PAIR_CANDIDATES` combinations per read pair are examined (a tandem repeat can
   give millions), `CHUNK` at a time, so memory stays bounded;
2. `classify`: each combination is concordant (one contig, the library's orientation, MIN <= TLEN <= MAX)
   or gets its DIVET type;
3. per pair, the concordant combinations with the fewest total edits are reported (the first as the
   primary pair, the others with FLAG 256). A pair without one is discordant (both mates map: their
   combinations go to OUT_DIVET.vh), one-end anchored (OEA: one mate maps, OUT_OEA.sam) or unmapped.
"""
import functools
import itertools
import logging
from dataclasses import dataclass, field

import numpy as np
from mapper.align import describe
from mapper.divet import divet_text, mapping_probabilities, mean_qualities
from mapper.errors import InputError, UsageError
from mapper.insert_size import ESTIMATE_PAIRS, ESTIMATE_SCAN, insert_range
from mapper.options import PAIRED
from mapper.pipeline import Counters, add_ints, find_loci
from mapper.reads import read_batches
from mapper.sam import read_scores
from mapper.sam_pairs import Rows, joined, mate_lines
from mapper.seeding import ragged_arange

log = logging.getLogger("gkmap")

PAIR_CANDIDATES = 10_000  # mate combinations examined per read pair, at most (documented in docs/paired.md)
CHUNK = 1 << 21           # combinations examined at once

CONCORDANT = 0
# Combination codes -> letters. DIVET (VariationHunter's mapping types): T mates on two contigs
# (translocation), V mates on one strand (inversion), E mates facing away from the library's orientation
# (everted: tandem duplication), D TLEN > MAX (deletion), I TLEN < MIN (insertion).
TYPES = "CTVEDI"


@dataclass
class PairCounters:
    """What a paired run counts: read pairs by class, output lines, the TLEN range, and the mates' Counters."""
    mates: Counters
    pairs: int = 0
    concordant: int = 0
    discordant: int = 0
    oea: int = 0
    unmapped: int = 0
    divet_lines: int = 0
    oea_records: int = 0
    insert: tuple = (None, None)

    CLASSES = ("concordant", "discordant", "oea", "unmapped")   # the class codes 0..3 of pair_batch

    def __post_init__(self):
        self.mates.times.setdefault("pair", 0.0)   # listed in the summary even before the first batch is paired

    def add(self, classes):
        self.pairs += len(classes)
        for name, count in zip(self.CLASSES, np.bincount(classes, minlength=4)):
            setattr(self, name, getattr(self, name) + int(count))

    def merge(self, part):
        """Add another PairCounters' counts, its mates' included (a render process's, a chunk's)."""
        add_ints(self, part)
        self.mates.merge(part.mates)

    def summary(self):
        return (f"{self.pairs} read pairs: {self.concordant} concordant, {self.discordant} discordant "
                f"({self.divet_lines} DIVET lines), {self.oea} one-end anchored ({self.oea_records} OEA records), "
                f"{self.unmapped} unmapped; concordant TLEN {self.insert[0]}..{self.insert[1]}")


@dataclass
class MappedPairs:
    """A batch of read pairs with both mates' loci (`find_mates`): what pairing and the insert-size estimate read."""
    r1: object                    # reads.ReadBatch of R1
    r2: object                    # reads.ReadBatch of R2
    names: list                   # QNAMEs
    found1: object                # pipeline.BatchLoci of R1
    found2: object                # pipeline.BatchLoci of R2


@dataclass
class Mate:
    """One mate's loci in a batch: flat arrays grouped by pair (read) in report order, as find_loci gives them."""
    batch: object                 # reads.ReadBatch
    found: object                 # pipeline.BatchLoci
    first: np.ndarray = field(init=False)   # index of each pair's first locus

    def __post_init__(self):
        loci = self.found.loci
        self.contig, self.start, self.end, self.edits = loci.contig, loci.start, loci.end, loci.edits
        self.strand, self.read, self.nh = self.found.strand, self.found.read, self.found.nh
        self.first = np.cumsum(self.nh) - self.nh

    @functools.cached_property
    def scores(self):
        """(single-end MAPQ of each read's primary locus, its second-best edit distance or -1): sam.read_scores."""
        n = len(self.nh)
        return read_scores(self.read, self.edits, n, self.found.rows.e[:n])


def _strip_mate_suffix(names):
    return [n[:-2] if n[-2:] in ("/1", "/2") else n for n in names]


def pair_names(b1, b2, path1, path2):
    """QNAMEs of a batch pair: the names, equal but for a trailing /1 or /2; InputError naming the record."""
    if b1.names == b2.names:
        return b1.names
    n1, n2 = _strip_mate_suffix(b1.names), _strip_mate_suffix(b2.names)
    if n1 == n2:
        return n1
    i = next(i for i, (x, y) in enumerate(zip(n1, n2)) if x != y)
    raise InputError(path2, f"read '{b2.names[i]}' is not the mate of read '{b1.names[i]}' of {path1} "
                            f"(mate names must be equal but for a trailing /1 or /2)", record=b2.first + i + 1)


def read_pairs(path1, path2, batch_size):
    """Yield (R1 batch, R2 batch, QNAMEs) in lockstep; InputError when the files do not pair."""
    for b1, b2 in itertools.zip_longest(read_batches(path1, batch_size), read_batches(path2, batch_size)):
        n1, n2 = (len(b) if b is not None else 0 for b in (b1, b2))
        if n1 != n2:
            (long_path, longer), short_path = ((path1, b1), path2) if n1 > n2 else ((path2, b2), path1)
            k = longer.first + min(n1, n2)
            raise InputError(long_path, f"read '{longer.names[k - longer.first]}' has no mate: {short_path} ends "
                                        f"after read {k}", record=k + 1)
        yield b1, b2, pair_names(b1, b2, path1, path2)


def find_mates(b1, b2, names, index, backend, filter_mode, opts, counters):
    """MappedPairs of a batch pair: each mate mapped by the single-end core (each file named in its errors)."""
    return MappedPairs(b1, b2, names, *(find_loci(b, index, backend, filter_mode, opts.e, path, counters)
                                        for b, path in ((b1, opts.reads), (b2, opts.reads2))))


def classify(m1, a, m2, b, orientation, lo, hi):
    """(codes uint8 [k] as in TYPES, TLEN int64 [k]) of the mate combinations (locus a of mate 1, b of mate 2).

    TLEN is SAM's: leftmost to rightmost base of the two mappings. Orientation FR: the forward mate's 5'
    end (its first base) is not right of the reverse mate's 5' end (its last base), as in bwa, so a fragment
    shorter than the reads (both running into the adapter, the reverse mate starting first) is still FR.
    RF is its mirror image (both mates reverse-complemented): the reverse mate's first base is not right of
    the forward mate's last base. A pair facing neither way is everted (E)."""
    s1, s2 = m1.start[a], m2.start[b]
    e1, e2 = m1.end[a], m2.end[b]
    tlen = np.maximum(e1, e2) - np.minimum(s1, s2)
    r1, r2 = m1.strand[a], m2.strand[b]
    forward1 = r1 == 0
    if orientation == "FR":
        facing = np.where(forward1, s1, s2) <= np.where(forward1, e2, e1) - 1
    else:
        facing = np.where(forward1, s2, s1) <= np.where(forward1, e1, e2) - 1
    code = np.select([m1.contig[a] != m2.contig[b], r1 == r2, ~facing, tlen > hi, tlen < lo],
                     [1, 2, 3, 4, 5], CONCORDANT)
    return code.astype(np.uint8), tlen


def _group_first(pair):
    """For each element, the index of the first element of its run of equal `pair` values."""
    new = np.ones(len(pair), dtype=bool)
    new[1:] = pair[1:] != pair[:-1]
    return np.flatnonzero(new)[np.cumsum(new) - 1]


def _combinations(m1, m2, reach, genome_length):
    """Yield (a, b) chunks: every mate-2 locus b of a pair starting within `reach` of the pair's mate-1
    locus a, at most PAIR_CANDIDATES per pair (the first in mate-1 report order, each one's mate-2 loci from
    left to right); chunks hold whole pairs, in pair order."""
    stride = genome_length + reach + 1     # keys of two pairs never come within `reach` of each other
    key = m2.read * stride + m2.start
    order = np.argsort(key, kind="stable")
    key = key[order]
    base = m1.read * stride + m1.start
    first = np.searchsorted(key, base - reach, "left")
    count = np.searchsorted(key, base + reach, "right") - first
    before = np.cumsum(count) - count
    before -= before[m1.first[m1.read]]    # combinations of the same pair before this locus
    count = np.clip(PAIR_CANDIDATES - before, 0, count)
    per_pair = np.zeros(len(m1.nh), dtype=np.int64)
    np.add.at(per_pair, m1.read, count)
    chunk = ((np.cumsum(per_pair) - per_pair) // CHUNK)[m1.read]
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(chunk)) + 1, [len(chunk)]])
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        owner, local = ragged_arange(count[lo:hi])
        a = lo + owner
        yield a, order[first[a] + local]


def best_concordant(m1, m2, orientation, lo, hi, genome_length):
    """(a, b) of every pair's concordant combinations with the fewest total edits, by pair, then in mate-1
    and mate-2 report order."""
    kept = [], []
    for a, b in _combinations(m1, m2, hi, genome_length):
        code, _ = classify(m1, a, m2, b, orientation, lo, hi)
        a, b = a[code == CONCORDANT], b[code == CONCORDANT]
        order = np.lexsort((b, a, m1.edits[a] + m2.edits[b], m1.read[a]))
        a, b = a[order], b[order]
        total = m1.edits[a] + m2.edits[b]
        best = total == total[_group_first(m1.read[a])]
        kept[0].append(a[best])
        kept[1].append(b[best])
    return tuple(np.concatenate(k) if k else np.zeros(0, np.int64) for k in kept)


@dataclass
class Confident:
    """The confidently paired read pairs of one batch, what `insert_size` reads: mates that map once each, on
    one contig, in the library's orientation."""
    numbers: np.ndarray           # their 0-based numbers in the files, in pair order
    tlens: np.ndarray             # their TLENs
    end: int                      # pairs in the files up to the batch's last


def confident_tlens(mapped, orientation):
    """Confident of a MappedPairs."""
    m1, m2 = Mate(mapped.r1, mapped.found1), Mate(mapped.r2, mapped.found2)
    pairs = np.flatnonzero((m1.nh == 1) & (m2.nh == 1))
    code, tlen = classify(m1, m1.first[pairs], m2, m2.first[pairs], orientation, 0, np.inf)
    confident = code == CONCORDANT
    return Confident(mapped.r1.first + pairs[confident], tlen[confident], mapped.r1.first + len(mapped.r1))


@dataclass
class PairSettings:
    orientation: str
    lo: int
    hi: int
    max_records: int
    max_oea: int
    max_dis: int
    read_group: str = None        # -R's ID: RG:Z on every record
    secondary_seq: bool = True    # False: SEQ and QUAL '*' on secondary records (--no-secondary-seq)

    @classmethod
    def of(cls, opts, lo, hi):
        return cls(PAIRED[opts.paired], lo, hi, opts.max_records, opts.max_oea, opts.max_dis, opts.read_group_id,
                   opts.secondary_seq)


def _pair_mapq(ties):
    """MAPQ of the mates of a concordant pair: 60 when its best pair is the only one, else 0."""
    return np.where(ties == 1, 60, 0)


class _Described:
    """CIGAR/MD/NM of the loci of one mate that some output needs (align.describe, once per batch)."""

    def __init__(self, mate, needed, reference):
        self.needed = np.unique(np.concatenate(needed))
        self.cigars, self.mds, self.nms = describe(mate.found.rows, mate.found.loci.take(self.needed), reference)

    def at(self, idx):
        """Positions in the described lists of loci `idx` (all >= 0)."""
        return np.searchsorted(self.needed, idx).tolist()


def _main_rows(m1, m2, a, b, ties, max_records):
    """Rows of the main SAM: the best concordant pairs (a, b) (-n of them), else each mate's primary locus."""
    pair = m1.read[a]
    rank = np.arange(len(pair)) - _group_first(pair)
    if max_records:
        keep = rank < max_records
        a, b, pair, rank = a[keep], b[keep], pair[keep], rank[keep]
    rest = np.flatnonzero(ties == 0)
    mapq = _pair_mapq(ties[pair])
    rows = Rows(pair=np.concatenate([pair, rest]), rank=np.concatenate([rank, np.zeros(len(rest), np.int64)]),
                proper=np.concatenate([np.ones(len(a), bool), np.zeros(len(rest), bool)]),
                loc=[np.concatenate([x, np.where(m.nh[rest] > 0, m.first[rest], -1)]) for x, m in ((a, m1), (b, m2))],
                nh=[np.concatenate([ties[pair], m.nh[rest]]) for m in (m1, m2)],
                mapq=[np.concatenate([mapq, m.scores[0][rest]]) for m in (m1, m2)])
    return rows.take(np.lexsort((rows.rank, rows.pair)))


def _oea_rows(mates, anchors, which):
    """Rows of OUT_OEA.sam for the anchors (pairs) of mate `which`: every locus of the anchor."""
    mate = mates[which]
    owner, rank = ragged_arange(mate.nh[anchors])
    pair = anchors[owner]
    own, none = mate.first[pair] + rank, np.full(len(pair), -1)
    return Rows(pair=pair, rank=rank, proper=np.zeros(len(pair), bool),
                loc=[own, none] if which == 0 else [none, own], nh=[mate.nh[pair]] * 2,
                mapq=[np.where(rank == 0, mate.scores[0][pair], 0)] * 2)


def _divet_combinations(m1, m2, discordant, settings):
    """(a, b, type codes): the first --maxdis combinations of each discordant pair, mate-1 locus by mate-1
    locus (mrFAST's order)."""
    owner, c = ragged_arange(np.minimum(m1.nh[discordant] * m2.nh[discordant], settings.max_dis))
    pair = discordant[owner]
    a, b = m1.first[pair] + c // m2.nh[pair], m2.first[pair] + c % m2.nh[pair]
    code, _ = classify(m1, a, m2, b, settings.orientation, settings.lo, settings.hi)
    real = code != CONCORDANT     # only where PAIR_CANDIDATES cut the concordant search short
    return a[real], b[real], code[real]


def pair_batch(mapped, reference, settings, counters, pairs):
    """(main SAM, OEA SAM, DIVET) texts of one MappedPairs; updates the counters."""
    b1, b2 = mapped.r1, mapped.r2
    qnames = np.asarray(mapped.names, dtype=object)  # once: each mate's lines take theirs from it
    mates = m1, m2 = Mate(b1, mapped.found1), Mate(b2, mapped.found2)
    with counters.timed("pair"):
        a, b = best_concordant(m1, m2, settings.orientation, settings.lo, settings.hi, reference.size)
        ties = np.bincount(m1.read[a], minlength=len(b1))
        mapped1, mapped2 = m1.nh > 0, m2.nh > 0
        classes = np.select([ties > 0, mapped1 & mapped2, mapped1 | mapped2], [0, 1, 2], 3)  # PairCounters.CLASSES
        rows = _main_rows(m1, m2, a, b, ties, settings.max_records)
        oea = [_oea_rows(mates, np.flatnonzero((classes == 2) & (m.nh > 0) & (m.nh <= settings.max_oea)), k)
               for k, m in enumerate(mates)]
        da, db, codes = _divet_combinations(m1, m2, np.flatnonzero(classes == 1), settings)
    with counters.timed("align"):
        described = [_Described(m, [rows.loc[k][rows.loc[k] >= 0], oea[k].loc[k], d], reference)
                     for k, (m, d) in enumerate(((m1, da), (m2, db)))]
    with counters.timed("output"):
        group = settings.read_group
        lines = [mate_lines(mates, k, rows, described[k], qnames, reference, read_group=group,
                            secondary_seq=settings.secondary_seq) for k in (0, 1)]
        sam = joined(np.stack(lines, axis=1))  # row by row: R1's line, then R2's
        oea_lines = np.concatenate([mate_lines(mates, k, oea[k], described[k], qnames, reference, mate_tags=True,
                                               read_group=group, secondary_seq=settings.secondary_seq)
                                    for k in (0, 1)])
        oea_text = joined(oea_lines[np.argsort(np.concatenate([oea[0].pair, oea[1].pair]), kind="stable")])
        probabilities = [mapping_probabilities(m, idx, d, reference) for m, idx, d in zip(mates, (da, db), described)]
        divet = divet_text(qnames, reference, m1, da, m2, db, TYPES, codes, probabilities, mean_qualities(b1, b2))
    mapped = int(mapped1.sum() + mapped2.sum())
    counters.reads += 2 * len(b1)
    counters.mapped += mapped
    counters.unmapped += 2 * len(b1) - mapped
    counters.loci += int(m1.nh.sum() + m2.nh.sum())
    counters.records += 2 * len(rows.pair)
    pairs.add(classes)
    pairs.divet_lines += len(da)
    pairs.oea_records += len(oea_lines)
    return sam, oea_text, divet


def side_paths(output):
    """(OEA SAM, DIVET) paths named from -o OUT.sam (or OUT.bam): OUT_OEA.sam and OUT_DIVET.vh (mrFAST's layout)."""
    stem = output[:-4] if output.endswith((".sam", ".bam")) else output
    return f"{stem}_OEA.sam", f"{stem}_DIVET.vh"


def insert_size(batches, orientation, given):
    """(lo, hi, the items consumed): the concordant TLEN range, `given` (--min, --max) where both are set,
    else estimated (insert_size.py) from the first ESTIMATE_PAIRS confident pairs among the first
    ESTIMATE_SCAN pairs of the files; `given` overrides its side of the estimate.

    `batches` yields (item, its batch's Confident) in input order and is consumed only until the estimate
    is known. The pairs taken are fixed pair by pair, not batch by batch, so a distributed run, whose
    chunks are not the single process's batches, gets the same range (mapper/runners/cluster.py)."""
    if None not in given:
        return *given, []
    seen, tlens = [], []
    confident = 0
    for item, batch in batches:
        seen.append(item)
        tlens.append(batch.tlens[batch.numbers < ESTIMATE_SCAN])
        confident += len(tlens[-1])
        if confident >= ESTIMATE_PAIRS or batch.end >= ESTIMATE_SCAN:
            break
    tlens = np.concatenate(tlens)[:ESTIMATE_PAIRS]
    lo, hi = insert_range(tlens, orientation)
    lo, hi = given[0] if given[0] is not None else lo, given[1] if given[1] is not None else hi
    if lo > hi:
        raise UsageError(f"the TLEN range would be {lo}..{hi} (--min/--max and the estimate); "
                         f"give both --min and --max")
    q1, median, q3 = np.percentile(tlens, [25, 50, 75])
    log.info("insert size from the first %d uniquely mapped %s pairs: TLEN quartiles %.0f, %.0f, %.0f; "
             "concordant pairs have %d <= TLEN <= %d", len(tlens), orientation, q1, median, q3, lo, hi)
    return lo, hi, seen


def render_pairs(reference, settings, mapped):
    """({sink name: text}, the PairCounters of this batch) of one MappedPairs: `pair_batch` where it can run
    in a render process (render.HostWorkers.submit_call), its counts returned rather than added."""
    pairs = PairCounters(Counters())
    sam, oea, divet = pair_batch(mapped, reference, settings, pairs.mates, pairs)
    return {"sam": sam, "oea": oea, "divet": divet}, pairs
