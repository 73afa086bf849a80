"""Stage `sets`: the paper's "Sets" made our way. Real reads (and reads simulated on human chr20) are mapped with
`gkmap map --filter none --dump-candidates` at a low and a high error threshold; every candidate window before the
filter becomes one pair `<reference segment>\\t<read>` (the read's length at the band's first diagonal), like the
paper's mrFAST candidate sets. The shared filter-pairs samples (mrFAST 2.6 candidates of ERR240727_1, and the
Shigella 150 bp sample) join them with the published program's decisions.

Output rows: set, origin, read length, e of the mapping run, reads, candidate pairs, pairs kept (the first
`set_pairs` lines: the accuracy stage's input), undefined pairs (a non-ACGT letter), and where the pairs file is.
"""
import math
import shutil
import subprocess
from itertools import islice
from pathlib import Path

import dnaio
import numpy as np

from paper.common import CHR20, Missing, StageResults, map_once, simulated_reads

# (set, genome, reads: a shared reads file, "bam:<file>" (samtools fastq) or "sim:<L>" (chr20 simulation), L).
# Reads in human repeats have thousands of candidates each: the chr20 set maps a tenth of the reads.
REAL_SETS = (
    ("Shigella_vs_S.dysenteriae", "genomes/shigella_dysenteriae_ATCC13313_GCF_002949675.1.fna.gz",
     "reads/shigella_dysenteriae_ERR6005894_R1.fastq.gz", 150),
    ("Shigella_vs_E.coli_K-12", "genomes/ecoli_K12_MG1655_NC_000913.2.fa.gz",
     "reads/shigella_dysenteriae_ERR6005894_R1.fastq.gz", 150),
    ("honeybee_virus_vs_DWV+VDV-1", "genomes/honeybee_viruses_DWV_NC_004830.2_VDV1_NC_006494.1.fa.gz",
     "reads/honeybee_virus_SRR059298_GAII_subset.fastq.gz", 72),
    ("NA12878_vs_chr22_fragment", "genomes/human_chr22_fragment_freebayes_q.fa.gz",
     "bam:reads/human_NA12878_chr22_tiny_HiSeqX.bam", 151),
    ("chr20_simulated_100bp", CHR20, "sim:100", 100),
)
# The shared samples: (set, pairs file, published program's decisions, L)
SHARED_SETS = tuple((name, f"filter-pairs/{name}.pairs.txt", f"filter-pairs/{name}.gatekeeper-gpu.tsv", L)
                    for name, L in (("ERR240727_1_E2", 100), ("ERR240727_1_E5", 100),
                                    ("shigella_ERR6005894_L150", 150)))
_ACGT = np.zeros(256, dtype=bool)
_ACGT[np.frombuffer(b"ACGT", dtype=np.uint8)] = True


def thresholds(length):
    """Low and high e of a set: about 2 % and 6.5 % of L, the high one kept within the pigeonhole guarantee
    (e + 1 <= L // 12), so that every candidate within e is in the set."""
    return math.ceil(0.02 * length), min(math.ceil(0.065 * length), length // 12 - 1)


def first_reads(ctx, name, source, n):
    """Plain FASTQ of the first n reads of `source` under work/reads/."""
    path = ctx.scratch("reads") / f"{name}_first{n}.fq"
    if path.exists():
        return path
    if source.startswith("sim:"):
        shutil.copyfile(simulated_reads(ctx, int(source[4:]), n), path)
        return path
    if source.startswith("bam:"):
        bam = ctx.input(source[4:])
        if shutil.which("samtools") is None:
            raise Missing("samtools is not installed (needed for `samtools fastq` of the BAM)")
        fastq = ctx.scratch("reads") / f"{name}_all.fq"
        with open(fastq, "wb") as out:
            subprocess.run(["samtools", "fastq", str(bam)], stdout=out, stderr=subprocess.DEVNULL, check=True)
        source_path = fastq
    else:
        source_path = ctx.input(source)
    with dnaio.open(source_path) as reads, dnaio.open(path.with_suffix(".tmp"), mode="w", fileformat="fastq") as out:
        for record in islice(reads, n):
            out.write(record)
    path.with_suffix(".tmp").replace(path)
    return path


def _undefined(path):
    """Pairs with a letter other than A, C, G, T in either column (the paper's 'undefined' pairs)."""
    raw = np.frombuffer(Path(path).read_bytes(), dtype=np.uint8)
    bad = ~_ACGT[raw] & (raw != 9) & (raw != 10) & (raw != 13)
    line = np.cumsum(raw == 10) - (raw == 10)
    return len(np.unique(line[bad]))


def _keep_first(src, dst, n):
    """Write the first n lines of src to dst (when dst is given); returns how many lines src has."""
    raw = np.frombuffer(Path(src).read_bytes(), dtype=np.uint8)
    ends = np.flatnonzero(raw == 10)
    if dst is not None:
        Path(dst).write_bytes(raw[:ends[n - 1] + 1 if len(ends) >= n else len(raw)].tobytes())
    return len(ends)


def run(ctx):
    sizes = ctx.sizes
    with StageResults(ctx, "sets", ["cpu"], dict(reads_per_set=sizes["set_reads"],
                                                 pairs_kept=sizes["set_pairs"])) as results:
        for name, genome, source, length in REAL_SETS:
            try:
                genome_path = ctx.input(genome)
                n = sizes["set_reads"] // (10 if source.startswith("sim:") else 1)
                reads = first_reads(ctx, name, source, n)
            except Missing as why:
                results.skip(name, str(why))
                continue
            for level, e in zip(("low", "high"), thresholds(length)):
                folder = ctx.scratch("sets")
                dump, kept = folder / f"{name}_e{e}.all.pairs.txt", folder / f"{name}_e{e}.pairs.txt"
                counters, _ = map_once(ctx, genome_path, reads, e, "none", "cpu", f"set_{name}_e{e}", dump=dump)
                total = _keep_first(dump, kept, sizes["set_pairs"])
                dump.unlink()
                results.add(dict(set=f"{name} e={e}", origin=f"gkmap map -e {e} --dump-candidates ({level} e)",
                                 genome=Path(genome).name, reads_file=source, read_length=length, map_e=e,
                                 reads=counters.reads, mapped_reads=counters.mapped, candidate_pairs=total,
                                 pairs=min(total, sizes["set_pairs"]), undefined_pairs=_undefined(kept),
                                 root="work", pairs_file=str(kept.relative_to(ctx.work)), published_decisions=""))
        for name, pairs_file, decisions, length in SHARED_SETS:
            try:
                path = ctx.input(pairs_file)
            except Missing as why:
                results.skip(name, str(why))
                continue
            n = _keep_first(path, None, 0)
            results.add(dict(set=name, origin="shared filter-pairs (mrFAST 2.6 / k-mer candidates, SOURCES.md)",
                             genome="", reads_file="", read_length=length, map_e="", reads="", mapped_reads="",
                             candidate_pairs=n, pairs=n, undefined_pairs=_undefined(path), root="data",
                             pairs_file=pairs_file, published_decisions=decisions))
    return results
