"""One `gkmap map` run spread over worker processes with dask.distributed (the `cluster` extra): one worker
per GPU of this host (`--gpus`), N local workers (`--local-cluster`) or a Dask cluster (`--scheduler`).

    client (this process)                                     worker (one per GPU, or per core)
    read_batches(--chunk-reads) -- chunk i --submit-->        IndexPlugin: index + backend, loaded once
    OrderedWriter <-- ChunkResult (SAM, unmapped, candidates,   map_chunk: pipeline.map_batch on the chunk
                      Counters, worker name) --

- Order: chunk i is written only after chunks 0..i-1 (a writer keyed by chunk index), so the SAM is the
  single-process SAM byte for byte (the @PG line aside): records depend on the read alone, not its batch.
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
"""
import contextlib
import io
import logging
import os
import shutil
import subprocess
import time
import uuid
from collections import Counter as Tally
from dataclasses import dataclass, field, fields, replace

from mapper.backends import get_backend
from mapper.errors import GkmapError, IndexFormatError, UsageError
from mapper.filters.windows import MODES as FILTER_MODES
from mapper.index import load_index, open_index, read_meta
from mapper.outputs import atomic_output
from mapper.pipeline import Counters, map_batch, progress_bar
from mapper.reads import read_batches
from mapper.sam import header, unmapped_records

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


class RemoteError(GkmapError):
    """A GkmapError raised on a worker, carried back to the client with its message and exit code."""

    def __init__(self, message, exit_code=1):
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self):
        return RemoteError, (str(self), self.exit_code)


@dataclass
class ChunkResult:
    sam: str
    unmapped: str     # --unmapped records of the chunk ("" without it)
    candidates: str   # --dump-candidates lines of the chunk ("" without it)
    counters: Counters
    worker: str       # the worker's name (stable across a restart of that worker)


class IndexPlugin(WorkerPlugin):
    """The index and backend of one worker process: loaded when the worker joins (or restarts), validated
    there, and used by every chunk the worker maps. A refusal is kept in `error` and returned by each task
    (the client asks every present worker right after registering; a late joiner answers with its tasks)."""

    def __init__(self, opts, folder, checksum, ws, token):
        self.opts, self.folder, self.checksum, self.ws, self.token = opts, str(folder), checksum, ws, token
        self.worker = self.index = self.backend = self.error = None

    def setup(self, worker):
        self.worker = worker
        try:
            index = load_index(self.opts.reference, self.folder, checksum=self.checksum)  # version, checksum
            if index.ws != self.ws:
                raise IndexFormatError(f"{self.folder}: an index of ws {index.ws}, but the client's has ws {self.ws}")
            backend = get_backend(self.opts.device)
        except GkmapError as e:
            self.error = RemoteError(f"worker {worker.name} ({worker.address}) refused the run: {e}", e.exit_code)
            return
        self.index, self.backend = index, backend
        self.filter_mode = FILTER_MODES[self.opts.filter]
        devices = dict(backend.devices, filter=backend.name if self.filter_mode else "none")
        self.stages = ", ".join(f"{stage}: {devices[stage]}" for stage in ("seed", "filter", "verify"))

    def transition(self, key, start, finish, **kwargs):
        """Report a chunk of this run that raised (Dask retries it) to the client's run summary."""
        if finish == "error" and isinstance(key, str) and key.startswith(self.token):
            self.worker.log_event(RETRY_TOPIC, {"key": key})


def map_chunk(batch, plugin_name):
    """Map one chunk (a ReadBatch) with this worker's index and backend: a ChunkResult, or the RemoteError
    that refuses it."""
    worker = get_worker()
    plugin = worker.plugins.get(plugin_name)
    if plugin is None or plugin.index is None:
        return plugin.error if plugin else RemoteError(f"worker {worker.name} has no gkmap index loaded")
    opts = plugin.opts
    counters = Counters(stages=plugin.stages)
    dump = io.StringIO() if opts.dump_candidates else None
    try:
        text, unmapped = map_batch(batch, plugin.index, plugin.backend, plugin.filter_mode, opts, counters, dump)
    except GkmapError as e:
        return RemoteError(str(e), e.exit_code)
    return ChunkResult(text, unmapped_records(batch, unmapped) if opts.unmapped else "",
                       dump.getvalue() if dump else "", counters, str(worker.name))


def setup_error(plugin_name, dask_worker):
    """The refusal of this worker's IndexPlugin, or None (run on every worker by `Client.run`)."""
    return dask_worker.plugins[plugin_name].error


def visible_gpus():
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries: that variable's list when it is set,
    else every GPU `nvidia-smi -L` lists. No CUDA call: the client needs no GPU context of its own."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [gpu.strip() for gpu in listed.split(",") if gpu.strip()]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    out = subprocess.run([smi, "-L"], capture_output=True, text=True, check=False)
    gpus = [line for line in out.stdout.splitlines() if line.startswith("GPU ")] if out.returncode == 0 else []
    return [str(i) for i in range(len(gpus))]


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
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard_address": ":0"}}
    with dask.config.set({MALLOC_TRIM: None}):  # the nannies read it when they are made, here
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
def connect(opts):
    """A Client of the cluster the options name; a local cluster lives as long as the client."""
    if opts.scheduler:
        try:
            client = Client(opts.scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except (OSError, TimeoutError) as e:
            raise GkmapError(f"--scheduler {opts.scheduler}: no Dask scheduler answers there ({e})") from None
        with client:
            yield client
        return
    if opts.gpus is not None:
        cluster = local_cluster(gpu_environments(opts.gpus), "gpu")
    else:
        cluster = local_cluster([{}] * opts.local_cluster, "worker")
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


def add_counters(total, part):
    """Add one chunk's Counters to the run's (per-stage seconds add up over workers)."""
    for f in fields(Counters):
        if f.type is int:
            setattr(total, f.name, getattr(total, f.name) + getattr(part, f.name))
    total.seeding.add(part.seeding)
    for stage, seconds in part.times.items():
        total.times[stage] += seconds


def chunk_of(key, token):
    """The chunk index of one of this run's task keys (`<token>-<chunk>`), or None for any other key."""
    return int(key.rsplit("-", 1)[1]) if isinstance(key, str) and key.startswith(token + "-") else None


def retried_chunks(client, token):
    """Chunks of this run that ran more than once: those on or held by a worker that died (the scheduler's
    remove-worker events) and those whose task raised (IndexPlugin's events), sorted."""
    keys = set()
    for _, event in client.get_events("all"):
        if isinstance(event, dict) and event.get("action") == "remove-worker":
            keys.update(event.get("processing-tasks", ()), event.get("lost-computed-tasks", ()))
    keys.update(event["key"] for _, event in client.get_events(RETRY_TOPIC))
    return sorted(chunk for chunk in (chunk_of(key, token) for key in keys) if chunk is not None)


@dataclass
class RunTally:
    """What the run summary says about the cluster: chunks submitted, chunks per worker, backends seen."""
    chunks: int = 0
    per_worker: Tally = field(default_factory=Tally)
    stages: set = field(default_factory=set)


def map_distributed(opts):
    """`gkmap map` over workers (opts.distributed); returns the run's Counters, summed over the chunks."""
    t0 = time.perf_counter()
    index = open_index(opts.reference, opts.ws, opts.index_dir)  # builds it once, here, when missing
    token = f"gkmap-{uuid.uuid4().hex[:12]}"
    worker_opts = replace(opts, reference=os.path.abspath(opts.reference),
                          device="cuda" if opts.gpus is not None and opts.device == "auto" else opts.device)
    plugin = IndexPlugin(worker_opts, index.folder.resolve(), read_meta(index.folder)["reference"]["checksum"],
                         index.ws, token)
    counters = Counters()
    tally = RunTally()
    with contextlib.ExitStack() as stack:
        stack.enter_context(quiet_dask())
        client = stack.enter_context(connect(opts))
        plugin_name = f"{token}-index"
        client.register_plugin(plugin, name=plugin_name)
        if opts.scheduler:  # a long-lived cluster: free the index (and GPU memory) when the run ends
            stack.callback(client.unregister_worker_plugin, plugin_name)
        refusals = [e for e in client.run(setup_error, plugin_name).values() if e is not None]
        if refusals:
            raise refusals[0]
        log.info("mapping on %d Dask workers (dashboard: %s)", len(client.nthreads()), client.dashboard_link)
        optional = lambda path: stack.enter_context(atomic_output(path)) if path else None
        sam = stack.enter_context(atomic_output(opts.output))
        unmapped, dump = optional(opts.unmapped), optional(opts.dump_candidates)
        sam.write(header(index.reference, opts.command_line))
        progress = stack.enter_context(progress_bar(opts, " reads"))

        def write(result):
            with counters.timed("output"):
                sam.write(result.sam)
                if unmapped is not None:
                    unmapped.write(result.unmapped)
                if dump is not None:
                    dump.write(result.candidates)
            add_counters(counters, result.counters)
            tally.per_worker[result.worker] += 1
            tally.stages.add(result.counters.stages)
            progress.update(result.counters.reads)
            progress.set_postfix_str(f"{writer.written + 1}/{tally.chunks} chunks", refresh=False)

        writer = OrderedWriter(write)
        _run_chunks(client, opts, plugin_name, token, counters, writer, tally)
        retried = retried_chunks(client, token)
    counters.stages = "; ".join(sorted(tally.stages))
    counters.seconds = time.perf_counter() - t0
    log.info("%s", counters.summary())
    log.info("cluster: %d chunks of up to %d reads; chunks per worker: %s; retried chunks: %d%s", tally.chunks,
             opts.chunk_reads or opts.batch_size,
             ", ".join(f"{name} {n}" for name, n in sorted(tally.per_worker.items())), len(retried),
             f" ({', '.join(map(str, retried))})" if retried else "")
    return counters


def _run_chunks(client, opts, plugin_name, token, counters, writer, tally):
    """Stream the reads as chunks into tasks, keeping the in-flight window, and hand results to `writer`."""
    pending = as_completed(loop=client.loop)

    def collect(future):
        chunk = chunk_of(future.key, token)
        try:
            result = future.result()
        except Exception as e:  # the task's own error after RETRIES reruns, or KilledWorker
            raise GkmapError(f"chunk {chunk} failed on the cluster: {type(e).__name__}: {e}") from e
        future.release()
        if isinstance(result, RemoteError):
            raise result
        writer.add(chunk, result)

    with dask.config.set(LARGE_TASK):
        for batch in counters.timed_iter("parse", read_batches(opts.reads, opts.chunk_reads or opts.batch_size)):
            while tally.chunks - writer.written >= IN_FLIGHT_PER_THREAD * max(1, sum(client.nthreads().values())):
                collect(next(pending))
            pending.add(client.submit(map_chunk, batch, plugin_name, key=f"{token}-{tally.chunks}",
                                      retries=RETRIES, pure=False))
            tally.chunks += 1
        for future in pending:
            collect(future)
