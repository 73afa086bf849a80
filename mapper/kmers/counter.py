"""The counting pipeline, SNCGPU's two phases, within a memory budget.

Phase 1, per block of input (reading.py): the backend (backend.py: cpu or cuda) parses it and extracts its
k-mers into a buffer. When the buffer holds `capacity` k-mers it is sorted and run-length encoded into a
run. A run much smaller than the buffer (input with many repeats) stays in the buffer, weighted by its
counts, and is merged with what comes next; a larger one is spilled to the temporary folder as a table
(store.py), compressed per bin.
Phase 2: when nothing was spilled (the input fitted in the budget), the last run is encoded by the backend
(on the GPU for cuda) and written as OUT. Otherwise the spilled runs and the last run are merged bin by
bin (merge.py) into OUT.

The budget: sorting n k-mers of C channels needs about (24 C + 24) n bytes at its peak (the buffer,
the sorted copy, the sort index and the run starts), so capacity = memory / (24 C + 24). The
temporary folder is removed on success and on error; OUT is written atomically (outputs.atomic_path).
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
from mapper.kmers.reading import blocks
from mapper.outputs import atomic_path, remove_stale, temp_prefix

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

    def __init__(self, k, canonical, make_backend, memory_bytes, tmp_parent):
        self.layout = KmerLayout(k)
        self.canonical = canonical
        self.capacity = max(MIN_CAPACITY, int(memory_bytes) // (24 * self.layout.channels + 24))
        self.block_bytes = min(MAX_BLOCK_BYTES, self.capacity)
        # a block adds at most block_bytes k-mers to a buffer that holds fewer than `capacity`
        self.backend = make_backend(self.layout, canonical, self.capacity + self.block_bytes)
        self.tmp_parent = tmp_parent
        self.tmp_dir = None
        self.spilled = []
        self.stats = CountStats()

    def add_files(self, paths):
        start = time.perf_counter()
        for block in blocks(paths, self.block_bytes):
            self.backend.add(block)
            if self.backend.buffered >= self.capacity:
                run = self.backend.reduce()
                if 2 * len(run) <= self.capacity:
                    self.backend.keep(run)
                else:
                    self._spill(run)
        self.stats.phases["reading"] = time.perf_counter() - start

    def _spill(self, run):
        if self.tmp_dir is None:
            remove_stale(self.tmp_parent or tempfile.gettempdir(), "gkmap-kmers-")  # a killed count's runs
            self.tmp_dir = tempfile.mkdtemp(prefix=temp_prefix("gkmap-kmers-"), dir=self.tmp_parent)
        path = f"{self.tmp_dir}/run{len(self.spilled):05d}.gkmers"
        store.write_table(path, self.layout.k, self.canonical, 1, self.backend.encode(run))
        self.spilled.append(path)
        self.stats.runs_spilled += 1
        log.info("spilled run %d (%d distinct k-mers) to %s", len(self.spilled), len(run), self.tmp_dir)

    def write(self, out_path, min_count=1):
        """Phase 2: everything counted so far into the table `out_path` (written atomically)."""
        k = self.layout.k
        clock = time.perf_counter()
        last = self.backend.reduce()
        self.stats.occurrences = self.backend.occurrences
        self.stats.phases["sorting"] = time.perf_counter() - clock
        with atomic_path(out_path) as tmp:
            if not self.spilled:
                clock = time.perf_counter()
                encoded = self.backend.encode(last, min_count)
                self.stats.phases["encoding"] = time.perf_counter() - clock
                clock = time.perf_counter()
                self.stats.distinct = store.write_table(tmp, k, self.canonical, min_count, encoded)
            else:
                clock = time.perf_counter()
                runs = [store.KmerTable(path) for path in self.spilled]
                try:
                    with store.TableWriter(tmp, k, self.canonical, min_count) as writer:
                        merge_runs(runs + [self.backend.memory_run(last)], writer, k, self.backend.sort_count,
                                   min_count)
                    self.stats.distinct = writer.distinct
                finally:
                    for run in runs:
                        run.close()
        self.stats.phases["merging" if self.spilled else "writing"] = time.perf_counter() - clock

    def close(self):
        if self.tmp_dir is not None:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
            self.tmp_dir = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def count_kmers(paths, out_path, k, canonical=False, min_count=1, make_backend=CpuBackend,
                memory_bytes=2 << 30, tmp_parent=None):
    """Count the k-mers of FASTA/FASTQ files `paths` into the table `out_path`; returns CountStats."""
    start = time.perf_counter()
    with KmerCounter(k, canonical, make_backend, memory_bytes, tmp_parent) as counter:
        counter.add_files(paths)
        counter.write(out_path, min_count)
    counter.stats.seconds = time.perf_counter() - start
    return counter.stats
