#!/usr/bin/env python3
"""Mapping benchmark of the cuda backend (issue #5), every number measured in this run.

    scripts/bench_cuda.py [--data ../shared/data] [--reads 200000] [--cpu-reads 20000] [--out DIR]

Human chr20 with reads simulated from it (scripts/simulate_reads.py model, seed 11), 100 bp at e=5 and
150 bp at e=6, then the real Shigella and honeybee-virus reads against their genomes; for each, --filter
none / gatekeeper / gatekeeper-faithful side by side on the cuda backend, and --filter none on the cpu
backend over a subsample (reads/s ratio). A warm-up run first keeps kernel compilation out of the times.
Columns: reads/s end to end (FASTQ file to SAM file), core reads/s (seed + filter + verify only),
candidate windows per read, filter pass rate, verifications, loci and mapped reads lost against
--filter none of the same backend (the published filter may lose some; the improved one must lose none),
and seconds per stage (align and output are summed over the host render workers, -t).
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

from mapper.index import build_index
from mapper.options import MapOptions
from mapper.outputs import atomic_output
from mapper.runners import map_reads
from mapper.simulate import simulate, write_fastq

ROOT = Path(__file__).resolve().parents[1]
FILTERS = ("none", "gatekeeper", "gatekeeper-faithful")


def run(genome, reads, folder, device, filt, e, tag, quiet=True):
    c = map_reads(MapOptions(str(genome), str(reads), e=e, filter=filt, device=device, index_dir=str(folder / "idx"),
                             output=str(folder / f"{tag.split()[0]}.{device}.{filt}.sam"), quiet=quiet))
    core = c.times["seed"] + c.times["filter"] + c.times["verify"]
    windows = c.seeding.bands
    return dict(
        set=tag, device=device, filter=filt, reads=c.reads, seconds=c.seconds, rate=c.reads / c.seconds,
        core_rate=c.reads / core if core else 0.0, windows_per_read=windows / max(c.reads, 1),
        pass_rate=c.verified / windows if windows else 1.0, verified=c.verified, mapped=c.mapped, loci=c.loci,
        lost="",
        stages=" ".join(f"{k}={v:.2f}" for k, v in c.times.items()))


def head(src, dst, n):
    with open(src) as f, open(dst, "w") as out:
        for i, line in enumerate(f):
            if i >= 4 * n:
                break
            out.write(line)
    return dst


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--reads", type=int, default=200_000)
    p.add_argument("--cpu-reads", type=int, default=20_000)
    p.add_argument("--out", help="keep the SAM files and the table here")
    p.add_argument("--device", default="cuda", help="backend of the side-by-side runs (cpu: a smoke test)")
    args = p.parse_args()
    data = Path(args.data)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.out or tmp)
        work.mkdir(parents=True, exist_ok=True)
        chr20 = data / "genomes" / "human_GRCh37_chr20.fa.gz"
        t = time.perf_counter()
        index = build_index(chr20, 12, work / "idx")
        print(f"index chr20: {time.perf_counter() - t:.1f} s", file=sys.stderr)
        sets = []
        for length, e in ((100, 5), (150, 6)):
            fq = work / f"chr20_{length}.fq"
            t = time.perf_counter()
            with atomic_output(str(fq)) as out:
                write_fastq(simulate(index.reference, args.reads, length, seed=11), out)
            print(f"simulated {args.reads} x {length} bp in {time.perf_counter() - t:.1f} s", file=sys.stderr)
            sets.append((f"chr20 sim {length}bp e={e}", chr20, fq, e, work))
        for name, genome, reads in (("Shigella R1 150bp", "shigella_dysenteriae_ATCC13313_GCF_002949675.1.fna.gz",
                                     "shigella_dysenteriae_ERR6005894_R1.fastq.gz"),
                                    ("honeybee 72bp", "honeybee_viruses_DWV_NC_004830.2_VDV1_NC_006494.1.fa.gz",
                                     "honeybee_virus_SRR059298_GAII_subset.fastq.gz")):
            folder = work / name.split()[0]
            folder.mkdir(exist_ok=True)
            sets.append((name, data / "genomes" / genome, data / "reads" / reads, None, folder))
        for name, genome, reads, e, folder in sets:
            warm = head(reads, folder / "warm.fq", 2000) if str(reads).endswith(".fq") else reads
            for filt in FILTERS:  # warm-up: compile every kernel this set needs
                run(genome, warm, folder, args.device, filt, e, "warmup")
            for filt in FILTERS:
                rows.append(run(genome, reads, folder, args.device, filt, e, name))
            sub = head(reads, folder / "sub.fq", args.cpu_reads) if str(reads).endswith(".fq") else reads
            rows.append(run(genome, sub, folder, "cpu", "none", e, name))
        base = {(r["set"], r["device"]): r for r in rows if r["filter"] == "none"}
        for r in rows:
            b = base[(r["set"], r["device"])]
            if r is not b:
                r["lost"] = f"{b['loci'] - r['loci']:,} / {b['mapped'] - r['mapped']:,}"
        lines = ["| set | device | filter | reads | end-to-end reads/s | core reads/s | windows/read | pass rate | "
                 "verified | mapped | loci / reads lost | seconds per stage |", "|" + "---|" * 12]
        for r in rows:
            lines.append(f"| {r['set']} | {r['device']} | {r['filter']} | {r['reads']:,} | {r['rate']:,.0f} | "
                         f"{r['core_rate']:,.0f} | {r['windows_per_read']:.2f} | {r['pass_rate']:.3f} | "
                         f"{r['verified']:,} | {r['mapped']:,} | {r['lost']} | {r['stages']} |")
        table = "\n".join(lines)
        print(table)
        if args.out:
            (Path(args.out) / "bench_cuda.md").write_text(table + "\n")


if __name__ == "__main__":
    sys.exit(main())
