"""The mapping pipeline: batches of reads through seeding -> filter -> verification -> loci -> CIGAR/MD
-> SAM, in that order, on whichever backend was chosen. It owns the counters every report reads and the
progress bar; it does not know how a backend runs a stage.

Per batch:
1. per-read e (`-e`, or ceil(0.04 L) clamped to CONVENTIONS.md's range); reads with more Ns than e are
   not seeded (they cannot map) and come out unmapped;
2. seeding on both strands (seeding.py), giving verification windows;
3. the pre-alignment filter (`--filter`) on each window (mapper/filters/windows.py says what it sees);
4. verification (edlib, or the backend's kernel) of the surviving windows, then one mapping per locus;
5. `--best` / `-n`, CIGAR and MD (align.py, the same host routine for every backend), SAM in input order.
"""
import contextlib
import logging
import sys
import threading
import time
from dataclasses import dataclass, field, fields

import numpy as np

from mapper.backends import get_backend
from mapper.device.cuda import build_seconds
from mapper.errors import UsageError
from mapper.filters.windows import MODES as FILTER_MODES, candidate_pair_texts
from mapper.index import find_index, load_for, open_index
from mapper.options import MAX_E
from mapper.render import batch_loci
from mapper.seeding import SeedStats, strand_rows
from mapper.verify import Mappings

log = logging.getLogger("gkmap")
# load: index opened and made resident; compile: kernels compiled on a cache miss, taken out of the stage it hit
STAGES = ("load", "parse", "seed", "filter", "verify", "align", "output", "compile")


@dataclass
class Counters:
    reads: int = 0
    mapped: int = 0
    unmapped: int = 0
    loci: int = 0
    records: int = 0
    filtered_out: int = 0
    verified: int = 0
    seeding: SeedStats = field(default_factory=SeedStats)
    stages: str = ""            # where each stage ran, e.g. "seed: cpu, filter: cuda, verify: cuda"
    seconds: float = 0.0
    times: dict = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))  # wall seconds per stage

    @contextlib.contextmanager
    def timed(self, stage):
        t, built = time.perf_counter(), build_seconds()
        try:
            yield
        finally:
            compiled = build_seconds() - built
            self.times[stage] += time.perf_counter() - t - compiled
            self.times["compile"] += compiled

    def timed_iter(self, stage, iterable):
        """Iterate, counting the time spent producing each item under `stage`."""
        iterator = iter(iterable)
        while True:
            with self.timed(stage):
                item = next(iterator, None)
            if item is None:
                return
            yield item

    def merge(self, part):
        """Add the counts and per-stage seconds of `part` (a batch's, chunk's or render process's Counters)."""
        add_ints(self, part)
        self.seeding.add(part.seeding)
        for stage, seconds in part.times.items():  # per-stage seconds add up over processes
            self.times[stage] = self.times.get(stage, 0.0) + seconds

    def summary(self):
        s = self.seeding
        rate = self.reads / self.seconds if self.seconds else 0.0
        return (f"{self.reads} reads: {self.mapped} mapped ({self.loci} loci, {self.records} SAM records), "
                f"{self.unmapped} unmapped; {s.bands} candidate windows ({s.hits} seed hits, {s.diagonals} "
                f"diagonals, {s.adjacent} after the adjacency filter), {self.filtered_out} filtered out, "
                f"{self.verified} verified; {self.seconds:.2f} s, {rate:,.0f} reads/s ({self.stages}); seconds per "
                f"stage: " + ", ".join(f"{k} {v:.2f}" for k, v in self.times.items()))


def add_ints(total, part):
    """Add the int fields of a counts dataclass (Counters, PairCounters) to another's."""
    for f in fields(part):
        if f.type is int:
            setattr(total, f.name, getattr(total, f.name) + getattr(part, f.name))


def per_read_e(batch, fixed_e, reads_path):
    """e for every read of the batch (int64 [n])."""
    lengths = batch.lengths
    if fixed_e is not None:
        too_short = np.flatnonzero(4 * fixed_e > lengths)
        if len(too_short):
            i = int(too_short[0])
            raise UsageError(f"-e {fixed_e} is more than a quarter of read '{batch.names[i]}' ({lengths[i]} bp, "
                             f"record {batch.first + i + 1} of {reads_path}); lower -e or drop it for the per-read rule")
        return np.full(len(lengths), fixed_e, dtype=np.int64)
    rule = (4 * lengths + 99) // 100  # ceil(0.04 L) in integers
    return np.minimum(np.minimum(rule, MAX_E), lengths // 4)


def find_mappings(batch, index, backend, filter_mode, fixed_e, reads_path, counters):
    """Seeding, filter and verification of one batch (the mapping core): (StrandRows, every verified
    mapping, before loci are selected); updates `counters`. The pieces of `find_mapping_pieces` joined: for
    callers that take a batch whole (paired-end, the API)."""
    pieces = list(find_mapping_pieces(batch, index, backend, filter_mode, fixed_e, reads_path, counters))
    return pieces[0].rows, Mappings.concat([part for piece in pieces for part in piece.parts])


# A batch whose reads hit much is seeded and verified in row groups (the backend's memory budget); the
# groups' mappings are handed on in pieces of at least PIECE_READS reads or PIECE_MAPPINGS mappings, so that
# the render processes start on a piece while the device maps the next. One piece a batch took 1,000 repeat
# reads against a 3.1 Gbp proxy (one H200) through 5 s of mapping, then 5 s of rendering, then 3 s of
# writing, one after the other; a batch of ordinary reads there is ~30 groups, its first rendered only
# once the last was verified. The mappings' bound was 2^24 while the device returned an end once for each
# overlapping window that took it (twice the loci for ordinary reads at genome scale); since found_mappings
# keeps one, 2^23 cuts a batch about where 2^24 cut it before. (Kept at 2^24, the 1,000 repeat reads' 25 M
# loci would go out in two pieces, the first two thirds of them, and that run took 1 s longer; the tree
# with 2^23 took them in 10.30 s against the tree before's 10.64 s on one H200, docs/benchmarks.md.)
PIECE_READS = 25_000
PIECE_MAPPINGS = 1 << 23


@dataclass
class MappingPiece:
    """Reads [a, b) of a batch after the mapping core: the batch's StrandRows (`rows`) and the reads'
    verified mappings, as verification's parts, rows numbered in the batch."""
    rows: object
    a: int
    b: int
    parts: list


def find_mapping_pieces(batch, index, backend, filter_mode, fixed_e, reads_path, counters, dump=None):
    """The mapping core of a batch (`find_mappings`), yielded in MappingPieces of whole reads, in read
    order, as they are done (see PIECE_READS). With `dump` (a callable taking text), the candidates are
    also handed to it as pair lines, before the filter, in pieces of bounded size (--dump-candidates:
    windows.candidate_pair_texts). With the index in parts (a device too small for it) a group
    is complete only after the last part: then the batch is one piece."""
    reference = index.reference
    e = per_read_e(batch, fixed_e, reads_path)
    rows = strand_rows(batch.codes(), batch.starts, e)
    n = len(batch)
    found, a, held = [], 0, 0
    with contextlib.closing(backend.index_parts(index, rows)) as parts:  # one part unless the GPU is too small
        for _ in counters.timed_iter("load", parts):
            with counters.timed("seed"):
                groups = backend.row_groups(rows, index)  # one unless the batch's reads hit too much
            for group in groups:
                with counters.timed("seed"):
                    cands, stats = backend.seed(group.rows, index)
                counters.seeding.add(stats)
                if dump is not None:
                    with counters.timed("output"):
                        for text in candidate_pair_texts(group.rows, cands, reference):
                            dump(text)
                with counters.timed("filter"):
                    cands, rejected = backend.filtered(filter_mode, group.rows, cands, reference)
                counters.filtered_out += rejected
                counters.verified += len(cands)
                with counters.timed("verify"):
                    verified = backend.verify_parts(group.rows, cands, reference)
                found.extend(verified)
                held += sum(len(part) for part in verified)
                if backend.whole_index and group.b < n and (group.b - a >= PIECE_READS or held >= PIECE_MAPPINGS):
                    yield MappingPiece(rows, a, group.b, found)
                    found, a, held = [], group.b, 0
    yield MappingPiece(rows, a, n, found)


def find_loci(batch, index, backend, filter_mode, fixed_e, reads_path, counters):
    """`find_mappings`, then one mapping per locus (render.BatchLoci)."""
    rows, maps = find_mappings(batch, index, backend, filter_mode, fixed_e, reads_path, counters)
    with counters.timed("verify"):
        return batch_loci(rows, maps, len(batch), index.reference)


def count_batch(counters, rendered):
    """Add one rendered batch's reads, mapped/unmapped reads, loci, records and host seconds to `counters`."""
    nh = rendered.nh
    counters.reads += len(nh)
    counters.mapped += int((nh > 0).sum())
    counters.unmapped += int((nh == 0).sum())
    counters.loci += int(nh.sum())
    counters.records += rendered.records + int((nh == 0).sum())
    counters.times["align"] += rendered.align_s
    counters.times["output"] += rendered.output_s


def open_mapping(opts):
    """(index, backend, filter mode, Counters) of a run: what single-end and paired runs set up alike. The
    backend loads the index where it works (the cuda backend uploads it) here, timed as the `load` stage,
    so that the per-batch stages hold only per-batch work."""
    t = time.perf_counter()
    index, backend = _open_index_and_backend(opts)
    backend.load(index, opts.gpu_memory)
    filter_mode, stages = filter_setting(opts.filter, backend)
    counters = Counters(stages=stages)
    counters.times["load"] = time.perf_counter() - t
    return index, backend, filter_mode, counters


def _open_index_and_backend(opts):
    """(index, backend started): an existing index loads (its files read, its offsets checked) in a thread
    while the backend starts (the cuda backend's driver and context: about a quarter of a second, much of it
    in the driver without the interpreter's lock); one to build is built here first, where Ctrl-C stops it.
    The index's error comes first, as when it opened before the backend; Ctrl-C waits for neither."""
    folder, built = find_index(opts.reference, opts.index_dir)
    if built:
        loaded = _InThread("gkmap-index", load_for, opts.reference, opts.ws, folder).result
    else:
        index = open_index(opts.reference, opts.ws, folder)
        loaded = lambda: index  # noqa: E731
    try:
        backend = get_backend(opts.device, opts.threads, opts.memory)
        backend.start()
    except Exception:
        loaded()
        raise
    return loaded(), backend


class _InThread:
    """`function(*args)` run in a daemon thread. result() waits for it, then returns its value or raises its
    error; a signal's exception (Ctrl-C) interrupts the wait, and the process's exit abandons the thread
    (a pool's thread would be waited for, at its shutdown and again at exit)."""

    def __init__(self, name, function, *args):
        self._done = {}
        self._thread = threading.Thread(target=self._run, args=(function, args), name=name, daemon=True)
        self._thread.start()

    def _run(self, function, args):
        try:
            self._done["value"] = function(*args)
        except BaseException as error:  # handed to the caller's thread
            self._done["error"] = error

    def result(self):
        self._thread.join()
        if "error" in self._done:
            raise self._done["error"]
        return self._done["value"]


def filter_setting(name, backend):
    """(the filter mode of --filter `name`, the run summary's "seed: .., filter: .., verify: .." on `backend`)."""
    mode = FILTER_MODES[name]
    devices = dict(backend.devices, filter=backend.name if mode else "none")
    return mode, ", ".join(f"{stage}: {devices[stage]}" for stage in ("seed", "filter", "verify"))


class _HiddenBar:
    """A progress bar nobody sees (--quiet, or stderr not a terminal): does nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass

    def set_postfix_str(self, text, refresh=True):
        pass


def progress_bar(opts, unit):
    """tqdm's bar on a terminal; tqdm is imported only then (about 20 ms of every start-up otherwise)."""
    if opts.quiet or not sys.stderr.isatty():
        return _HiddenBar()
    from tqdm import tqdm
    return tqdm(unit=unit, unit_scale=True, desc="mapping", file=sys.stderr)
