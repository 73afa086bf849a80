"""The run loop, for any job (mapper/jobs.py): single-end and paired-end alike, in this process or in a
Dask worker's task (mapper/runners/cluster.py runs `drive` over a share of the reads file, or over one chunk).

    inputs (a parsing thread) -> job.map (the device) -> renderer (render processes, or inline) -> sinks

The reader thread and the render processes start first: they parse and import while the index loads. The
main process maps batch after batch; the renderer hands back finished batches in input order, which the
sinks write from threads of their own (mapper/sinks.py), so the device waits for neither the host's
rendering nor the disk.
"""
import contextlib
import os
import time

from mapper.jobs import settled
from mapper.pipeline import progress_bar
from mapper.render import HostWorkers
from mapper.sinks import Format, Sinks, run_header


GENOME_FILE = 1 << 28  # bytes of a reference file whose index loads for longer than render processes start


def _early_processes(opts, bytes_per_read=50):
    """Whether the render processes start with the run, while the index loads, rather than with the first
    batch worth them: when the reads file holds more than one batch (a compressed FASTQ of short reads
    takes about 60 bytes a read), or when the reference is genome-sized (a file of 256 MB or more: such an
    index loads in a second or more, the processes' start is then free, and its reads may each make
    thousands of records: 1,000 repeat reads at 3.1 Gbp make 25 M, and waiting for their first batch put
    0.3 s of process start-up before the first rendering). A small run against a small genome stays
    inline: starting 15 processes would cost it more than it saves."""
    try:
        if os.path.getsize(opts.reads) > opts.batch_size * bytes_per_read:
            return True
    except (OSError, TypeError):  # standard input, or no such file: the reader reports it
        pass
    try:
        return os.path.getsize(opts.reference) >= GENOME_FILE
    except (OSError, TypeError):
        return False


def drive(job, items, counters, renderer, put, advance=None):
    """The one loop: each input item mapped by the job, in order and in pieces (job.map_pieces), handed to
    `renderer` (submit / ready, see jobs.py), and every rendered text ({sink name: text}) given to `put` in
    input order as soon as it is done, so the device maps the next piece while the last one renders (the
    candidates' pair lines of --dump-candidates go to `put` while they are made, in their order);
    `advance(units)` after each piece's texts (a progress bar). Returns the units (reads, or read pairs)
    written."""
    written = 0

    def write(block=False):
        nonlocal written
        for units, texts in renderer.ready(block):
            for piece in texts:
                put(piece)
            written += units
            if advance is not None:
                advance(units)

    dump = lambda text: put({"candidates": text})
    mapped = (piece for item in counters.timed_iter("parse", items)
              for piece in job.map_pieces(item, counters, dump))
    for item in settled(job, mapped):
        renderer.submit(item)
        write()
    write(block=True)
    return written


def run_local(job):
    """Run `job` in this process; returns its tally (Counters, or PairCounters)."""
    opts = job.opts
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        items = job.inputs()
        stack.callback(items.close)
        workers = opts.host_workers()
        pool = HostWorkers.spawn(workers) if _early_processes(opts) else None
        if pool is not None:
            stack.callback(pool.shutdown, cancel_futures=True)
        counters = job.open()
        tally = job.tally(counters)
        progress = stack.enter_context(progress_bar(opts, job.unit))
        form = Format.of(opts)
        sinks = stack.enter_context(Sinks(job.outputs(opts), run_header(job.index.reference, opts), form))
        renderer = stack.enter_context(job.renderer(tally, workers, pool, form.blocks_level()))
        drive(job, items, counters, renderer, sinks.put, progress.update)
        with counters.timed("output"):
            sinks.close()
    counters.seconds = time.perf_counter() - t0
    return job.report(tally)
