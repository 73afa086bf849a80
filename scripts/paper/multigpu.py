"""Stage `multi-gpu` (paper Tables S.21-S.23, Figure 8 / S.15; issue #22): the filter and the mapper on
1..N GPUs of one host, measured by scripts/bench_multigpu.py (its docstring says what each part times).

Rows (one CSV, a `part` column):
    filter-memory  pairs held in memory, one process per GPU on its 1/N share: kernel and filter M
                   filtrations/s for the packed, device- and host-encoded ways in (the paper's kernel and
                   filter columns), by read length, e and N;
    filter-file    `gkmap filter --gpus N` on a pairs file (>= 10^8 pairs at 100 bp), with the rate at which
                   the file can be read (the bound from a file) and whether the output matches N = 1's;
    map            `gkmap map --gpus N` beside the single process: whole-command reads/s, SAM md5 (records
                   and header without @PG) equal to the single process's, each worker's stage seconds and
                   the run's timeline.
Needs a host with 2 or more GPUs: elsewhere the stage leaves a 'missing' record (the report keeps complete
results measured on another machine). The report joins the published rows of the same N
(../shared/data/published/gatekeeper_gpu_multigpu.csv) and computes the scaling efficiency of both.
"""
from bench_multigpu import measure, parser
from paper.common import Missing, StageResults

STAGE = "multi-gpu"


def gpu_count():
    try:
        import pycuda.driver as drv
        drv.init()
        return drv.Device.count()
    except Exception:
        return 0


def run(ctx):
    """Every part of bench_multigpu.py with its defaults (GPU counts 1..min(4, visible)), rows cached."""
    count = gpu_count() if "cuda" in ctx.devices() else 0
    if count < 2:
        raise Missing(f"{count} GPU(s) here: the multi-GPU runs need a host with 2 or more")
    args = parser().parse_args(["--work", str(ctx.scratch("multigpu")), "--data", str(ctx.data)])
    gpus = list(range(1, min(count, 4) + 1))
    args.gpus, args.map_gpus = gpus, sorted({1, min(2, count), gpus[-1]})
    args.map_reads, args.proxy_reads, args.subset_reads = map(int, (args.map_reads, args.proxy_reads,
                                                                    args.subset_reads))
    settings = {k: v for k, v in vars(args).items() if k not in ("json", "work", "data")}
    with StageResults(ctx, STAGE, ["cuda"], settings) as results:
        measure(args, results.add)
    return results


def published_key(row):
    """(read length, e, N) of a measured filter row, the key of the published row it stands beside."""
    return int(row["read_length"]), int(row["E"]), int(row["n_gpus"])
