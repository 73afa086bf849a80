#!/usr/bin/env python3
"""Human-size scale test of the cuda backend (issue #5): a synthetic random genome of --gbp billion bases
(contigs of 100 Mbp, uniform A/C/G/T, fixed seed) is indexed on the GPU (`gkmap index --device cuda`)
and mapped against with --device cuda, every number measured in this run.

    scripts/bench_scale.py [--gbp 3.1] [--reads 100000] [--length 100] [-e 5] [--work DIR] [--gpu-memory 8G ...]

Prints: FASTA write time, index build time (total, and the GPU build of the arrays), peak GPU memory used
during the build and during mapping (NVML, sampled every 50 ms), mapping reads/s end to end, and the run
summary; with --gpu-memory, the same reads mapped again with the index cut into parts to fit each budget
(mapper/backends/index_parts.py), with the same numbers and a check that the SAM is the one-part run's.
Reads are sampled uniformly from the genome (half reverse-complemented, 1 % substitutions; no
indels: the point is scale, not sensitivity), so every read has its true locus within e.
"""
import argparse
import itertools
import logging
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from mapper.alphabet import COMPLEMENT, READ_ASCII
from mapper.index import build_index
from mapper.options import MapOptions, parse_size
from mapper.runners import map_reads

CONTIG = 100_000_000
LINE = 100


class GpuMemory:
    """Peak GPU memory the block's processes take (bytes), by NVML sampling of the device-wide figure less
    what was in use when the block began (the driver's own reservation, about 0.5 GiB on an idle H100 or
    H200, is not the run's); None without NVML."""

    def __enter__(self):
        self.peak, self._stop = None, threading.Event()
        try:
            import pynvml
            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            before = pynvml.nvmlDeviceGetMemoryInfo(handle).used
        except Exception:  # no NVML here: the peak stays unknown
            return self

        def sample():
            while not self._stop.is_set():
                used = pynvml.nvmlDeviceGetMemoryInfo(handle).used - before
                self.peak = max(self.peak or 0, used)
                time.sleep(0.05)
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if hasattr(self, "_thread"):
            self._thread.join()
        return False

    def __str__(self):
        return "unknown (no NVML)" if self.peak is None else f"{self.peak / 2**30:.1f} GiB"


def write_genome(path, total, rng):
    """FASTA of `total` random bases in contigs of CONTIG bases, LINE bases a line; returns the codes."""
    codes = rng.integers(0, 4, total, dtype=np.uint8)
    with open(path, "wb") as out:
        for i, start in enumerate(range(0, total, CONTIG)):
            seq = READ_ASCII[codes[start:start + CONTIG]]
            full = len(seq) // LINE * LINE
            block = np.concatenate([seq[:full].reshape(-1, LINE), np.full((full // LINE, 1), 10, np.uint8)], axis=1)
            out.write(f">chr{i + 1}\n".encode())
            out.write(block.tobytes())
            if full < len(seq):
                out.write(seq[full:].tobytes() + b"\n")
    return codes


def write_reads(path, codes, n, length, rng):
    """n reads sampled from the codes (module docstring), as FASTQ."""
    contig_of = lambda pos: pos // CONTIG
    starts = rng.integers(0, len(codes) - length, n)
    keep = contig_of(starts) == contig_of(starts + length - 1)
    starts = starts[keep]
    reads = codes[starts[:, None] + np.arange(length)]
    subs = rng.random(reads.shape) < 0.01
    reads[subs] = (reads[subs] + rng.integers(1, 4, int(subs.sum()))) % 4
    rev = rng.random(len(reads)) < 0.5
    reads[rev] = COMPLEMENT[reads[rev][:, ::-1]]
    with open(path, "w") as out:
        for i, row in enumerate(READ_ASCII[reads]):
            out.write(f"@r{i}\n{row.tobytes().decode()}\n+\n{'I' * length}\n")
    return len(reads)


def same_sam(a, b):
    """Whether two SAM files are equal but for the @PG line."""
    with open(a) as fa, open(b) as fb:
        lines = lambda f: (line for line in f if not line.startswith("@PG"))
        return all(x == y for x, y in itertools.zip_longest(lines(fa), lines(fb)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gbp", type=float, default=3.1)
    p.add_argument("--reads", type=int, default=100_000)
    p.add_argument("--length", type=int, default=100)
    p.add_argument("-e", type=int, default=5)
    p.add_argument("--work", help="folder for the genome, index and reads (default: a temporary folder)")
    p.add_argument("--gpu-memory", nargs="*", default=[], metavar="SIZE",
                   help="also map within these device memory budgets (the index in parts), e.g. 8G")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # build_index logs its own timing
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        work = Path(tmp)
        genome, reads = work / "random.fa", work / "reads.fq"
        t = time.perf_counter()
        codes = write_genome(genome, int(args.gbp * 1e9), rng)
        n = write_reads(reads, codes, args.reads, args.length, rng)
        del codes
        print(f"genome {args.gbp} Gbp and {n} reads written in {time.perf_counter() - t:.1f} s", flush=True)
        with GpuMemory() as build_memory:
            t = time.perf_counter()
            index = build_index(genome, 12, work / "idx", device="cuda")
            build_s = time.perf_counter() - t
        print(f"index (--device cuda): {build_s:.1f} s in all, {len(index.positions):,} positions, "
              f"peak GPU memory {build_memory}", flush=True)
        del index
        for budget in [None] + args.gpu_memory:
            sam = work / f"out.{budget}.sam"
            opts = MapOptions(str(genome), str(reads), e=args.e, device="cuda", index_dir=str(work / "idx"),
                              output=str(sam), quiet=True, gpu_memory=parse_size(budget) if budget else None)
            with GpuMemory() as map_memory:
                counters = map_reads(opts)
            same = "" if budget is None else f", SAM {'==' if same_sam(work / 'out.None.sam', sam) else '!='} one-part SAM"
            print(f"map (--gpu-memory {budget or 'default'}): {counters.reads / counters.seconds:,.0f} reads/s end to end, "
                  f"peak GPU memory {map_memory}{same}", flush=True)
            print(counters.summary(), flush=True)


if __name__ == "__main__":
    sys.exit(main())
