"""Independent checks of mapper output: SAM parsing, edlib distances, and a CIGAR/MD replay.

Written apart from the mapper's own code paths (no seeding, no align.py): slow and obvious on purpose.
"""
import re

import edlib
import numpy as np

from mapper.alphabet import ENCODE

COMPLEMENT = str.maketrans("ACGTN", "TGCAN")


def read_sam(path):
    """(header lines, records as dicts with tags parsed)."""
    header, records = [], []
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines:
        if line.startswith("@"):
            header.append(line.rstrip("\n"))
            continue
        f = line.rstrip("\n").split("\t")
        rec = dict(qname=f[0], flag=int(f[1]), rname=f[2], pos=int(f[3]), mapq=int(f[4]), cigar=f[5],
                   seq=f[9], qual=f[10])
        for tag in f[11:]:
            key, kind, value = tag.split(":", 2)
            rec[key] = int(value) if kind == "i" else value
        records.append(rec)
    return header, records


def load_genome(path):
    """{contig name: upper-case sequence}, parsed without the mapper's reader."""
    import gzip
    with open(path, "rb") as f:
        opener = gzip.open if f.read(2) == b"\x1f\x8b" else open
    contigs, name, parts = {}, None, []
    with opener(path, "rt") as f:
        lines = f.read().splitlines()
    for line in lines:
        if line.startswith(">"):
            if name is not None:
                contigs[name] = "".join(parts).upper()
            name, parts = line[1:].split()[0], []
        else:
            parts.append(line.strip())
    contigs[name] = "".join(parts).upper()
    return contigs


def as_read(seq):
    """Spell a read for edlib: non-ACGT -> 'N'."""
    return re.sub("[^ACGT]", "N", seq.upper())


def as_ref(seq):
    """Spell a reference for edlib: non-ACGT -> 'n' (never equal to the read's 'N')."""
    return re.sub("[^ACGT]", "n", seq.upper())


def revcomp(seq):
    return seq.translate(COMPLEMENT)[::-1]


_SPELLED = [None, None]  # the last genome best_distance saw and its contigs spelled for edlib


def spelled_for_edlib(genome):
    """The genome's contigs as_ref spells them, made once for a run of reads against one genome (spelling a
    Shigella contig anew for each read and strand was a third of its exhaustive oracle's 94 s)."""
    if _SPELLED[0] is not genome:
        _SPELLED[:] = genome, [as_ref(contig) for contig in genome.values()]
    return _SPELLED[1]


def best_distance(read, genome, k):
    """Best semi-global distance of the read (either strand) against every contig, if <= k, else None."""
    best = None
    contigs = spelled_for_edlib(genome)
    for strand_seq in (as_read(read), revcomp(as_read(read))):
        for contig in contigs:
            d = edlib.align(strand_seq, contig, mode="HW", task="distance", k=k)["editDistance"]
            if d >= 0 and (best is None or d < best):
                best = d
    return best


def ref_span(cigar):
    return sum(int(n) for n, op in re.findall(r"(\d+)([MIDNSHP=X])", cigar) if op in "MDN=X")


def replay(rec, genome):
    """Walk CIGAR over SEQ and the reference: (MD, NM) as the spec defines them (N never matches)."""
    ref = genome[rec["rname"]]
    r, q, matched, md, nm = rec["pos"] - 1, 0, 0, [], 0
    seq = rec["seq"]
    for n, op in re.findall(r"(\d+)([MID])", rec["cigar"]):
        n = int(n)
        if op == "M":
            for i in range(n):
                a, b = seq[q + i], ref[r + i]
                if a == b and a in "ACGT":
                    matched += 1
                else:
                    md.append(f"{matched}{b if b in 'ACGT' else 'N'}")
                    matched, nm = 0, nm + 1
            q, r = q + n, r + n
        elif op == "I":
            q, nm = q + n, nm + n
        else:
            md.append(f"{matched}^{''.join(c if c in 'ACGT' else 'N' for c in ref[r:r + n])}")
            matched, r, nm = 0, r + n, nm + n
    assert q == len(seq), f"CIGAR {rec['cigar']} does not cover the read ({q} of {len(seq)})"
    md.append(str(matched))
    return "".join(md), nm


def check_record(rec, genome, e):
    """A mapped record is consistent: CIGAR/MD/NM replay against the reference, edlib agrees, NM <= e."""
    md, nm = replay(rec, genome)
    assert rec["MD"] == md, (rec["qname"], rec["MD"], md)
    assert rec["NM"] == nm, (rec["qname"], rec["NM"], nm)
    start = rec["pos"] - 1
    window = genome[rec["rname"]][start:start + ref_span(rec["cigar"])]
    assert edlib.align(as_read(rec["seq"]), as_ref(window), mode="NW")["editDistance"] == nm
    assert nm <= e, (rec["qname"], nm, e)


def default_e(length):
    return min(-(-4 * length // 100), 25, length // 4)


def codes(seq):
    return ENCODE[np.frombuffer(seq.encode(), dtype=np.uint8)]


def assert_bare_secondaries(bare, full):
    """`bare` (SAM record lines of a --no-secondary-seq run) are `full`'s (the same run without it) with SEQ
    and QUAL '*' on every secondary record (FLAG 256), and only there; returns the secondaries' count."""
    assert len(bare) == len(full)
    secondaries = 0
    for b, f in zip(bare, full):
        b, f = b.split("\t"), f.split("\t")
        if int(f[1]) & 256:
            secondaries += 1
            assert b[9:11] == ["*", "*"] and b[:9] + b[11:] == f[:9] + f[11:], (b, f)
        else:
            assert b == f, (b, f)
    return secondaries
