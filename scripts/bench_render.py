#!/usr/bin/env python3
"""The renderer alone (issue #18, item 1): SAM records per second of the numpy renderer and of the compiled
one (kernels/render.cu through the host layer) on the same batch, side by side in one run.

    scripts/bench_render.py [--genome chr20.fa.gz] [--reads 1000000] [--threads 1,16] [-e 5]

Simulates `--reads` reads of `--length` bases from the genome (mapper/simulate.py, fixed --seed), maps them
once (the mapping core, `--device`), then renders the one batch: `render()` as a render process runs it
(loci, caps, MAPQ, records), numpy once and compiled at each thread count, and the records stage alone
(CIGAR, MD and the lines: align.describe + sam.batch_records against sam_kernel.records_text). Texts are
timed as the ASCII bytes a render process writes to its file (the numpy str encoded, the compiled buffer
as it is), and every compiled text is checked equal, byte for byte, to the numpy one. Rates are SAM lines
(records and unmapped reads) per second; each timing is the best of --repeat runs.
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mapper import sam_kernel  # noqa: E402
from mapper.align import describe  # noqa: E402
from mapper.backends import get_backend  # noqa: E402
from mapper.index import build_index, load_index  # noqa: E402
from mapper.pipeline import Counters, find_mappings  # noqa: E402
from mapper.reads import ReadBatch  # noqa: E402
from mapper.render import RecordOptions, batch_loci, cap_records, render  # noqa: E402
from mapper.sam import batch_records, read_scores  # noqa: E402
from mapper.simulate import simulate  # noqa: E402


def simulated_batch(reference, n, length, seed):
    reads = simulate(reference, n, length, seed)
    seq = np.frombuffer("".join(s for _, s in reads).encode(), dtype=np.uint8)
    starts = np.arange(n + 1, dtype=np.int64) * length
    return ReadBatch([name for name, _ in reads], seq, np.full(len(seq), ord("I"), dtype=np.uint8), starts)


def best_of(repeat, call):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shared = Path(os.environ.get("GKMAP_SHARED_DATA") or ROOT.parent / "shared" / "data")  # as tests/conftest.py
    p.add_argument("--genome", default=str(shared / "genomes" / "human_GRCh37_chr20.fa.gz"))
    p.add_argument("--index-dir", help="index folder (default: a cache folder per genome, built when absent)")
    p.add_argument("--reads", type=int, default=1_000_000)
    p.add_argument("--length", type=int, default=100)
    p.add_argument("-e", type=int, default=5)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--threads", default=f"1,{len(os.sched_getaffinity(0))}", help="compiled renderer's thread counts")
    p.add_argument("--device", default="auto", help="mapping core's device (cpu, cuda, auto)")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--best", action="store_true")
    p.add_argument("-n", "--max-records", type=int)
    p.add_argument("-R", "--read-group")
    args = p.parse_args()
    if not sam_kernel.available():
        sys.exit("no C++ compiler: the compiled renderer cannot run here")

    genome = Path(args.genome)
    folder = Path(args.index_dir or Path(tempfile.gettempdir()) / f"gkmap-bench-render-{genome.name}.gkx")
    t0 = time.perf_counter()
    index = load_index(genome, folder) if (folder / "meta.json").exists() else build_index(genome, index_dir=folder)
    print(f"index {folder}: {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    batch = simulated_batch(index.reference, args.reads, args.length, args.seed)
    print(f"simulated {args.reads:,} reads of {args.length} bp (seed {args.seed}): {time.perf_counter() - t0:.1f} s",
          flush=True)
    t0 = time.perf_counter()
    rows, maps = find_mappings(batch, index, get_backend(args.device), None, args.e, None, Counters())
    print(f"mapping core ({args.device}): {time.perf_counter() - t0:.1f} s, {len(maps):,} verified mappings", flush=True)

    reference, n = index.reference, len(batch)
    thread_counts = [int(t) for t in args.threads.split(",")]
    options = RecordOptions(args.best, args.max_records, False, args.read_group)
    found = batch_loci(rows, maps, n, reference)
    loci, read, strand = cap_records(found, args.best, args.max_records)
    mapq, second = read_scores(found.read, found.loci.edits, n, rows.e[:n])
    lines = len(loci) + int((found.nh == 0).sum())
    spans = loci.end - loci.start
    print(f"{lines:,} SAM lines: {len(loci):,} records ({(spans != rows.length[loci.row]).sum():,} spans not "
          f"of the read's length), {lines - len(loci):,} unmapped reads", flush=True)

    def numpy_records():  # as a render process writes it: ASCII bytes
        return batch_records(batch, reference, read, strand, loci, *describe(rows, loci, reference), found.nh, mapq,
                             second, args.read_group).encode("ascii")

    kept = sam_kernel.TextBuffer()  # as a render process keeps its text memory from job to job

    def compiled_render(threads):
        return render(batch, rows, maps, reference, *options, threads=threads, compiled=True, text_buffer=kept)

    def numpy_render():
        done = render(batch, rows, maps, reference, *options, compiled=False)
        return done, done.sam.encode("ascii")

    rate = lambda seconds: f"{lines / seconds:>12,.0f} lines/s  {seconds:8.3f} s"
    print(f"\nSAM text as bytes, as render processes write it; best of {args.repeat}")
    print(f"{'stage':<28}{'renderer':<22}{'rate':>28}")
    t_numpy, want = best_of(args.repeat, numpy_records)
    print(f"{'records (CIGAR/MD/text)':<28}{'numpy':<22}{rate(t_numpy)}", flush=True)
    for threads in thread_counts:
        seconds, got = best_of(args.repeat, lambda: sam_kernel.records_text(
            batch, rows, reference, read, strand, loci, found.nh, mapq, second, args.read_group, threads))
        check(got.tobytes() == want)
        print(f"{'records (CIGAR/MD/text)':<28}{f'compiled, {threads} thr':<22}{rate(seconds)}  x{t_numpy / seconds:.1f}"
              f"  text equal", flush=True)
    t_render, (_, whole) = best_of(args.repeat, numpy_render)
    print(f"{'render() (loci + records)':<28}{'numpy':<22}{rate(t_render)}", flush=True)
    for threads in thread_counts:
        seconds, done = best_of(args.repeat, lambda: compiled_render(threads))
        check(done.sam.tobytes() == whole)
        print(f"{'render() (loci + records)':<28}{f'compiled, {threads} thr':<22}{rate(seconds)}  x{t_render / seconds:.1f}"
              f"  text equal  (loci {done.align_s:.3f} s)", flush=True)


def check(equal):
    if not equal:
        sys.exit("the compiled renderer's text differs from the numpy renderer's")

if __name__ == "__main__":
    sys.exit(main())
