#!/usr/bin/env python3
"""Multi-GPU scaling of `gkmap filter --gpus N` and `gkmap map --gpus N` (issue #22; the paper's Tables
S.21-S.23), every number measured in this run, on one host with several GPUs (or, with --device cpu, local
CPU workers at toy size: a check of the script, not a measurement).

    scripts/bench_multigpu.py [--gpus 1 2 3 4] [--map-gpus 1 2 4] [--parts map filter-memory filter-file proxy]
                              [--filter-pairs 1e8] [--map-reads 1e7] [--proxy-gbp 1.0] [--proxy-reads 1e6]
                              [--deadline-s 450] [--work /dev/shm/gk-multigpu] [--json OUT.json] [--device cuda]

Parts, in this order (each row printed as it is measured; a part that would run past --deadline-s is cut
down or skipped and says so, so that a run inside a lease keeps what it measured):
  map            chr20 (shared data), --map-reads reads of 100 bp simulated with the CONVENTIONS.md model
                 (seed 11, drawn on all cores), e = 5: the single process, then `--gpus N` for --map-gpus;
                 whole command (python -m mapper map) wall time and reads/s, speed-up over the single
                 process, the SAM's md5 without its @PG line (identical to the single process's or not),
                 the run's per-stage seconds and each worker's (the cluster's summary line). On the first
                 1,000,000 reads also the single process and the chunk path (`--chunk-reads 100000`, the
                 client streams every read and SAM text: what `--gpus` ran before issue #22) at 1 and the
                 largest N, for the before/after.
  filter-memory  pairs held in memory, one process per GPU, each filtering its 1/N share of the pairs at
                 once (a barrier starts them together): kernel time = the slowest GPU's filter kernels
                 (CUDA events), filter time = first start to last end; M filtrations/s = pairs / time, as
                 the paper counts them. Ways in: packed (2-bit words in pinned memory, the kernel
                 throughput), device (ASCII rows encoded on the GPU), host (numpy encodes; fewer pairs:
                 its host packing costs microseconds a pair).
  filter-file    `gkmap filter --gpus N` on a pairs file of --filter-pairs real 100 bp pairs at e = 2 (the
                 shared ERR240727_1 pairs repeated) and of 150 bp / e = 4 (Shigella) and 250 bp / e = 8
                 (bench_filter.py's real model) pairs, built in --work (a tmpfs: page-cache reading): the
                 command's own filter and kernel seconds, wall time, and the rate at which the file's
                 bytes can be read into memory (the bound from a file); outputs compared across N.
  proxy          a genome proxy of --proxy-gbp Gbp (chr20 plus diverged copies: 5 % substitutions each,
                 N runs kept, seed 11), indexed on the GPU, and --proxy-reads reads simulated from all
                 copies: single process and `--gpus N` as for chr20.
Filter rows use the published program's decisions (`--filter gatekeeper-faithful`), the filter the paper scaled.
Reuses: bench_filter.py (pairs, packing, timing), paper/throughput.py (the pairs of each length).
"""
import argparse
import hashlib
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path[:0] = [str(SCRIPTS), str(ROOT)]

from bench_filter import pack_pinned, run_one, run_packed, write_text  # noqa: E402
from paper.common import Context  # noqa: E402
from paper.throughput import pairs_of_length  # noqa: E402

FILTER_SETS = ((100, 2), (150, 4), (250, 8))          # the paper's Tables S.21, S.22, S.23
FILTER_MODE = "faithful"
FILE_PAIRS = {100: 1.0, 150: 0.4, 250: 0.2}           # pairs-file sizes as fractions of --filter-pairs
MEMORY_PAIRS = {"packed": 1 << 25, "device": 1 << 25, "host": 1 << 20}  # pairs held in memory, at 100 bp
CHUNK_READS = 100_000
DIVERGENCE = 0.05
CHR20 = "genomes/human_GRCh37_chr20.fa.gz"


def log(message):
    print(message, flush=True)


class Clock:
    """The run's deadline: parts ask how much time is left before they start something long."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


# ------------------------------------------------------------------------------------------- helpers

def gkmap(*args, env=None):
    """Run `python -m mapper ARGS` (the whole command, as a user runs it): (wall seconds, stderr)."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mapper", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"gkmap {' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, done.stderr


def sam_md5(path):
    """md5 of a SAM file without its @PG line(s): the records and the rest of the header."""
    digest = hashlib.md5()
    with open(path, "rb") as f:
        while (line := f.readline()).startswith(b"@"):
            if not line.startswith(b"@PG"):
                digest.update(line)
        digest.update(line)
        while block := f.read(1 << 26):
            digest.update(block)
    return digest.hexdigest()


def file_md5(path):
    digest = hashlib.md5()
    with open(path, "rb") as f:
        while block := f.read(1 << 26):
            digest.update(block)
    return digest.hexdigest()


def cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# ------------------------------------------------------------------------------------- simulated reads

def _simulate_part(task):
    """One process's share of the reads: (FASTQ path, its reads' global starts, first read number, seed)."""
    from mapper.index import open_index
    from mapper.simulate import simulate_at, write_fastq
    genome, index_dir, length, path, starts, first, seed = task
    reference = open_index(genome, None, index_dir).reference
    labels = [f"sim{first + i}" for i in range(len(starts))]
    reads = simulate_at(reference, starts, length, np.random.default_rng([seed, first]), labels)
    with open(path, "w") as out:
        write_fastq(reads, out)
    return path


def simulate_reads(genome, index_dir, n, length, path, seed=11):
    """n reads of `length` bp simulated on `genome` (CONVENTIONS.md model via mapper.simulate), drawn from
    every contig alike: starts are N-free windows of the first contig moved to a random contig (the proxy's
    copies keep chr20's N runs; chr20 has one contig). Cut into parts simulated on all cores (the model is
    a Python loop, ~10 us a read); the same reads for a seed and n, whatever the cores."""
    from mapper.index import open_index
    from mapper.simulate import draw_starts
    reference = open_index(str(genome), None, str(index_dir)).reference
    first = SimpleNamespace(codes=reference.codes[:reference.ends[0]], starts=reference.starts[:1],
                            ends=reference.ends[:1])
    rng = np.random.default_rng(seed)
    starts = draw_starts(first, length + 2, n, rng) + \
        np.asarray(reference.starts)[rng.integers(0, len(reference.starts), size=n)]
    parts = max(1, min(64, -(-n // 50_000)))
    bounds = [n * i // parts for i in range(parts + 1)]
    tasks = [(str(genome), str(index_dir), length, f"{path}.part{i}", starts[a:b], a, seed)
             for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
    with multiprocessing.get_context("spawn").Pool(min(cores(), parts)) as pool:
        done = pool.map(_simulate_part, tasks)
    with open(path, "wb") as out:
        for part in done:
            with open(part, "rb") as f:
                os.sendfile(out.fileno(), f.fileno(), 0, os.path.getsize(part))
            os.unlink(part)
    return path


def head_reads(src, n, dst):
    """The first n FASTQ records of src (4 lines each) into dst."""
    with open(src, "rb") as f, open(dst, "wb") as out:
        for _ in range(4 * n):
            line = f.readline()
            if not line:
                break
            out.write(line)
    return dst


# ------------------------------------------------------------------------------------------------ map

SUMMARY = re.compile(r"gkmap: (\d+) reads: .*?; ([\d.]+) s, ([\d,]+) reads/s .*?seconds per stage: (.*)$", re.M)
WORKERS = re.compile(r"cluster: seconds per stage on each worker: (.*)$", re.M)
TIMELINE = re.compile(r"cluster: timeline, seconds from the start: (.*)$", re.M)
LAYOUT = re.compile(r"cluster: (\d+ (?:shares|chunks)) .*?(?:shares|chunks) per worker: ([^;]+);", re.M)


def parse_map(stderr):
    """The run's own figures from its summary lines: reads, seconds, per-stage seconds (summed over
    workers), each worker's per-stage seconds, how the work was cut."""
    found = SUMMARY.search(stderr)
    if not found:
        raise RuntimeError(f"no summary line in:\n{stderr[-2000:]}")
    stages = {k: float(v) for k, v in (item.rsplit(" ", 1) for item in found.group(4).split(", "))}
    workers = WORKERS.search(stderr)
    layout = LAYOUT.search(stderr)
    timeline = TIMELINE.search(stderr)
    return dict(timeline=timeline.group(1) if timeline else "", reads=int(found.group(1)), own_s=float(found.group(2)), stages=stages,
                per_worker=workers.group(1) if workers else "", layout=f"{layout.group(1)}: {layout.group(2)}"
                if layout else "")


def map_set(name, genome, index_dir, reads, n_reads, gpus, args, add, clock, subset=None):
    """Single process, then --gpus N for each N (cpu: --local-cluster N): rows added; the SAMs' md5s are
    compared with the single process's once all ran (hashed in parallel, outside the timed runs)."""
    work = Path(args.work)
    where = ["--device", "cpu"] if args.device == "cpu" else ["--device", "cuda"]
    base = ["map", "-e", 5, "--index", index_dir, *where]
    runs = [("single process", 0, [])]
    for n in gpus:
        runs.append((f"--gpus {n}", n, ["--gpus", n] if args.device != "cpu" else ["--local-cluster", n]))
    if subset:
        chunked = lambda n: ["--chunk-reads", CHUNK_READS, "-t", max(1, cores() // n - 1)]
        runs += [(f"--gpus {n} (chunk path)", n, (["--gpus", n] if args.device != "cpu" else ["--local-cluster", n])
                  + chunked(n)) for n in sorted({gpus[0], gpus[-1]})]
    rows, sams = [], {}
    for label, n, extra in runs:
        for what, path, count in ((("all", reads, n_reads),) if "chunk" not in label else ()) + \
                ((("subset", subset, args.subset_reads),) if subset and (label == "single process" or "chunk" in label) else ()):
            if clock.left() < (count / 2e5 + 20 if n == 0 else count / 4e5 + 20):
                log(f"# {name} {label} on {count:,} reads: skipped, {clock.left():.0f} s left")
                continue
            sam = work / f"{name}.{what}.{label.replace(' ', '_').replace('(', '').replace(')', '')}.sam"
            wall, err = gkmap(*base, "-o", sam, *extra, genome, path)
            own = parse_map(err)
            row = dict(part="map", set=name, reads=count, run=label, n_gpus=n, wall_s=round(wall, 2),
                       reads_per_s=round(count / wall), gkmap_own_s=own["own_s"],
                       **{f"{k}_s": round(v, 2) for k, v in own["stages"].items()},
                       layout=own["layout"], per_worker=own["per_worker"], timeline=own["timeline"])
            rows.append(row)
            sams[(what, label)] = sam
            log(f"# {name} {label} ({count:,} reads): {wall:.2f} s whole command, {count / wall:,.0f} reads/s; "
                f"{own['layout']}; stages {own['stages']}; per worker: {own['per_worker']}; timeline: {own['timeline']}")
    with ThreadPoolExecutor(8) as pool:
        digests = dict(zip(sams, pool.map(sam_md5, sams.values())))
    for (what, label), sam in sams.items():
        sam.unlink()
    for row, key in zip(rows, sams):
        single_key = (key[0], "single process")
        single = next(r for r in rows if r["run"] == "single process" and r["reads"] == row["reads"])
        row.update(speedup_vs_single=round(single["wall_s"] / row["wall_s"], 3),
                   efficiency_vs_single=round(single["wall_s"] / row["wall_s"] / max(row["n_gpus"], 1), 3),
                   sam_md5=digests[key], sam_identical_to_single=digests[key] == digests.get(single_key))
        add(row)


def part_map(args, add, clock):
    from mapper.index import build_index
    genome = Path(args.data) / CHR20
    work = Path(args.work)
    index_dir = work / "chr20.gkx"
    t0 = time.perf_counter()
    if not index_dir.exists():
        build_index(genome, 12, index_dir, "cuda" if args.device != "cpu" else "cpu")
    reads = work / f"chr20_sim100_n{args.map_reads}.fq"
    if not reads.exists():
        simulate_reads(genome, index_dir, args.map_reads, 100, reads)
    subset = head_reads(reads, args.subset_reads, work / "chr20_sim100_subset.fq") \
        if args.map_reads > args.subset_reads else None
    log(f"# chr20: index and {args.map_reads:,} simulated reads in {time.perf_counter() - t0:.1f} s")
    map_set("chr20", genome, index_dir, reads, args.map_reads, args.map_gpus, args, add, clock, subset)


def proxy_fasta(args, path):
    """chr20 and diverged copies of it (DIVERGENCE substitutions at its A/C/G/T bases, N runs kept),
    --proxy-gbp Gbp in all, as FASTA; the copies are drawn from one seeded generator."""
    from mapper.alphabet import READ_ASCII
    from mapper.index import open_index
    chr20 = open_index(str(Path(args.data) / CHR20), None, str(Path(args.work) / "chr20.gkx")).reference
    codes = np.asarray(chr20.codes[:chr20.ends[0]])
    copies = max(1, round(args.proxy_gbp * 1e9 / len(codes)))
    rng = np.random.default_rng(11)
    width = 100
    with open(path, "wb") as out:
        for c in range(copies):
            copy = codes.copy()
            if c:
                hit = (rng.random(len(copy)) < DIVERGENCE) & (copy < 4)
                copy[hit] = (copy[hit] + rng.integers(1, 4, size=int(hit.sum()), dtype=np.uint8)) % 4
            text = READ_ASCII[copy]
            full = len(text) // width * width
            lines = np.empty((full // width, width + 1), dtype=np.uint8)
            lines[:, :width], lines[:, width] = text[:full].reshape(-1, width), 10
            out.write(f">copy{c}\n".encode())
            out.write(lines.tobytes())
            if full < len(text):
                out.write(text[full:].tobytes() + b"\n")
    return copies * len(codes)


def part_proxy(args, add, clock):
    from mapper.index import build_index
    work = Path(args.work)
    fasta, index_dir = work / "proxy.fa", work / "proxy.gkx"
    fits = (clock.left() - 90) / 100   # Gbp that fit: about 40 s a Gbp to write and index, 4 runs after
    if fits < args.proxy_gbp:
        log(f"# proxy: {clock.left():.0f} s left: {max(fits, 0):.2f} Gbp instead of {args.proxy_gbp}")
        if fits < 0.1:
            return
        args.proxy_gbp = fits
    t0 = time.perf_counter()
    bases = proxy_fasta(args, fasta)
    t1 = time.perf_counter()
    build_index(fasta, 12, index_dir, "cuda" if args.device != "cpu" else "cpu")
    t2 = time.perf_counter()
    reads = simulate_reads(fasta, index_dir, args.proxy_reads, 100, work / "proxy_sim100.fq")
    log(f"# proxy: {bases / 1e9:.2f} Gbp written in {t1 - t0:.1f} s, indexed in {t2 - t1:.1f} s, "
        f"{args.proxy_reads:,} reads in {time.perf_counter() - t2:.1f} s")
    map_set(f"proxy {bases / 1e9:.2f} Gbp", fasta, index_dir, reads, args.proxy_reads, args.map_gpus, args,
            lambda row: add(dict(row, genome_bases=bases)), clock)


# ------------------------------------------------------------------------------------ filter in memory

def _share(total, n, rank):
    return total * (rank + 1) // n - total * rank // n


def _memory_worker(rank, n, device, data, sets, barrier, results):
    """One GPU's process: for each (length, e, way) its share of the pairs, warmed up, then filtered once
    when every process is ready (barrier); (times, counts) to `results`."""
    if device != "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)
    from mapper.filters.gatekeeper import backend
    gk = backend(device)
    ctx = Context(out=Path("."), work=Path("."), data=Path(data), quick=False, device=device)
    try:
        for length, e, way, total in sets:
            count = _share(total, n, rank)
            segments, reads, _ = pairs_of_length(ctx, length, count if way != "packed" else min(count, 1 << 16))
            if way == "packed":
                packed = pack_pinned(gk, segments, reads, count)
                out = gk.pinned(count, np.uint8), gk.pinned(count, np.int16)
                run = lambda: run_packed(gk, FILTER_MODE, packed, length, e, out)
                run()
            else:
                run = lambda: run_one(gk, FILTER_MODE, way, segments, reads, e)
                run_one(gk, FILTER_MODE, way, segments[:1024], reads[:1024], e)
            barrier.wait()
            start = time.monotonic()
            kernel, _ = run()
            results.put(dict(rank=rank, read_length=length, E=e, way=way, pairs=count, kernel_s=kernel,
                             start=start, end=time.monotonic()))
            del segments, reads, run
            packed = out = None
    except BaseException as error:  # the parent reports it; the barrier lets the others go on
        barrier.abort()
        results.put(dict(rank=rank, error=repr(error)))


def part_filter_memory(args, add, clock):
    ways = ("packed", "device", "host") if args.device != "cpu" else ("host",)
    scale = args.memory_scale
    sets = [(length, e, way, max(1 << 12, int(MEMORY_PAIRS[way] * scale * 100 / length)))
            for length, e in FILTER_SETS for way in ways]
    context = multiprocessing.get_context("spawn")
    for n in args.gpus:
        if clock.left() < 40:
            log(f"# filter-memory --gpus {n}: skipped, {clock.left():.0f} s left")
            continue
        barrier, results = context.Barrier(n), context.Queue()
        procs = [context.Process(target=_memory_worker, args=(rank, n, args.device, args.data, sets, barrier,
                                                                results)) for rank in range(n)]
        for p in procs:
            p.start()
        got = [results.get() for _ in range(n * len(sets))]
        for p in procs:
            p.join()
        errors = [g for g in got if "error" in g]
        if errors:
            log(f"# filter-memory --gpus {n} failed: {errors[0]}")
            continue
        for length, e, way, total in sets:
            mine = [g for g in got if (g["read_length"], g["E"], g["way"]) == (length, e, way)]
            kernel = max(g["kernel_s"] for g in mine)
            wall = max(g["end"] for g in mine) - min(g["start"] for g in mine)
            row = dict(part="filter-memory", read_length=length, E=e, mode=FILTER_MODE, way=way, n_gpus=n,
                       pairs=total, kernel_s=round(kernel, 6), filter_s=round(wall, 6),
                       kernel_mpairs_per_s=round(total / kernel / 1e6, 2),
                       filter_mpairs_per_s=round(total / wall / 1e6, 2))
            add(row)
            log(f"# filter-memory {length} bp e={e} {way} --gpus {n}: kernel {row['kernel_mpairs_per_s']} M/s, "
                f"filter {row['filter_mpairs_per_s']} M/s ({total:,} pairs)")


# -------------------------------------------------------------------------------------- filter file

def read_rate(path, threads):
    """GB/s at which `threads` threads read the file into memory (gkmap filter's reader, _text.read_range)."""
    from mapper.filters._text import read_range
    buffer = np.empty(1 << 28, dtype=np.uint8)
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    with ThreadPoolExecutor(threads) as pool:
        t0 = time.perf_counter()
        for offset in range(0, size, len(buffer)):
            read_range(fd, pool, threads, memoryview(buffer)[:min(len(buffer), size - offset)], offset)
        seconds = time.perf_counter() - t0
    os.close(fd)
    return size / seconds / 1e9


FILTER_LINE = re.compile(r"filter ([\d.]+) s end to end .*?kernel ([\d.]+) s, reading ([\d.]+) s")


def part_filter_file(args, add, clock):
    work = Path(args.work)
    ctx = Context(out=work, work=work, data=Path(args.data), quick=False, device=args.device)
    for length, e in FILTER_SETS:
        count = int(args.filter_pairs * FILE_PAIRS[length])
        line_bytes = 2 * length + 2
        if clock.left() < count * line_bytes / 2e9 + 15 * len(args.gpus):
            log(f"# filter-file {length} bp: skipped, {clock.left():.0f} s left")
            continue
        segments, reads, origin = pairs_of_length(ctx, length, 1 << 16)
        path = work / f"pairs_L{length}.txt"
        t0 = time.perf_counter()
        write_text(path, segments, reads, count)
        gb = os.path.getsize(path) / 1e9
        rates = {t: read_rate(path, t) for t in (16, 64)}
        log(f"# filter-file {length} bp: {count:,} pairs ({gb:.1f} GB) written in {time.perf_counter() - t0:.1f} s; "
            f"read into memory at {', '.join(f'{r:.1f} GB/s ({t} threads)' for t, r in rates.items())}")
        best = max(rates.values())
        first_md5 = None
        for n in args.gpus:
            out = work / f"pairs_L{length}.out"
            where = ["--device", "cuda", "--gpus", n] if args.device != "cpu" else ["--device", "cpu"]
            wall, err = gkmap("filter", path, "-e", e, "--filter", "gatekeeper-faithful", *where, "-o", out)
            found = FILTER_LINE.search(err)
            filter_s, kernel_s, read_s = map(float, found.groups()) if found else (wall, float("nan"), float("nan"))
            digest = file_md5(out)
            out.unlink()
            first_md5 = first_md5 or digest
            row = dict(part="filter-file", read_length=length, E=e, mode=FILTER_MODE, way="device (file)",
                       n_gpus=n, pairs=count, pairs_from=origin, file_gb=round(gb, 2), wall_s=round(wall, 3),
                       filter_s=filter_s, kernel_s=kernel_s, read_s=read_s,
                       filter_mpairs_per_s=round(count / filter_s / 1e6, 2),
                       kernel_mpairs_per_s=round(count / kernel_s / 1e6, 2) if kernel_s == kernel_s and kernel_s
                       else None, command_mpairs_per_s=round(count / wall / 1e6, 2),
                       file_read_gb_per_s=round(best, 2), file_read_mpairs_per_s=round(best * 1e9 / line_bytes / 1e6, 1),
                       output_md5=digest, output_same_as_first=digest == first_md5)
            add(row)
            log(f"# filter-file {length} bp e={e} --gpus {n}: filter {row['filter_mpairs_per_s']} M/s "
                f"(file read bound {row['file_read_mpairs_per_s']} M/s), kernel {row['kernel_mpairs_per_s']} M/s, "
                f"whole command {wall:.2f} s")
            if args.device == "cpu":
                break
        path.unlink()


# ------------------------------------------------------------------------------------------------ main

PARTS = {"map": part_map, "filter-memory": part_filter_memory, "filter-file": part_filter_file, "proxy": part_proxy}


def measure(args, add):
    """Run the chosen parts in order, calling add(row) for each measured row."""
    Path(args.work).mkdir(parents=True, exist_ok=True)
    clock = Clock(args.deadline_s)
    for name in args.parts:
        if clock.left() < 30:
            log(f"# part {name}: skipped, {clock.left():.0f} s left")
            continue
        t0 = time.perf_counter()
        try:
            PARTS[name](args, add, clock)
        except Exception as error:  # one part's failure leaves the others' rows
            log(f"# part {name} FAILED: {type(error).__name__}: {error}")
        log(f"# part {name}: {time.perf_counter() - t0:.1f} s")


def table(rows):
    """The printed summary: one line per row, grouped by part."""
    lines = []
    for part in ("map", "filter-memory", "filter-file"):
        mine = [r for r in rows if r["part"] == part]
        if not mine:
            continue
        if part == "map":
            lines += ["| set | reads | run | wall s | reads/s | x single | eff. | SAM = single |", "|---|---|---|---|---|---|---|---|"]
            lines += [f"| {r['set']} | {r['reads']:,} | {r['run']} | {r['wall_s']} | {r['reads_per_s']:,} | "
                      f"{r['speedup_vs_single']} | {r['efficiency_vs_single']} | {r['sam_identical_to_single']} |"
                      for r in mine]
        else:
            lines += [f"| {part} | L | e | way | GPUs | pairs | kernel M/s | filter M/s | x 1 GPU (kernel) |",
                      "|---|---|---|---|---|---|---|---|---|"]
            for r in mine:
                one = next((o for o in mine if o["n_gpus"] == 1 and (o["read_length"], o["way"]) ==
                            (r["read_length"], r["way"])), None)
                speedup = round(r["kernel_mpairs_per_s"] / one["kernel_mpairs_per_s"], 2) \
                    if one and r["kernel_mpairs_per_s"] and one["kernel_mpairs_per_s"] else ""
                lines.append(f"| | {r['read_length']} | {r['E']} | {r['way']} | {r['n_gpus']} | {r['pairs']:,} | "
                             f"{r['kernel_mpairs_per_s']} | {r['filter_mpairs_per_s']} | {speedup} |")
        lines.append("")
    return "\n".join(lines)


def parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", type=int, nargs="+", default=[1, 2, 3, 4], help="GPU counts of the filter parts")
    p.add_argument("--map-gpus", type=int, nargs="+", default=[1, 2, 4], help="GPU counts of the map parts")
    p.add_argument("--parts", nargs="+", choices=tuple(PARTS), default=list(PARTS))
    p.add_argument("--filter-pairs", type=float, default=1e8, help="pairs of the 100 bp file (150 bp: 0.4x, 250: 0.2x)")
    p.add_argument("--memory-scale", type=float, default=1.0, help="scales the in-memory pair counts")
    p.add_argument("--map-reads", type=float, default=1e7)
    p.add_argument("--subset-reads", type=float, default=1e6, help="reads of the chunk-path (before/after) rows")
    p.add_argument("--proxy-gbp", type=float, default=1.0)
    p.add_argument("--proxy-reads", type=float, default=1e6)
    p.add_argument("--deadline-s", type=float, default=450)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--data", default=os.environ.get("GKMAP_SHARED_DATA") or str(ROOT.parent / "shared" / "data"))
    p.add_argument("--work", default="/dev/shm/gk-multigpu" if os.path.isdir("/dev/shm") else "/tmp/gk-multigpu")
    p.add_argument("--json", help="write the rows here too")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    args.map_reads, args.proxy_reads, args.subset_reads = map(int, (args.map_reads, args.proxy_reads, args.subset_reads))
    rows = []

    def add(row):
        rows.append(row)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    measure(args, add)
    print(table(rows))


if __name__ == "__main__":
    sys.exit(main())
