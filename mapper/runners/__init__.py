"""Where a `gkmap map` run runs: `make_runner` picks the loop for the options, the job (mapper/jobs.py)
says what is done to the reads.

    local   this process: one loop for single-end and paired-end jobs (local.py); also `--gpus 1` (or
            `--gpus auto` with one GPU visible) without --chunk-reads: one GPU is mapped on fastest by the
            single process (Dask's workers, their start and the copy of their parts cost 50 % more on
            4 H200s: issue #22), and the SAM is the same
    dask    Dask workers: one per GPU of this host, N local workers or a cluster (mapper/runners/cluster.py;
            imported only for such runs, since dask is an optional dependency)
"""
from dataclasses import replace

from mapper.device import visible_gpus
from mapper.jobs import job_for
from mapper.runners.local import run_local


def one_local_gpu(opts):
    """Whether the run asks for a single GPU of this host and nothing that only Dask does (--chunk-reads)."""
    if opts.gpus not in (1, "auto") or opts.chunk_reads is not None:
        return False  # no need to ask which GPUs there are (nvidia-smi): the Dask runner asks
    visible = len(visible_gpus())
    return visible == 1 or (visible > 1 and opts.gpus == 1)


def make_runner(opts):
    """A callable that runs checked MapOptions and returns the run's tally."""
    if one_local_gpu(opts):
        opts = replace(opts, gpus=None, device="cuda" if opts.device == "auto" else opts.device)
    elif opts.distributed:
        from mapper.runners.cluster import map_distributed  # dask is optional
        return lambda: map_distributed(opts)
    return lambda: run_local(job_for(opts))


def map_reads(opts):
    """Run `gkmap map` with MapOptions; returns the Counters (paired.PairCounters with --pe/--mp)."""
    return make_runner(opts.check())()
