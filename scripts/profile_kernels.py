#!/usr/bin/env python3
"""Where a `gkmap map` run spends its kernel time: every kernel launch timed, summed per kernel.

    scripts/profile_kernels.py REFERENCE READS [-e 5] [--device cuda|cpu] [--batch-size N] [--index-dir DIR]
        [-t 4] [--top 20]

Runs `gkmap map` in this process (SAM to /dev/null) with each launch of the device layer (cuda:
mapper/device/cuda.py, bracketed by CUDA events and a synchronisation; cpu: mapper/device/host.py, the
kernels compiled for the host, timed by the clock) measured, then prints per kernel: launches, threads,
seconds, share of the kernels' total, and the run's own summary (stage wall seconds). On the GPU the
synchronisation serialises the stream, so the run is slower than a plain one; the kernel seconds are what
each kernel costs, and the gap between a stage's wall seconds and its kernels' seconds is host work
(prefix sums, copies, Python) in that stage. Why a script and not nsys: the GPU machines lent to the
project carry no nsys; their ncu (/usr/local/cuda/bin/ncu) profiles single launches in depth (`ncu
--target-processes all -k seed_place -s 5 -c 1 python3 -m mapper map ...`), not a run's every kernel.
"""
import argparse
import collections
import logging
import sys
import time

from mapper.device import cuda, host
from mapper.options import MapOptions
from mapper.runners import map_reads


def timed_launches(layer, totals):
    """Replace the layer's launch with one that adds each launch's seconds to totals[kernel name]."""
    plain = layer.launch

    def launch(kernel, n, *args, **options):
        with layer.Timer() as timer:
            plain(kernel, n, *args, **options)
        entry = totals[getattr(kernel, "name", str(kernel))]
        entry[0] += 1
        entry[1] += timer.seconds
        entry[2] += n
    layer.launch = launch


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("reference")
    p.add_argument("reads")
    p.add_argument("-e", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=100_000)
    p.add_argument("--index-dir")
    p.add_argument("--filter", default="none")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("-t", "--threads", type=int, default=4)
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    totals = collections.defaultdict(lambda: [0, 0.0, 0])
    timed_launches(cuda if args.device == "cuda" else host, totals)
    opts = MapOptions(args.reference, args.reads, e=args.e, device=args.device, output="/dev/null", quiet=True,
                      batch_size=args.batch_size, index_dir=args.index_dir, filter=args.filter,
                      threads=args.threads).check()
    t = time.perf_counter()
    map_reads(opts)
    wall = time.perf_counter() - t
    kernel_total = sum(v[1] for v in totals.values()) or 1.0
    print(f"\nrun {wall:.2f} s; kernels {kernel_total:.2f} s ({args.device})\n")
    print("| kernel | launches | threads | s | share |")
    print("|---|---|---|---|---|")
    for name, (calls, seconds, threads) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"| {name} | {calls} | {threads:,} | {seconds:.3f} | {seconds / kernel_total:.1%} |")


if __name__ == "__main__":
    main()
