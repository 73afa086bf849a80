"""Stage `end-to-end` (paper Table 3-5, S.24-S.25): `gkmap map` of reads simulated on human chr20 with
--filter none, gatekeeper (improved) and gatekeeper-faithful, on the cpu backend and, where there is a GPU, the
cuda backend (scripts/bench_cuda.py's approach: a warm-up run per filter keeps kernel compilation out of the times).

Output rows, one per (configuration, device, filter): mappings (loci), mapped reads, candidate windows,
verification pairs (windows verified), rejected pairs and their share, seconds of filter, verification,
filter + verification and the whole run, reads/s, the speed-ups of filter + verification and of the whole run over
--filter none on the same device and reads, whether the SAM equals --filter none's (the @PG line aside), and the
mappings and mapped reads lost against --filter none.

Stage `end-to-end-genome` (issue 17): the same rows where the paper measured them, on a whole genome: the
3.1 Gbp `human` proxy of scripts/genome_proxy.py (chr20 copies, a SINE family, microsatellites) and reads
simulated from all of it, on the cuda backend only (the cpu backend would spend most of an hour building the
13 GB index). Its rows join Table 4 in the report.
"""
import hashlib
import time

import genome_proxy
from bench_cuda import head
from paper.common import CHR20, FILTERS, Missing, StageResults, index_dir, map_once, simulated_reads

WARMUP_READS = 500


def sam_digest(path):
    """SHA-256 of a SAM file without its @PG line (CONVENTIONS.md: runs are compared ignoring @PG)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for line in f:
            if not line.startswith(b"@PG"):
                digest.update(line)
    return digest.hexdigest()


def filter_rows(ctx, results, config, genome, reads, length, e, device, warm=None):
    """One row per filter of `gkmap map` on `reads`, each against --filter none's run (the first); `warm`:
    reads mapped once per filter first, unmeasured, so that kernel compilation stays out of the times."""
    for filt in FILTERS if warm else ():
        map_once(ctx, genome, warm, e, filt, device, f"warmup_L{length}")
    base = None
    for filt in FILTERS:
        c, sam = map_once(ctx, genome, reads, e, filt, device, f"e2e_{config.split()[0]}_L{length}_e{e}")
        windows = c.seeding.bands
        row = dict(config=config, read_length=length, e=e, device=device, filter=filt, reads=c.reads,
                   mappings=c.loci, mapped_reads=c.mapped, candidate_windows=windows,
                   verification_pairs=c.verified, rejected_pairs=c.filtered_out,
                   rejected_pct=round(100.0 * c.filtered_out / windows, 2) if windows else 0.0,
                   seed_s=round(c.times["seed"], 4), filter_s=round(c.times["filter"], 4),
                   verify_s=round(c.times["verify"], 4),
                   filter_verify_s=round(c.times["filter"] + c.times["verify"], 4),
                   overall_s=round(c.seconds, 4), reads_per_s=round(c.reads / c.seconds, 1),
                   stages=c.stages, sam_sha256=sam_digest(sam))
        sam.unlink()  # a whole-genome run's SAM is gigabytes; its digest is what the rows compare
        if base is None:
            base = row
        row.update(filter_verify_speedup=round(base["filter_verify_s"] / row["filter_verify_s"], 3),
                   overall_speedup=round(base["overall_s"] / row["overall_s"], 3),
                   sam_identical_to_none=row["sam_sha256"] == base["sam_sha256"],
                   lost_mappings=base["mappings"] - row["mappings"],
                   lost_mapped_reads=base["mapped_reads"] - row["mapped_reads"])
        results.add(row)


def run(ctx):
    sizes, devices = ctx.sizes, ctx.devices()
    genome = ctx.input(CHR20)
    with StageResults(ctx, "end-to-end", devices, dict(reads=sizes["e2e_reads"], configs=sizes["e2e"])) as results:
        for length, e in sizes["e2e"]:
            n = max(sizes["e2e_reads"][d] for d in devices)
            fastq = simulated_reads(ctx, length, n)
            for device in devices:
                reads = head(fastq, ctx.scratch("reads") / f"chr20_L{length}_{device}.fq", sizes["e2e_reads"][device])
                warm = head(fastq, ctx.scratch("reads") / f"chr20_L{length}_warm.fq", WARMUP_READS) \
                    if device == "cuda" else None
                filter_rows(ctx, results, f"chr20 sim {length}bp e={e}", genome, reads, length, e, device, warm)
    return results


def run_genome(ctx):
    """The whole-genome rows: the proxy and its index are built once under work/ and reused."""
    if "cuda" not in ctx.devices():
        raise Missing("the whole-genome rows run on the cuda backend only (no CUDA GPU or no pycuda here)")
    gbp, n = ctx.sizes["e2e_genome"]
    length, e = 100, 5
    chr20 = ctx.input(CHR20)
    fasta = ctx.scratch("genome") / f"human_proxy_{gbp:g}gbp.fa"
    reads, warm = fasta.with_suffix(f".n{n}.fq"), fasta.with_suffix(".warm.fq")
    settings = dict(gbp=gbp, recipe="human", seed=11, reads=n, read_length=length, e=e)
    with StageResults(ctx, "end-to-end-genome", ["cuda"], settings) as results:
        if not (fasta.exists() and reads.exists()):
            t = time.perf_counter()
            genome_proxy.build(fasta, gbp, "human", 11, n, length, reads, chr20_path=chr20)
            results.record["proxy_s"] = round(time.perf_counter() - t, 1)
        if not (index_dir(ctx, fasta) / "meta.json").exists():
            from mapper.api import build_index
            t = time.perf_counter()
            build_index(str(fasta), index_dir=str(index_dir(ctx, fasta)), device="cuda")
            results.record["index_s"] = round(time.perf_counter() - t, 1)
        head(reads, warm, WARMUP_READS)
        filter_rows(ctx, results, f"human proxy {gbp:g} Gbp sim {length}bp e={e}", fasta, reads, length, e, "cuda",
                    warm)
    return results
