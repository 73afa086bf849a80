#!/usr/bin/env python3
"""The whole `gkmap map` command by output format (issue #18), side by side in one run.

    scripts/bench_formats.py GENOME READS [--index DIR] [--device cuda] [-t 15] [-e 5] [--repeat 3] [--tmp DIR]

Runs the same command (index prebuilt: `--index`, built once here when missing) writing
  sam         -o out.sam
  sam-bare    --no-secondary-seq -o bare.sam   (SEQ/QUAL '*' on secondary records: fewer bytes to write)
  bam         -o out.bam                 (gkmap's own BGZF writer, mapper/bam.py)
  sorted      --sort -o sorted.bam       (coordinate-sorted; `samtools index` accepts it)
  view-b      -o - | samtools view -b    (the reference point: SAM to stdout, BAM made by samtools)
and prints each one's reads/s (reads of the file over the wall time of the whole process or pipeline,
best of --repeat, the rounds interleaved so that a busy spell of the machine touches every format alike)
and its ratio to the SAM run. Every BAM passes `samtools quickcheck` and holds the SAM's records
(`samtools view`: the same lines; sorted: the same lines in another order); sam-bare holds them with the
secondaries' SEQ and QUAL made '*'.
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FORMATS = ("sam", "sam-bare", "bam", "sorted", "view-b")


def gkmap(*args):
    return [sys.executable, "-m", "mapper", *map(str, args)]


def command(fmt, common, out):
    """The shell-free argv list(s) of one run: one command, or two joined by a pipe."""
    if fmt == "sam":
        return [gkmap(*common, "-o", out / "out.sam")]
    if fmt == "sam-bare":
        return [gkmap(*common, "--no-secondary-seq", "-o", out / "bare.sam")]
    if fmt == "bam":
        return [gkmap(*common, "-o", out / "out.bam")]
    if fmt == "sorted":
        return [gkmap(*common, "--sort", "-o", out / "sorted.bam")]
    return [gkmap(*common, "-o", "-"), ["samtools", "view", "-b", "-o", str(out / "view.bam"), "-"]]


def timed(argvs):
    """Wall seconds of one command or pipeline; raises when any part fails."""
    t0 = time.perf_counter()
    if len(argvs) == 1:
        subprocess.run(argvs[0], check=True)
    else:
        first = subprocess.Popen(argvs[0], stdout=subprocess.PIPE)
        second = subprocess.Popen(argvs[1], stdin=first.stdout)
        first.stdout.close()
        if second.wait() or first.wait():
            raise subprocess.CalledProcessError(first.returncode or second.returncode, argvs)
    return time.perf_counter() - t0


def records_digest(path, sort=False, bare=False):
    """md5 of a SAM or BAM's records as `samtools view` prints them (sorted lines with `sort`); with `bare`,
    as --no-secondary-seq would write them (SEQ and QUAL '*' on FLAG 256 records)."""
    text = subprocess.run(["samtools", "view", str(path)], check=True, capture_output=True).stdout
    lines = text.splitlines()
    if bare:
        lines = [b"\t".join(f[:9] + [b"*", b"*"] + f[11:]) if int(f[1]) & 256 else line
                 for line, f in ((line, line.split(b"\t")) for line in lines)]
    if sort:
        lines.sort()
    return hashlib.md5(b"\n".join(lines)).hexdigest(), len(lines)


def count_reads(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f) // 4


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("genome")
    p.add_argument("reads", help="a plain FASTQ file (its records are counted for reads/s)")
    p.add_argument("--index", help="index folder (default: built in --tmp)")
    p.add_argument("--device", default="auto")
    p.add_argument("-t", "--threads", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    p.add_argument("-e", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--formats", default=",".join(FORMATS))
    p.add_argument("--tmp", default=None, help="folder for the outputs (default: the system's)")
    args = p.parse_args()
    if shutil.which("samtools") is None:
        sys.exit("bench_formats: samtools is not on PATH")
    formats = args.formats.split(",")
    reads = count_reads(args.reads)
    with tempfile.TemporaryDirectory(dir=args.tmp, prefix="gk-formats-") as tmp:
        out = Path(tmp)
        index = Path(args.index) if args.index else out / "idx"
        common = ["map", "--quiet", "--index", index, "--device", args.device, "-t", args.threads, "-e", args.e,
                  args.genome, args.reads]
        if not (index / "meta.json").exists():
            subprocess.run(gkmap("index", "--quiet", "--device", args.device, "--index", index, args.genome), check=True)
        subprocess.run(gkmap(*common, "-o", out / "warm.sam"), check=True)  # kernels compiled, page cache warm
        (out / "warm.sam").unlink()
        best = {fmt: float("inf") for fmt in formats}
        for _ in range(args.repeat):
            for fmt in formats:
                best[fmt] = min(best[fmt], timed(command(fmt, common, out)))
        outputs = {"sam": "out.sam", "sam-bare": "bare.sam", "bam": "out.bam", "sorted": "sorted.bam",
                   "view-b": "view.bam"}
        full = [fmt for fmt in formats if fmt != "sam-bare"]  # the records every full format must hold
        first = out / outputs[full[0] if full else "sam-bare"]
        reference = {bare: records_digest(first, sort=True, bare=bare or not full) for bare in (False, True)}
        print(f"{reads:,} reads, -e {args.e}, --device {args.device}, -t {args.threads}; best of {args.repeat}")
        print(f"{'format':<9} {'seconds':>8} {'reads/s':>12} {'x sam':>6}  check")
        for fmt in formats:
            path = out / outputs[fmt]
            if path.suffix == ".bam":
                subprocess.run(["samtools", "quickcheck", str(path)], check=True)
            same = records_digest(path, sort=True) == reference[fmt == "sam-bare"]
            ratio = best["sam"] / best[fmt] if "sam" in best else float("nan")
            print(f"{fmt:<9} {best[fmt]:8.2f} {reads / best[fmt]:12,.0f} {ratio:6.2f}  "
                  f"{'records = ' + (full or formats)[0] if same else 'RECORDS DIFFER'}")
            if not same:
                sys.exit(1)


if __name__ == "__main__":
    main()
