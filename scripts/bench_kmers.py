#!/usr/bin/env python3
"""Benchmark `gkmap kmers count` (cpu, and cuda where a GPU is present) against jellyfish and KMC (where they
are installed), side by side on the same machine and the same uncompressed input, in one run.

Every tool runs as a child process, so its peak RSS (os.wait4) and wall time are its own; gkmap's time
includes Python start-up. The cuda kernels are compiled once, by a warm-up count of a small file before the
table (PyCUDA caches the binaries on disk); that compilation time is reported on its own line, and each run
notes the (cached) load time and gkmap's phases (reading, sorting, encoding, writing) from its log line.
k-mers/s is the number of k-mers in the input (the sum of the counts in gkmap's table) over the wall time.

With --kernels (GPU only) the device work is also timed alone, with CUDA events, on each input's real
k-mers: the sort + run-length encoding of the whole buffer (G k-mers/s) and the table encoding.

    python scripts/bench_kmers.py [--inputs chr20 honeybee] [-k 28 31 40 65] [--threads N] [--canonical]
                                  [--kernels]
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
from mapper.device import cuda_available  # noqa: E402

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


def warm_up_cuda(workdir):
    """Compile the cuda kernels into PyCUDA's cache with a tiny count; returns the compilation seconds."""
    tiny = Path(workdir) / "warm_up.fa"
    tiny.write_text(">warm up\nACGTACGTTGCA\n")
    _, _, stderr = timed([sys.executable, "-m", "mapper", "kmers", "count", "-k", "5", "--device", "cuda",
                          "-o", str(Path(workdir) / "warm_up.kmers"), str(tiny)])
    return float(re.search(r"kernels compiled in ([0-9.]+) s", stderr).group(1))


def kernel_rates(path, k, canonical):
    """(k-mers, sort+RLE seconds, encode seconds) of the device work alone on the k-mers of `path`."""
    from mapper.device import cuda
    from mapper.kmers.encode import KmerLayout
    from mapper.kmers.gpu import CudaBackend, CudaKernels
    from mapper.kmers.reading import blocks
    kernels = CudaKernels()
    backend = CudaBackend(KmerLayout(k), canonical, path.stat().st_size, kernels)
    for block in blocks([path], 1 << 25):
        backend.add(block)
    kmers = backend.buffered
    with cuda.Timer() as sorting:
        run = backend.reduce()
    with cuda.Timer() as encoding:
        backend.encode(run)
    return kmers, sorting.seconds, encoding.seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", nargs="+", choices=list(INPUTS), default=["chr20", "honeybee"])
    parser.add_argument("-k", nargs="+", type=int, default=[28, 31, 40, 65])
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="for jellyfish and KMC")
    parser.add_argument("--canonical", action="store_true", help="count canonical k-mers (KMC always does)")
    parser.add_argument("--workdir", help="for the uncompressed inputs [a temporary folder]")
    parser.add_argument("--kernels", action="store_true", help="also time the device work alone (GPU only)")
    args = parser.parse_args()
    tools = ["gkmap-cpu"] + (["gkmap-cuda"] if cuda_available() else [])
    tools += ["jellyfish"] if shutil.which("jellyfish") else []
    tools += ["kmc"] if shutil.which("kmc") and args.canonical else []
    workdir = args.workdir or tempfile.mkdtemp(prefix="bench_kmers-")
    print(f"{os.cpu_count()} CPUs; jellyfish/KMC threads: {args.threads}; tools: {', '.join(tools)}; "
          f"{'canonical' if args.canonical else 'forward'} k-mers\n")
    if "gkmap-cuda" in tools:
        print(f"cuda kernels compiled (once, into PyCUDA's cache) in {warm_up_cuda(workdir):.2f} s\n")
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
                        phases = re.search(r"s \((reading .*)\)", stderr)
                        note = "; ".join(([f"kernels loaded in {compiled.group(1)} s"] if compiled else [])
                                         + ([phases.group(1)] if phases else []))
                    print(f"| {name} | {k} | {tool} | {seconds:.2f} | {kmers / seconds / 1e6:.1f} | {rss:.0f} | "
                          f"{note} |", flush=True)
        if args.kernels and "gkmap-cuda" in tools:
            print("\n| input | k | k-mers | sort+RLE ms | G k-mers/s | encode ms |\n|---|---|---|---|---|---|")
            for name in args.inputs:
                for k in args.k:
                    kmers, sorting, encoding = kernel_rates(uncompressed(INPUTS[name], workdir), k, args.canonical)
                    print(f"| {name} | {k} | {kmers:,} | {1e3 * sorting:.1f} | {kmers / sorting / 1e9:.2f} | "
                          f"{1e3 * encoding:.1f} |", flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
