#!/usr/bin/env python3
"""The cpu backend beside CPU mappers on the same reads, in one run (issue #21): whole commands, index built
beforehand, at 1 thread and at every core, with the ratio of each peer's time to gkmap's.

    scripts/bench_peers.py [--sets chr20,shigella,honeybee,proxy] [--chr20-reads 10000] [--threads 1 N]
                           [--repeat 1] [--data ../shared/data] [--work DIR]

Peers (Debian packages; a missing one is skipped and said so): razers3 (seqan-apps) with full sensitivity
(`-rr 100 -i P -m 1000000 -ds`: every match within the identity P that e edits allow, no cap on matches:
an all-mapper like gkmap and mrFAST); bwa mem and minimap2 -ax sr as best-mapper reference points (they
report one alignment a read, so they do less work than an all-mapper: not a like-for-like ratio).
Sets: `chr20` human chr20 with --chr20-reads simulated 100 bp reads (mapper/simulate.py, seed 11), e=5;
`shigella` the real 22,084 Shigella R1 reads (150 bp), e=6; `honeybee` the real honeybee-virus reads,
gkmap's per-read e; `proxy` --proxy-gbp of scripts/genome_proxy.py's human proxy with 10,000 reads
simulated from it, e=5. gkmap's modules are byte-compiled first, as a pip install leaves them. Times are
wall seconds of one run each, or with --repeat N the median of N runs taken in rotation after one untimed
run of each command (the machine is named in the output);
"x gkmap" is the peer's time over gkmap's at the same thread count (above 1: gkmap is faster).
"""
import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def timed(command, out=None):
    """Wall seconds of a command (stdout to `out`, stderr kept for the error message)."""
    t = time.perf_counter()
    with open(out or os.devnull, "wb") as sink:
        done = subprocess.run(command, stdout=sink, stderr=subprocess.PIPE)
    if done.returncode:
        raise SystemExit(f"{command[0]} failed: {done.stderr.decode(errors='replace')[-500:]}")
    return time.perf_counter() - t


def plain_fasta(genome, folder):
    """An uncompressed copy of a FASTA (razers3 and bwa want one)."""
    out = folder / (Path(genome).name.removesuffix(".gz") + (".fa" if not str(genome).endswith((".fa", ".fa.gz")) else ""))
    if not out.exists():
        subprocess.run(f"gzip -dc {genome} > {out}" if str(genome).endswith(".gz") else f"cp {genome} {out}",
                       shell=True, check=True)
    return out


def sets(args, work):
    """(name, genome FASTA, reads FASTQ, e or None, read length) of each asked set."""
    from mapper.reference import read_fasta
    from mapper.simulate import simulate, write_fastq
    data = Path(args.data)
    out = []
    for name in args.sets.split(","):
        if name == "chr20":
            genome = data / "genomes" / "human_GRCh37_chr20.fa.gz"
            reads = work / "chr20.fq"
            if not reads.exists():
                with open(reads, "w") as handle:
                    write_fastq(simulate(read_fasta(genome, work / "chr20.fai"), args.chr20_reads, 100, seed=11), handle)
            out.append((name, genome, reads, 5, 100))
        elif name == "shigella":
            out.append((name, data / "genomes" / "shigella_dysenteriae_ATCC13313_GCF_002949675.1.fna.gz",
                        data / "reads" / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 6, 150))
        elif name == "honeybee":
            out.append((name, data / "genomes" / "honeybee_viruses_DWV_NC_004830.2_VDV1_NC_006494.1.fa.gz",
                        data / "reads" / "honeybee_virus_SRR059298_GAII_subset.fastq.gz", None, 72))
        elif name == "proxy":
            import genome_proxy
            genome, reads = work / "proxy.fa", work / "proxy.fq"
            if not genome.exists():
                genome_proxy.build(genome, args.proxy_gbp, "human", 11, 10_000, 100, reads)
            out.append((name, genome, reads, 5, 100))
    return out


def main():
    cores = len(os.sched_getaffinity(0))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default="chr20,shigella,honeybee")
    p.add_argument("--chr20-reads", type=int, default=10_000)
    p.add_argument("--proxy-gbp", type=float, default=0.25)
    p.add_argument("--threads", type=int, nargs="+", default=sorted({1, cores}))
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--work", help="keep inputs and indexes here (default: a temporary folder)")
    p.add_argument("--repeat", type=int, default=1,
                   help="median of this many runs of each command, after one untimed run each (default: 1, no warm-up)")
    args = p.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="gkmap-peers-"))
    work.mkdir(parents=True, exist_ok=True)
    peers = [t for t in ("razers3", "bwa", "minimap2") if shutil.which(t)]
    print(f"# {platform.node()}: {cores} cores ({platform.processor() or platform.machine()}); peers: "
          f"{', '.join(peers) or 'none'}{'' if len(peers) == 3 else ' (the others are not installed)'}")
    print("| set | reads | threads | gkmap cpu s | reads/s | " + " | ".join(f"{t} s (x gkmap)" for t in peers) + " |")
    print("|---|---|---|---|---|" + "---|" * len(peers))
    gkmap = [sys.executable, "-m", "mapper"]
    # gkmap as a pip install leaves it: its modules' bytecode compiled (an editable install compiles on first
    # import, unless PYTHONDONTWRITEBYTECODE is set, as on the development machines: then every run compiled
    # the modules it imports again, ~20 ms of a 0.4 s Shigella run)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "mapper")], check=True)
    for name, genome, reads, e, length in sets(args, work):
        fasta = plain_fasta(genome, work)
        n_reads = int(subprocess.run(f"gzip -cdf {reads} | wc -l", shell=True, capture_output=True, text=True).stdout) // 4
        index = work / f"{name}.gkx"
        if not index.exists():
            subprocess.run([*gkmap, "index", "--quiet", "--index", str(index), str(genome)], check=True)
        if "bwa" in peers and not Path(f"{fasta}.bwt").exists():
            subprocess.run(["bwa", "index", str(fasta)], check=True, capture_output=True)
        mmi = work / f"{name}.mmi"
        if "minimap2" in peers and not mmi.exists():
            subprocess.run(["minimap2", "-x", "sr", "-d", str(mmi), str(fasta)], check=True, capture_output=True)
        identity = 100 - (100 * (e if e is not None else -(-4 * length // 100)) + length - 1) // length
        for t in args.threads:
            e_args = ["-e", str(e)] if e is not None else []
            commands = {
                "gkmap": [*gkmap, "map", "--quiet", "--device", "cpu", "-t", str(t), *e_args, "--index", str(index),
                          "-o", str(work / f"{name}.sam"), str(genome), str(reads)],
                "razers3": ["razers3", "-tc", str(t), "-rr", "100", "-i", str(identity), "-m", "1000000", "-ds",
                            "-o", str(work / f"{name}.razers"), str(fasta), str(reads)],
                "bwa": ["bwa", "mem", "-t", str(t), str(fasta), str(reads)],
                "minimap2": ["minimap2", "-ax", "sr", "-t", str(t), str(mmi), str(reads)],
            }
            tools = ["gkmap", *peers]
            if args.repeat > 1:  # one untimed run of each first: indexes in the page cache, kernels built
                for tool in tools:
                    timed(commands[tool])
            runs = {tool: [] for tool in tools}
            for _ in range(args.repeat):  # in rotation, so that a slow spell of the machine hits all of them
                for tool in tools:
                    runs[tool].append(timed(commands[tool]))
            ours = statistics.median(runs["gkmap"])
            row = [f"{ours:.2f}", f"{n_reads / ours:,.0f}"]
            for peer in peers:
                seconds = statistics.median(runs[peer])
                row.append(f"{seconds:.2f} ({seconds / ours:.2f}x)")
            print(f"| {name} | {n_reads:,} | {t} | " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
