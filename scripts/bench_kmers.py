#!/usr/bin/env python3
"""Benchmark `gkmap kmers count` (cpu, and cuda where a GPU is present) against jellyfish (and KMC when it
is installed), side by side on the same machine and the same uncompressed input, in one run.

Every tool runs as a child process, so its peak RSS (os.wait4) and wall time are its own; gkmap's time
includes Python start-up and, for cuda, kernel compilation (gkmap reports the compilation time
separately on stderr, which this script picks up). k-mers/s is the number of k-mers in the input (the
sum of the counts in gkmap's table) over the wall time.

    python scripts/bench_kmers.py [--inputs chr20 honeybee] [-k 28 31 40 65] [--threads 2] [--canonical]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from check_kmers import GENOMES, SHARED_DATA, uncompressed  # noqa: E402

from mapper.kmers import KmerTable  # noqa: E402
from mapper.backends.base import cuda_available  # noqa: E402

READS = SHARED_DATA / "reads"
INPUTS = {
    "chr20": GENOMES / "human_GRCh37_chr20.fa.gz",
    "ecoli": GENOMES / "ecoli_K12_MG1655_NC_000913.2.fa.gz",
    "honeybee": READS / "honeybee_virus_SRR059298_GAII_subset.fastq.gz",  # the largest read set (7.2 Mb)
    "shigella": READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz",
}


def timed(cmd):
    """(wall seconds, peak RSS in MB, stderr) of a child process; raises if it fails."""
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({child.returncode}): {stderr.strip()}")
    return seconds, usage.ru_maxrss / 1024, stderr


def commands(tool, path, k, canonical, threads, workdir):
    out = Path(workdir) / f"{tool}.out"
    if tool.startswith("gkmap"):
        device = tool.split("-")[1]
        return [sys.executable, "-m", "mapper", "kmers", "count", "-k", str(k), "--device", device,
                "--memory", "8", "-o", str(out), str(path)] + (["--canonical"] if canonical else [])
    if tool == "jellyfish":
        return ["jellyfish", "count", "-m", str(k), "-s", "100M", "-t", str(threads), "-o", str(out),
                str(path)] + (["-C"] if canonical else [])
    # KMC counts canonical k-mers only; -ci1 keeps singletons, -cs keeps large counts exact
    return ["kmc", "-k" + str(k), f"-t{threads}", "-ci1", "-cs4294967295", "-m8",
            "-fq" if path.suffix in (".fq", ".fastq") else "-fm", str(path), str(out), str(workdir)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", nargs="+", choices=list(INPUTS), default=["chr20", "honeybee"])
    parser.add_argument("-k", nargs="+", type=int, default=[28, 31, 40, 65])
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="for jellyfish and KMC")
    parser.add_argument("--canonical", action="store_true", help="count canonical k-mers (KMC always does)")
    parser.add_argument("--workdir", help="for the uncompressed inputs [a temporary folder]")
    args = parser.parse_args()
    tools = ["gkmap-cpu"] + (["gkmap-cuda"] if cuda_available() else []) + ["jellyfish"]
    tools += ["kmc"] if shutil.which("kmc") and args.canonical else []
    workdir = args.workdir or tempfile.mkdtemp(prefix="bench_kmers-")
    print(f"{os.cpu_count()} CPUs; jellyfish/KMC threads: {args.threads}; tools: {', '.join(tools)}; "
          f"{'canonical' if args.canonical else 'forward'} k-mers\n")
    print("| input | k | tool | seconds | M k-mers/s | peak RSS MB | note |")
    print("|---|---|---|---|---|---|---|")
    try:
        for name in args.inputs:
            path = uncompressed(INPUTS[name], workdir)
            for k in args.k:
                kmers = None
                for tool in tools:
                    seconds, rss, stderr = timed(commands(tool, path, k, args.canonical, args.threads, workdir))
                    note = ""
                    if tool.startswith("gkmap"):
                        with KmerTable(Path(workdir) / f"{tool}.out") as table:
                            kmers = table.total
                        compiled = re.search(r"kernels compiled in ([0-9.]+) s", stderr)
                        note = f"kernel compilation {compiled.group(1)} s" if compiled else ""
                    print(f"| {name} | {k} | {tool} | {seconds:.2f} | {kmers / seconds / 1e6:.1f} | {rss:.0f} | "
                          f"{note} |", flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
