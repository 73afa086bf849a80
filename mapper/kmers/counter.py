"""The counting pipeline, SNCGPU's two phases, within a memory budget.

Phase 1, per chunk of input (reading.py): extract the k-mers (encode.py) into a buffer. When the buffer
holds `capacity` k-mers it is sorted and run-length encoded (the backend's sort_count) into a run. A
run much smaller than the buffer (input with many repeats) stays in the buffer, weighted by its
counts, and is merged with what comes next; a larger one is spilled to the temporary folder as a
table (store.py), compressed per bin.
Phase 2 (merge.py): the spilled runs and the last run are merged bin by bin into OUT. When nothing was
spilled the whole input was one run in memory, and phase 2 only compresses it.

The budget: sorting n k-mers of C channels needs about (24 C + 24) n bytes at its peak (the buffer,
the sorted copy, the sort index and the run starts), so capacity = memory / (24 C + 24). The
temporary folder is removed on success and on error; OUT is written atomically (store.atomic_output).
"""
import logging
import shutil
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from mapper.kmers import store
from mapper.kmers.count import sort_count as cpu_sort_count
from mapper.kmers.encode import KmerLayout, extract
from mapper.kmers.merge import MemoryRun, merge_runs
from mapper.kmers.reading import code_chunks

log = logging.getLogger("gkmap")

MAX_CHUNK_BASES = 1 << 22
MIN_CAPACITY = 1 << 12


@dataclass
class CountStats:
    occurrences: int = 0  # k-mers read (with repeats)
    distinct: int = 0     # k-mers written
    runs_spilled: int = 0
    seconds: float = 0.0


class KmerCounter:
    """Phase 1 and 2 for one table; use as a context manager so the temporary folder always goes away."""

    def __init__(self, k, canonical, sort_count, memory_bytes, tmp_parent):
        self.layout = KmerLayout(k)
        self.canonical = canonical
        self.sort_count = sort_count
        self.capacity = max(MIN_CAPACITY, int(memory_bytes) // (24 * self.layout.channels + 24))
        self.chunk_bases = min(MAX_CHUNK_BASES, self.capacity)
        self.tmp_parent = tmp_parent
        self.tmp_dir = None
        self.pieces = []  # (keys, weights or None)
        self.buffered = 0
        self.spilled = []
        self.stats = CountStats()

    def add_codes(self, codes):
        keys = extract(codes, self.layout, self.canonical)
        self.stats.occurrences += keys.shape[1]
        self.pieces.append((keys, None))
        self.buffered += keys.shape[1]
        if self.buffered >= self.capacity:
            keys, counts = self._sort_buffer()
            if 2 * len(counts) <= self.capacity:
                self.pieces, self.buffered = [(keys, counts)], len(counts)
            else:
                self._spill(keys, counts)

    def add_files(self, paths):
        for codes in code_chunks(paths, self.layout.k, self.chunk_bases):
            self.add_codes(codes)

    def _sort_buffer(self):
        keys = np.concatenate([p[0] for p in self.pieces], axis=1)
        weights = None
        if any(p[1] is not None for p in self.pieces):
            weights = np.concatenate([np.ones(p[0].shape[1], dtype=np.uint64) if p[1] is None else p[1]
                                      for p in self.pieces])
        self.pieces, self.buffered = [], 0
        return self.sort_count(keys, weights)

    def _spill(self, keys, counts):
        if self.tmp_dir is None:
            self.tmp_dir = tempfile.mkdtemp(prefix="gkmap-kmers-", dir=self.tmp_parent)
        path = f"{self.tmp_dir}/run{len(self.spilled):05d}.gkmers"
        with store.TableWriter(path, self.layout.k, self.canonical) as writer:
            merge_runs([MemoryRun(keys, counts, self.layout.k)], writer, self.layout.k, self.sort_count)
        self.spilled.append(path)
        self.stats.runs_spilled += 1
        log.info("spilled run %d (%d distinct k-mers) to %s", len(self.spilled), len(counts), self.tmp_dir)

    def write(self, out_path, min_count=1):
        """Phase 2: merge everything counted so far into the table `out_path` (written atomically)."""
        runs = [store.KmerTable(path) for path in self.spilled]
        try:
            if self.pieces:
                runs.append(MemoryRun(*self._sort_buffer(), self.layout.k))
            with store.atomic_output(out_path) as tmp:
                with store.TableWriter(tmp, self.layout.k, self.canonical, min_count) as writer:
                    merge_runs(runs, writer, self.layout.k, self.sort_count, min_count)
                self.stats.distinct = writer.distinct
        finally:
            for run in runs:
                if isinstance(run, store.KmerTable):
                    run.close()

    def close(self):
        if self.tmp_dir is not None:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
            self.tmp_dir = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def count_kmers(paths, out_path, k, canonical=False, min_count=1, sort_count=cpu_sort_count,
                memory_bytes=2 << 30, tmp_parent=None):
    """Count the k-mers of FASTA/FASTQ files `paths` into the table `out_path`; returns CountStats."""
    start = time.perf_counter()
    with KmerCounter(k, canonical, sort_count, memory_bytes, tmp_parent) as counter:
        counter.add_files(paths)
        counter.write(out_path, min_count)
    counter.stats.seconds = time.perf_counter() - start
    return counter.stats
