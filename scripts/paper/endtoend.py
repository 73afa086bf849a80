"""Stage `end-to-end` (paper Table 3-5, S.24-S.25): `gkmap map` of reads simulated on human chr20 with
--filter none, gatekeeper (improved) and gatekeeper-faithful, on the cpu backend and, where there is a GPU, the
cuda backend (scripts/bench_cuda.py's approach: a warm-up run per filter keeps kernel compilation out of the times).

Output rows, one per (configuration, device, filter): mappings (loci), mapped reads, candidate windows,
verification pairs (windows verified), rejected pairs and their share, seconds of filter, verification,
filter + verification and the whole run, reads/s, the speed-ups of filter + verification and of the whole run over
--filter none on the same device and reads, whether the SAM equals --filter none's (the @PG line aside), and the
mappings and mapped reads lost against --filter none.
"""
import hashlib

from bench_cuda import head
from paper.common import CHR20, FILTERS, StageResults, map_once, simulated_reads

WARMUP_READS = 500


def sam_digest(path):
    """SHA-256 of a SAM file without its @PG line (CONVENTIONS.md: runs are compared ignoring @PG)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for line in f:
            if not line.startswith(b"@PG"):
                digest.update(line)
    return digest.hexdigest()


def run(ctx):
    sizes, devices = ctx.sizes, ctx.devices()
    genome = ctx.input(CHR20)
    with StageResults(ctx, "end-to-end", devices, dict(reads=sizes["e2e_reads"], configs=sizes["e2e"])) as results:
        for length, e in sizes["e2e"]:
            n = max(sizes["e2e_reads"][d] for d in devices)
            fastq = simulated_reads(ctx, length, n)
            config = f"chr20 sim {length}bp e={e}"
            for device in devices:
                reads = head(fastq, ctx.scratch("reads") / f"chr20_L{length}_{device}.fq", sizes["e2e_reads"][device])
                if device == "cuda":
                    warm = head(fastq, ctx.scratch("reads") / f"chr20_L{length}_warm.fq", WARMUP_READS)
                    for filt in FILTERS:
                        map_once(ctx, genome, warm, e, filt, device, f"warmup_L{length}")
                base = None
                for filt in FILTERS:
                    c, sam = map_once(ctx, genome, reads, e, filt, device, f"e2e_L{length}_e{e}")
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
                    if base is None:
                        base = row
                    row.update(filter_verify_speedup=round(base["filter_verify_s"] / row["filter_verify_s"], 3),
                               overall_speedup=round(base["overall_s"] / row["overall_s"], 3),
                               sam_identical_to_none=row["sam_sha256"] == base["sam_sha256"],
                               lost_mappings=base["mappings"] - row["mappings"],
                               lost_mapped_reads=base["mapped_reads"] - row["mapped_reads"])
                    results.add(row)
    return results
