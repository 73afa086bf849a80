"""One `gkmap map` run spread over worker processes with dask.distributed (the `cluster` extra): one worker
per GPU of this host (`--gpus`), N local workers (`--local-cluster`) or a Dask cluster (`--scheduler`).

    client (this process)                                     worker (one per GPU, or per core)
    job.inputs(--chunk-reads) -- chunk i --submit-->          IndexPlugin: index + backend + the run's job
    OrderedWriter -> Sinks <-- ChunkResult ([{sink: text}],   map_chunk: the run loop over one chunk
                      tally, worker name) --                  (runners/local.py `drive`: job.map, render)

The worker tasks know nothing of single- or paired-end: they call the run's job (mapper/jobs.py) through
the local runner's loop (mapper/runners/local.py), and the client writes through the same Sinks.

- Order: chunk i is written only after chunks 0..i-1 (a writer keyed by chunk index), so the outputs are
  the single-process outputs byte for byte (the @PG line aside): records depend on the read alone, not its
  batch.
- Memory: at most `IN_FLIGHT_PER_THREAD` chunks per worker thread are between reading and writing
  (submitted and not yet written). A slow chunk stalls reading instead of piling up results behind it.
- Faults: a chunk's reads travel inside its task, so the scheduler still holds them and runs the task
  elsewhere when its worker dies (Dask's allowed-failures); a task that raises is retried (`RETRIES`).
  The client writes each chunk once, from its future's one result: no read is lost or duplicated.
  A GkmapError on a worker (a refused index, an -e too large for a read) comes back as a value, not an
  exception: retrying it elsewhere cannot help, so the run stops with its one-line message.
- The index: the client opens (or builds) it and hands the workers its folder (a shared path), its
  reference checksum and ws; each worker loads it once, memory-mapped, refuses it unless format version,
  checksum and ws agree, and keeps it with its backend (the cuda backend keeps genome and index in GPU
  memory) for every chunk it maps.

Jobs that settle on their first mapped items (paired-end runs, --pe/--mp: the TLEN range) give each chunk
two tasks (`map_settled`): `map_item` maps it (both mates, read in lockstep by the job's inputs) and keeps
the result on its worker, `render_item` renders it there (Dask runs it where its input lies) once the job
is settled. Without --min and --max the range is estimated as a single process estimates it
(`PairedEndJob.settle`, pair by pair, so whatever the chunks): the client reads the first chunks'
lookaheads (confident TLENs: `chunk_lookahead`, a small task on each mapped chunk) in order while the
workers map `IN_FLIGHT_PER_THREAD` chunks per thread ahead, then submits the pairing of every chunk mapped
so far. A mapped chunk lost with its worker is mapped again
from its task, whose reads the scheduler still holds.

Shares (issue #22): on a local cluster (--gpus, --local-cluster), a single-end run of a plain FASTQ file
written to a file is not streamed through the client. The client cuts the file into `SHARES_PER_WORKER`
byte ranges of whole records per worker (`share_cuts`: a few reads of the file, no parsing) and each
`map_share` task reads its own range with the block parser and runs the single process's loop on it
(runners/local.py `drive`: GPU mapping overlapped with its render processes), writing the SAM records to a
part file beside the output; the client copies the parts into the output in order (os.sendfile) as they
finish. Why: through the chunk path the client parsed, pickled and sent every read and received and wrote
every SAM text, and each worker rendered a chunk before it could map the next: on 4 H100s `--gpus 4` ran at
0.38x of one process (issue #22). The records depend on the read alone, so the output is the same bytes.
Any error of a share (a record the block parser does not check, an -e too large for a read, a refused
index) makes the run start again on the chunk path, which words it as a single process does.
`--chunk-reads`, --scheduler (no shared folder assumed), --pe/--mp, --unmapped, --dump-candidates,
compressed or FASTA reads and output to stdout keep the chunk path.
"""
import concurrent.futures
import contextlib
import copy
import functools
import io
import itertools
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections import Counter as Tally, deque
from dataclasses import dataclass, field, replace

import numpy as np

from mapper.backends import get_backend
from mapper.cores import usable_cores
from mapper.device import visible_gpus
from mapper.errors import GkmapError, IndexFormatError, UsageError
from mapper.index import load_index, open_index, read_meta
from mapper.jobs import job_for
from mapper.outputs import BackgroundWriter
from mapper.pipeline import Counters, filter_setting, progress_bar
from mapper.read_blocks import FastqBlocks, Unsure, read_chunks
from mapper.reads import _UPPER, ReadBatch, _detect_format_from_name, prefetch, with_codes
from mapper.render import MAX_WORKERS, HostWorkers, SpilledText
from mapper.runners.local import drive
from mapper.sinks import Format, Sinks, run_header

try:
    import dask
    from distributed import Client, Nanny, Scheduler, SpecCluster, WorkerPlugin, as_completed, get_worker
except ImportError:  # the extra is optional; this module is imported only for a distributed run
    raise UsageError("--gpus, --scheduler and --local-cluster need dask.distributed: "
                     "pip install 'gkmap[cluster]'") from None

log = logging.getLogger("gkmap")

RETRIES = 2                 # reruns of a chunk whose task raised (a dead worker is Dask's allowed-failures)
IN_FLIGHT_PER_THREAD = 2    # chunks between reading and writing, per worker thread: one mapping, one queued
RETRY_TOPIC = "gkmap-retry"  # the scheduler's event topic where workers report a chunk that raised
CONNECT_TIMEOUT = "30s"
# A chunk's reads ride in its task (see the module docstring), which Dask would warn about as a large graph.
MALLOC_TRIM = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"  # see local_cluster
LARGE_TASK = {"distributed.admin.large-graph-warning-threshold": "4GiB"}
SHARES_PER_WORKER = 2       # byte ranges of the reads file per worker (shares): a second one lets the client
                            # copy the first parts into the output while the workers map the last ones. The
                            # copies into one file take turns (its inode lock): on 4 H200s, chr20 10M reads,
                            # 2 shares a worker waited 2.8 s for them after the mapping and 6 waited 1.5 s,
                            # but 6 shares' readers cost more (parse 5.5 against 2.4 s): 0.95x against 0.98x
COPY_THREADS = 8            # part files copied into the output at once (each to its own offset)
CUT_WINDOW = 1 << 16        # bytes read at a cut to find the next record's start (doubled up to CUT_MAX)
CUT_MAX = 1 << 24
COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".bgz")


class RemoteError(GkmapError):
    """A GkmapError raised on a worker, carried back to the client with its message and exit code."""

    def __init__(self, message, exit_code=1):
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self):
        return type(self), (str(self), self.exit_code)


@dataclass
class ChunkResult:
    texts: list       # pieces in order, each {sink name: text} (mapper/sinks.py)
    tally: object     # the job's tally of the chunk (Counters; paired: PairCounters around them)
    counters: Counters  # its mapping counts and seconds per stage (the tally itself, or the tally's mates)
    worker: str       # the name of the worker that mapped it (stable across a restart of that worker)
    units: int        # reads (paired: read pairs) in it, for the progress bar


@dataclass
class MappedChunk:
    """A chunk mapped by `map_item`, kept on its worker until `render_item` renders it."""
    mapped: object    # paired.MappedPairs
    counters: Counters
    worker: str


class IndexPlugin(WorkerPlugin):
    """The index and backend of one worker process: loaded when the worker joins (or restarts), validated
    there, and used by every chunk the worker maps. A refusal is kept in `error` and returned by each task
    (the client asks every present worker right after registering; a late joiner answers with its tasks)."""

    def __init__(self, opts, folder, checksum, ws, token):
        self.opts, self.folder, self.checksum, self.ws, self.token = opts, str(folder), checksum, ws, token
        self.worker = self.index = self.backend = self.error = None

    def setup(self, worker):
        self.worker = worker
        # the render processes import their modules while the index loads (None where not worth it/allowed)
        pool = HostWorkers.spawn(self.opts.threads or 1)
        try:
            index = load_index(self.opts.reference, self.folder, checksum=self.checksum)  # version, checksum
            if index.ws != self.ws:
                raise IndexFormatError(f"{self.folder}: an index of ws {index.ws}, but the client's has ws {self.ws}")
            backend = get_backend(self.opts.device, memory=self.opts.memory)
            if backend.name == "cuda":
                gpu_context()  # made here, in the worker's main thread, which pops it at exit (see gpu_task)
            backend.load(index, self.opts.gpu_memory)
        except GkmapError as e:
            self.error = RemoteError(f"worker {worker.name} ({worker.address}) refused the run: {e}", e.exit_code)
            if pool is not None:
                pool.shutdown(cancel_futures=True)
            return
        self.index, self.backend = index, backend
        opts = self.opts
        filter_mode, self.stages = filter_setting(opts.filter, backend)
        self.job = job_for(opts).attach(index, backend, filter_mode)
        # SAM rendering in processes of this worker (-t per worker, spawned above; inline in a daemonic
        # worker process, which may not start processes), from the first batch of any size
        self.renderer = self.job.render_host(opts.threads or 1, batch_size=1)
        self.renderer.adopt(pool)

    def teardown(self, worker):
        if getattr(self, "renderer", None) is not None:
            self.renderer.close()

    def transition(self, key, start, finish, **kwargs):
        """Report a chunk of this run that raised (Dask retries it) to the client's run summary."""
        if finish == "error" and isinstance(key, str) and key.startswith(self.token):
            self.worker.log_event(RETRY_TOPIC, {"key": key})


def gpu_context():
    """The worker process's CUDA context (pycuda.autoinit's, made current in the calling thread on first use)."""
    from mapper.device import cuda
    cuda.driver()
    import pycuda.autoinit
    return pycuda.autoinit.context


@contextlib.contextmanager
def gpu_task():
    """Tasks run in a worker's executor thread, not where the context was made: the context is pushed for the
    task and popped after it. A thread that ends with a context on its stack makes PyCUDA abort the process
    at exit (with a page of "context stack was not empty" on stderr), and the main thread pops its own."""
    import sys
    if "pycuda.autoinit" not in sys.modules:  # a cpu worker: no context
        yield
        return
    context = sys.modules["pycuda.autoinit"].context
    context.push()
    try:
        yield
    finally:
        context.pop()


def remote(task):
    """A task function whose GkmapError comes back as a RemoteError value rather than an exception: Dask
    would retry an exception, and retrying cannot help (module docstring). GPU tasks run in `gpu_task`."""
    @functools.wraps(task)
    def run(*args):
        try:
            with gpu_task():
                return task(*args)
        except GkmapError as e:
            return RemoteError(str(e), e.exit_code)
    return run


def loaded(plugin_name):
    """(this worker, its IndexPlugin); the RemoteError that refuses the chunk when it has no index."""
    worker = get_worker()
    plugin = worker.plugins.get(plugin_name)
    if plugin is None:
        raise RemoteError(f"worker {worker.name} has no gkmap index loaded")
    if plugin.index is None:
        raise plugin.error
    return worker, plugin


def mapped_input(value):
    """The MappedChunk a task takes from `map_item`; that task's RemoteError is this task's answer too."""
    if isinstance(value, RemoteError):
        raise value
    return value


@remote
def map_chunk(item, plugin_name):
    """Map and render one chunk (a ReadBatch) with this worker's index, backend and render processes: the
    run loop (runners/local.py) over this one item. A ChunkResult whose texts travel to the client (str)."""
    worker, plugin = loaded(plugin_name)
    counters = Counters(stages=plugin.stages)
    pieces = []
    units = drive_on_worker(plugin, [item], counters, pieces.append)
    return ChunkResult([{name: text if isinstance(text, str) else text.text() for name, text in piece.items()}
                        for piece in pieces], counters, counters, str(worker.name), units)


def drive_on_worker(plugin, items, counters, put):
    """The run loop over `items` with this worker's job and render processes, which it keeps for the next
    task: on an error nothing of these items stays queued in them. Returns the units (reads) driven."""
    renderer = plugin.job.renderer_on(plugin.renderer, counters)
    try:
        return drive(plugin.job, items, counters, renderer, put)
    except BaseException:
        for _ in renderer.ready(block=True):
            pass
        raise


class ShareUnsure(RemoteError):
    """A share held a record the block parser does not check: the run goes again on the chunk path."""


class ByteRange(io.RawIOBase):
    """Bytes [begin, end) of a file as a stream (what `read_chunks` reads)."""

    def __init__(self, path, begin, end):
        super().__init__()
        self.file = open(path, "rb")
        self.file.seek(begin)
        self.left = end - begin

    def readable(self):
        return True

    def readinto(self, buffer):
        view = memoryview(buffer)[:self.left]
        got = self.file.readinto(view) if len(view) else 0
        self.left -= got
        return got

    def close(self):
        self.file.close()
        super().close()


def share_batches(path, begin, end, batch_size):
    """ReadBatches of the FASTQ records in bytes [begin, end) of `path`, cut by the block parser as
    reads.read_batches cuts a whole file (that function takes only whole files). Raises Unsure where the
    parser would hand the file to dnaio; `first` counts from the share's start (it only numbers reads in
    error messages, and an error sends the run to the chunk path)."""
    with contextlib.closing(ByteRange(path, begin, end)) as stream, \
            contextlib.closing(prefetch(read_chunks(stream))) as chunks:
        first = 0
        for names, seq, qual, lengths in FastqBlocks(chunks, batch_size):
            starts = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=starts[1:])
            if (seq >= ord("a")).any():
                seq = _UPPER[seq]
            yield ReadBatch(names, seq, qual, starts, first)
            first += len(names)


@remote
def map_share(path, begin, end, part, plugin_name):
    """Map the reads in bytes [begin, end) of `path` (whole FASTQ records) into the SAM records of file
    `part`: a ChunkResult whose text is that file (render.SpilledText, copied into the output by the client).
    A record the block parser does not check comes back as ShareUnsure."""
    worker, plugin = loaded(plugin_name)
    counters = Counters(stages=plugin.stages)
    batches = prefetch(with_codes(share_batches(path, begin, end, plugin.opts.batch_size)))
    try:
        with open(part, "w") as handle:
            out = BackgroundWriter(handle)
            def put(piece):  # a share writes its records only (the share path has no other sinks)
                if piece.get("sam"):
                    out.put(piece["sam"])
            try:
                units = drive_on_worker(plugin, batches, counters, put)
            finally:
                out.close(raise_error=False)
            out.close()
    except Unsure:
        return ShareUnsure(f"{path}: bytes {begin}..{end}: a record the block parser does not check")
    finally:
        batches.close()
    return ChunkResult([{"sam": SpilledText(part, os.path.getsize(part))}], counters, counters, str(worker.name),
                       units)


@remote
def map_item(item, plugin_name):
    """Map one chunk (paired: both mates of its read pairs): a MappedChunk, which stays on this worker."""
    worker, plugin = loaded(plugin_name)
    counters = Counters(stages=plugin.stages)
    return MappedChunk(map_on_worker(plugin.job, item, counters), counters, str(worker.name))


def map_on_worker(job, item, counters):
    """The job's mapping of one chunk on this worker (a module-level step: the fault tests replace it)."""
    return job.map(item, counters)


def render_on_worker(job, mapped, tally):
    """The job's rendering of one mapped chunk on this worker (likewise)."""
    return job.render(mapped, tally)


@remote
def chunk_lookahead(chunk, plugin_name):
    """jobs' lookahead of a MappedChunk (paired: its confident TLENs): what the client needs to settle."""
    _, plugin = loaded(plugin_name)
    return plugin.job.lookahead(mapped_input(chunk).mapped)


@remote
def render_item(chunk, settings, plugin_name):
    """Render one MappedChunk with the job's settings (paired: the run's PairSettings): a ChunkResult."""
    chunk = mapped_input(chunk)
    _, plugin = loaded(plugin_name)
    job = copy.copy(plugin.job)               # the settings are this run's; the worker's job is shared
    job.settings = settings
    counters = copy.deepcopy(chunk.counters)  # the mapped chunk stays as it is, for a rerun of this task
    tally = job.tally(counters)
    return ChunkResult([render_on_worker(job, chunk.mapped, tally)], tally, counters, chunk.worker,
                       job.units(chunk.mapped))


def setup_error(plugin_name, dask_worker):
    """The refusal of this worker's IndexPlugin, or None (run on every worker by `Client.run`)."""
    return dask_worker.plugins[plugin_name].error


def gpu_environments(gpus):
    """One worker environment per GPU for --gpus N|auto: each worker sees only its own GPU (as device 0)."""
    visible = visible_gpus()
    if not visible:
        raise UsageError("--gpus: no GPU is visible here (CUDA_VISIBLE_DEVICES, nvidia-smi); "
                         "use --local-cluster N for CPU workers")
    n = len(visible) if gpus == "auto" else gpus
    if n > len(visible):
        raise UsageError(f"--gpus {n}: only {len(visible)} GPU(s) visible here ({','.join(visible)})")
    return [{"CUDA_VISIBLE_DEVICES": gpu} for gpu in visible[:n]]


def local_cluster(environments, prefix):
    """A scheduler and one worker process per entry of `environments` (its extra variables), on loopback.
    One thread per worker: a worker owns one backend (one GPU context). No Dask memory limit: the index
    is memory-mapped and the mapper bounds its batches itself; Dask's limit would restart the workers of
    a human-sized index. Without Dask's MALLOC_TRIM_THRESHOLD_: setting it turns off glibc's adaptive mmap
    threshold, so every large numpy array is a fresh mmap with page faults (seeding ran 2.5x slower)."""
    worker = dict(nthreads=1, host="127.0.0.1", memory_limit=0, silence_logs=logging.ERROR)
    workers = {f"{prefix}{env.get('CUDA_VISIBLE_DEVICES', i)}": {"cls": Nanny, "options": dict(worker, env=env)}
               for i, env in enumerate(environments)}
    # the scheduler and its dashboard on loopback only (":0" would open the dashboard on every interface,
    # unauthenticated): nothing of the run answers from another host
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}}
    # the nannies read these when they start their worker processes, here: MALLOC_TRIM (above), and
    # non-daemonic workers, so that a worker may start its SAM render processes (a worker restarted later
    # reads the default again and renders inline: the same output, more slowly)
    with dask.config.set({MALLOC_TRIM: None, "distributed.worker.daemon": False}):
        return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.ERROR)


@contextlib.contextmanager
def quiet_dask():
    """Dask's INFO lines (workers starting, comms closing) stay out of gkmap's stderr; its warnings (a worker
    lost) stay in."""
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def connect(opts, environments=None):
    """A Client of the cluster the options name; a local cluster (one worker per entry of `environments`)
    lives as long as the client."""
    if opts.scheduler:
        try:
            client = Client(opts.scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except (OSError, TimeoutError) as e:
            raise GkmapError(f"--scheduler {opts.scheduler}: no Dask scheduler answers there ({e})") from None
        with client:
            yield client
        return
    cluster = local_cluster(environments, "gpu" if opts.gpus is not None else "worker")
    with cluster, Client(cluster, set_as_default=False) as client:
        yield client


class OrderedWriter:
    """Writes chunk results in chunk order, whatever order they finish in (cutadapt's OrderedChunkWriter)."""

    def __init__(self, write):
        self._write = write
        self._waiting = {}
        self.written = 0  # chunks 0..written-1 are out

    def add(self, chunk, result):
        self._waiting[chunk] = result
        while self.written in self._waiting:
            self._write(self._waiting.pop(self.written))
            self.written += 1


def chunk_of(key, token):
    """The chunk index of one of this run's task keys (`<token>-[<step>-]<chunk>`), or None for any other key."""
    return int(key.rsplit("-", 1)[1]) if isinstance(key, str) and key.startswith(token + "-") else None


def retried_chunks(client, token):
    """Chunks of this run that ran (a task of theirs) more than once: those on or held by a worker that died
    (the scheduler's remove-worker events) and those whose task raised (IndexPlugin's events), sorted."""
    keys = set()
    for _, event in client.get_events("all"):
        if isinstance(event, dict) and event.get("action") == "remove-worker":
            keys.update(event.get("processing-tasks", ()), event.get("lost-computed-tasks", ()))
    keys.update(event["key"] for _, event in client.get_events(RETRY_TOPIC))
    return sorted({chunk for chunk in (chunk_of(key, token) for key in keys) if chunk is not None})


@dataclass
class RunTally:
    """What the run summary says about the cluster: chunks submitted, chunks per worker, backends seen."""
    chunks: int = 0
    per_worker: Tally = field(default_factory=Tally)
    times: dict = field(default_factory=dict)   # worker -> seconds per stage of its chunks or shares
    stages: set = field(default_factory=set)


class Stream:
    """This run's chunks through the cluster: each submitted in input order, at most `window` of them
    between submission and writing, their results handed to the OrderedWriter."""

    def __init__(self, client, token, writer, tally):
        self.client, self.token, self.writer, self.tally = client, token, writer, tally
        self.pending = as_completed(loop=client.loop)

    @property
    def window(self):
        return IN_FLIGHT_PER_THREAD * max(1, sum(self.client.nthreads().values()))

    def submit(self, function, *args, step=None, chunk, priority=0):
        """The future of one task of this run, keyed `<token>-[<step>-]<chunk>` (chunk_of reads it back)."""
        key = f"{self.token}-{step}-{chunk}" if step else f"{self.token}-{chunk}"
        return self.client.submit(function, *args, key=key, retries=RETRIES, pure=False, priority=priority)

    def result(self, future):
        """A task's value; GkmapError when the chunk failed on every try or was refused (a RemoteError)."""
        try:
            value = future.result()
        except Exception as e:  # the task's own error after RETRIES reruns, or KilledWorker
            raise GkmapError(f"chunk {chunk_of(future.key, self.token)} failed on the cluster: "
                             f"{type(e).__name__}: {e}") from e
        future.release()
        if isinstance(value, RemoteError):
            raise value
        return value

    def run(self, items, submit):
        """submit(chunk, item) -> the future of chunk's ChunkResult, for each item in order; an item is drawn
        (read, or mapped) only when the window has room."""
        items = iter(items)
        with dask.config.set(LARGE_TASK):
            while True:
                while self.tally.chunks - self.writer.written >= self.window:
                    self._collect(next(self.pending))
                item = next(items, None)
                if item is None:
                    break
                self.pending.add(submit(self.tally.chunks, item))
                self.tally.chunks += 1
            for future in self.pending:
                self._collect(future)

    def _collect(self, future):
        self.writer.add(chunk_of(future.key, self.token), self.result(future))


class Ahead:
    """An iterator that draws `depth` items ahead of the one it yields: drawing a chunk submits its task, so
    the workers map the next chunks while the client waits for this one."""

    def __init__(self, iterable, depth):
        self.items, self.depth, self.queue = iter(iterable), depth, deque()

    def __iter__(self):
        return self

    def __next__(self):
        while len(self.queue) <= self.depth:
            item = next(self.items, None)
            if item is None:
                break
            self.queue.append(item)
        if not self.queue:
            raise StopIteration
        return self.queue.popleft()


def map_chunks(stream, job, plugin_name, counters):
    """The job's input in chunks (--chunk-reads, else --batch-size), each mapped and rendered by one
    map_chunk task; a job that settles on its first mapped items gets two tasks a chunk (map_settled)."""
    if job.settles:
        map_settled(stream, job, plugin_name, counters)
        return
    chunks = job.inputs(job.opts.chunk_reads or job.opts.batch_size)
    with contextlib.closing(chunks):
        stream.run(counters.timed_iter("parse", chunks),
                   lambda chunk, item: stream.submit(map_chunk, item, plugin_name, chunk=chunk))


def map_settled(stream, job, plugin_name, counters):
    """Chunks of a job that settles on its first mapped items (paired: the TLEN range): map_item, then
    render_item once the job is settled (module docstring); the job is settled here, on the client."""
    size = job.opts.chunk_reads or job.opts.batch_size
    chunks = job.inputs(size)
    estimating = job.needs_lookahead

    def submit_mapping(chunk, item):
        """(future of the MappedChunk, future of its lookahead while the job settles, else None). The
        lookahead task is submitted with the mapping and ahead of the mappings queued on that worker, so
        the client, which reads them in order, does not stall the workers (docs/cluster.md)."""
        future = stream.submit(map_item, item, plugin_name, step="map", chunk=chunk)
        return future, stream.submit(chunk_lookahead, future, plugin_name, step="tlens", chunk=chunk,
                                     priority=1) if estimating else None

    with contextlib.closing(chunks), dask.config.set(LARGE_TASK):
        mapped = Ahead(itertools.starmap(submit_mapping, enumerate(counters.timed_iter("parse", chunks))),
                       stream.window)
        seen = deque(job.settle((future, stream.result(ahead)) for future, ahead in mapped))
        estimating = False     # the chunks drawn from here on need no lookahead (submit_mapping reads it)
        mapped.depth = 0       # from here on, Stream.run draws chunks as its window allows
        popped = (seen.popleft() for _ in range(len(seen)))   # the client lets go of a chunk once it is rendered
        stream.run(itertools.chain(popped, (future for future, _ in mapped)),
                   lambda chunk, future: stream.submit(render_item, future, job.settings, plugin_name, step="pair",
                                                       chunk=chunk))


def record_start(path, offset, size):
    """The offset of the first FASTQ record that starts at or after `offset` (a line starting with '@' whose
    next line but one starts with '+': a quality line starting with '@' is followed by a header and a
    sequence line, so no other line passes), `size` if none does before the end; None when no record
    starts within CUT_MAX bytes (very long reads: the chunk path reads such files)."""
    window = CUT_WINDOW
    with open(path, "rb") as f:
        while True:
            f.seek(max(offset - 1, 0))
            data = f.read(window + 1)
            if offset == 0:
                data = b"\n" + data
            starts = [i + 1 for i, byte in enumerate(data) if byte == 10]
            for k, start in enumerate(starts[:-2]):
                if data[start:start + 1] == b"@" and data[starts[k + 2]:starts[k + 2] + 1] == b"+":
                    return max(offset - 1, 0) + start - (1 if offset == 0 else 0)
            if max(offset - 1, 0) + len(data) >= size + (1 if offset == 0 else 0):
                return size  # no record starts past the offset (lines past it are the last record's)
            if window >= CUT_MAX:
                return None
            window *= 2


def share_cuts(path, shares):
    """Byte offsets [0, c1, ..., size] cutting a plain FASTQ file into at most `shares` ranges of whole
    records of about equal size; None when the file is not one the share path takes (module docstring)."""
    name = os.path.basename(path).lower()
    if not os.path.isfile(path) or name.endswith(COMPRESSED) or _detect_format_from_name(path) not in ("fastq", None):
        return None
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if f.read(1) != b"@":
            return None
    cuts = [0]
    for j in range(1, shares):
        cut = record_start(path, size * j // shares, size)
        if cut is None:
            return None
        if cut > cuts[-1] and cut < size:
            cuts.append(cut)
    return cuts + [size]


def share_plan(opts, workers):
    """(byte cuts, render processes per worker) when this run takes the share path, else None."""
    local = opts.scheduler is None and (opts.gpus is not None or opts.local_cluster is not None)
    if not local or opts.paired or opts.unmapped or opts.dump_candidates or opts.chunk_reads is not None \
            or opts.output in (None, "-") or opts.bam:
        return None
    cuts = share_cuts(opts.reads, SHARES_PER_WORKER * workers)
    if cuts is None:
        return None
    cores = usable_cores()
    # without -t, the host's cores but one per worker, shared out (the single process takes all but one)
    return cuts, opts.threads or max(1, min(MAX_WORKERS, cores // workers - 1))


def copy_part(part, output_fd, offset):
    """Part file `part` (a render.SpilledText) into the output at byte `offset`, by the kernel
    (os.copy_file_range; read and pwrite where that is refused), then deleted. Parts go to their own
    offsets, so several copy at once."""
    with open(part.path, "rb") as source:
        done = 0
        try:
            while done < part.size:
                got = os.copy_file_range(source.fileno(), output_fd, part.size - done, done, offset + done)
                if got == 0:
                    break
                done += got
        except OSError:
            pass
        while done < part.size:
            data = os.pread(source.fileno(), min(1 << 26, part.size - done), done)
            os.pwrite(output_fd, data, offset + done)
            done += len(data)
    os.unlink(part.path)


def map_shares(client, token, plugin_name, opts, cuts, output, account, timed, timeline):
    """Run the shares (module docstring) and copy their parts into `output` in order, each at its offset as
    soon as the shares before it are done (COPY_THREADS at once); account(result) for each, once all are
    in. False, with `output` cut back to where it was, when a share came back with an error (the caller
    then runs the chunk path). `timeline` gets the seconds at which each share finished."""
    output.flush()
    mark = output.tell()
    fd = output.fileno()
    folder = tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(opts.output)), prefix=".gkmap-parts-")
    futures = [client.submit(map_share, os.path.abspath(opts.reads), a, b, os.path.join(folder, f"part{i}.sam"),
                             plugin_name, key=f"{token}-share-{i}", retries=RETRIES, pure=False, priority=-i)
               for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))]
    finished = {}
    for i, future in enumerate(futures):
        future.add_done_callback(lambda _, i=i: finished.setdefault(i, time.perf_counter()))
    results, offset = [], mark
    try:
        with concurrent.futures.ThreadPoolExecutor(COPY_THREADS) as pool:
            copies = []
            for i, future in enumerate(futures):
                try:
                    result = future.result()
                except Exception as e:  # the task's own error after RETRIES reruns, or KilledWorker
                    raise GkmapError(f"share {i} failed on the cluster: {type(e).__name__}: {e}") from e
                future.release()
                if isinstance(result, RemoteError):
                    log.info("share %d: %s; mapping again through the client (chunks)", i, result)
                    client.cancel(futures[i + 1:])
                    for copy_job in copies:
                        copy_job.result()
                    os.ftruncate(fd, mark)
                    output.seek(mark)
                    return False
                part, = (piece["sam"] for piece in result.texts)
                copies.append(pool.submit(copy_part, part, fd, offset))
                offset += part.size
                results.append(result)
            with timed("output"):  # the copies the workers' mapping did not hide
                for copy_job in copies:
                    copy_job.result()
        output.seek(offset)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        timeline.extend(finished.get(i) for i in range(len(futures)))
    for result in results:
        account(result)
    return True


def render_processes(opts):
    """SAM render processes per worker: -t, else 1 (render in the task, as measured on GPUs so far)."""
    return opts.threads or 1


def map_distributed(opts):
    """`gkmap map` over workers (opts.distributed); returns the run's Counters (PairCounters with --pe/--mp),
    summed over the chunks."""
    t0 = time.perf_counter()
    index = open_index(opts.reference, opts.ws, opts.index_dir)  # builds it once, here, when missing
    token = f"gkmap-{uuid.uuid4().hex[:12]}"
    environments = (gpu_environments(opts.gpus) if opts.gpus is not None else [{}] * opts.local_cluster) \
        if opts.scheduler is None else None
    plan = share_plan(opts, len(environments)) if environments else None
    worker_opts = replace(opts, reference=os.path.abspath(opts.reference),
                          device="cuda" if opts.gpus is not None and opts.device == "auto" else opts.device,
                          threads=plan[1] if plan else render_processes(opts))
    plugin = IndexPlugin(worker_opts, index.folder.resolve(), read_meta(index.folder)["reference"]["checksum"],
                         index.ws, token)
    job = job_for(opts)   # this side of the job: its outputs, inputs, settling and report
    counters = Counters()
    run = job.tally(counters)
    tally = RunTally()
    with contextlib.ExitStack() as stack:
        stack.enter_context(quiet_dask())
        client = stack.enter_context(connect(opts, environments))
        up = time.perf_counter()
        plugin_name = f"{token}-index"
        client.register_plugin(plugin, name=plugin_name)
        if opts.scheduler:  # a long-lived cluster: free the index (and GPU memory) when the run ends
            stack.callback(client.unregister_worker_plugin, plugin_name)
        refusals = [e for e in client.run(setup_error, plugin_name).values() if e is not None]
        if refusals:
            raise refusals[0]
        ready, timeline = time.perf_counter(), []
        log.info("mapping on %d Dask workers (dashboard: %s)", len(client.nthreads()), client.dashboard_link)
        sinks = stack.enter_context(Sinks(job.outputs(opts), run_header(index.reference, opts), Format.of(opts)))
        progress = stack.enter_context(progress_bar(opts, job.unit))

        def write(result):
            with counters.timed("output"):
                for piece in result.texts:
                    sinks.put(piece)
            account(result)

        def account(result):
            run.merge(result.tally)
            tally.per_worker[result.worker] += 1
            tally.times.setdefault(result.worker, Tally()).update(result.counters.times)
            tally.stages.add(result.counters.stages)
            progress.update(result.units)
            progress.set_postfix_str(f"{writer.written + 1}/{tally.chunks} chunks", refresh=False)

        writer = OrderedWriter(write)
        stream = Stream(client, token, writer, tally)
        shares = False
        if plan:
            tally.chunks = len(plan[0]) - 1
            shares = map_shares(client, token, plugin_name, opts, plan[0], sinks.file("sam"), account,
                                counters.timed, timeline)
            if not shares:
                tally.chunks = 0
        if not shares:
            map_chunks(stream, job, plugin_name, counters)
        retried = retried_chunks(client, token)
        with counters.timed("output"):
            sinks.close()
    counters.stages = "; ".join(sorted(tally.stages))
    counters.seconds = time.perf_counter() - t0
    job.report(run)
    per_worker = ", ".join(f"{name} {n}" for name, n in sorted(tally.per_worker.items()))
    if shares:
        log.info("cluster: %d shares of the reads file, each read and mapped by one worker in batches of %d "
                 "reads; shares per worker: %s; retried shares: %d%s", tally.chunks, opts.batch_size, per_worker,
                 len(retried), f" ({', '.join(map(str, retried))})" if retried else "")
    else:
        log.info("cluster: %d chunks of up to %d %s; chunks per worker: %s; retried chunks: %d%s", tally.chunks,
                 opts.chunk_reads or opts.batch_size, job.unit.strip(), per_worker,
                 len(retried), f" ({', '.join(map(str, retried))})" if retried else "")
    log.info("cluster: timeline, seconds from the start: cluster up %.2f, index loaded on every worker %.2f, "
             "%s, outputs complete %.2f", up - t0, ready - t0, "shares done " + " ".join(
                 f"{t - t0:.2f}" if t else "-" for t in timeline) if timeline else "chunks",
             time.perf_counter() - t0)
    log.info("cluster: seconds per stage on each worker: %s", "; ".join(
        f"{name}: " + ", ".join(f"{stage} {seconds:.2f}" for stage, seconds in times.items() if stage != "load")
        for name, times in sorted(tally.times.items())))
    return run
