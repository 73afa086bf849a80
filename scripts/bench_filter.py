#!/usr/bin/env python3
"""Benchmark the GateKeeper filter: both modes, both backends, both encoding paths.

For each read length L and threshold E (default: L = 100, 150, 250 and E = 0 .. 10 % of L) and each kind of pairs
(`random`: unrelated sequences; `real`: a read copied from its reference segment with the simulator's errors,
1 % substitutions and one 1-2 base indel in 10 % of the reads, seed 11), prints one row per mode, backend and
encoding path:
    kernel s   the filter computation alone (cuda: the kernels' event time; cpu: the numpy core)
    filter s   from ASCII rows in host memory to decisions in host memory: encoding, transfers, kernel
    M pairs/s  pairs / kernel s and pairs / filter s
A different set of `--pairs` distinct pairs is tiled to the requested count (a filter's speed does not depend on
pairs being distinct). Published GateKeeper-GPU figures, for comparison (not measured here):
    GTX 1080 Ti, paper Table S.17-S.19, 100 bp, e = 2: 102 M pairs/s kernel, 3.2 M pairs/s filter;
    the published program ported to CUDA 13 on one H100 (issue #4): 660 M pairs/s at 100 bp e = 5, 1390 M at e = 2.

    python scripts/bench_filter.py --device cpu --count 262144
    python scripts/bench_filter.py --device cuda --count 16777216 --es 100:2,5,10 150:7 250:12
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mapper.filters.gatekeeper import backend, check_e  # noqa: E402

LETTERS = np.frombuffer(b"ACGT", dtype=np.uint8)


def make_pairs(kind, L, n, rng):
    """(segments, reads) ASCII uint8 [n, L]: column 1 and column 2 of a pairs file."""
    segment = rng.integers(0, 4, size=(n, L + 2), dtype=np.uint8)
    if kind == "random":
        return LETTERS[segment[:, :L]], LETTERS[rng.integers(0, 4, size=(n, L), dtype=np.uint8)]
    index = np.broadcast_to(np.arange(L), (n, L)).copy()
    indel = rng.random(n) < 0.10
    size = rng.integers(1, 3, size=n)
    at = rng.integers(0, L, size=n)
    deletion = indel & (rng.random(n) < 0.5)
    insertion = indel & ~deletion
    after = index >= at[:, None]
    index += np.where(deletion[:, None] & after, size[:, None], 0)
    index -= np.where(insertion[:, None] & after, size[:, None], 0)
    inserted = insertion[:, None] & after & (index < at[:, None])
    read = np.take_along_axis(segment, np.clip(index, 0, L + 1), axis=1)
    read[inserted] = rng.integers(0, 4, size=int(inserted.sum()), dtype=np.uint8)
    sub = rng.random((n, L)) < 0.01
    read[sub] = (read[sub] + rng.integers(1, 4, size=int(sub.sum()), dtype=np.uint8)) % 4
    return LETTERS[segment[:, :L]], LETTERS[read]


def run_one(gk, mode, encoding, segments, reads, e):
    """(kernel s, filter s) of one pass over all pairs, from ASCII rows in host memory."""
    from mapper.alphabet import ENCODE
    from mapper.filters.gatekeeper import encode_faithful
    k0, t0 = gk.kernel_seconds, time.perf_counter()
    if mode == "improved":
        if encoding == "device":
            gk.improved_ascii(reads, segments, e, "global")
        else:
            gk.improved(ENCODE[reads], ENCODE[segments], e, "global")
    elif encoding == "device":
        gk.faithful_ascii(segments, reads, e)
    else:
        shifted, fixed, undefined = encode_faithful(segments, reads)
        gk.faithful(shifted, fixed, e, undefined)
    return gk.kernel_seconds - k0, time.perf_counter() - t0


def parse_es(items):
    """['100:2,5', '250:12'] -> {100: [2, 5], 250: [12]}"""
    out = {}
    for item in items:
        length, es = item.split(":")
        out[int(length)] = [int(e) for e in es.split(",")]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda", "both"], default="cpu")
    ap.add_argument("--count", type=int, default=1 << 18, help="pairs per measurement (>= 2^24 on the GPU)")
    ap.add_argument("--pairs", type=int, default=1 << 18, help="distinct pairs, tiled to --count")
    ap.add_argument("--lengths", type=int, nargs="+", default=[100, 150, 250])
    ap.add_argument("--es", nargs="+", default=None, help="L:E,E,... (default: E = 0 .. ceil(0.1 L) for each L)")
    ap.add_argument("--kinds", nargs="+", default=["random", "real"], choices=["random", "real"])
    ap.add_argument("--modes", nargs="+", default=["improved", "faithful"], choices=["improved", "faithful"])
    ap.add_argument("--encodings", nargs="+", default=["host", "device"], choices=["host", "device"])
    args = ap.parse_args(argv)
    es = parse_es(args.es) if args.es else {L: list(range(0, -(-L // 10) + 1)) for L in args.lengths}
    devices = ["cpu", "cuda"] if args.device == "both" else [args.device]
    print(f"{'dev':4} {'enc':6} {'mode':8} {'kind':6} {'L':>4} {'E':>3} {'pairs':>9} {'kernel s':>9} "
          f"{'filter s':>9} {'kernel M/s':>10} {'filter M/s':>10}")
    for L in es:
        rng = np.random.default_rng(11)
        for kind in args.kinds:
            segments, reads = make_pairs(kind, L, min(args.pairs, args.count), rng)
            reps = -(-args.count // len(segments))
            segments = np.tile(segments, (reps, 1))[:args.count]
            reads = np.tile(reads, (reps, 1))[:args.count]
            for e in es[L]:
                for device in devices:
                    gk = backend(device)
                    for mode in args.modes:
                        check_e(e, mode)
                        for encoding in args.encodings if device == "cuda" else ["host"]:
                            run_one(gk, mode, encoding, segments[:1024], reads[:1024], e)  # compile, warm up
                            kernel, total = run_one(gk, mode, encoding, segments, reads, e)
                            n = len(segments)
                            print(f"{device:4} {encoding:6} {mode:8} {kind:6} {L:4d} {e:3d} {n:9d} {kernel:9.4f} "
                                  f"{total:9.4f} {n / kernel / 1e6:10.1f} {n / total / 1e6:10.2f}", flush=True)


if __name__ == "__main__":
    main()
