#!/usr/bin/env python3
"""BAM output (issue #18, item 2): mapper/bam.py's writers beside samtools on the same SAM, in one run.

    scripts/bench_output.py [--sam FILE] [--records 1000000] [--threads 1,2,16] [--memory 256M] [--repeat 1]

The SAM is `--sam` (e.g. a chr20 run of gkmap on the GPU machine) or, by default, gkmap's own paired-end SAM
of the first --pairs Shigella read pairs of ../shared/data; either is repeated until it holds --records
records. At each thread count T it times, from that SAM:
  - gkmap BamWriter (SAM text already in memory, as a sink has it) and `samtools view -b -@ T-1` at
    samtools's default level and at level 1 (ISA-L level 1 is gkmap's default);
  - gkmap SortedBamWriter with --memory and `samtools sort -@ T-1 -m MEMORY/T` (the same total budget).
Rates are SAM records per second and SAM megabytes per second (wall time); "x samtools" divides gkmap's
rate by samtools's at the same thread count (default level for BAM). "CPU s" is the process's (or
samtools's) user + system time, the figure to compare on a machine other jobs share. Each timing is the
best of --repeat runs; every output passes `samtools quickcheck`.
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mapper import bam  # noqa: E402
from mapper.cli import main as gkmap  # noqa: E402
from mapper.options import parse_size  # noqa: E402

DATA = Path(os.environ.get("GKMAP_SHARED_DATA") or ROOT.parent / "shared" / "data")  # as tests/conftest.py


def shigella_sam(folder, pairs):
    """gkmap's SAM of the first `pairs` Shigella read pairs (paired-end: mates, TLEN, unmapped mates)."""
    import dnaio
    reads = []
    for k in (1, 2):
        reads.append(folder / f"r{k}.fq")
        with dnaio.open(DATA / "reads" / f"shigella_dysenteriae_ERR6005894_R{k}.fastq.gz") as src, \
                dnaio.open(reads[-1], mode="w") as out:
            for n, record in enumerate(src):
                if n == pairs:
                    break
                out.write(record)
    sam = folder / "shigella.sam"
    genome = DATA / "genomes" / "shigella_dysenteriae_ATCC13313_GCF_002949675.1.fna.gz"
    assert gkmap(["map", "--quiet", "--pe", "--index", str(folder / "idx"), "-o", str(sam), str(genome),
                  *map(str, reads)]) == 0
    return sam


def repeated(sam, records, out):
    """The SAM's header and its records repeated until there are at least `records`."""
    header, body = [], []
    with open(sam, "rb") as text:
        for line in text:
            (header if line.startswith(b"@") else body).append(line)
    body = b"".join(body)
    copies = -(-records // max(1, body.count(b"\n")))
    with open(out, "wb") as target:
        target.write(b"".join(header))
        for _ in range(copies):
            target.write(body)
    return out, b"".join(header).decode(), body * copies, body.count(b"\n") * copies


def cpu_seconds():
    """CPU time of this process and its finished children (samtools): comparable on a busy machine."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def best(repeat, call):
    """(wall seconds, CPU seconds) of the fastest of `repeat` calls."""
    times = []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), cpu_seconds()
        call()
        times.append((time.perf_counter() - start, cpu_seconds() - cpu))
    return min(times)


def samtools(*args):
    subprocess.run(["samtools", *map(str, args)], check=True, stdout=subprocess.DEVNULL)


def gkmap_bam(kind, path, header, body, **options):
    """Write `body` through a writer in pieces of about 64 MB, as a sink hands over batches."""
    cuts = [0]
    while cuts[-1] < len(body):
        cuts.append(body.rfind(b"\n", cuts[-1], cuts[-1] + (64 << 20)) + 1 or len(body))
    view = memoryview(body)

    def run():
        with open(path, "wb") as handle, kind(handle, header, **options) as writer:
            for start, end in zip(cuts, cuts[1:]):
                writer.write(view[start:end])
    return run


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sam", help="SAM to convert (default: gkmap's paired-end SAM of Shigella reads)")
    p.add_argument("--pairs", type=int, default=3000, help="Shigella read pairs mapped for the default SAM")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--threads", default=f"1,2,{os.cpu_count()}")
    p.add_argument("--memory", default="256M", help="sort memory in all (default 256M: a 1M-record input spills)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--tmp", default=None, help="folder for the outputs and sort runs (default: the system's)")
    args = p.parse_args()
    if shutil.which("samtools") is None:
        sys.exit("samtools is needed for the comparison")
    threads = sorted({int(t) for t in args.threads.split(",")})
    memory = parse_size(args.memory)
    with tempfile.TemporaryDirectory(prefix="gkmap-bench-output-", dir=args.tmp) as tmp:
        tmp = Path(tmp)
        source = Path(args.sam) if args.sam else shigella_sam(tmp, args.pairs)
        sam, header, body, n = repeated(source, args.records, tmp / "input.sam")
        mb = len(body) / 1e6
        print(f"input: {n:,} SAM records, {mb:,.1f} MB ({source.name} repeated); {os.cpu_count()} cores; "
              f"sort memory {memory >> 20} MiB")
        print(f"{'':30s}{'threads':>8s}{'seconds':>9s}{'CPU s':>7s}{'records/s':>12s}{'SAM MB/s':>10s}{'out MB':>8s}"
              f"{'x samtools':>11s}")
        out = tmp / "out.bam"
        for t in threads:
            at = ["-@", t - 1]
            runs = [
                ("samtools view -b", lambda: samtools("view", "--no-PG", "-b", *at, "-o", out, sam)),
                ("samtools view -b (level 1)",
                 lambda: samtools("view", "--no-PG", "-b", "--output-fmt-option", "level=1", *at, "-o", out, sam)),
                ("gkmap BamWriter", gkmap_bam(bam.BamWriter, out, header, body, threads=t)),
                ("samtools sort", lambda: samtools("sort", "--no-PG", *at, "-m", max(1, memory // t >> 20) * (1 << 20),
                                                   "-T", tmp / "sort", "-o", out, sam)),
                ("gkmap SortedBamWriter", gkmap_bam(bam.SortedBamWriter, out, header, body, threads=t, memory=memory,
                                                    temp_dir=tmp)),
            ]
            reference = None
            for name, run in runs:
                seconds, cpu = best(args.repeat, run)
                samtools("quickcheck", out)
                rate = n / seconds
                if name in ("samtools view -b", "samtools sort"):
                    reference = rate
                ratio = f"{rate / reference:.2f}" if name.startswith("gkmap") else ""
                print(f"{name:30s}{t:8d}{seconds:9.2f}{cpu:7.2f}{rate:12,.0f}{mb / seconds:10.1f}"
                      f"{out.stat().st_size / 1e6:8.1f}{ratio:>11s}", flush=True)


if __name__ == "__main__":
    main()
