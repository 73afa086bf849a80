"""SAM records of read pairs: one line per mate for each reported row (paired.py decides the rows).

Input : `Rows`, arrays of one length: the pair (batch index), the rank of the row among the pair's rows
        (0 primary, > 0 FLAG 256), proper (FLAG 2), and per mate the locus (index into paired.Mate's flat
        loci, -1 when unmapped), NH and MAPQ.
Output: the lines (no newline) of one mate, one per row, with FLAG 1 | 2 | 4 | 8 | 16 | 32 | 64 or 128 | 256,
        RNEXT/PNEXT and TLEN as SAM defines them: TLEN is leftmost to rightmost base, positive on the mate
        that starts first (R1 on a tie), 0 unless both map to one contig. An unmapped mate of a mapped one
        is placed at its mate (RNAME/POS) and the mapped one's RNEXT/PNEXT point at itself, as the spec
        recommends. SEQ/QUAL of a reverse-strand mate are reverse-complemented/reversed (sam.py's helper).
"""
from dataclasses import dataclass

import numpy as np

from mapper.sam import FLAG_REVERSE, FLAG_SECONDARY, FLAG_UNMAPPED, _texts

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
    """SAM lines of mate `which` (0: R1, 1: R2) of `mates` (paired.Mate) for `rows`. `described` holds the
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
    batch = mate.batch
    fastq = batch.qual is not None
    seq_f, seq_r = _texts(batch.seq, batch.starts, pair, None), _texts(batch.seq, batch.starts, pair, "complement")
    if fastq:
        qual_f, qual_r = _texts(batch.qual, batch.starts, pair, None), _texts(batch.qual, batch.starts, pair, "reverse")
    else:
        qual_f = qual_r = ["*"] * len(pair)
    where = np.full(len(pair), -1)
    where[mapped] = described.at(own[mapped])
    xs = ["" if s < 0 else f"\tXS:i:{-s}" for s in mate.scores[1][pair].tolist()]
    tags = [f"\tNM:i:{described.nms[k]}\tMD:Z:{described.mds[k]}\tAS:i:{-described.nms[k]}{x}\tNH:i:{h}"
            f"\tHI:i:{r + 1}" if k >= 0 else ""
            for k, h, x, r in zip(where.tolist(), nh.tolist(), xs, rows.rank.tolist())]
    if mate_tags:
        obatch = other.batch
        oseq = _texts(obatch.seq, obatch.starts, pair, None)
        oqual = _texts(obatch.qual, obatch.starts, pair, None) if obatch.qual is not None else ["*"] * len(pair)
        tags = [f"{t}\tNS:Z:{s}\tNQ:Z:{q}" for t, s, q in zip(tags, oseq, oqual)]
    if read_group is not None:
        tags = [f"{t}\tRG:Z:{read_group}" for t in tags]
    names = reference.names + ["=", "*"]
    cigars = described.cigars
    # each row's SEQ/QUAL: 0 forward, 1 reversed, 2 '*' (a secondary row without them)
    shown = np.where((rows.rank > 0) & (not secondary_seq), 2, reverse.astype(np.int64))
    seqs, quals = (seq_f, seq_r, ["*"] * len(pair)), (qual_f, qual_r, ["*"] * len(pair))
    return [
        f"{qnames[p]}\t{f}\t{names[r]}\t{x}\t{q}\t{cigars[k] if k >= 0 else '*'}\t{names[rn]}\t{pn}\t{t}\t"
        f"{seqs[sq][i]}\t{quals[sq][i]}{tags[i]}"
        for i, (p, f, r, x, q, k, rn, pn, t, sq) in enumerate(zip(
            pair.tolist(), flag.tolist(), rname.tolist(), pos.tolist(), mapq.tolist(), where.tolist(), rnext.tolist(),
            pnext.tolist(), tlen.tolist(), shown.tolist()))
    ]
