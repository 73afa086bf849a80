#!/usr/bin/env python3
"""Benchmark of one run spread over Dask workers (issue #10), every number measured in this run, on the
backend --device names (cpu on a machine without GPUs).

    scripts/bench_cluster.py [--set shigella|chr20] [--reads N] [--chunk-reads 2000] [--workers 1 2]
                             [--device cpu] [--repeat 3] [--data ../shared/data] [--out DIR] [--paired]

Sets: `shigella`, the 22,084 real Shigella R1 reads (150 bp, per-read e) against S. dysenteriae; `chr20`,
--reads reads simulated from human chr20 (CONVENTIONS.md model, seed 11), 100 bp at e=5 (issue #4's set;
slow on cpu). Each time is the fastest of --repeat runs. Measured:
1. per number of workers W: a local cluster of W worker processes is started (timed: T_setup), then the
   run goes through it (`--scheduler`): wall seconds, reads/s, speed-up over one worker, scaling efficiency
   (speed-up / W). Every SAM is checked equal to the single-process SAM;
2. the cost of the distribution with one worker against the single process at the same batch size:
   T_1worker - T_single = F0 + chunks * o + N * d, with chunks of C and of C/10 reads (o: the fixed cost of
   a task), and with the first C/10 reads alone (one chunk: F0, the fixed cost of a run: connecting,
   index load on the worker, plugin registration); d is what remains per read (moving the chunk and its
   SAM between processes);
3. the client's ceiling R_client: its own work per read (parse the reads into chunks, pickle each chunk,
   write the SAM text), timed alone: one client cannot feed workers faster than that.
Then the projection of docs/cluster.md for --project-reads reads on 8 and 64 GPUs, from the single-GPU rates
of GPU_RATES: T(G) = T_setup + F0 + N * max((1/r + o/C + d) / G, 1/R_client + d), chunks of 100,000 reads.

--paired: the Shigella R1/R2 read pairs (`gkmap map --pe`, insert size estimated) in a single process
(batches of --chunk-reads pairs) and through local clusters of --workers worker processes (chunks of
--chunk-reads pairs): wall seconds, read pairs/s and reads/s (two a pair), speed-up over the single process
and over one worker. Every distributed SAM, OEA SAM and DIVET file is checked equal to the single process's.
"""
import argparse
import itertools
import os
import pickle
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import dnaio
from distributed import Client

from mapper.runners.cluster import local_cluster
from mapper.index import build_index
from mapper.options import MapOptions
from mapper.paired import side_paths
from mapper.outputs import atomic_output
from mapper.runners import map_reads
from mapper.reads import read_batches
from mapper.simulate import simulate, write_fastq

ROOT = Path(__file__).resolve().parents[1]
# Single-GPU end-to-end rates of the cuda backend on an H100: scripts/bench_cuda.py's last run, chr20.
GPU_RATES = {"chr20 100 bp e=5": 17_471, "chr20 150 bp e=6": 27_826}
PROJECT_CHUNK = 100_000


def body(path):
    with open(path) as f:
        return [line for line in f if not line.startswith("@PG")]


def pair_bodies(sam):
    """The three outputs of a paired run (@PG lines aside)."""
    return [body(path) for path in (sam, *side_paths(str(sam)))]


def fastest(repeat, opts, **changes):
    """Wall seconds of the fastest of `repeat` `gkmap map` runs with `opts` changed by `changes`."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        map_reads(replace(opts, **changes))
        best = min(best, time.perf_counter() - t)
    return best


def client_seconds_per_read(reads, chunk_reads, sam, scratch):
    """The client's own work per read, timed alone: parse + pickle the chunks, write the SAM text (into the
    page cache: the disk's bandwidth is a bound of its own, docs/cluster.md)."""
    text = Path(sam).read_text()
    t = time.perf_counter()
    n = 0
    for batch in read_batches(reads, chunk_reads):
        pickle.dumps(batch, protocol=5)
        n += len(batch)
    with open(scratch, "w") as out:
        out.write(text)
    seconds = time.perf_counter() - t
    os.unlink(scratch)
    return seconds / n


def first_reads(src, n, dst):
    with dnaio.open(src) as reader, dnaio.open(dst, mode="w") as writer:
        for record in itertools.islice(reader, n):
            writer.write(record)
    return dst


def inputs(args, work):
    """(set name, genome, reads file, number of reads, fixed e) of the chosen set, with its index built."""
    data = Path(args.data)
    if args.set == "shigella":
        genome = data / "genomes" / "shigella_dysenteriae_ATCC13313_GCF_002949675.1.fna.gz"
        build_index(genome, 12, work / "idx")
        reads = data / "reads" / "shigella_dysenteriae_ERR6005894_R1.fastq.gz"
        return "Shigella R1 150 bp, per-read e", genome, reads, sum(map(len, read_batches(reads))), None
    genome = data / "genomes" / "human_GRCh37_chr20.fa.gz"
    index = build_index(genome, 12, work / "idx")
    reads = work / "chr20_100.fq"
    with atomic_output(str(reads)) as out:
        write_fastq(simulate(index.reference, args.reads, 100, seed=11), out)
    return "chr20 simulated 100 bp, e=5", genome, reads, args.reads, 5


def clusters(workers, setup):
    """For each number w of workers: (w, a Client of a local cluster of w worker processes); its start
    time in setup[w]."""
    for w in workers:
        t = time.perf_counter()
        with local_cluster([{}] * w, "worker") as cluster, Client(cluster, set_as_default=False) as client:
            setup[w] = time.perf_counter() - t
            yield w, client
            assert len(client.nthreads()) == w


def bench_paired(args, work):
    """--paired: single process against local clusters, every output checked; prints the table."""
    name, genome, r1, pairs, _ = inputs(args, work)
    r2 = r1.with_name(r1.name.replace("_R1", "_R2"))
    base = MapOptions(str(genome), str(r1), reads2=str(r2), paired="pe", device=args.device,
                      index_dir=str(work / "idx"), output=str(work / "single.sam"), quiet=True)
    C = args.chunk_reads
    single = fastest(args.repeat, base, batch_size=C)
    expected = pair_bodies(work / "single.sam")
    wall, setup = {}, {}
    for w, client in clusters(args.workers, setup):
        sam = work / f"w{w}.sam"
        wall[w] = fastest(args.repeat, base, scheduler=client.scheduler.address, chunk_reads=C, output=str(sam))
        assert pair_bodies(sam) == expected, f"{w} workers: the outputs differ"
    print(f"{name.replace('R1', 'R1/R2')} as read pairs (--pe): {pairs:,} pairs, --device {args.device}, "
          f"{os.cpu_count()} cores, fastest of {args.repeat}; every distributed SAM, OEA SAM and DIVET file equals "
          f"the single process's (the @PG line aside)\n")
    print("| run | chunk pairs | cluster start s | wall s | pairs/s | reads/s | speed-up over single process | "
          "speed-up over 1 worker |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| single process | {C:,} (batch) | - | {single:.2f} | {pairs / single:,.0f} | {2 * pairs / single:,.0f} "
          f"| 1.00 | - |")
    for w, seconds in sorted(wall.items()):
        print(f"| {w} worker(s) | {C:,} | {setup[w]:.1f} | {seconds:.2f} | {pairs / seconds:,.0f} | "
              f"{2 * pairs / seconds:,.0f} | {single / seconds:.2f} | {wall[1] / seconds:.2f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", choices=("shigella", "chr20"), default="shigella")
    p.add_argument("--reads", type=int, default=20_000, help="reads simulated for --set chr20")
    p.add_argument("--chunk-reads", type=int, default=2_000)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--project-reads", type=float, default=900e6)
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--out", help="keep the index, reads and SAM files here")
    p.add_argument("--paired", action="store_true", help="the Shigella R1/R2 read pairs (--pe) instead")
    args = p.parse_args()
    if 1 not in args.workers:
        p.error("--workers must include 1 (the speed-up and the overheads are measured against it)")
    if args.paired and args.set != "shigella":
        p.error("--paired maps the Shigella R1/R2 pairs (--set shigella)")
    if args.paired:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(args.out or tmp)
            work.mkdir(parents=True, exist_ok=True)
            return bench_paired(args, work)
    C, small = args.chunk_reads, max(args.chunk_reads // 10, 1)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.out or tmp)
        work.mkdir(parents=True, exist_ok=True)
        name, genome, reads, n_reads, e = inputs(args, work)
        base = MapOptions(str(genome), str(reads), e=e, device=args.device, index_dir=str(work / "idx"),
                          output=str(work / "single.sam"), quiet=True)
        tiny = replace(base, reads=str(first_reads(reads, small, work / "tiny.fq")), output=str(work / "tiny.sam"))
        single = {c: fastest(args.repeat, base, batch_size=c) for c in (C, small)}
        single_tiny = fastest(args.repeat, tiny)
        expected = body(work / "single.sam")
        wall, setup = {}, {}
        for w, client in clusters(args.workers, setup):
            address = client.scheduler.address
            for c in (C, small) if w == 1 else (C,):
                sam = work / f"w{w}_c{c}.sam"
                wall[w, c] = fastest(args.repeat, base, scheduler=address, chunk_reads=c, output=str(sam))
                assert body(sam) == expected, f"{w} workers, chunks of {c}: the SAM differs"
            if w == 1:
                wall_tiny = fastest(args.repeat, tiny, scheduler=address, chunk_reads=small)
        chunks = {c: -(-n_reads // c) for c in (C, small)}
        extra = {c: wall[1, c] - single[c] for c in (C, small)}
        overhead = (extra[small] - extra[C]) / (chunks[small] - chunks[C])
        fixed = wall_tiny - single_tiny - overhead
        per_read = (extra[C] - fixed - chunks[C] * overhead) / n_reads
        r_client = 1 / min(client_seconds_per_read(reads, C, work / "single.sam", work / "scratch.sam")
                           for _ in range(args.repeat))

    print(f"{name}: {n_reads:,} reads, --device {args.device}, {os.cpu_count()} cores, fastest of {args.repeat}; "
          f"every distributed SAM equals the single-process SAM (the @PG line aside)\n")
    print("| run | chunk reads | cluster start s | wall s | reads/s | speed-up over 1 worker | efficiency |")
    print("|---|---|---|---|---|---|---|")
    for c in (C, small):
        print(f"| single process | {c:,} (batch) | - | {single[c]:.2f} | {n_reads / single[c]:,.0f} | - | - |")
    for (w, c), seconds in sorted(wall.items()):
        speedup = wall[1, c] / seconds
        print(f"| {w} worker(s) | {c:,} | {setup[w]:.1f} | {seconds:.2f} | {n_reads / seconds:,.0f} | "
              f"{speedup:.2f} | {speedup / w:.0%} |")
    print(f"\nT_1worker - T_single: {extra[C]:.2f} s with {chunks[C]} chunks, {extra[small]:.2f} s with "
          f"{chunks[small]} chunks, {wall_tiny - single_tiny:.2f} s for {small:,} reads in one chunk -> "
          f"per-chunk overhead o = {overhead * 1e3:.1f} ms, fixed cost F0 = {fixed:.2f} s, "
          f"per read d = {per_read * 1e6:.1f} us")
    print(f"client ceiling R_client = {r_client:,.0f} reads/s (parse + pickle {C:,}-read chunks, write the SAM)")
    t_setup = max(setup.values())
    n = args.project_reads
    print(f"\nprojection for {n:,.0f} reads in chunks of {PROJECT_CHUNK:,}: "
          f"T(G) = T_setup + F0 + N max((1/r + o/C + d)/G, 1/R_client + d), T_setup = {t_setup:.1f} s")
    print("| set | per-GPU rate r (H100, end to end) | GPUs | workers' bound h | client bound h | projected h |")
    print("|---|---|---|---|---|---|")
    for set_name, rate in GPU_RATES.items():
        for g in (8, 64):
            d = max(per_read, 0)
            workers_h = n * (1 / rate + max(overhead, 0) / PROJECT_CHUNK + d) / g / 3600
            client_h = n * (1 / r_client + d) / 3600
            print(f"| {set_name} | {rate:,} | {g} | {workers_h:.2f} | {client_h:.2f} | "
                  f"{(t_setup + fixed) / 3600 + max(workers_h, client_h):.2f} |")


if __name__ == "__main__":
    sys.exit(main())
