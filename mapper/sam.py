"""SAM output: header, and the records of a batch in input read order.

Input : a `ReadBatch`, its selected loci (`verify.Mappings`, in report order), their CIGAR/MD/NM, and NH.
Output: text; per read either its records (primary first, then FLAG 256 secondaries, CONVENTIONS.md) or
one unmapped record (FLAG 4). MAPQ is 60 for a read with one locus and 0 for a multi-mapped read
(mrFAST reports all loci and no MAPQ; this is the simplest honest value, documented in the README).
The reverse strand's SEQ is reverse-complemented and its QUAL reversed, as the spec requires.
"""
import numpy as np

from mapper import __version__
from mapper.alphabet import COMPLEMENT_ASCII

FLAG_UNMAPPED, FLAG_REVERSE, FLAG_SECONDARY = 4, 16, 256


def header(reference, command_line):
    lines = ["@HD\tVN:1.6\tSO:unsorted\tGO:query"]
    lines += [f"@SQ\tSN:{name}\tLN:{length}" for name, length in zip(reference.names, reference.lengths.tolist())]
    lines.append(f"@PG\tID:gkmap\tPN:gkmap\tVN:{__version__}\tCL:{command_line}")
    return "\n".join(lines) + "\n"


def _texts(buffer, starts, reads, reverse):
    """Per read in `reads`: its slice of the ASCII buffer, or its reverse (complement) when `reverse`."""
    if reverse is None:
        text = buffer.tobytes().decode("ascii")
        return [text[a:b] or "*" for a, b in zip(starts[reads].tolist(), starts[reads + 1].tolist())]
    flipped = (COMPLEMENT_ASCII[buffer[::-1]] if reverse == "complement" else buffer[::-1]).tobytes().decode("ascii")
    total = len(buffer)
    return [flipped[total - b:total - a] or "*" for a, b in zip(starts[reads].tolist(), starts[reads + 1].tolist())]


def batch_records(batch, reference, read, strand, loci, cigars, mds, nms, nh):
    """SAM lines of one batch. `read`/`strand` give each locus' read (batch index) and strand; `nh` [n]
    is the number of loci found per read (before any -n cap). Returns one string, records in input order."""
    n = len(batch)
    is_primary = np.ones(len(read), dtype=bool)
    is_primary[1:] = read[1:] != read[:-1]
    flags = (strand * FLAG_REVERSE + (~is_primary) * FLAG_SECONDARY).tolist()
    pos = (loci.start - reference.starts[loci.contig] + 1).tolist()
    mapq = np.where(nh[read] == 1, 60, 0).tolist()
    # per read (not per locus): its SEQ and QUAL forward and reverse(-complemented), each sliced once
    every = np.arange(n)
    seqs = (_texts(batch.seq, batch.starts, every, None), _texts(batch.seq, batch.starts, every, "complement"))
    fastq = batch.qual is not None
    quals = ((_texts(batch.qual, batch.starts, every, None), _texts(batch.qual, batch.starts, every, "reverse"))
             if fastq else (["*"] * n,) * 2)
    names = batch.names
    contig_names = reference.names
    mapped = [
        f"{names[r]}\t{flags[i]}\t{contig_names[c]}\t{pos[i]}\t{mapq[i]}\t{cigars[i]}\t*\t0\t0\t"
        f"{seqs[s][r]}\t{quals[s][r]}\tNM:i:{nms[i]}\tMD:Z:{mds[i]}\tNH:i:{nh[r]}"
        for i, (r, s, c) in enumerate(zip(read.tolist(), strand.tolist(), loci.contig.tolist()))
    ]
    unmapped_reads = np.flatnonzero(nh == 0)
    unmapped = [f"{names[r]}\t{FLAG_UNMAPPED}\t*\t0\t0\t*\t*\t0\t0\t{seqs[0][r]}\t{quals[0][r]}"
                for r in unmapped_reads.tolist()]
    # Interleave into input order: a read's records are contiguous and already in report order.
    order = np.argsort(np.concatenate([read, unmapped_reads]), kind="stable")
    lines = mapped + unmapped
    return "\n".join(map(lines.__getitem__, order.tolist())) + "\n" if n else ""


def unmapped_records(batch, reads):
    """The reads `reads` of a batch as FASTQ (or FASTA for FASTA input), for --unmapped."""
    seqs = _texts(batch.seq, batch.starts, reads, None)
    names = [batch.names[r] for r in reads.tolist()]
    if batch.qual is None:
        return "".join(f">{n}\n{s if s != '*' else ''}\n" for n, s in zip(names, seqs))
    quals = _texts(batch.qual, batch.starts, reads, None)
    return "".join(f"@{n}\n{s if s != '*' else ''}\n+\n{q if q != '*' else ''}\n" for n, s, q in zip(names, seqs, quals))
