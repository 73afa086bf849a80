"""Where a `gkmap map` run runs: `make_runner` picks the loop for the options, the job (mapper/jobs.py)
says what is done to the reads.

    local   this process: one loop for single-end and paired-end jobs (local.py)
    dask    Dask workers: one per GPU of this host, N local workers or a cluster (mapper/cluster.py;
            imported only for such runs, since dask is an optional dependency)
"""
from mapper.jobs import job_for
from mapper.runners.local import run_local


def make_runner(opts):
    """A callable that runs checked MapOptions and returns the run's tally."""
    if opts.distributed:
        from mapper.cluster import map_distributed  # dask is optional
        return lambda: map_distributed(opts)
    return lambda: run_local(job_for(opts))


def map_reads(opts):
    """Run `gkmap map` with MapOptions; returns the Counters (paired.PairCounters with --pe/--mp)."""
    return make_runner(opts.check())()
