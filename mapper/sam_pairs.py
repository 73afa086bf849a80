"""SAM records of read pairs: one line per mate for each reported row (paired.py decides the rows).

Input : `Rows`, arrays of one length: the pair (batch index), the rank of the row among the pair's rows
        (0 primary, > 0 FLAG 256), proper (FLAG 2), and per mate the locus (index into paired.Mate's flat
        loci, -1 when unmapped), NH and MAPQ.
Output: the lines of one mate, one per row (a table of text pieces, see mate_lines), with FLAG 1 | 2 |
        4 | 8 | 16 | 32 | 64 or 128 | 256, RNEXT/PNEXT and TLEN as SAM defines them: TLEN is leftmost to rightmost base, positive on the mate
        that starts first (R1 on a tie), 0 unless both map to one contig. An unmapped mate of a mapped one
        is placed at its mate (RNAME/POS) and the mapped one's RNEXT/PNEXT point at itself, as the spec
        recommends. SEQ/QUAL of a reverse-strand mate are reverse-complemented/reversed (sam.py's
        read_fields), '*' on secondary rows with --no-secondary-seq.
"""
from dataclasses import dataclass

import numpy as np

from mapper.align import decimals
from mapper.sam import FLAG_REVERSE, FLAG_SECONDARY, FLAG_UNMAPPED, read_fields, value_texts

FLAG_PAIRED, FLAG_PROPER, FLAG_MATE_UNMAPPED, FLAG_MATE_REVERSE = 1, 2, 8, 32
FLAG_FIRST, FLAG_LAST = 64, 128
_SAME, _NONE = -2, -1      # RNEXT "=" and "*" (indices into the contig names + ["=", "*"])


def _at(values, idx, fill):
    """values[idx] where idx >= 0, else fill."""
    if not len(values):
        return np.full(len(idx), fill, dtype=np.int64)
    return np.where(idx >= 0, values[np.maximum(idx, 0)], fill)


@dataclass
class Rows:
    pair: np.ndarray
    rank: np.ndarray
    proper: np.ndarray
    loc: list           # [mate-1 loci, mate-2 loci]
    nh: list            # [mate-1 NH, mate-2 NH]
    mapq: list

    def take(self, index):
        return Rows(self.pair[index], self.rank[index], self.proper[index], [x[index] for x in self.loc],
                    [x[index] for x in self.nh], [x[index] for x in self.mapq])


def mate_lines(mates, which, rows, described, qnames, reference, mate_tags=False, read_group=None,
               secondary_seq=True):
    """SAM lines of mate `which` (0: R1, 1: R2) of `mates` (paired.Mate) for `rows`, as an object array
    [len(rows), 17] of text pieces, each row one line with its line break (`joined` makes the text), so that
    the caller interleaves the mates' lines and orders them without splitting text. `described` holds the
    CIGAR/MD/NM of this mate's loci; `mate_tags` adds the other mate's SEQ/QUAL as NS:Z/NQ:Z (OEA output);
    without `secondary_seq` a secondary row's SEQ and QUAL are '*'.
    A mapped mate's tags: NM, MD, AS (-edits), XS (-edits of the mate's second-best locus, when it has
    one), NH, HI (the row's rank + 1); every record ends with RG:Z:`read_group` when there is one."""
    mate, other = mates[which], mates[1 - which]
    pair, own, oth, nh = rows.pair, rows.loc[which], rows.loc[1 - which], rows.nh[which]
    mapped, omapped = own >= 0, oth >= 0
    contig, ocontig = _at(mate.contig, own, _NONE), _at(other.contig, oth, _NONE)
    start, ostart = _at(mate.start, own, 0), _at(other.start, oth, 0)
    reverse = mapped & (_at(mate.strand, own, 0) == 1)
    oreverse = omapped & (_at(other.strand, oth, 0) == 1)
    pos = np.where(mapped, start - reference.starts[np.maximum(contig, 0)] + 1, 0)
    opos = np.where(omapped, ostart - reference.starts[np.maximum(ocontig, 0)] + 1, 0)
    rname = np.where(mapped, contig, ocontig)
    rnext = np.where(omapped, np.where(ocontig == rname, _SAME, ocontig), np.where(mapped, _SAME, _NONE))
    pnext = np.where(omapped, opos, pos)
    pos = np.where(mapped, pos, opos)
    both = mapped & omapped & (contig == ocontig)
    span = np.maximum(_at(mate.end, own, 0), _at(other.end, oth, 0)) - np.minimum(start, ostart)
    first = (start < ostart) | ((start == ostart) & (which == 0))
    tlen = np.where(both, np.where(first, span, -span), 0)
    flag = (FLAG_PAIRED + FLAG_PROPER * rows.proper + FLAG_UNMAPPED * ~mapped + FLAG_MATE_UNMAPPED * ~omapped
            + FLAG_REVERSE * reverse + FLAG_MATE_REVERSE * oreverse + (FLAG_LAST if which else FLAG_FIRST)
            + FLAG_SECONDARY * (rows.rank > 0))
    mapq = np.where(mapped, rows.mapq[which], 0)
    n = len(pair)
    # the lines are built column by column (sam.batch_records' way), not record by record: a table of text
    # pieces, each distinct FLAG, MAPQ and tag value formatted once, positions spelled all at once, SEQ/QUAL
    # sliced once per read and strand, joined in one call
    kept = np.where(mapped, np.searchsorted(described.needed, own), -1)
    names = reference.names + ["=", "*"]
    table = np.empty((n, 17), dtype=object)
    table[:, 0] = np.asarray(qnames, dtype=object)[pair]  # an object array already: no copy
    table[:, 1] = value_texts(flag, "\t{}\t".format)
    table[:, 2] = np.array([f"{name}\t" for name in names], dtype=object)[rname]
    table[:, 3] = decimals(pos)
    table[:, 4] = value_texts(mapq, "\t{}\t".format)
    table[:, 5] = np.array(described.cigars + ["*"], dtype=object)[kept]
    table[:, 6] = np.array([f"\t{name}\t" for name in names], dtype=object)[rnext]
    table[:, 7] = decimals(pnext)
    table[:, 8] = np.where(tlen < 0, "\t-", "\t")
    table[:, 9] = decimals(np.abs(tlen))
    # each row's "\tSEQ\tQUAL": 0 forward, 1 reversed (SEQ reverse-complemented), 2 '*' (a secondary row
    # without them: --no-secondary-seq)
    shown = np.where((rows.rank > 0) & (not secondary_seq), 2, reverse.astype(np.int64))
    needed = np.zeros((2, len(mate.batch)), dtype=bool)
    needed[shown[shown < 2], pair[shown < 2]] = True
    fields = np.concatenate([read_fields(mate.batch, needed, b"\t", b"\t"),
                             np.full((1, len(mate.batch)), "\t*\t*", dtype=object)])
    table[:, 10] = fields[shown, pair]
    table[:, 11:16] = ""
    at = np.flatnonzero(mapped)
    if len(at):
        k = kept[at]
        nms = np.asarray(described.nms, dtype=np.int64)[k]
        second = np.asarray(mate.scores[1], dtype=np.int64)[pair[at]]
        table[at, 11] = value_texts(nms, "\tNM:i:{}\tMD:Z:".format)
        table[at, 12] = np.array(described.mds, dtype=object)[k]
        table[at, 13] = (value_texts(nms, lambda v: f"\tAS:i:{-v}")
                         + value_texts(second + 1, lambda v: f"\tXS:i:{1 - v}" if v else ""))
        table[at, 14] = value_texts(nh[at], "\tNH:i:{}".format) + value_texts(rows.rank[at] + 1, "\tHI:i:{}".format)
    if mate_tags:
        seen = np.zeros((2, len(other.batch)), dtype=bool)
        seen[0, pair] = True
        table[:, 15] = read_fields(other.batch, seen, b"\tNS:Z:", b"\tNQ:Z:")[0, pair]
    table[:, 16] = f"\tRG:Z:{read_group}\n" if read_group is not None else "\n"
    return table


def joined(table):
    """The text of a `mate_lines` table (or of its rows stacked and reordered)."""
    return "".join(table.ravel().tolist())


