#!/usr/bin/env python3
"""Whole-genome benchmark (issue 17, deliverable 5): the genome proxies of scripts/genome_proxy.py, indexed
and mapped the way users run gkmap, with razers3 (full sensitivity) as the oracle, every number from this run.

    scripts/bench_genome.py [--gbp 3.1] [--recipes human,copies48] [--reads 1000000] [--razers-reads 20000]
        [--pathological 1000] [--razers-pathological 0] [--gpu-memory 20G] [--device cuda] [-e 5] [-t 15]
        [--against TREE] [--work DIR]

For each recipe (`human`: chr20 copies with a SINE family, microsatellites and chromosome-like contigs;
`copies48`: chr20 and 48 copies 1-15 % diverged, the issue's duplication-heavy proxy):
1. the proxy FASTA, --reads reads simulated from the whole proxy and --pathological repeat reads
   (genome_proxy.build; with --work, a proxy built earlier with the same settings is reused);
2. `gkmap index --device D`: seconds, peak host RSS and peak GPU memory, index size and bytes a base;
3. `gkmap map -e E --device D -t T` on the reads, as a user runs it (a fresh process, FASTQ to SAM), after
   an untimed run of the first WARM_UP_READS reads has compiled the kernels into their cache: whole
   command seconds and reads/s; from the run summary it logs: index load seconds, steady-state reads/s
   (the run's seconds less the load), seconds per stage, seed hits, candidate windows, verified windows
   and loci per read; peak RSS of the main process and summed over its process tree (RSS counts shared
   copy-on-write pages once per process), peak GPU memory (NVML: device-wide, less what was in use
   before the command; bench_scale.GpuMemory);
4. with --gpu-memory, the same run within that budget, and whether its SAM is the default run's;
5. razers3 (-tc 16, -rr 100 -i 95: every locus within 5 edits of a 100 bp read, -m 1000000 so no locus is
   cut) on the first --razers-reads reads (the reads file is in random contig order, so its head samples
   the whole proxy): its reads/s, and the razers3 loci that gkmap's SAM of step 3 has no record for whose
   end lies within e on the same contig and strand ("lost"; must be 0);
6. the pathological reads mapped on their own (step 3's numbers), and razers3 on the first
   --razers-pathological of them (off by default: razers3 may take minutes on them at genome scale);
7. with --against TREE (another checkout, e.g. a `git worktree` of an earlier commit: its mapper/ and
   kernels/), each map run of steps 3 and 6 again from that tree, right after this tree's, with the ratio
   of the whole commands and whether the SAMs are equal (@PG aside): an A/B on the same proxy and index.
Stage seconds are wall seconds except align and output, which are CPU seconds summed over the -t render
processes (the run summary's convention). The report is printed as Markdown tables.
Run time at 3.1 Gbp on one H100 host: `copies48` (issue 17's figures at 0faf558) ~75 s for proxy and
reads, ~85 s index build, ~40 s per run of 1M reads, ~100 s for 1,000 pathological reads, razers3 ~94
reads/s. `human` as measured at 0011c3a: proxy 47 s, index 100 s, 200,000 reads in 19 s (~11,000 reads/s
whole command; its SINE-family reads have ~61 loci each), so ~110 s for 1M reads. A call too short for a whole
recipe can be split on one machine: a first call with --work DIR --keep-index builds the proxy and the index
(reused by the next call with the same settings: the index row is the first call's) and every map run is
printed as it ends. Otherwise the index and SAM files of a recipe are removed once it is measured (a 3.1 Gbp
proxy needs ~13 GB of index and ~5 GB per SAM of 1M reads), the proxies only with a temporary work folder.
"""
import argparse
import bisect
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import psutil

import genome_proxy
from bench_cuda import head
from bench_scale import GpuMemory, same_sam

CIGAR_REF = re.compile(r"(\d+)[MDN=X]")


class HostMemory:
    """Peak RSS of a process and of its whole tree (children summed in), sampled every 0.1 s while it runs."""

    def __init__(self, pid):
        self.main = self.tree = 0
        self._process, self._stop = psutil.Process(pid), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        while not self._stop.wait(0.1):
            try:
                main = self._process.memory_info().rss
                tree = main + sum(c.memory_info().rss for c in self._process.children(recursive=True))
            except psutil.Error:  # the process (or a child) ended between listing and reading
                continue
            self.main, self.tree = max(self.main, main), max(self.tree, tree)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self


def measured(command, tree=None):
    """Run a command (from checkout `tree` where given: its folder, on PYTHONPATH); (seconds, stderr text,
    HostMemory, GpuMemory). A failure stops the benchmark with its stderr."""
    env = None if tree is None else dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tree)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    with GpuMemory() as gpu:
        t = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tree,
                                   env=env)
        host = HostMemory(process.pid)
        stderr = process.communicate()[1]
        seconds = time.perf_counter() - t
        host.stop()
    if process.returncode:
        sys.exit(f"failed ({process.returncode}): {' '.join(map(str, command))}\n{stderr}")
    return seconds, stderr, host, gpu


def gib(n):
    return f"{n / 2**30:.2f} GiB"


def summary_numbers(stderr):
    """The run summary gkmap logs (pipeline.Counters.summary) as numbers; fields it does not print are absent."""
    line = next((l for l in stderr.splitlines() if "seconds per stage:" in l), "")
    fields = {key: int(m.group(1)) for key, pattern in (
        ("reads", r"(\d+) reads:"), ("loci", r"\((\d+) loci"), ("windows", r"(\d+) candidate windows"),
        ("hits", r"(\d+) seed hits"), ("verified", r"(\d+) verified"))
        if (m := re.search(pattern, line))}
    if m := re.search(r"; ([\d.]+) s, ", line):
        fields["seconds"] = float(m.group(1))
    stages = line.split("seconds per stage:", 1)[-1]
    fields["stages"] = {k: float(v) for k, v in re.findall(r"(\w+) ([\d.]+)", stages)}
    return fields


def gkmap(*args):
    return [sys.executable, "-m", "mapper", *map(str, args)]


def map_run(label, genome, reads, sam, args, budget=None, tree=None):
    """`gkmap map` as a user runs it (from checkout `tree` where given): one row of the mapping table."""
    extra = ["--gpu-memory", budget] if budget else []
    seconds, stderr, host, gpu = measured(gkmap("map", "-e", args.e, "--device", args.device, "-t", args.threads,
                                                *extra, "-o", Path(sam).resolve(), Path(genome).resolve(),
                                                Path(reads).resolve()), tree)
    s = summary_numbers(stderr)
    print(f"{label}: {seconds:.1f} s; {next((l for l in stderr.splitlines() if 'seconds per stage:' in l), '')}",
          file=sys.stderr, flush=True)  # each run as it ends: a call cut short still shows the runs it made
    n = s.get("reads", 0)
    per = lambda key: f"{s[key] / n:,.1f}" if key in s and n else "?"
    load = s["stages"].get("load", 0.0)
    steady = n / (s["seconds"] - load) if "seconds" in s and s["seconds"] > load else 0.0
    return dict(run=label, reads=f"{n:,}", whole_s=f"{seconds:.1f}", whole_rate=f"{n / seconds:,.0f}",
                load_s=f"{load:.1f}", steady_rate=f"{steady:,.0f}", hits=per("hits"), windows=per("windows"),
                verified=per("verified"), loci=per("loci"),
                stages=" ".join(f"{k} {v:.1f}" for k, v in s["stages"].items()),
                rss=f"{gib(host.main)} / {gib(host.tree)}", gpu=str(gpu) if args.device == "cuda" else "-", lost="",
                seconds=seconds)


WARM_UP_READS = 2000


def warm_up(genome, reads, args, tree=None):
    """An untimed `gkmap map` of a few reads, so that the kernels of the timed runs come from the compiled
    cache (a fresh GPU machine compiles them first: ~2-7 s a kernel source, which the first timed run would
    otherwise carry in its whole-command seconds; the run summary's `compile` stage says how much)."""
    seconds, stderr, _, _ = measured(gkmap("map", "-e", args.e, "--device", args.device, "-t", args.threads,
                                           "-o", os.devnull, Path(genome).resolve(), Path(reads).resolve()), tree)
    compiled = summary_numbers(stderr)["stages"].get("compile", 0.0)
    print(f"warm-up: {seconds:.1f} s, kernels compiled in {compiled:.1f} s", file=sys.stderr, flush=True)


def sam_ends(path, names=None):
    """{(read, contig, reverse): sorted ends} of a SAM's mapped records; with `names`, only the records of
    those reads at the file's start (records come in input order: reading stops at the first other read)."""
    ends = defaultdict(list)
    with open(path) as f:
        for line in f:
            if line.startswith("@"):
                continue
            qname, flag, rname, pos, _, cigar = line.split("\t", 6)[:6]
            if names is not None and qname not in names:
                break
            flag = int(flag)
            if flag & 4:
                continue
            end = int(pos) - 1 + sum(int(n) for n in CIGAR_REF.findall(cigar))
            ends[(qname, rname, bool(flag & 16))].append(end)
    return {key: sorted(v) for key, v in ends.items()}


def lost_loci(razers, ours, e):
    """razers3 loci with no gkmap record whose end lies within e on the same contig and strand."""
    lost = 0
    for key, ends in razers.items():
        mine = ours.get(key, [])
        for end in ends:
            i = bisect.bisect_left(mine, end - e)
            lost += not (i < len(mine) and mine[i] <= end + e)
    return lost


def razers3(label, genome, reads, n, gkmap_sam, work, args):
    """razers3 on the first n reads: (its row of the mapping table, "lost of loci" for gkmap's row)."""
    subset = head(reads, work / "razers3.fq", n)
    sam = work / "razers3.sam"
    identity = 100 * (1 - args.e / args.length)  # -i 95: at most 5 errors in 100 bases
    seconds, _, host, _ = measured([args.razers3, "-tc", str(args.razers_threads), "-rr", "100", "-i", f"{identity:g}",
                                    "-m", "1000000", "-ds", "-o", str(sam), str(genome), str(subset)])
    with open(subset) as f:
        names = {line[1:].split()[0] for i, line in enumerate(f) if i % 4 == 0}
    theirs = sam_ends(sam)
    lost = lost_loci(theirs, sam_ends(gkmap_sam, names), args.e)
    loci = sum(len(v) for v in theirs.values())
    sam.unlink()
    print(f"{label}: {len(names):,} reads in {seconds:.1f} s, {loci:,} loci, {lost:,} not in gkmap's SAM",
          file=sys.stderr, flush=True)
    row = dict(run=label, reads=f"{len(names):,}", whole_s=f"{seconds:.1f}", whole_rate=f"{len(names) / seconds:,.0f}",
               load_s="-", steady_rate="-", hits="-", windows="-", verified="-", loci=f"{loci / len(names):,.1f}",
               stages="-", rss=f"{gib(host.main)} / {gib(host.tree)}", gpu="-", lost="-")
    return row, f"{lost:,} of {loci:,}"


def proxy_files(work, recipe, args):
    """The recipe's proxy and reads, built unless --work holds them from a build with the same settings."""
    fa = work / f"{recipe}.fa"
    reads, patho, stamp = fa.with_suffix(".reads.fq"), fa.with_suffix(".pathological.fq"), fa.with_suffix(".json")
    settings = dict(gbp=args.gbp, reads=args.reads, length=args.length, pathological=args.pathological, seed=11)
    if stamp.exists() and json.loads(stamp.read_text()) == settings and fa.exists():
        return fa, reads, patho, "reused"
    t = time.perf_counter()
    genome_proxy.build(fa, args.gbp, recipe, 11, args.reads, args.length, reads, args.pathological, patho)
    stamp.write_text(json.dumps(settings))
    fa.with_suffix(".index.json").unlink(missing_ok=True)  # a new proxy: its index is built again
    return fa, reads, patho, f"{time.perf_counter() - t:.1f} s"


def bench_recipe(recipe, work, args, index_rows, map_rows):
    fa, reads, patho, built = proxy_files(work, recipe, args)
    size = fa.stat().st_size
    print(f"{recipe}: proxy {size / 1e9:.2f} GB of FASTA ({built}), {args.reads:,} reads, "
          f"{args.pathological:,} pathological", file=sys.stderr, flush=True)
    index, built_row = Path(f"{fa}.gkx"), fa.with_suffix(".index.json")
    if built == "reused" and built_row.exists() and (index / "meta.json").exists():
        row = json.loads(built_row.read_text())   # built by an earlier call with --work: measured then
    else:
        shutil.rmtree(index, ignore_errors=True)
        seconds, _, host, gpu = measured(gkmap("index", "--device", args.device, fa))
        on_disk = sum(p.stat().st_size for p in index.rglob("*") if p.is_file())
        bases = sum(n for _, n in fasta_lengths(fa))
        row = dict(proxy=recipe, bases=f"{bases / 1e9:.3f} G", generated=built, build_s=f"{seconds:.1f}",
                   rss=f"{gib(host.main)} / {gib(host.tree)}", gpu=str(gpu) if args.device == "cuda" else "-",
                   size=f"{on_disk / 1e9:.2f} GB", per_base=f"{on_disk / bases:.2f}")
        built_row.write_text(json.dumps(row))
    index_rows.append(row)
    print(f"{recipe}: indexed in {row['build_s']} s", file=sys.stderr, flush=True)
    warm_up(fa, head(reads, work / "warm_up.fq", WARM_UP_READS), args)
    if args.against:
        warm_up(fa, work / "warm_up.fq", args, args.against)
    sam = work / f"{recipe}.sam"
    rows = [map_run(f"{recipe} reads", fa, reads, sam, args)]
    rows += against(f"{recipe} reads", fa, reads, sam, rows[0], work, args)
    for budget in args.gpu_memory:
        budget_sam = work / f"{recipe}.budget.sam"
        row = map_run(f"{recipe} reads --gpu-memory {budget}", fa, reads, budget_sam, args, budget)
        row["lost"] = "SAM " + ("==" if same_sam(sam, budget_sam) else "!=") + " default run"
        budget_sam.unlink()
        rows.append(row)
    if args.razers_reads:
        row, rows[0]["lost"] = razers3(f"{recipe} razers3", fa, reads, args.razers_reads, sam, work, args)
        rows.append(row)
    sam.unlink()
    if args.pathological:
        rows.append(map_run(f"{recipe} pathological", fa, patho, sam, args))
        rows += against(f"{recipe} pathological", fa, patho, sam, rows[-1], work, args)
        if args.razers_pathological:
            row, rows[-1]["lost"] = razers3(f"{recipe} razers3 pathological", fa, patho, args.razers_pathological,
                                            sam, work, args)
            rows.append(row)
        sam.unlink()
    if not args.keep_index:
        shutil.rmtree(index)
        built_row.unlink(missing_ok=True)
    map_rows.extend(rows)
    for row in rows:
        print(f"{row['run']}: {row['whole_rate']} reads/s whole command", file=sys.stderr, flush=True)


def against(label, genome, reads, sam, mine, work, args):
    """With --against: the run of `mine` (its SAM `sam`) again from that checkout, as a row that says how
    its whole command compares with this tree's and whether its SAM is this tree's; else no row."""
    if not args.against:
        return []
    theirs = work / "against.sam"
    row = map_run(f"{label} (--against)", genome, reads, theirs, args, tree=args.against)
    ratio = mine["seconds"] / row["seconds"]
    row["lost"] = f"SAM {'==' if same_sam(sam, theirs) else '!='} this tree's; this / against {ratio:.2f}"
    theirs.unlink()
    return [row]


def fasta_lengths(path):
    """(name, length) of each record of a plain FASTA, by streaming it."""
    out, name, n = [], None, 0
    with open(path, "rb") as f:
        for line in f:
            if line.startswith(b">"):
                if name is not None:
                    out.append((name, n))
                name, n = line[1:].split()[0].decode(), 0
            else:
                n += len(line.rstrip())
    return out + ([(name, n)] if name is not None else [])


def table(columns, rows):
    lines = ["| " + " | ".join(title for _, title in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r[key]) for key, _ in columns) + " |" for r in rows]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gbp", type=float, default=genome_proxy.MAX_GBP, help="proxy size (both recipes)")
    p.add_argument("--recipes", default="human,copies48")
    p.add_argument("--reads", type=int, default=1_000_000)
    p.add_argument("--length", type=int, default=100)
    p.add_argument("--pathological", type=int, default=1000)
    p.add_argument("-e", type=int, default=5)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda", help="backend of gkmap index and gkmap map")
    p.add_argument("-t", "--threads", type=int, default=15, help="gkmap map -t")
    p.add_argument("--gpu-memory", nargs="*", default=[], metavar="SIZE", help="also map within these budgets, e.g. 20G")
    p.add_argument("--razers-reads", type=int, default=20_000, help="razers3 on this many of the reads (0: skip)")
    p.add_argument("--razers-pathological", type=int, default=0, help="razers3 on this many pathological reads")
    p.add_argument("--razers-threads", type=int, default=16, help="razers3 -tc (more than the cores slows it down a lot)")
    p.add_argument("--razers3", default="razers3", help="the razers3 program (a machine without Debian's seqan-apps "
                   "can run a copy of /usr/lib/seqan/bin/razers3)")
    p.add_argument("--keep-index", action="store_true",
                   help="with --work: keep each proxy's index, so that a later call maps without building it")
    p.add_argument("--against", type=lambda path: Path(path).resolve(),
                   help="another checkout (its mapper/ and kernels/): each map run again from it, side by side")
    p.add_argument("--work", help="folder for proxies (kept and reused), indexes and SAM files (default: temporary)")
    args = p.parse_args()
    if (args.razers_reads or args.razers_pathological) and shutil.which(args.razers3) is None:
        p.error(f"{args.razers3} not found (Debian: apt-get install seqan-apps), or pass --razers-reads 0")
    index_rows, map_rows = [], []
    t = time.perf_counter()
    with contextlib.nullcontext(args.work) if args.work else tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        work.mkdir(parents=True, exist_ok=True)
        for recipe in args.recipes.split(","):
            bench_recipe(recipe, work, args, index_rows, map_rows)
    print(f"gkmap whole-genome benchmark (scripts/bench_genome.py): {args.gbp} Gbp proxies, {args.length} bp reads, "
          f"e={args.e}, --device {args.device}, -t {args.threads}; razers3 -tc {args.razers_threads}; "
          f"{time.perf_counter() - t:.0f} s in all")
    print()
    print(table([("proxy", "proxy"), ("bases", "bases"), ("generated", "proxy + reads generated"),
                 ("build_s", "index build s"), ("rss", "peak RSS main / tree"), ("gpu", "peak GPU"),
                 ("size", "index on disk"), ("per_base", "bytes/base")], index_rows))
    print()
    print(table([("run", "run"), ("reads", "reads"), ("whole_s", "whole command s"), ("whole_rate", "reads/s"),
                 ("load_s", "index load s"), ("steady_rate", "steady reads/s"), ("hits", "seed hits/read"),
                 ("windows", "windows/read"), ("verified", "verified/read"), ("loci", "loci/read"),
                 ("stages", "stage s (align, output: CPU-s over -t)"), ("rss", "peak RSS main / tree"),
                 ("gpu", "peak GPU"), ("lost", "razers3 loci lost")], map_rows))


if __name__ == "__main__":
    sys.exit(main())
