"""The reporting rule in tandem repeats, against exhaustive verification (issue #17).

For every read, strand and contig the oracle computes D(x), the fewest edits of an alignment of the whole
read ending at reference base x, for every x, by a plain dynamic programme over the whole genome (no
seeding, no windows, no bit vectors). The mapper must report exactly the greedy cover of {x : D(x) <= e}
(README "What is reported"): so no end within e lies more than e from a reported end, and no reported end
is hidden transitively. Periods 1-6, at e = 5, on both strands, on a genome small enough to check every end.
"""
import numpy as np

from mapper.alphabet import COMPLEMENT, ENCODE
from oracle import read_sam, ref_span
from repeats import tandem_genome

E = 5
def reads_from(contigs, rng, n=36, length=60):
    """Reads from inside the repeats (and across their edges), with 0-3 substitutions, half reversed."""
    out = []
    names = list(contigs)
    for i in range(n):
        seq = contigs[names[i % 2]]
        start = int(rng.integers(250, len(seq) - 250 - length))
        read = list(seq[start:start + length])
        for k in rng.choice(length, int(rng.integers(0, 4)), replace=False):
            read[k] = "ACGT"[("ACGT".index(read[k]) + 1 + int(rng.integers(0, 3))) % 4]
        read = "".join(read)
        if i % 3 == 0:
            read = read[::-1].translate(str.maketrans("ACGT", "TGCA"))
        out.append((f"r{i}", read))
    return out


def last_row(read, text):
    """D(x) for every end x of `text` (numpy rows, free start): D[i][j] = min(D[i-1][j-1] + mismatch,
    D[i-1][j] + 1, D[i][j-1] + 1), the last term by a running minimum of D[i][j] - j."""
    cols = np.arange(len(text) + 1)
    prev = np.zeros(len(text) + 1, dtype=np.int64)
    for i, base in enumerate(read, 1):
        cur = np.empty_like(prev)
        cur[0] = i
        cur[1:] = np.minimum(prev[:-1] + (text != base), prev[1:] + 1)
        prev = np.minimum.accumulate(cur - cols) + cols
    return prev[1:]


def greedy_cover(D, e):
    """The rule, spelled out one end at a time."""
    taken = []
    for x in sorted(np.flatnonzero(D <= e), key=lambda x: (D[x], x)):
        if all(abs(x - t) > e for t in taken):
            taken.append(x)
    return sorted(taken)


def test_tandem_repeats_report_the_greedy_cover(gkmap, tmp_path, device):
    rng = np.random.default_rng(17)
    contigs = tandem_genome(rng)
    reads = reads_from(contigs, rng)
    fasta, fastq, out = tmp_path / "rep.fa", tmp_path / "r.fq", tmp_path / "out.sam"
    fasta.write_text("".join(f">{name}\n{seq}\n" for name, seq in contigs.items()))
    fastq.write_text("".join(f"@{name}\n{seq}\n+\n{'I' * len(seq)}\n" for name, seq in reads))
    code, err = gkmap("map", "--quiet", "--device", device, "-e", E, "--index", tmp_path / "idx", "-o", out, fasta, fastq)
    assert code == 0, err
    _, records = read_sam(out)
    got = {}
    for rec in records:
        if rec["flag"] & 4:
            continue
        strand = "-" if rec["flag"] & 16 else "+"
        end = rec["pos"] - 1 + ref_span(rec["cigar"]) - 1
        got.setdefault((rec["qname"], strand, rec["rname"]), []).append((end, rec["NM"]))
    codes = {name: ENCODE[np.frombuffer(seq.encode(), np.uint8)] for name, seq in contigs.items()}
    crowded = 0
    for name, read in reads:
        fwd = ENCODE[np.frombuffer(read.encode(), np.uint8)]
        for strand, seq in (("+", fwd), ("-", COMPLEMENT[fwd[::-1]])):
            for contig, text in codes.items():
                D = last_row(seq, text)
                want = greedy_cover(D, E)
                have = sorted(got.get((name, strand, contig), []))
                assert [x for x, _ in have] == want, (name, strand, contig)
                assert all(nm == D[x] for x, nm in have)
                crowded += len(want) > 1
    assert crowded >= 10  # the set must exercise reads with several nearby ends, or it proves nothing
