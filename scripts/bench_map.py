#!/usr/bin/env python3
"""Mapping throughput, single-end and (with --pe) paired-end, on one backend; every number measured in this run.

    scripts/bench_map.py [--pe] [--device cpu] [--data ../shared/data] [-e E] [--pairs N] [--repeat 3]

The Shigella R1/R2 run (150 bp, 22,084 pairs) against S. dysenteriae. Single-end: R1 and R2 each mapped
alone; its reads/s is all their reads over the time of both runs. Paired (--pe): the two files as pairs
(gkmap map --pe, insert size estimated); reads/s counts two reads per pair. Each run goes end to end
(FASTQ files in, SAM files out, index already built), best of --repeat. The issue's bar: paired reads/s at
least half the single-end reads/s of the same backend.
"""
import argparse
import itertools
import sys
import tempfile
from pathlib import Path

import dnaio

from mapper.index import build_index
from mapper.options import MapOptions
from mapper.runners import map_reads

ROOT = Path(__file__).resolve().parents[1]


def run(genome, index, out, device, e, r1, r2=None):
    """One mapping run, end to end (FASTQ in, SAM out): its measurements."""
    opts = MapOptions(str(genome), str(r1), reads2=str(r2) if r2 else None, paired="pe" if r2 else None, e=e,
                      device=device, index_dir=str(index), output=str(out), quiet=True)
    c = map_reads(opts)
    mates = c.mates if r2 else c
    row = dict(reads=mates.reads, seconds=mates.seconds, stages=mates.stages,
               times={k: round(v, 3) for k, v in mates.times.items()})
    if r2:
        row.update(pairs=c.pairs, concordant=c.concordant, discordant=c.discordant, oea=c.oea, unmapped=c.unmapped,
                   insert=c.insert)
    return row


def subset(src, n, dst):
    with dnaio.open(src) as reader, dnaio.open(dst, mode="w") as writer:
        for record in itertools.islice(reader, n):
            writer.write(record)
    return dst


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pe", action="store_true", help="also map the files as read pairs")
    p.add_argument("--device", default="cpu", help="backend, passed to gkmap map --device")
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("-e", type=int, default=None, help="fixed e (default: gkmap's per-read rule)")
    p.add_argument("--pairs", type=int, default=None, help="only the first N pairs")
    p.add_argument("--repeat", type=int, default=3, help="runs of each kind; the fastest counts")
    args = p.parse_args()
    data = Path(args.data)
    genome = data / "genomes" / "shigella_dysenteriae_ATCC13313_GCF_002949675.1.fna.gz"
    reads = [data / "reads" / f"shigella_dysenteriae_ERR6005894_R{k}.fastq.gz" for k in (1, 2)]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.pairs:
            reads = [subset(path, args.pairs, tmp / f"r{k}.fq") for k, path in enumerate(reads, 1)]
        index = tmp / "idx"
        build_index(str(genome), 12, str(index))
        common = (genome, index, tmp / "out.sam", args.device, args.e)
        single = [min((run(*common, r) for _ in range(args.repeat)), key=lambda r: r["seconds"]) for r in reads]
        se_reads, se_seconds = sum(r["reads"] for r in single), sum(r["seconds"] for r in single)
        print(f"backend {single[0]['stages']}; Shigella ERR6005894, 150 bp, best of {args.repeat}")
        print(f"{'run':28} {'reads':>7} {'s':>7} {'reads/s':>9}")
        for name, r in zip(("single-end R1", "single-end R2"), single):
            print(f"{name:28} {r['reads']:7} {r['seconds']:7.2f} {r['reads'] / r['seconds']:9,.0f}   {r['times']}")
        se_rate = se_reads / se_seconds
        print(f"{'single-end R1 + R2':28} {se_reads:7} {se_seconds:7.2f} {se_rate:9,.0f}")
        if args.pe:
            pe = min((run(*common, *reads) for _ in range(args.repeat)), key=lambda r: r["seconds"])
            pe_rate = pe["reads"] / pe["seconds"]
            print(f"{'paired (--pe)':28} {pe['reads']:7} {pe['seconds']:7.2f} {pe_rate:9,.0f}   {pe['times']}")
            print(f"paired / single-end reads/s: {pe_rate / se_rate:.2f} (the bar is 0.50)")
            print(f"{pe['pairs']} pairs: {pe['concordant']} concordant, {pe['discordant']} discordant, {pe['oea']} "
                  f"one-end anchored, {pe['unmapped']} unmapped; TLEN range {pe['insert'][0]}..{pe['insert'][1]}")


if __name__ == "__main__":
    sys.exit(main())
