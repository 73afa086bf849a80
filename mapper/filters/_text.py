"""`gkmap filter` on GPUs from the pairs file itself: parsing, encoding, filtering and formatting the output lines
all happen on the GPU, in chunks streamed through pinned memory; one worker thread per GPU (`--gpus N`), output in
input order. The host reads bytes and writes bytes.

Input : a pairs file (pairs.py's format and rules), read CHUNK bytes at a time.
Output: "<1|0>\\t<estimate>\\n" per line, in input order, written to a binary file object as chunks finish;
        a `TextResult` with counts and times (and every decision and estimate when asked for).

Chunks. Chunk k holds the lines that start in bytes [k CHUNK, (k+1) CHUNK) of the file, so that a worker finds its
chunk from the file alone: it reads from byte k CHUNK - 1 on, starts after the first newline there (at byte 0 for
k = 0) and reads on past byte (k+1) CHUNK - 1 up to the next newline or the end of the file (where a missing last
newline is added). Chunks go, in order, to whichever worker asks first; a writer thread writes them in order.

A chunk on one of a worker's NSLOTS streams (kernels/pairs_text.cu, gatekeeper.cu):
    parse : bytes to the GPU, line ends (count, scan, compaction), tabs and checks; 16 bytes of stats back;
    filter: once the stats are in, both columns encoded, the filter kernel for the chunk's lengths (per length
            group when lines differ), output lines formatted (widths, scan, scatter); the output bytes, decisions
            and estimates back.
A worker's reader thread reads chunk k+1 (preadv by several threads, into pinned memory) while the worker thread
queues chunk k's work and its GPU runs it: file reading, both copy directions and the SMs work at once.

Errors. A chunk whose lines break a rule (parse_lines' flags) is not filtered. At the end the first such chunk is
parsed again by pairs.parse_pairs (and gatekeeper.check_lengths), which words the error as the cpu path does, with
the file's line number; as there, a malformed line anywhere comes before a length mismatch. The output is then
incomplete, and the caller's atomic output is not renamed into place.
"""
import collections
import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from mapper.filters._gpu import filter_kernel
from mapper.filters._stream import aligned

CHUNK = 1 << 26
NSLOTS = 4
SCAN_SPAN = 128      # items a thread sums in one level of the scan
PAD = 64             # bytes past a chunk that kernels may read (word loads)
EXTEND = 1 << 16     # first read past a chunk's nominal end, looking for its last newline (doubles)
AHEAD = 4            # chunks per worker that may wait for the writer
PARSE_THREADS = 1 << 18
BAD_LINE, BAD_LENGTHS, MIXED = 1, 2, 4  # kernels/pairs_text.cu
SOURCE = "pairs_text.cu"


@dataclass
class TextResult:
    pairs: int = 0
    accepted: int = 0
    undefined: int = 0
    kernel_seconds: float = 0.0
    read_seconds: float = 0.0       # summed over workers (reading overlaps the GPU)
    setup_seconds: float = 0.0      # the slowest worker's start: context, kernels, buffers
    seconds: float = 0.0            # wall time, file to output (setup included)
    profile: dict = None            # seconds per stage, summed over chunks (`Worker.profile`)
    accept: np.ndarray = None       # bool [pairs], when asked for
    estimate: np.ndarray = None     # int16 [pairs]


@dataclass
class Chunk:
    index: int
    begin: int = 0                  # file offsets of its bytes
    end: int = 0
    lines: int = 0
    flags: int = 0
    output: bytes = b""
    accepted: int = 0
    undefined: int = 0
    kernel_seconds: float = 0.0
    accept: np.ndarray = None
    estimate: np.ndarray = None


def read_range(fd, pool, threads, view, offset):
    """Fill memoryview `view` with the file's bytes from `offset` (fewer at the end of the file): preadv by
    `threads` threads of the pool, a part of 4 MiB or more each. Returns the number of bytes read."""
    n = len(view)
    parts = max(1, min(threads, n >> 22))
    bounds = [n * i // parts for i in range(parts + 1)]

    def part(a, b):
        done = a
        while done < b:
            got = os.preadv(fd, [view[done:b]], offset + done)
            if got == 0:
                break
            done += got
        return done - a
    sizes = list(pool.map(lambda i: part(bounds[i], bounds[i + 1]), range(parts)))
    for i, size in enumerate(sizes[:-1]):
        if size < bounds[i + 1] - bounds[i]:  # the file ended inside part i
            return bounds[i] + size
    return bounds[-2] + sizes[-1]


def find_newline(array, lo, hi):
    """Index of the first '\\n' in array[lo:hi], or -1 (searched in growing windows: lines are short)."""
    step = 4096
    while lo < hi:
        at = array[lo:min(hi, lo + step)].tobytes().find(b"\n")
        if at >= 0:
            return lo + at
        lo, step = lo + step, step * 4
    return -1


class Job:
    """What the workers share: the file, the mode, the next chunk to hand out, the writer and the results."""

    def __init__(self, path, e, mode, out, chunk, keep, readers, ngpus):
        self.path, self.e, self.mode, self.out, self.chunk, self.keep = path, e, mode, out, chunk, keep
        self.readers = readers
        self.size = os.path.getsize(path)
        self.nchunks = -(-self.size // chunk)
        self.lock = threading.Condition()
        self.next, self.written, self.window = 0, 0, AHEAD * ngpus
        self.done = {}
        self.bad_line = None  # the first chunk with a malformed line, when one was seen
        self.failed = False   # a chunk broke a rule: nothing more to write
        self.error = None     # an exception of a worker
        self.read_seconds = self.setup_seconds = 0.0
        self.profile = collections.Counter()

    def take(self):
        """The next chunk index, or None. A reader more than `window` chunks ahead of the writer waits; its worker
        finishes what it holds meanwhile, so the chunk the writer waits for always gets done."""
        with self.lock:
            self.lock.wait_for(lambda: self.next - self.written < self.window or self.error is not None)
            stop = self.nchunks if self.bad_line is None else self.bad_line + 1
            if self.error is not None or self.next >= stop:
                return None
            self.next += 1
            return self.next - 1

    def put(self, chunk):
        """A finished chunk: written now if its turn has come, with any later ones waiting for it."""
        with self.lock:
            self.done[chunk.index] = chunk
            if chunk.flags & BAD_LINE and (self.bad_line is None or chunk.index < self.bad_line):
                self.bad_line = chunk.index
            while self.written in self.done and self.error is None:
                c = self.done[self.written]
                self.failed = self.failed or bool(c.flags & (BAD_LINE | BAD_LENGTHS))
                if not self.failed:
                    self.out.write(c.output)
                c.output = b""
                self.written += 1
            self.lock.notify_all()

    def fail(self, error):
        with self.lock:
            self.error = self.error or error
            self.lock.notify_all()


class Slot:
    """One stream of a worker, with the pinned host buffers and device buffers of one chunk in flight."""

    def __init__(self, dev, capacity):
        self.dev, self.stream = dev, dev.stream()
        self.host = dev.pinned(capacity + PAD)
        self.stats = dev.pinned(4, np.uint32)
        self.buffers, self.host_buffers = {}, {}
        self.chunk = None
        self.state = None  # "parsed", "filtered" or "skipped"

    def device(self, name, nbytes):
        """Device buffer `name` of at least nbytes (made again, larger, when needed: the stream is idle then or
        has not used it yet)."""
        buffer, size = self.buffers.get(name, (None, 0))
        if nbytes > size:
            if buffer is not None:
                self.dev.free(buffer)
            buffer, size = self.dev.alloc(aligned(nbytes)), aligned(nbytes)
            self.buffers[name] = buffer, size
        return buffer

    def pinned(self, name, count, dtype):
        array = self.host_buffers.get(name)
        if array is None or len(array) < count:
            if array is not None:
                self.dev.free(array)
            array = self.host_buffers[name] = self.dev.pinned(max(count, 1), dtype)
        return array

    def grow(self, capacity):
        """A larger host buffer, keeping its bytes (a line longer than the room left past the chunk)."""
        bigger = self.dev.pinned(capacity + PAD)
        bigger[:len(self.host)] = self.host
        self.dev.free(self.host)
        self.host = bigger


class Worker:
    """One GPU: reads chunks, queues their work on its streams, hands finished chunks to the job."""

    def __init__(self, job, dev):
        self.job, self.dev = job, dev
        self.fd = os.open(job.path, os.O_RDONLY)
        self.pool = ThreadPoolExecutor(job.readers)
        self.slots = [Slot(dev, job.chunk + 1 + EXTEND + 1) for _ in range(NSLOTS)]  # the byte before the
        # chunk, the chunk, a first read past it, an added newline
        self.free, self.filled = queue.Queue(), queue.Queue()
        for slot in self.slots:
            self.free.put(slot)
        self.faithful = job.mode == "faithful"
        self.fn = {name: dev.function(SOURCE, name) for name in
                   ("count_newlines", "scan_reduce", "scan_serial", "scan_spread", "line_ends", "line_stats",
                    "parse_lines", "scatter_results", "format_widths", "format_lines")}
        self.encode = dev.function("gatekeeper.cu", "encode_lines", GK_KERNEL=1)
        self.max_width = 3 + max(len(str(job.e)), 2)  # "<0|1>\t<estimate>\n", estimate in -2..e
        self.read_seconds = 0.0
        # host seconds of the worker thread per step (issuing work, waiting for the GPU, finishing chunks) and
        # GPU seconds between events (bytes in to stats out; encoding to output back): where a chunk's time goes
        self.profile = collections.Counter()

    def close(self):
        """Before the device closes: its kernels, streams and events go while its context is current."""
        os.close(self.fd)
        self.pool.shutdown()
        self.slots, self.free, self.filled, self.fn, self.encode = [], None, None, None, None

    def timed(self, step, call, *args):
        t0 = time.perf_counter()
        call(*args)
        self.profile[step] += time.perf_counter() - t0

    def run(self):
        """Chunks from the reader thread: parse each at once, filter it once the next one is parsed (its stats
        are back by then), finish it when no newer chunk is waiting or two are on the GPU."""
        reader = threading.Thread(target=self.read_chunks, daemon=True)
        reader.start()
        inflight = collections.deque()
        try:
            while True:
                try:
                    slot = self.filled.get_nowait()
                except queue.Empty:
                    if inflight:
                        self.finish(inflight.popleft())
                        continue
                    t0 = time.perf_counter()
                    slot = self.filled.get()
                    self.profile["host: wait for the reader"] += time.perf_counter() - t0
                if slot is None:
                    break
                self.timed("host: queue parsing", self.parse, slot)
                inflight.append(slot)
                for other in list(inflight)[:-1]:
                    if other.state == "parsed":
                        self.filter(other)
                while len(inflight) > 2:
                    self.finish(inflight.popleft())
            while inflight:
                self.finish(inflight.popleft())
        except BaseException as error:
            self.job.fail(error)  # first, so that a reader waiting for the writer stops too
            raise
        finally:
            self.free.put(None)
            reader.join()

    def read_chunks(self):
        """The reader thread: the next chunk into a free slot, then to the worker; None when there are no more."""
        try:
            with self.dev.current():  # a line longer than the room past its chunk grows a pinned buffer
                while True:
                    slot = self.free.get()
                    k = None if slot is None else self.job.take()
                    if k is None:
                        break
                    self.read(slot, k)
                    self.filled.put(slot)
        except BaseException as error:  # handed to the caller's thread
            self.job.fail(error)
        finally:
            self.filled.put(None)

    # -- reading -------------------------------------------------------------------------------------------
    def read(self, slot, k):
        """Chunk k's bytes into slot.host[slot.lo:slot.lo + chunk.end - chunk.begin], plus a last newline."""
        t0, job = time.perf_counter(), self.job
        origin = max(k * job.chunk - 1, 0)
        nominal = min((k + 1) * job.chunk, job.size) - origin
        got = read_range(self.fd, self.pool, job.readers, memoryview(slot.host)[:nominal], origin)
        lo = 0 if k == 0 else find_newline(slot.host, 0, min(got, (k + 1) * job.chunk - 1 - origin)) + 1
        chunk = slot.chunk = Chunk(k, origin, origin)
        slot.lo = slot.nbytes = 0
        if (k and lo == 0) or lo == got:  # no line starts in this chunk's bytes
            self.read_seconds += time.perf_counter() - t0
            return
        end = find_newline(slot.host, (k + 1) * job.chunk - 1 - origin, got) if got == nominal else -1
        step = EXTEND
        while end < 0 and origin + got < job.size:  # the last line of the chunk goes on past its nominal end
            if got + step + 1 > len(slot.host) - PAD:
                slot.grow(got + step + 1)
            more = read_range(self.fd, self.pool, job.readers, memoryview(slot.host)[got:got + step], origin + got)
            end = find_newline(slot.host, got, got + more)
            got, step = got + more, step * 2
        if end < 0:  # the end of the file
            end = got
            if slot.host[got - 1] != 10:
                slot.host[got] = 10
            else:
                end -= 1
        slot.lo, chunk.begin, chunk.end = lo, origin + lo, origin + min(end + 1, got)
        slot.nbytes = end + 1 - lo
        self.read_seconds += time.perf_counter() - t0

    # -- GPU work ------------------------------------------------------------------------------------------
    def scan(self, slot, name, data, n):
        """Exclusive scan of uint32 data[0..n) in place, on the slot's stream (pairs_text.cu, step 2)."""
        dev, fn, span = self.dev, self.fn, np.int32(SCAN_SPAN)
        sizes = [n]
        while sizes[-1] > SCAN_SPAN:
            sizes.append(-(-sizes[-1] // SCAN_SPAN))
        offsets = np.cumsum([0] + [aligned(4 * m) for m in sizes[1:]])
        scratch = slot.device(name, offsets[-1])
        levels = [data] + [dev.at(scratch, o) for o in offsets[:-1]]
        for i in range(len(sizes) - 1):
            dev.launch(fn["scan_reduce"], sizes[i + 1], levels[i], np.int32(sizes[i]), span, levels[i + 1],
                       stream=slot.stream)
        dev.launch(fn["scan_serial"], 1, levels[-1], np.int32(sizes[-1]), stream=slot.stream)
        for i in reversed(range(len(sizes) - 1)):
            dev.launch(fn["scan_spread"], sizes[i + 1], levels[i], np.int32(sizes[i]), span, levels[i + 1],
                       stream=slot.stream)

    def parse(self, slot):
        dev, fn, s = self.dev, self.fn, slot.stream
        slot.state = "parsed"
        if slot.nbytes == 0:
            slot.stats[:] = 0
            slot.stats_ready = None
            return
        nbytes = slot.nbytes
        nseg, cap = -(-nbytes // 64), nbytes // 4 + 1
        text = slot.device("text", nbytes + PAD)
        counts = slot.device("counts", 4 * (nseg + 1))
        ends, tabs = slot.device("ends", 4 * cap), slot.device("tabs", 4 * cap)
        stats = slot.device("stats", 16)
        slot.parse_start = dev.record(s)
        dev.htod(text, slot.host[slot.lo:slot.lo + nbytes], s)
        dev.launch(fn["count_newlines"], nseg + 1, text, np.int32(nbytes), np.int32(nseg), counts, stream=s)
        self.scan(slot, "scan1", counts, nseg + 1)
        dev.launch(fn["line_ends"], nseg, text, np.int32(nbytes), np.int32(nseg), counts, np.int32(cap), ends,
                   stream=s)
        count = dev.at(counts, 4 * nseg)
        dev.launch(fn["line_stats"], 1, text, ends, count, stats, stream=s)
        nthreads = min(nseg + 1, PARSE_THREADS)
        dev.launch(fn["parse_lines"], nthreads, text, ends, count, np.int32(cap), np.int32(nthreads),
                   np.int32(self.faithful), tabs, stats, stream=s)
        dev.dtoh(slot.stats, stats, s)
        slot.stats_ready = dev.record(s)

    def groups(self, slot, n):
        """(rows uint32 or None, count, len1, len2) per length group of the slot's lines (rows None: all)."""
        flags, _, len1, len2 = (int(v) for v in slot.stats)
        if not flags & MIXED:
            return [(None, n, len1, len2)]
        dev = self.dev
        ends, tabs = slot.pinned("ends", n, np.uint32), slot.pinned("tabs", n, np.uint32)
        dev.dtoh(ends[:n], slot.device("ends", 0), slot.stream)
        dev.dtoh(tabs[:n], slot.device("tabs", 0), slot.stream)
        dev.wait(dev.record(slot.stream))
        text = slot.host[slot.lo:slot.lo + slot.nbytes]
        end, tab = ends[:n].astype(np.int64), tabs[:n].astype(np.int64)
        start = np.concatenate(([0], end[:-1] + 1))
        stop = end - ((end > start) & (text[np.maximum(end - 1, 0)] == 13))
        key = (tab - start) << 32 | (stop - tab - 1)
        order = np.argsort(key, kind="stable")
        bounds = np.flatnonzero(np.diff(key[order])) + 1
        return [(rows.astype(np.uint32), len(rows), int(key[rows[0]] >> 32), int(key[rows[0]] & 0xFFFFFFFF))
                for rows in np.split(order, bounds)]

    @staticmethod
    def column_bytes(length, m):
        """Bytes of an encoded column of m lines: 2-bit words, N masks, any-N flags."""
        words = -(-length // 16)
        return 4 * words * m, 4 * -(-words // 2) * m, m

    def columns(self, slot, rows, m, column, length, name):
        """Encoded column (2-bit words, N masks, any-N flags) of m lines (rows: which; None: all)."""
        dev = self.dev
        w2, wn, flag = (slot.device(f"{name}{part}", size)
                        for part, size in zip("2nf", self.column_bytes(length, m)))
        dev.launch(self.encode, m, slot.device("text", 0), slot.device("ends", 0), slot.device("tabs", 0),
                   rows, np.int32(m), np.int32(column), np.int32(length), np.int32(self.faithful), w2, wn, flag,
                   stream=slot.stream)
        return w2, wn, flag

    def filter(self, slot):
        dev = self.dev
        if slot.stats_ready is not None:
            self.timed("host: wait for stats", dev.wait, slot.stats_ready)
            self.profile["gpu: bytes in, lines parsed"] += dev.elapsed(slot.parse_start, slot.stats_ready)
        t0 = time.perf_counter()
        self.filter_queued(slot)
        self.profile["host: queue filtering"] += time.perf_counter() - t0

    def filter_queued(self, slot):
        dev, fn, s, job = self.dev, self.fn, slot.stream, self.job
        flags, n = int(slot.stats[0]), int(slot.stats[1])
        slot.chunk.lines, slot.chunk.flags = n, flags & (BAD_LINE | BAD_LENGTHS)
        if n == 0 or slot.chunk.flags or job.failed:
            slot.state = "skipped"
            return
        accept, estimate = slot.device("accept", n), slot.device("estimate", 2 * n)
        slot.filter_start = dev.record(s)
        slot.timed = []
        groups = self.groups(slot, n)
        if len(groups) > 1:  # every group's buffers at their largest first: none may move under queued work
            for _, m, len1, len2 in groups:
                for name, length in (("c1", len1), ("c2", len2)):
                    for part, size in zip("2nf", self.column_bytes(length, m)):
                        slot.device(f"{name}{part}", size)
                for name, size in (("rows", 4 * m), ("accept_group", m), ("estimate_group", 2 * m)):
                    slot.device(name, size)
        for rows, m, len1, len2 in groups:
            rows_at = dev.null
            if rows is not None:
                rows_at = slot.device("rows", 4 * m)
                dev.htod(rows_at, rows, s)
            first = self.columns(slot, rows_at, m, 0, len1, "c1")
            second = self.columns(slot, rows_at, m, 1, len2, "c2")
            out_a, out_e = (accept, estimate) if rows is None else \
                (slot.device("accept_group", m), slot.device("estimate_group", 2 * m))
            if self.faithful:
                kernel = filter_kernel(dev.function, "faithful", len1, len1, job.e)
                args = (first[0], second[0], first[2], second[2])
            else:
                kernel = filter_kernel(dev.function, "improved", len2, len1, job.e,
                                       "global" if len1 == len2 else "infix")
                args = (second[0], second[1], first[0], first[1])
            start = dev.record(s)
            dev.launch(kernel, m, *args, np.int32(m), out_a, out_e, stream=s)
            slot.timed.append((start, dev.record(s)))
            if rows is not None:
                dev.launch(fn["scatter_results"], m, rows_at, np.int32(m), out_a, out_e, accept, estimate, stream=s)
        widths = slot.device("widths", 4 * (n + 1))
        dev.launch(fn["format_widths"], n + 1, estimate, np.int32(n), widths, stream=s)
        self.scan(slot, "scan2", widths, n + 1)
        out = slot.device("out", self.max_width * n)
        dev.launch(fn["format_lines"], n, accept, estimate, widths, np.int32(n), out, stream=s)
        slot.out = slot.pinned("out", self.max_width * n, np.uint8)
        slot.accept, slot.estimate = slot.pinned("accept", n, np.uint8), slot.pinned("estimate", n, np.int16)
        slot.total = slot.pinned("total", 1, np.uint32)
        dev.dtoh(slot.out[:self.max_width * n], out, s)
        dev.dtoh(slot.accept[:n], accept, s)
        dev.dtoh(slot.estimate[:n], estimate, s)
        dev.dtoh(slot.total[:1], dev.at(widths, 4 * n), s)
        slot.finished = dev.record(s)
        slot.state = "filtered"

    def finish(self, slot):
        """The slot's chunk, done, to the job."""
        if slot.state == "parsed":
            self.filter(slot)
        chunk = slot.chunk
        if slot.state == "filtered":
            self.timed("host: wait for the output", self.dev.wait, slot.finished)
            self.profile["gpu: encoding to output back"] += self.dev.elapsed(slot.filter_start, slot.finished)
        t0 = time.perf_counter()
        if slot.state == "filtered":
            n = chunk.lines
            chunk.output = slot.out[:int(slot.total[0])].tobytes()
            chunk.accepted = int(np.count_nonzero(slot.accept[:n]))
            chunk.undefined = int(np.count_nonzero(slot.estimate[:n] == -2))
            chunk.kernel_seconds = sum(self.dev.elapsed(a, b) for a, b in slot.timed)
            if self.job.keep:
                chunk.accept, chunk.estimate = slot.accept[:n].astype(bool), slot.estimate[:n].copy()
        slot.state = None
        self.job.put(chunk)
        self.free.put(slot)
        self.profile["host: finish chunks (output written)"] += time.perf_counter() - t0


def _worker(job, device_factory, index):
    dev = worker = None
    t0 = time.perf_counter()
    try:
        dev = device_factory(index)
        worker = Worker(job, dev)
        with job.lock:
            job.setup_seconds = max(job.setup_seconds, time.perf_counter() - t0)
        worker.run()
    except BaseException as error:  # handed to the caller's thread
        job.fail(error)
    finally:
        if worker is not None:
            worker.close()
            with job.lock:
                job.read_seconds += worker.read_seconds
                job.profile.update(worker.profile)
                job.profile["reader: read chunks"] += worker.read_seconds
        if dev is not None:
            dev.close()


def error_of(job, first_line):
    """Raise the cpu path's InputError for the first chunk that broke a rule (module docstring)."""
    from mapper.filters.gatekeeper import check_lengths
    from mapper.filters.pairs import parse_pairs
    bad = [c for c in job.done.values() if c.flags]
    if not bad:
        return
    worst = min(bad, key=lambda c: (not c.flags & BAD_LINE, c.index))
    with open(job.path, "rb") as f:
        f.seek(worst.begin)
        data = f.read(worst.end - worst.begin)
    pairs = parse_pairs(data, job.path, first_line=first_line[worst.index])
    check_lengths(pairs, job.mode)
    raise RuntimeError(f"{job.path}: the GPU flagged chunk {worst.index} ({worst.flags}), the host parser did not")


def filter_file(path, e, mode, out, gpus=(0,), keep=False, chunk=CHUNK, readers=None, device_factory=None):
    """Filter a pairs file on the GPUs `gpus` (device indices; an index may repeat: several workers on one GPU),
    writing the output lines to `out` (binary file object). keep: also return every decision and estimate.
    device_factory(index) makes a worker's `_stream.Device` (tests pass a host twin)."""
    if device_factory is None:
        from mapper.device import cuda
        from mapper.filters._stream import Device
        cuda.driver()  # pycuda.autoinit's context belongs to this thread, not to a worker
        device_factory = Device
    t0 = time.perf_counter()
    readers = readers or max(2, min(16, (os.cpu_count() or 1) // len(gpus)))  # page cache to pinned memory: 36
    # GB/s with 16 threads, 22 with 8 (an H100 host of 16 cores; scripts/bench_filter.py --bandwidth)
    job = Job(str(path), e, mode, out, chunk, keep, readers, len(gpus))
    threads = [threading.Thread(target=_worker, args=(job, device_factory, index), daemon=True)
               for index in gpus]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if job.error is not None:
        raise job.error
    chunks = [job.done[k] for k in range(len(job.done))]
    first_line = np.cumsum([1] + [c.lines for c in chunks])
    error_of(job, first_line)
    result = TextResult(pairs=int(first_line[-1] - 1), accepted=sum(c.accepted for c in chunks),
                        undefined=sum(c.undefined for c in chunks),
                        kernel_seconds=sum(c.kernel_seconds for c in chunks), read_seconds=job.read_seconds,
                        setup_seconds=job.setup_seconds, seconds=time.perf_counter() - t0,
                        profile=dict(job.profile))
    if keep:
        result.accept = np.concatenate([np.zeros(0, bool)] + [c.accept for c in chunks if c.lines])
        result.estimate = np.concatenate([np.zeros(0, np.int16)] + [c.estimate for c in chunks if c.lines])
    return result
