"""The host half of mapping: a batch's loci -> CIGAR/MD (align.py) -> SAM text (sam.py), and the unmapped
reads' FASTQ/FASTA. On a GPU run this is most of the host's work per read (a per-record string for every
locus), so `HostWorkers` spreads it over worker processes while the main process runs the next batch's
mapping core: the batch is cut into slices of whole reads, each slice is rendered by a worker, and the
texts come back and are written in input order, so the output is byte-identical to rendering inline.

Workers are spawned (not forked: the main process may hold a CUDA context and threads) and see the
reference through one memory-mapped temporary file, so N workers share one copy of the genome.
"""
import collections
import concurrent.futures
import multiprocessing
import os
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from mapper.align import describe
from mapper.reads import ReadBatch
from mapper.reference import Reference
from mapper.sam import batch_records, unmapped_records
from mapper.seeding import strand_rows
from mapper.verify import Mappings

MAX_WORKERS = 16
SLICE_READS = 10_000  # reads per worker job: small enough to spread a batch, large enough to amortise pickling


@dataclass
class Rendered:
    sam: str
    unmapped: str       # FASTQ/FASTA of the unmapped reads ('' unless asked for)
    align_s: float      # seconds spent on CIGAR/MD
    output_s: float     # seconds spent formatting records


def render(batch, reference, loci, read, strand, nh, want_unmapped):
    """SAM text of `batch` from its selected loci (read = batch index of each locus, in report order)."""
    t0 = time.perf_counter()
    rows = strand_rows(batch.codes(), batch.starts, np.zeros(len(batch), dtype=np.int64))
    cigars, mds, nms = describe(rows, loci, reference)
    t1 = time.perf_counter()
    sam = batch_records(batch, reference, read, strand, loci, cigars, mds, nms, nh)
    unmapped = unmapped_records(batch, np.flatnonzero(nh == 0)) if want_unmapped else ""
    return Rendered(sam, unmapped, t1 - t0, time.perf_counter() - t1)


def _slice_job(batch, loci, read, strand, nh, a, b):
    """The reads [a, b) of a batch with their loci, renumbered as a batch of their own."""
    s0, s1 = batch.starts[a], batch.starts[b]
    part = ReadBatch(batch.names[a:b], batch.seq[s0:s1], None if batch.qual is None else batch.qual[s0:s1],
                     batch.starts[a:b + 1] - s0, batch.first + a)
    lo, hi = np.searchsorted(read, [a, b])
    local = read[lo:hi] - a
    sub = loci.take(slice(lo, hi))
    sub = Mappings(local + strand[lo:hi] * (b - a), sub.contig, sub.start, sub.end, sub.edits)
    return part, sub, local, strand[lo:hi], nh[a:b]


_reference = None  # the worker's Reference (set by _init_worker)


def _init_worker(names, starts, lengths, codes_path):
    global _reference
    _reference = Reference(names, starts, lengths, np.load(codes_path, mmap_mode="r"))


def _render_job(job, want_unmapped):
    part, loci, read, strand, nh = job
    return render(part, _reference, loci, read, strand, nh, want_unmapped)


class HostWorkers:
    """Render batches inline or in `workers` spawned processes, yielding results in order.

    submit(batch, loci, read, strand, nh) queues a batch; ready(block) yields (batch, [Rendered]) of the
    oldest batches, in submission order, once done (all of them, waiting, when block is True). At most
    2 x workers slices are in flight, which bounds the memory held for pending batches. The processes start
    with the first full batch (`batch_size` reads): a run of one short batch is rendered inline, as the
    start-up would cost more than it saves."""

    def __init__(self, workers, batch_size, reference, want_unmapped):
        self.workers = max(1, min(int(workers), MAX_WORKERS))
        self.batch_size = batch_size
        self.reference = reference
        self.want_unmapped = want_unmapped
        self._pool = None
        self._tmp = None
        self._pending = collections.deque()

    def _start(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="gkmap-ref-")
        codes_path = os.path.join(self._tmp.name, "codes.npy")
        np.save(codes_path, np.asarray(self.reference.codes))
        ref = self.reference
        self._pool = concurrent.futures.ProcessPoolExecutor(
            self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
            initargs=(list(ref.names), ref.starts, ref.lengths, codes_path))

    def submit(self, batch, loci, read, strand, nh):
        if self._pool is None and (self.workers == 1 or len(batch) < self.batch_size):
            self._pending.append((batch, [render(batch, self.reference, loci, read, strand, nh, self.want_unmapped)]))
            return
        if self._pool is None:
            self._start()
        n = len(batch)
        step = max(1, min(SLICE_READS, -(-n // self.workers)))
        bounds = list(range(0, n, step)) + [n]
        futures = [self._pool.submit(_render_job, _slice_job(batch, loci, read, strand, nh, a, b), self.want_unmapped)
                   for a, b in zip(bounds[:-1], bounds[1:])]
        self._pending.append((batch, futures))

    def ready(self, block=False):
        """Finished batches, oldest first; with block, every pending batch. Keeps the in-flight bound."""
        while self._pending:
            batch, jobs = self._pending[0]
            in_flight = sum(len(j) for _, j in self._pending if not isinstance(j[0], Rendered))
            done = isinstance(jobs[0], Rendered) or all(f.done() for f in jobs)
            if not (block or done or in_flight > 2 * self.workers):
                return
            self._pending.popleft()
            yield batch, jobs if isinstance(jobs[0], Rendered) else [f.result() for f in jobs]

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
