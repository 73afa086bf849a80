"""The counting pipeline, SNCGPU's two phases, within a memory budget.

Phase 1, per block of input (reading.py): the backend (backend.py: cpu or cuda) parses it and extracts its
k-mers into a buffer. When the buffer is full it is sorted and run-length encoded into a run. A run much
smaller than the buffer (input with many repeats) goes back into the buffer, weighted by its counts, and
is merged with what comes next; a larger one is held in memory, and the next buffer is smaller by what
the held runs take. Only when the held runs leave less than an eighth of the budget to the buffer are
they spilled to the temporary folder as tables (store.py), compressed per bin.
Phase 2: when nothing was spilled, the runs in memory are one run (the usual case: the input fitted in
the budget) or are merged in memory by the backend into one; that run is encoded by the backend (on the
GPU for cuda) and written as OUT, with no merge pass over files. Otherwise the spilled runs and the runs
in memory are merged bin by bin (merge.py) into OUT.

The budget (`memory`: host bytes on the cpu backend, device bytes on cuda): `backend.bytes_per_kmer(C)` is
what sorting and run-length encoding one buffered k-mer of C channels costs at its peak (its slot in the
buffer, the sort's working copy, the run it becomes; backend.py says what it counts for each backend), so
the buffer is sized to memory / bytes_per_kmer k-mers. A held run of u distinct k-mers takes (8 C + 8) u
bytes, and the buffer then holds (memory - the buffer's fixed bytes - held runs) / work_bytes k-mers, the
space that is left for the sort's work. Runs are encoded in pieces that fit what is left beside the buffer
and the held runs (encode_pieces). Beyond that, up to PARSE_AHEAD + 1 input blocks of at most
MAX_BLOCK_BYTES bytes are in flight (text, codes and their k-mers' words): the documented constant of
docs/kmers.md. `host_memory` (--memory, where the budget is the device's) bounds what the host holds of a
merge of spilled runs. The temporary folder is removed on success and on error; OUT is written atomically
(outputs.atomic_path).
"""
import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, field


from mapper.kmers import store
from mapper.kmers.backend import CpuBackend
from mapper.kmers.encode import KmerLayout
from mapper.kmers.merge import merge_runs
from mapper.kmers.reading import blocks, fresh_buffer
from mapper.outputs import atomic_path, remove_stale, temp_prefix
from mapper.reads import prefetch

log = logging.getLogger("gkmap")

MAX_BLOCK_BYTES = 1 << 25
MIN_CAPACITY = 1 << 12


@dataclass
class CountStats:
    occurrences: int = 0  # k-mers read (with repeats)
    distinct: int = 0     # k-mers written
    runs_spilled: int = 0
    seconds: float = 0.0
    phases: dict = field(default_factory=dict)  # seconds: reading (phase 1), sorting, encoding, writing


class KmerCounter:
    """Phase 1 and 2 for one table; use as a context manager so the temporary folder always goes away.
    `make_backend(layout, canonical, slots)` builds the backend (backend.select)."""

    def __init__(self, k, canonical, make_backend, memory_bytes, tmp_parent, host_memory=None):
        self.layout = KmerLayout(k)
        self.canonical = canonical
        self.memory = int(memory_bytes)
        self.host_memory = host_memory
        C = self.layout.channels
        self.run_bytes = 8 * C + 8  # a held run's bytes per distinct k-mer
        self.per_kmer = make_backend.bytes_per_kmer(C)
        self.capacity = max(MIN_CAPACITY, self.memory // self.per_kmer)
        self.block_bytes = min(MAX_BLOCK_BYTES, self.capacity)
        # a block adds at most block_bytes k-mers to a buffer that holds fewer than `capacity`
        self.backend = make_backend(self.layout, canonical, self.capacity + self.block_bytes)
        self.held = []  # sorted, counted runs kept in memory
        self.tmp_parent = tmp_parent
        self.tmp_dir = None
        self.spilled = []
        self.stats = CountStats()

    def _held_bytes(self, runs=None):
        return self.run_bytes * sum(len(run) for run in (self.held if runs is None else runs))

    def _spare(self, runs=None):
        """Bytes of the budget left beside the buffer and the held runs (or `runs`)."""
        return self.memory - self.backend.fixed_bytes - self._held_bytes(runs)

    def _room(self, runs=None):
        """k-mers the buffer may hold next to the held runs (or next to `runs`): as many as the spare bytes
        give the sort's work."""
        return max(MIN_CAPACITY, self._spare(runs) // self.backend.work_bytes(self.layout.channels))

    def add_files(self, paths):
        start = time.perf_counter()
        # Blocks are read by a thread `read_ahead` blocks ahead of add(). The cuda backend's blocks go into
        # its free pinned buffers (read_ahead + 2 of them: the one add() uploads, those queued, the one
        # being read; released once add() is done), each read by the reading threads (reading.py); the
        # reading of a block then overlaps the GPU's work on the one before. The cpu backend parses a block
        # in its pool after add() returns: fresh buffers, read by the one thread (reading threads only took
        # cores from the pool: 2-core development machine, 1 M reads, k 31, medians 3.63 s with two
        # reading threads, 3.31 s with the one, 3.39 s for ffa7791's reader). The buffer is reduced before
        # a block that could take it past the room, so a sort never holds more than the room's k-mers.
        reused = self.backend.block_buffer
        if reused:
            self.backend.pin_blocks(self.block_bytes)
            source = blocks(paths, self.block_bytes, reused, True, self.backend.release)
        else:
            source = blocks(paths, self.block_bytes, fresh_buffer, False)
        for block in prefetch(source, self.backend.read_ahead):
            if self._full(block.max_bases):
                self._reduce()
            self.backend.add(block)
            if reused:
                self.backend.release(block.data)
        self.stats.phases["reading"] = time.perf_counter() - start

    def _full(self, coming):
        """Whether `coming` more k-mers (at most) could take the buffer past its room: it is then reduced
        first (`buffered` is a bound on the cpu backend; settle() makes it exact). An empty buffer takes
        any block."""
        buffered = self.backend.buffered
        return buffered > 0 and buffered + coming > self._room() and self.backend.settle() + coming > self._room()

    def _reduce(self):
        """The full buffer sorted into a run, which is kept in the buffer, held, or spilled with the held
        ones. A function of its own so that a kept run's device copy goes as soon as the buffer has it."""
        run = self.backend.reduce()
        if 2 * len(run) <= self._room():
            self.backend.keep(run)
            return
        self.held.append(run)
        # Held runs are spilled when they would leave the sort under an eighth of what the buffer leaves, or
        # a room that does not take a whole block. Not sooner: runs held on the GPU are merged there, spilled
        # ones are read back, decoded and uploaded (10 Gbp of reads, one H100: spilling at a quarter took
        # 37.03 s, 23.37 s of it merging; at an eighth 14.87 s, nothing spilled).
        if 8 * self._held_bytes() > 7 * (self.memory - self.backend.fixed_bytes) or self._room() < self.block_bytes:
            while self.held:  # each goes once written, so the next one's encoding has its room
                self._spill(self.held[-1])
                self.held.pop()

    def _spill(self, run):
        if self.tmp_dir is None:
            remove_stale(self.tmp_parent or tempfile.gettempdir(), "gkmap-kmers-")  # a killed count's runs
            self.tmp_dir = tempfile.mkdtemp(prefix=temp_prefix("gkmap-kmers-"), dir=self.tmp_parent)
        path = f"{self.tmp_dir}/run{len(self.spilled):05d}.gkmers"
        store.write_table(path, self.layout.k, self.canonical, 1, self.backend.encode_pieces(run, 1, self._spare()))
        self.spilled.append(path)
        self.stats.runs_spilled += 1
        log.info("spilled run %d (%d distinct k-mers) to %s", len(self.spilled), len(run), self.tmp_dir)

    def write(self, out_path, min_count=1):
        """Phase 2: everything counted so far into the table `out_path` (written atomically)."""
        k = self.layout.k
        clock = time.perf_counter()
        runs = self.held + [self.backend.reduce()]
        self.held = []
        if len(runs) > 1 and not self.spilled:
            merged = self.backend.merge(runs, self._room([]))  # None where the budget cannot take it
            runs = runs if merged is None else [merged]
        self.stats.occurrences = self.backend.occurrences
        self.stats.phases["sorting"] = time.perf_counter() - clock
        with atomic_path(out_path) as tmp:
            if len(runs) == 1 and not self.spilled:
                clock = time.perf_counter()
                pieces = self.backend.encode_pieces(runs[0], min_count, self._spare(runs))
                self.stats.distinct = store.write_table(tmp, k, self.canonical, min_count, _timed(pieces, self.stats))
                self.stats.phases["writing"] = time.perf_counter() - clock - self.stats.phases["encoding"]
                return
            clock = time.perf_counter()
            tables = [store.KmerTable(path) for path in self.spilled]
            try:
                if self.backend.merge_pieces:  # cuda: on the device, a range of bins at a time
                    pieces = self.backend.merge_pieces(runs, min_count, self._spare(runs), tables, self.host_memory)
                    self.stats.distinct = store.write_table(tmp, k, self.canonical, min_count, pieces)
                else:
                    with store.TableWriter(tmp, k, self.canonical, min_count) as writer:
                        merge_runs(tables + [self.backend.memory_run(run) for run in runs], writer, k,
                                   self.backend.sort_count, min_count)
                    self.stats.distinct = writer.distinct
            finally:
                for table in tables:
                    table.close()
            self.stats.phases["merging"] = time.perf_counter() - clock

    def close(self):
        if self.tmp_dir is not None:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
            self.tmp_dir = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _timed(pieces, stats):
    """`pieces` (a generator that encodes each when asked), the seconds spent making them added up in
    stats.phases["encoding"]."""
    stats.phases["encoding"] = 0.0
    pieces = iter(pieces)
    while True:
        clock = time.perf_counter()
        piece = next(pieces, None)
        stats.phases["encoding"] += time.perf_counter() - clock
        if piece is None:
            return
        yield piece


def count_kmers(paths, out_path, k, canonical=False, min_count=1, make_backend=CpuBackend,
                memory_bytes=2 << 30, tmp_parent=None, host_memory=None):
    """Count the k-mers of FASTA/FASTQ files `paths` into the table `out_path`; returns CountStats.
    `memory_bytes` is the backend's budget, `host_memory` the host's where that budget is the device's."""
    start = time.perf_counter()
    with KmerCounter(k, canonical, make_backend, memory_bytes, tmp_parent, host_memory) as counter:
        counter.add_files(paths)
        counter.write(out_path, min_count)
    counter.stats.seconds = time.perf_counter() - start
    return counter.stats
