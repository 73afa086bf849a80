#!/usr/bin/env python3
"""CPU mapping benchmark (issue #3): index and map, each step in a fresh process so its peak RSS is its own.

    scripts/bench_cpu.py [--data ../shared/data] [--filters none,gatekeeper] [--skip-chr20]

Steps: index S. dysenteriae; map the 22,084 Shigella R1 reads (150 bp) at e = 6 with each filter;
index human chr20 (63 Mb). Prints seconds, reads/s, candidates per read, verification calls, peak RSS,
and the ratios of the filtered runs to the no-filter baseline, all from this one run.
"""
import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def step(kind, genome, index, reads=None, filt="none"):
    """Run one step in this process and print its measurements as JSON (called in a child process)."""
    from mapper.index import build_index
    from mapper.options import MapOptions
    from mapper.runners import map_reads
    t0 = time.perf_counter()
    out = {"step": kind}
    if kind == "index":
        build_index(genome, 12, index)
    else:
        c = map_reads(MapOptions(genome, reads, e=6, filter=filt, device="cpu", index_dir=index,
                                 output=str(Path(index).parent / f"{filt}.sam"), quiet=True))
        out.update(reads=c.reads, mapped=c.mapped, loci=c.loci, windows=c.seeding.bands,
                   verified=c.verified, hits=c.seeding.hits)
    out["seconds"] = time.perf_counter() - t0
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def child(*args):
    done = subprocess.run([sys.executable, __file__, "--child", *map(str, args)], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"step {args} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--filters", default="none,gatekeeper")
    p.add_argument("--skip-chr20", action="store_true")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return step(*args.child)
    data = Path(args.data)
    genome = data / "genomes" / "shigella_dysenteriae_ATCC13313_GCF_002949675.1.fna.gz"
    reads = data / "reads" / "shigella_dysenteriae_ERR6005894_R1.fastq.gz"
    with tempfile.TemporaryDirectory() as tmp:
        rows = [("index S. dysenteriae (4.6 Mb)", child("index", genome, Path(tmp) / "shig.gkx"))]
        for filt in args.filters.split(","):
            rows.append((f"map Shigella R1, e=6, --filter {filt}",
                         child("map", genome, Path(tmp) / "shig.gkx", reads, filt)))
        if not args.skip_chr20:
            rows.append(("index human chr20 (63 Mb)",
                         child("index", data / "genomes" / "human_GRCh37_chr20.fa.gz", Path(tmp) / "chr20.gkx")))
    print(f"{'step':44} {'s':>7} {'reads/s':>9} {'windows/read':>12} {'verified':>9} {'mapped':>7} {'RSS MB':>7}")
    base = None
    for name, r in rows:
        if r["step"] == "map":
            rate = r["reads"] / r["seconds"]
            base = base or rate
            print(f"{name:44} {r['seconds']:7.2f} {rate:9,.0f} {r['windows'] / r['reads']:12.2f} "
                  f"{r['verified']:9} {r['mapped']:7} {r['peak_rss_mb']:7.0f}   x{rate / base:.2f} vs no filter")
        else:
            print(f"{name:44} {r['seconds']:7.2f} {'':>9} {'':>12} {'':>9} {'':>7} {r['peak_rss_mb']:7.0f}")


if __name__ == "__main__":
    sys.exit(main())
