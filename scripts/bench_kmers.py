#!/usr/bin/env python3
"""Benchmark `gkmap kmers count` (cpu, and cuda where a GPU is present) against jellyfish 2 and KMC 3 (where they
are installed), side by side on the same machine and the same input, in one run.

Inputs: the genomes below (uncompressed), and with --reads simulated read sets of 100 bp chr20 reads of the
given sizes in Gbp (1 and 10 in issue #23), made by scripts/simulate_reads.py (the project's read model, seed
11 + chunk) in chunks of 1 M reads, one process per core, once into --workdir; --proxy-reads makes such sets
from the genome-scale proxy instead (scripts/genome_proxy.py --reads, --proxy-gbp Gbp, its repeats included:
one process that builds the proxy a contig at a time and draws the reads from each, about 30 us a read;
simulate_reads.py's whole-genome start arrays do not fit a 128 GB machine at 3.1 Gbp); --formats says whether the
plain FASTQ, its gzip (level 1, by isal) or both are counted. KMC counts canonical k-mers only, so it runs
only with --canonical; jellyfish reads a gzip file through a generator (`zcat`), as its manual says.
Every row says its ratio to KMC's time on the same input (x KMC: below 1 is faster than KMC).

--memory is host memory: KMC's -m and gkmap's --memory (jellyfish sizes its hash with -s). gkmap cuda
buffers k-mers in GPU memory, within --gpu-memory where given (its default: 80 % of the GPU's free memory,
CUDA context included): each tool uses the memory it runs on as it would out of the box.

Every tool runs as a child process, so its peak RSS (os.wait4) and wall time are its own; gkmap's time
includes Python start-up. Each tool's output of the run before is removed before it runs (remove_outputs).
The cuda kernels are compiled once, by a warm-up count of a small file before the
table (PyCUDA caches the binaries on disk); that compilation time is reported on its own line, and each run
notes the (cached) load time and gkmap's phases (reading, sorting, encoding, writing) from its log line.
k-mers/s is the number of k-mers in the input (the sum of the counts in gkmap's table) over the wall time.

With --kernels (GPU only) the device work is also timed alone, with CUDA events, on each input's real
k-mers: the sort + run-length encoding of the whole buffer (G k-mers/s) and the table encoding.

    python scripts/bench_kmers.py [--inputs chr20 honeybee] [-k 28 31 40 65] [--threads N] [--canonical]
                                  [--kernels] [--memory GB] [--tools gkmap-cuda kmc ...]
    python scripts/bench_kmers.py --inputs --reads 1 10 --formats plain gz -k 31 65 127 --canonical \
                                  --memory 24 --workdir /data/bench
"""
import argparse
import concurrent.futures
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


READ_LENGTH = 100
CHUNK_READS = 1_000_000


def proxy_reads(gbp, proxy_gbp, workdir, gzipped):
    """A FASTQ of `gbp` Gbp of 100 bp reads simulated from the genome-scale proxy of `proxy_gbp` Gbp
    (scripts/genome_proxy.py --reads: recipe human, seed 11; the proxy's FASTA is written beside it), and
    its gzip, made once in workdir."""
    out = Path(workdir) / f"proxy{proxy_gbp:g}_reads_{gbp:g}gbp.fq"
    if not out.exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "genome_proxy.py"),
                        str(Path(workdir) / f"proxy_{proxy_gbp:g}gbp.fa"), "--gbp", f"{proxy_gbp:g}",
                        "--reads", str(int(round(gbp * 1e9 / READ_LENGTH))), "--length", str(READ_LENGTH),
                        "--reads-out", str(out), "--quiet"], check=True)
    return gzip_of(out) if gzipped else out


def simulated_reads(gbp, workdir, gzipped):
    """A FASTQ of `gbp` Gbp of 100 bp chr20 reads and its gzip, made once in workdir: chunks of 1 M reads by
    scripts/simulate_reads.py, seed 11 + chunk, in parallel processes (each holds chr20), concatenated in
    chunk order."""
    genome = INPUTS["chr20"]
    out = Path(workdir) / f"chr20_reads_{gbp:g}gbp.fq"
    if not out.exists():
        reads = int(round(gbp * 1e9 / READ_LENGTH))
        sizes = [min(CHUNK_READS, reads - start) for start in range(0, reads, CHUNK_READS)]
        names = [Path(workdir) / f"chunk{i:04d}.fq" for i in range(len(sizes))]
        script = ROOT / "scripts" / "simulate_reads.py"

        def simulate(i):
            subprocess.run([sys.executable, str(script), str(genome), str(sizes[i]), str(READ_LENGTH),
                            "--seed", str(11 + i), "-o", str(names[i])], check=True)
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as workers:
            list(workers.map(simulate, range(len(sizes))))
        with open(f"{out}.part", "wb") as f:
            for name in names:
                with open(name, "rb") as chunk:
                    shutil.copyfileobj(chunk, f, 1 << 24)
                name.unlink()
        os.replace(f"{out}.part", out)
    return gzip_of(out) if gzipped else out


def gzip_of(out):
    """`out`.gz (level 1, isal on every core), made once."""
    gz = Path(f"{out}.gz")
    if not gz.exists():
        from isal import igzip_threaded
        with open(out, "rb") as src, igzip_threaded.open(f"{gz}.part", "wb", compresslevel=1,
                                                         threads=os.cpu_count()) as dst:
            shutil.copyfileobj(src, dst, 1 << 24)
        os.replace(f"{gz}.part", gz)
    return gz


def commands(tool, path, k, canonical, threads, workdir, memory, gpu_memory=None):
    out = Path(workdir) / f"{tool}.out"
    gzipped = path.suffix == ".gz"
    if tool.startswith("gkmap"):
        device = tool.split("-")[1]
        budget = ["--memory", f"{memory:g}"]
        if device == "cuda" and gpu_memory:
            budget += ["--gpu-memory", gpu_memory]
        return [sys.executable, "-m", "mapper", "kmers", "count", "-k", str(k), "--device", device, "-t", str(threads),
                *budget, "-o", str(out), str(path)] + (["--canonical"] if canonical else [])
    if tool == "jellyfish":
        source = [str(path)]
        if gzipped:
            generator = Path(workdir) / "jellyfish.generator"
            generator.write_text(f"zcat {path}\n")
            source = ["-g", str(generator), "-G", "1"]
        return ["jellyfish", "count", "-m", str(k), "-s", "100M", "-t", str(threads), "-o", str(out),
                *source] + (["-C"] if canonical else [])
    # KMC counts canonical k-mers only; -ci1 keeps singletons, -cs keeps large counts exact
    fastq = path.name.removesuffix(".gz").endswith((".fq", ".fastq"))
    return ["kmc", "-k" + str(k), f"-t{threads}", "-ci1", "-cs4294967295", f"-m{max(2, round(memory))}",
            "-fq" if fastq else "-fm", str(path), str(out), str(workdir)]


def remove_outputs(tool, workdir):
    """Remove what a tool wrote in the run before: replacing or truncating a file makes ext4 write it to
    disk (its guard for files rewritten in place), which would count in the timed run of whichever tool
    meets an old output (gkmap: 0.46 s for a 1 GB table on the H100 machine)."""
    for old in Path(workdir).glob(f"{tool}.out*"):
        old.unlink()


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


def rows(inputs, ks, tools, args, workdir):
    """Run every tool on every input and k; a table row for each, with the ratio to KMC's time."""
    print("| input | k | tool | seconds | M k-mers/s | peak RSS MB | x KMC | note |")
    print("|---|---|---|---|---|---|---|---|")
    for name, path in inputs:
        for k in ks:
            kmers, results = None, []
            for tool in tools:
                remove_outputs(tool, workdir)
                seconds, rss, stderr = timed(commands(tool, path, k, args.canonical, args.threads, workdir,
                                                      args.memory, args.gpu_memory))
                note = ""
                if tool.startswith("gkmap"):
                    with KmerTable(Path(workdir) / f"{tool}.out") as table:
                        kmers = table.total
                    compiled = re.search(r"kernels compiled in ([0-9.]+) s", stderr)
                    phases = re.search(r"s \((reading .*)\)", stderr)
                    note = "; ".join(([f"kernels loaded in {compiled.group(1)} s"] if compiled else [])
                                     + ([phases.group(1)] if phases else []))
                results.append((tool, seconds, rss, note))
            kmc = dict((tool, seconds) for tool, seconds, _, _ in results).get("kmc")
            for tool, seconds, rss, note in results:
                rate = f"{kmers / seconds / 1e6:.1f}" if kmers else ""
                ratio = f"{seconds / kmc:.2f}" if kmc else ""
                print(f"| {name} | {k} | {tool} | {seconds:.2f} | {rate} | {rss:.0f} | {ratio} | {note} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", nargs="*", choices=list(INPUTS), default=["chr20", "honeybee"])
    parser.add_argument("--reads", nargs="*", type=float, default=[], metavar="GBP",
                        help="simulated chr20 read sets of these sizes (Gbp of 100 bp reads)")
    parser.add_argument("--proxy-reads", nargs="*", type=float, default=[], metavar="GBP",
                        help="read sets of these sizes simulated from the genome-scale proxy (its repeats)")
    parser.add_argument("--proxy-gbp", type=float, default=3.1, help="the proxy's size (scripts/genome_proxy.py)")
    parser.add_argument("--formats", nargs="+", choices=["plain", "gz"], default=["plain"],
                        help="for the read sets: plain FASTQ, gzip, or both")
    parser.add_argument("-k", nargs="+", type=int, default=[28, 31, 40, 65])
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="for every tool (gkmap: -t)")
    parser.add_argument("--memory", type=float, default=8, help="GB of host memory, for gkmap (--memory) and KMC (-m)")
    parser.add_argument("--gpu-memory", metavar="SIZE", help="gkmap cuda's --gpu-memory [its default]")
    parser.add_argument("--tools", nargs="+", choices=["gkmap-cpu", "gkmap-cuda", "jellyfish", "kmc"],
                        help="the tools to run [every one installed]")
    parser.add_argument("--canonical", action="store_true", help="count canonical k-mers (KMC always does)")
    parser.add_argument("--workdir", help="for the uncompressed inputs and read sets [a temporary folder]")
    parser.add_argument("--kernels", action="store_true", help="also time the device work alone (GPU only)")
    args = parser.parse_args()
    tools = ["gkmap-cpu"] + (["gkmap-cuda"] if cuda_available() else [])
    tools += ["jellyfish"] if shutil.which("jellyfish") else []
    tools += ["kmc"] if shutil.which("kmc") and args.canonical else []
    tools = [tool for tool in tools if args.tools is None or tool in args.tools]
    workdir = args.workdir or tempfile.mkdtemp(prefix="bench_kmers-")
    os.makedirs(workdir, exist_ok=True)
    print(f"{os.cpu_count()} CPUs; threads: {args.threads}; memory {args.memory:g} GB; "
          f"GPU memory {args.gpu_memory or 'gkmap default'}; tools: {', '.join(tools)}; "
          f"{'canonical' if args.canonical else 'forward'} k-mers\n")
    if "gkmap-cuda" in tools:
        print(f"cuda kernels compiled (once, into PyCUDA's cache) in {warm_up_cuda(workdir):.2f} s\n")
    try:
        inputs = [(name, uncompressed(INPUTS[name], workdir)) for name in args.inputs]
        for gbp in args.reads:
            for fmt in args.formats:
                inputs.append((f"chr20 reads {gbp:g} Gbp{' gz' if fmt == 'gz' else ''}",
                               simulated_reads(gbp, workdir, fmt == "gz")))
        for gbp in args.proxy_reads:
            for fmt in args.formats:
                inputs.append((f"proxy {args.proxy_gbp:g} Gbp reads {gbp:g} Gbp{' gz' if fmt == 'gz' else ''}",
                               proxy_reads(gbp, args.proxy_gbp, workdir, fmt == "gz")))
        rows(inputs, args.k, tools, args, workdir)
        if args.kernels and "gkmap-cuda" in tools:
            print("\n| input | k | k-mers | sort+RLE ms | G k-mers/s | encode ms |\n|---|---|---|---|---|---|")
            for name, path in inputs:
                for k in args.k:
                    kmers, sorting, encoding = kernel_rates(path, k, args.canonical)
                    print(f"| {name} | {k} | {kmers:,} | {1e3 * sorting:.1f} | {kmers / sorting / 1e9:.2f} | "
                          f"{1e3 * encoding:.1f} |", flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
