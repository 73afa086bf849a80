"""The host half of mapping: a batch's verified mappings -> loci (one per locus, --best / -n) -> CIGAR/MD and
SAM text (compiled: kernels/render.cu by sam_kernel.py; numpy where no C++ compiler is: align.py, sam.py),
and the unmapped reads' FASTQ/FASTA. On a GPU run this is most of the host's work per read (sorting loci,
a CIGAR/MD and a record line for every locus), so `HostWorkers`
spreads it over worker processes while the main process runs the next batch's mapping core: the batch is
cut into slices of whole reads, each slice is rendered by a worker, and the texts come back and are
written in input order, so the output is byte-identical to rendering inline.

Workers are spawned (not forked: the main process may hold a CUDA context and threads) and see the
reference through one memory-mapped temporary file, so N workers share one copy of the genome; each job
names that file, so processes started before the index was open (`HostWorkers.spawn`) serve it too. A batch
reaches them as one file and their SAM text comes back as files (in /dev/shm when it has room), which the
main process copies to the output (in the kernel, os.sendfile, when the output is a file; outputs.emit):
the main process never pickles reads or SAM text. As with
any spawned process, a script calling `mapper.map_reads` must guard its entry point with
`if __name__ == "__main__":`.

The processes' lifetime is the main process's business: they are started with SIGINT, SIGTERM and SIGHUP
blocked (a Ctrl-C reaches the whole process group, and must not print a traceback from every worker), the
main process ends them when it finishes or unwinds after a signal (mapper/cli.py), and each ends itself
when the main process is gone (SIGKILL), so that none is left behind. The temporary folders are named
with their creator's PID (outputs.temp_prefix), and a later run removes those of a dead process.
"""
import collections
import concurrent.futures
import ctypes
import mmap
import multiprocessing
import os
import signal
import tempfile
import threading
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mapper import sam_kernel
from mapper.align import describe
from mapper.outputs import remove_stale, temp_prefix
from mapper.reads import ReadBatch
from mapper.reference import Reference
from mapper.sam import batch_records, header, read_scores, unmapped_records
from mapper.seeding import strand_rows
from mapper.verify import POSITION_FIELDS, Mappings, select_loci

MAX_WORKERS = 16
SLICE_READS = 10_000  # reads per worker job: small enough to spread a batch, large enough to amortise pickling
INLINE_MAPPINGS = 100_000  # a short batch with more verified mappings than this is rendered in processes too


@dataclass
class BatchLoci:
    """Every locus found for one batch, in report order, before any --best / -n cap."""
    rows: object          # seeding.StrandRows
    loci: object          # verify.Mappings
    read: np.ndarray      # batch index of each locus' read
    strand: np.ndarray    # 0 forward, 1 reverse
    nh: np.ndarray        # loci per read [n]


def batch_loci(rows, maps, n_reads, reference):
    """The reported mappings (verify.select_loci) of a batch's verified mappings, with read, strand and NH."""
    loci = select_loci(rows, maps, reference)
    read = rows.read_of(loci.row)
    return BatchLoci(rows, loci, read, rows.strand_of(loci.row), np.bincount(read, minlength=n_reads))


def cap_records(found, best, max_records):
    """(loci, read, strand) kept by --best (fewest edits of the read) and -n (first N of the read)."""
    loci, read, strand = found.loci, found.read, found.strand
    if not len(loci) or not (best or max_records):
        return loci, read, strand
    is_first = np.ones(len(read), dtype=bool)
    is_first[1:] = read[1:] != read[:-1]
    group_start = np.flatnonzero(is_first)[np.cumsum(is_first) - 1]
    keep = np.ones(len(read), dtype=bool)
    if best:
        keep &= loci.edits == loci.edits[group_start]
    if max_records:
        keep &= np.arange(len(read)) - group_start < max_records
    return loci.take(keep), read[keep], strand[keep]


class RecordOptions(NamedTuple):
    """What render() writes for a batch (the run's options): --best, -n, --unmapped, -R's ID and, False
    for --no-secondary-seq, the secondaries' SEQ/QUAL. A render process gets them with every job."""
    best: bool
    max_records: int
    want_unmapped: bool
    read_group: str = None
    secondary_seq: bool = True


@dataclass
class Rendered:
    sam: object         # str, or a SpilledText from a worker process (render's raw: the bytes, until spilled)
    unmapped: object    # FASTQ/FASTA of the unmapped reads ('' unless asked for), likewise
    nh: np.ndarray      # loci found per read (before the caps): the run's counters
    records: int        # SAM records of mapped reads
    align_s: float      # seconds spent on loci (and CIGAR/MD with the numpy renderer)
    output_s: float     # seconds spent on the records (with the compiled renderer CIGAR/MD too)


def render(batch, rows, maps, reference, best, max_records, want_unmapped, read_group=None, secondary_seq=True,
           threads=1, compiled=None, text_buffer=None):
    """SAM text of `batch` from its verified mappings (`rows`: its StrandRows); `read_group`: -R's ID;
    `secondary_seq` False: SEQ and QUAL '*' on secondary records (--no-secondary-seq).

    The records (CIGAR, MD and text) are written by kernels/render.cu on `threads` threads (sam_kernel.py)
    where a C++ compiler is present, else by the numpy renderer (align.describe, sam.batch_records), which
    states the same rules and is the tests' oracle; `compiled` forces one or the other (None: compiled
    wherever it can run). Render processes keep to one thread each: they are the parallelism. With
    `text_buffer` (a sam_kernel.TextBuffer: a render process's) the compiled renderer's SAM is left as its
    ASCII bytes (a uint8 array) in that buffer, for the process to write to its file without making a str
    of it; the caller writes it out before its next call."""
    t0 = time.perf_counter()
    found = batch_loci(rows, maps, len(batch), reference)
    loci, read, strand = cap_records(found, best, max_records)
    mapq, second = read_scores(found.read, found.loci.edits, len(batch), rows.e[:len(batch)])
    if compiled is None:
        compiled = sam_kernel.available()
    if compiled:
        t1 = time.perf_counter()
        sam = sam_kernel.records_text(batch, rows, reference, read, strand, loci, found.nh, mapq, second,
                                      read_group, threads, secondary_seq, text_buffer)
        if text_buffer is None:
            sam = str(sam, "utf-8")
    else:
        cigars, mds, nms = describe(rows, loci, reference)
        t1 = time.perf_counter()
        sam = batch_records(batch, reference, read, strand, loci, cigars, mds, nms, found.nh, mapq, second,
                            read_group, secondary_seq)
    unmapped = unmapped_records(batch, np.flatnonzero(found.nh == 0)) if want_unmapped else ""
    return Rendered(sam, unmapped, found.nh, len(loci), t1 - t0, time.perf_counter() - t1)


def _parts(maps):
    """Verified mappings as a list of Mappings parts: a Mappings, or the parts themselves."""
    return list(maps) if isinstance(maps, (list, tuple)) else [maps]


COUNT_STRIDE = 16  # a part of more than COUNT_EXACT mappings is counted from every COUNT_STRIDE-th one
COUNT_EXACT = 1 << 16


def _row_counts(parts, n, a=0, b=None):
    """Mappings per strand row of reads [a, b) of a batch of n reads ([2(b - a)]: forward, then reverse),
    counted on the batch's rows (not rows % n: a division per mapping cost the mapping thread seconds at
    genome scale). The counts only weigh the render slices (_slice_bounds), so a big part is sampled:
    counting every mapping took the mapping thread 1.7 s for 1,000 repeat reads and 1.2 s for 500,000
    ordinary reads at genome scale (py-spy, one H200); the sample's counts, scaled, are exact in
    expectation, near it for the heavy reads, and a slice's hundreds of reads even out the rest."""
    b = n if b is None else b
    counts = np.zeros(2 * n, np.int64)
    for part in parts:
        if len(part) > COUNT_EXACT:
            counts += COUNT_STRIDE * np.bincount(part.row[::COUNT_STRIDE], minlength=2 * n)
        else:
            counts += np.bincount(part.row, minlength=2 * n)
    return np.concatenate([counts[a:b], counts[n + a:n + b]])


def _slice_bounds(n, workers, per_row):
    """[a, b) read ranges that cut a batch of n reads into worker jobs of about equal work: a read weighs
    one plus its verified mappings (`per_row`: mappings per strand row, _row_counts), so that a few repeat
    reads with 10^5 loci each are spread over the workers as a batch of ordinary reads is. At least one job
    per worker and per SLICE_READS reads; a read is never cut."""
    weight = np.cumsum(1 + per_row[:n] + per_row[n:] if n else np.zeros(0, np.int64))
    jobs = min(n, max(workers, -(-n // SLICE_READS)))
    cuts = np.searchsorted(weight, weight[-1] * np.arange(1, jobs) / jobs, side="right") if jobs else []
    bounds = np.unique(np.concatenate([[0], cuts, [n]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _slice(batch, e, maps, a, b, numbering=None):
    """Reads [a, b) of a batch as a batch of their own, with their e and verified mappings renumbered (rows
    a..b-1 forward and n+a..n+b-1 reverse become 0..m-1 and m..2m-1), widened to int64 (a batch file holds
    them in the device's dtypes). `maps` in any order (the loci chosen from them do not depend on it): each
    worker picks its own, so the main process need not sort them. `numbering` (n, o): the rows of `maps`
    number a batch of n reads of which `batch` is reads o.. (a mapping piece); default (len(batch), 0)."""
    n, o = numbering or (len(batch), 0)
    part = batch.slice(a, b)
    row, lo, hi = maps.row, o + a, o + b
    sub = maps.take(np.flatnonzero(((row >= lo) & (row < hi)) | ((row >= n + lo) & (row < n + hi))))
    row = np.where(sub.row < n, sub.row - lo, sub.row - n - lo + (b - a))
    return part, e[a:b], Mappings(*(x.astype(np.int64, copy=False) for x in (row, sub.contig, sub.start, sub.end,
                                                                               sub.edits)), sub.settled)


# -- worker processes: jobs and results travel as files, not through pipes ---------------------------------
# A batch's inputs (reads, e, mappings) are written once by the main process into one file, which every
# slice job maps read-only; each job writes its SAM text to a file of its own, which the main process copies
# to the output (outputs.emit). Pickling them instead (about 1 KB of reads and SAM per read) made the main
# process, which also drives the GPU, spend most of its time in pipe reads and writes under the GIL.



@dataclass
class SpilledText:
    """Text a worker left in a file, to be copied to an output (`emit`) or read (`data`, `text`) once, then
    `release`d; with `bgzf`, the BAM records of SAM text as BGZF blocks (bam.compressed_records) for a BAM
    output. `recycle`: the run's folder of spare files (SPARE), where the file goes once read."""
    path: str
    size: int
    bgzf: bool = False
    recycle: str = ""

    def data(self):
        """The bytes, the file released."""
        with open(self.path, "rb") as handle:
            data = handle.read()
        self.release()
        return data

    def release(self):
        """The file once its text is out: a spare for the render processes' next texts (`recycle`), else
        removed."""
        if self.recycle:
            try:
                os.rename(self.path, os.path.join(self.recycle, os.path.basename(self.path)))
                return
            except OSError:  # the run's folders are going away
                pass
        os.unlink(self.path)

    def text(self):
        return self.data().decode("ascii")


def _spill_root():
    """RAM-backed /dev/shm when it has room for a few batches, else the temporary folder."""
    try:
        stats = os.statvfs("/dev/shm")
        if stats.f_bavail * stats.f_frsize >= 2 << 30 and os.access("/dev/shm", os.W_OK):
            return "/dev/shm"
    except OSError:
        pass
    return tempfile.gettempdir()


def _write_batch(folder, batch, e, maps, numbering=None):
    """One file holding a batch's reads, e and mappings (a Mappings or its parts, each field's parts one
    after the other, in their common dtype: no join in the mapping thread), their rows numbered as
    `numbering` says (see _slice); returns (path, layout), layout
    giving each array's (offset, dtype, count) for `_read_batch`. The arrays go out in one os.writev call
    (a loop only if the kernel takes part of them) instead of two writes an array: each call releases and
    retakes the GIL that the main process's reader and writer threads also hold (an A/B on 3 M chr20 reads
    could not tell the two apart from noise; fewer calls is kept as the simpler I/O)."""
    parts = _parts(maps)
    arrays = dict(numbering=[np.array(numbering or (len(batch), 0), dtype=np.int64)],
                  starts=[batch.starts], e=[np.asarray(e, dtype=np.int64)], seq=[batch.seq],
                  names=[np.frombuffer("\n".join(batch.names).encode(), dtype=np.uint8)],
                  **{f: [getattr(p, f) for p in parts] for f in POSITION_FIELDS})
    if any(p.settled is not None for p in parts):
        arrays["settled"] = [np.zeros(len(p), bool) if p.settled is None else p.settled for p in parts]
    if batch.qual is not None:
        arrays["qual"] = [batch.qual]
    layout, pieces, offset = {}, [], 0
    for name, field in arrays.items():
        dtype = np.result_type(*field) if field else np.dtype(np.int64)
        field = [np.ascontiguousarray(a, dtype=dtype) for a in field]
        pad = -offset % 8
        pieces.append(bytes(pad))
        offset += pad
        layout[name] = (offset, dtype.str, sum(len(a) for a in field))
        pieces += [memoryview(a).cast("B") for a in field]
        offset += sum(a.nbytes for a in field)
    fd, path = tempfile.mkstemp(dir=folder, suffix=".batch")
    try:
        _write_all(fd, pieces)
    finally:
        os.close(fd)
    return path, layout


_IOV_MAX = 1024  # buffers one writev takes (Linux's IOV_MAX)


def _write_all(fd, pieces):
    """Every byte of `pieces` (bytes-like) written to `fd`, in as few system calls as the kernel allows."""
    pieces = [memoryview(p).cast("B") for p in pieces if len(p)]
    while pieces:
        sent = os.writev(fd, pieces[:_IOV_MAX])
        while pieces and sent >= len(pieces[0]):
            sent -= len(pieces.pop(0))
        if pieces and sent:
            pieces[0] = pieces[0][sent:]


def _read_batch(path, layout, first):
    """(ReadBatch, e, Mappings, numbering) of a batch file, the arrays mapped from it, not copied."""
    data = np.memmap(path, dtype=np.uint8, mode="r")

    def get(name):
        if name not in layout:
            return None
        offset, dtype, count = layout[name]
        return data[offset:offset + count * np.dtype(dtype).itemsize].view(dtype)

    batch = ReadBatch(_Names(get("names")), get("seq"), get("qual"), get("starts"), first)
    maps = Mappings(*(get(f) for f in POSITION_FIELDS), get("settled"))
    return batch, get("e"), maps, tuple(int(x) for x in get("numbering"))


class _Names:
    """A batch file's read names ('\n'-joined bytes) as a sequence whose slices are decoded when asked for:
    each job needs only its own reads' names, and decoding the whole batch's in every job cost about a
    tenth of the render time."""

    def __init__(self, joined):
        self._joined = joined
        self._ends = np.flatnonzero(joined == 10)

    def __len__(self):
        return len(self._ends) + 1

    def __getitem__(self, which):
        a, b, _ = which.indices(len(self))
        if a >= b:
            return []
        lo = int(self._ends[a - 1]) + 1 if a else 0
        hi = int(self._ends[b - 1]) if b - 1 < len(self._ends) else len(self._joined)
        return self._joined[lo:hi].tobytes().decode().split("\n")


SPARE = "spare"  # the folder, in a run's job folder, of files whose text is out: written over by the next texts


def _spill(text, folder, suffix):
    """`text` (a str, or ASCII bytes as a uint8 array: render's with a text_buffer) in a file of `folder`; ''
    when empty."""
    if not len(text):
        return ""
    data = text.encode("ascii") if isinstance(text, str) else memoryview(text)
    fd, path, recycle = _spill_file(folder, suffix)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.truncate()  # a spare longer than this text
    return SpilledText(path, data.nbytes if isinstance(data, memoryview) else len(data), recycle=recycle)


def _spill_file(folder, suffix):
    """(fd, path, recycle) of a file of `folder` to write a text into: a spare file (SPARE) when there is one,
    taken by renaming it over a new empty file of this process's (a rename that another process won
    fails, and the next spare is tried), else the new file. Why spares: a fresh file in /dev/shm costs a
    page allocation and its release for every 4 KB of text: at genome scale (500,000 proxy reads, 8.2 GB of
    SAM, -t 15 on one H200 host) writing the texts took the render processes 4.3-4.8 s of system time, and
    3.3-3.6 s over spares (what is left is the copy); the whole command 6.86-7.53 s -> 6.75-7.04 s."""
    fd, path = tempfile.mkstemp(dir=folder, suffix=suffix)
    spare = os.path.join(folder, SPARE)
    try:
        entries = [entry.path for entry in os.scandir(spare)]
    except OSError:  # no spare folder: a caller without one
        return fd, path, ""
    for entry in entries:
        try:
            os.rename(entry, path)
        except FileNotFoundError:
            continue
        os.close(fd)
        return os.open(path, os.O_WRONLY), path, spare
    return fd, path, spare


_reference = None  # (folder, Reference): the worker's reference, loaded by its first job
_text_buffer = sam_kernel.TextBuffer()  # the worker's SAM text memory, kept from job to job


def _write_reference(folder, reference):
    """The reference as the workers load it: its contig table, and the codes where the workers map them (the
    main process's own memory when the reference has a codes_path, else codes.npy, memory-mapped by each:
    one copy in the page cache). Writing codes.npy took 0.77-0.94 s for a 3.1 Gbp genome on the H200 host."""
    codes = np.asarray(reference.codes)  # unpacked first: an index's codes get their codes_path then
    shared = reference.codes_path or ""
    if not shared:
        np.save(os.path.join(folder, "codes.npy"), codes)
    np.savez(os.path.join(folder, "contigs.npz"), names=np.array(list(reference.names), dtype=str),
             starts=reference.starts, lengths=reference.lengths, codes_path=np.array(shared))


def _worker_reference(folder):
    global _reference
    if _reference is None or _reference[0] != folder:
        with np.load(os.path.join(folder, "contigs.npz")) as table:
            names, starts, lengths = table["names"].tolist(), table["starts"], table["lengths"]
            shared = str(table["codes_path"])
        codes = (_map_resident(shared, int(np.sum(lengths))) if shared
                 else np.load(os.path.join(folder, "codes.npy"), mmap_mode="r"))
        _reference = folder, Reference(names, starts, lengths, codes)
    return _reference[1]


def _map_resident(path, size):
    """The `size` bytes of the main process's codes (a memfd: already in memory) mapped read-only with their
    page-table entries made at once (_populate), not one fault at a time. A render job at genome scale
    reads windows all over the genome, so each process faulted its way through the 3.1 Gbp codes page by
    page: populated, 500,000 reads of the 3.1 Gbp proxy took 63.7 / 63.8 summed job seconds against
    67.2 / 67.9 (align + output, -t 15, one H200 host), the same SAM."""
    with open(path, "rb") as handle:
        memory = mmap.mmap(handle.fileno(), max(size, 1), prot=mmap.PROT_READ, flags=mmap.MAP_SHARED)
        if not _populate(memory, size):  # a kernel without the advice: populated as the mapping is made
            memory.close()
            memory = mmap.mmap(handle.fileno(), max(size, 1), prot=mmap.PROT_READ,
                               flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
    return np.frombuffer(memory, dtype=np.uint8, count=size)


POPULATE_CHUNK = 1 << 23  # bytes a process populates at a time (a multiple of the page size)
_MADV_POPULATE_READ = 22  # Linux 5.14's madvise advice (Python's mmap names it from 3.13 only)


def _populate(memory, size):
    """Make `memory`'s page-table entries at once (madvise MADV_POPULATE_READ), chunk by chunk, starting at a
    chunk of this process's own (from its pid) and wrapping around; False where the kernel has no such
    advice (before Linux 5.14: the caller maps with MAP_POPULATE instead); a later failure leaves the rest
    to fault when read. Why not MAP_POPULATE: the render processes take their first jobs together, so all of them populated the codes at once and from the same
    end, and the first processes to map the main process's fresh pages fought over each page: on the H200
    host 15 processes released together over a 3.1 GB memfd took 0.69 s each (9.6 s of system time, 1.23 M
    faults) with MAP_POPULATE, 0.12 s each (1.8 s, 0.71 M faults) this way; once the pages had been mapped
    anywhere, both took 0.12 s. 500,000 proxy reads at 3.1 Gbp (-t 15): the first jobs' mapping of the codes
    10.3-10.8 s -> 3.2-3.4 s of system time, the render jobs 65.5-69.5 -> 55.0-62.0 summed seconds, the
    whole command 7.60-8.20 s -> 6.86-7.53 s, the same SAM."""
    chunks = -(-size // POPULATE_CHUNK)
    first = (os.getpid() * 0x9E3779B1) % max(chunks, 1)  # Knuth's multiplicative hash: pids a few apart spread
    for k in range(chunks):
        at = (first + k) % chunks * POPULATE_CHUNK
        try:
            memory.madvise(_MADV_POPULATE_READ, at, min(POPULATE_CHUNK, size - at))
        except OSError:  # no such advice (the first chunk), or no memory to spare: the rest faults when read
            return k > 0
    return True


def _warm():
    """A worker's first job: unpickling it makes a new worker import this module (numpy and the renderers),
    and running it loads the compiled renderer (built once per machine into the kernel cache), while the
    main process is still opening the index."""
    sam_kernel.load()


def _render_job(reference, path, layout, first, a, b, options, folder, bgzf=None):
    """Reads [a, b) of a batch file rendered against the reference files of folder `reference`; the texts
    are left in files of `folder`, the SAM records as BAM in BGZF blocks of compression level `bgzf` when
    it is not None."""
    batch, e, maps, numbering = _read_batch(path, layout, first)
    part, e, maps = _slice(batch, e, maps, a, b, numbering)
    rows = strand_rows(part.codes(), part.starts, e)
    ref = _worker_reference(reference)
    done = render(part, rows, maps, ref, *options, text_buffer=_text_buffer)
    sam = _spill(done.sam, folder, ".sam") if bgzf is None else _spill_bgzf(done.sam, ref, folder, bgzf)
    done.sam, done.unmapped = sam, _spill(done.unmapped, folder, ".fq")
    return done


def _spill_bgzf(records, reference, folder, level):
    """SAM record text (uint8 array) as BAM records in BGZF blocks, in a file of `folder`; '' when empty."""
    if not len(records):
        return ""
    from mapper.bam import compressed_records  # BAM runs only
    fd, path, recycle = _spill_file(folder, ".bgzf")
    with os.fdopen(fd, "wb") as out:
        compressed_records(records, header(reference, ""), out, level)
        size = out.tell()
        out.truncate()
    return SpilledText(path, size, bgzf=True, recycle=recycle)


def _call_job(reference, function, args):
    """A submit_call job: `function` run against the reference files of folder `reference`."""
    return function(_worker_reference(reference), *args)


_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
PARENT_POLL_S = 0.5  # how often a worker checks that the main process is still there
# How much nicer than the main process the render processes run: the main process's mapping thread drives
# the GPU and waits on each launch, so a core it waits for idles the device; rendering takes every core it
# leaves. One H200 host, 16 cores, -t 15, alternating in one call (908859a's tree, the same SAMs): chr20,
# 1,000,000 reads, 1.71-1.78 s printed against 1.83-1.88 s; the 3.1 Gbp human proxy, 500,000 reads,
# 6.52 / 6.67 s against 6.85 / 7.14 s.
RENDER_NICE = 10


@contextmanager
def _signals_held():
    """Around a pool's submit, which may start a process: the signals the main process handles are blocked,
    so that a spawned process inherits them blocked and never runs Python's SIGINT handler, even while it
    imports; and one that arrives anyway (delivered to another thread, Python runs the handler in the main
    thread at its next instruction) is held until the pool's books are whole, then handled. A
    KeyboardInterrupt halfway through submit could leave a started process the pool does not know of, which
    nobody would end and the interpreter's exit would wait for, for ever."""
    held = []  # (signum, frame) of each signal that came, in order
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        for signum in _SIGNALS:
            handler = signal.getsignal(signum)
            if callable(handler):
                handlers[signum] = signal.signal(signum, lambda number, frame: held.append((number, frame)))
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)  # one still pending goes to its handler now
        if held:
            handlers[held[0][0]](*held[0])


def _watch_parent(parent):
    """A worker's thread: end the process once its parent, the main process, is gone (killed with SIGKILL:
    nobody else will end it; a worker holds its own end of the job queue and would wait for ever)."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def _worker_start(parent):
    """Each worker's initializer: watch the main process (`parent`), keep freed memory for the next jobs, and
    yield the cores to the main process (RENDER_NICE)."""
    threading.Thread(target=_watch_parent, args=(parent,), name="gkmap-parent-watch", daemon=True).start()
    keep_freed_memory()
    with suppress(OSError):  # a system that refuses it only loses the priority
        os.nice(RENDER_NICE)


MALLOC_KEEP = 1 << 28  # bytes: allocations below this come from the heap, which keeps up to twice this freed;
                       # bigger ones (a text past TextBuffer.LIMIT) are mapped and given back as before
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h>


def keep_freed_memory():
    """Have glibc's malloc serve allocations below MALLOC_KEEP from the heap and keep what is freed there for
    reuse (up to 2 x MALLOC_KEEP at the heap's top), instead of mapping each big array afresh and unmapping it
    when freed. Why: each render job allocates arrays of the sizes the job before it freed (tens of MB), and
    fresh pages cost a fault and the kernel's zeroing each. 5,000 proxy reads at 3.1 Gbp rendered as 8 jobs
    on one core: 21,000-26,000 minor faults a round -> 790, 0.450-0.469 s -> 0.410-0.438 s a round (1 GiB
    and 256 MiB as MALLOC_KEEP did the same: the smaller keeps less). A process then holds up to its
    biggest job's arrays between jobs; the peak, when every process renders, is the same. Does nothing
    where the C library has no mallopt."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, MALLOC_KEEP)
        mallopt(_M_TRIM_THRESHOLD, 2 * MALLOC_KEEP)


def _new_pool(workers):
    return concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=_worker_start, initargs=(os.getpid(),))


def _temp_folders():
    """(where the reference folder goes, where the job folder goes)."""
    return tempfile.gettempdir(), _spill_root()


class HostWorkers:
    """Render batches inline or in `workers` spawned processes, yielding results in order.

    submit(batch, rows, maps) queues a batch (its StrandRows and verified mappings); ready(block) yields
    (batch, [Rendered]) of the oldest batches, in submission order, once done (all of them, waiting, when
    block is True); their texts are str or SpilledText, written with outputs.emit. At most 2 x workers slices are
    in flight, which bounds the memory held for pending batches. The processes start with the first full
    batch (`batch_size` reads) or the first with more than INLINE_MAPPINGS mappings (repeat reads: 600 of
    them can have 16 M loci at genome scale); a run of one short batch of ordinary reads is rendered inline,
    as the start-up would cost more than it saves; a caller that knows the input is big starts them earlier
    (`spawn`, then `adopt`)."""

    def __init__(self, workers, batch_size, reference, options, bgzf=None):
        self.workers = max(1, min(int(workers), MAX_WORKERS))
        self.batch_size = batch_size
        self.reference = reference
        self.options = options  # a RecordOptions
        self.bgzf = bgzf  # a BAM output's compression level: the processes encode and compress its records
        self._pool = None
        self._tmp = None
        self._spill = None
        self._pending = collections.deque()
        ref_root, jobs_root = _temp_folders()
        remove_stale(ref_root, "gkmap-ref-")  # what a killed run left
        remove_stale(jobs_root, "gkmap-jobs-")

    @staticmethod
    def spawn(workers):
        """Start `workers` render processes now, for a run that will have full batches (a big reads file):
        they import their modules (about half a second each) while the main process opens the index and
        maps the first batch. Returns the pool for `adopt`, or None where processes are
        not worth it or not allowed (one worker, a daemonic process such as a Dask worker)."""
        workers = max(1, min(int(workers), MAX_WORKERS))
        if workers == 1 or multiprocessing.current_process().daemon:
            return None
        pool = _new_pool(workers)
        with _signals_held():
            for _ in range(workers):  # a spawn pool starts a process per job submitted while none is idle
                pool.submit(_warm)
        return pool

    def adopt(self, pool):
        """Use a pool from `spawn` (None: start one with the first full batch, as without)."""
        self._pool = pool

    def _start(self):
        ref_root, jobs_root = _temp_folders()
        self._tmp = tempfile.TemporaryDirectory(prefix=temp_prefix("gkmap-ref-"), dir=ref_root)
        self._spill = tempfile.TemporaryDirectory(prefix=temp_prefix("gkmap-jobs-"), dir=jobs_root)
        os.mkdir(os.path.join(self._spill.name, SPARE))
        _write_reference(self._tmp.name, self.reference)
        if self._pool is None:
            self._pool = _new_pool(self.workers)

    def submit(self, batch, rows, maps, a=0, b=None):
        """Queue reads [a, b) of a batch (default: all; a mapping piece, pipeline.MappingPiece): the batch's
        StrandRows and the reads' verified mappings (a Mappings, or verification's parts), rows numbered in
        the batch. `ready` yields the piece as a batch of its own."""
        # inline: one worker, a short light batch before any full one, or a daemonic process (a Dask worker by
        # default), which may not start processes of its own; processes already spawned are always used
        n, b = len(batch), len(batch) if b is None else b
        parts = _parts(maps)
        e = rows.e[:n]
        short = n < self.batch_size and sum(len(p) for p in parts) <= INLINE_MAPPINGS
        if self._tmp is None and self._pool is None and (
                self.workers == 1 or short or multiprocessing.current_process().daemon):
            maps = Mappings.concat(parts)
            if (a, b) != (0, n):
                batch, e, maps = _slice(batch, e, maps, a, b)
                rows = strand_rows(batch.codes(), batch.starts, e)
            done = render(batch, rows, maps, self.reference, *self.options)
            self._pending.append((batch, None, [done]))
            return
        if self._tmp is None:
            self._start()
        piece = batch.slice(a, b) if (a, b) != (0, n) else batch
        path, layout = _write_batch(self._spill.name, piece, e[a:b], parts, (n, a))
        bounds = _slice_bounds(b - a, self.workers, _row_counts(parts, n, a, b))
        with _signals_held():
            futures = [self._pool.submit(_render_job, self._tmp.name, path, layout, piece.first, lo, hi, self.options,
                                         self._spill.name, self.bgzf)
                       for lo, hi in bounds]
        self._pending.append((piece, path, futures))

    def submit_call(self, key, size, function, *args):
        """Run `function(reference, *args)` (a module-level function, pickled by name; `reference` the run's,
        shared as for the batches) in a render process: `ready` yields (key, [its value]) in submission order
        with the batches. Inline where `submit` would render inline (`size`: the work's reads). What other
        jobs render (paired-end pairs: paired.render_pairs) gets the processes this way."""
        if self._tmp is None and self._pool is None and (
                self.workers == 1 or size < self.batch_size or multiprocessing.current_process().daemon):
            self._pending.append((key, None, [function(self.reference, *args)]))
            return
        if self._tmp is None:
            self._start()
        with _signals_held():
            future = self._pool.submit(_call_job, self._tmp.name, function, args)
        self._pending.append((key, "", [future]))

    def render_now(self, batch, rows, maps):
        """One batch rendered (by the processes when there are), as one Rendered with str texts: for callers
        that map batch by batch, such as a cluster worker's chunk task."""
        self.submit(batch, rows, maps)
        (_, parts), = self.ready(block=True)
        text = lambda t: t if isinstance(t, str) else t.text()
        return Rendered("".join(text(p.sam) for p in parts), "".join(text(p.unmapped) for p in parts),
                        np.concatenate([p.nh for p in parts]), sum(p.records for p in parts),
                        sum(p.align_s for p in parts), sum(p.output_s for p in parts))

    def ready(self, block=False):
        """Finished batches, oldest first; with block, every pending batch. Keeps the in-flight bound."""
        while self._pending:
            batch, path, jobs = self._pending[0]
            in_flight = sum(len(j) for _, p, j in self._pending if p is not None)
            done = path is None or all(f.done() for f in jobs)
            if not (block or done or in_flight > 2 * self.workers):
                return
            self._pending.popleft()
            if path is None:
                yield batch, jobs
                continue
            results = [f.result() for f in jobs]
            if path:  # a batch file ("" for a submit_call)
                os.unlink(path)
            yield batch, results

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        for tmp in (self._tmp, self._spill):
            if tmp is not None:
                tmp.cleanup()
        self._tmp = self._spill = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
