#!/usr/bin/env python3
"""Benchmark reads parsing: read_batches with dnaio alone (fast=False) against the block parser
(mapper/read_blocks.py), side by side in one run, on the same files.

By default it writes N reads of L bp (1,000,000 x 100) as FASTQ into a temporary folder, plain and gzip
(level 1): names of scripts/simulate_reads.py's form (`sim<i>|20:<pos>:<strand>:<edits>`), random bases
with 0.1 % N, random qualities '#'..'J'. --reads benchmarks given files instead. Every reading is timed
whole (open to last batch, default batch size), best of --repeat; CPU is this process's CPU time (the
block parser reads and scans chunks in a thread of its own, so CPU can exceed wall time).

    python scripts/bench_reads.py [-n 1000000] [-l 100] [--repeat 3] [--reads FILE ...]
"""
import argparse
import gzip
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mapper.reads import read_batches  # noqa: E402


def write_reads(path, n, length, seed=11):
    """A FASTQ of n reads of `length` bp (see the module docstring)."""
    rng = np.random.default_rng(seed)
    bases = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, (n, length))]
    bases[rng.random((n, length)) < 0.001] = ord("N")
    quals = rng.integers(ord("#"), ord("J") + 1, (n, length), dtype=np.uint8)
    positions = rng.integers(1, 63_000_000, n)
    strands = np.where(rng.random(n) < 0.5, "+", "-")
    edits = rng.integers(0, 5, n)
    with open(path, "wb") as out:
        for block in range(0, n, 100_000):
            rows = range(block, min(block + 100_000, n))
            seqs, qs = bases[block:rows.stop], quals[block:rows.stop]
            out.write(b"".join(b"@sim%d|20:%d:%s:%d\n%s\n+\n%s\n" % (
                i, positions[i], strands[i].encode(), edits[i], seqs[i - block].tobytes(), qs[i - block].tobytes())
                for i in rows))


def timed(path, fast, repeat):
    """(reads, best wall seconds, CPU seconds of that run)."""
    best = None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        reads = sum(len(batch) for batch in read_batches(path, fast=fast))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if best is None or wall < best[1]:
            best = reads, wall, cpu
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=1_000_000, help="reads to write [1000000]")
    p.add_argument("-l", "--length", type=int, default=100, help="read length [100]")
    p.add_argument("--repeat", type=int, default=3, help="timings per reading; the best is shown [3]")
    p.add_argument("--reads", nargs="+", type=Path, help="benchmark these files instead")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = args.reads
        if not paths:
            plain = Path(tmp) / f"reads_{args.n}x{args.length}.fq"
            write_reads(plain, args.n, args.length)
            with open(plain, "rb") as src, gzip.open(f"{plain}.gz", "wb", compresslevel=1) as dst:
                shutil.copyfileobj(src, dst, 1 << 22)
            paths = [plain, Path(f"{plain}.gz")]
        print(f"{'file':28s} {'parser':7s} {'reads':>9s} {'wall s':>7s} {'M reads/s':>9s} {'CPU s':>6s}  ratio")
        for path in paths:
            reads, dnaio_wall, cpu = timed(path, False, args.repeat)
            print(f"{path.name:28s} {'dnaio':7s} {reads:9d} {dnaio_wall:7.2f} {reads / dnaio_wall / 1e6:9.2f} "
                  f"{cpu:6.2f}")
            reads, wall, cpu = timed(path, True, args.repeat)
            print(f"{path.name:28s} {'blocks':7s} {reads:9d} {wall:7.2f} {reads / wall / 1e6:9.2f} {cpu:6.2f}  "
                  f"{dnaio_wall / wall:.1f}x")

if __name__ == "__main__":
    sys.exit(main())
