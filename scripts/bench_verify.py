#!/usr/bin/env python3
"""The verifier alone (kernels/myers.cu verify_windows, built for the host) on the real candidate windows of a
read set, or the locus selection after it, with the same timing of another checkout's beside it in one run.

    scripts/bench_verify.py GENOME READS -e E [--stage verify|loci] [--index DIR] [--reads-max 30000]
        [--repeat 7] [--against TREE]

The reads' first --reads-max are seeded by the cpu backend (index prebuilt with --index, else built), then
timed --repeat times on one thread: `verify` their windows verified (how many hold an alignment within e),
`loci` the verified mappings' locus selection as a render process runs it (verify.select_loci: the
refinement of nearby ends by verify_wide included; how many loci). Printed: the minimum and the median of
the calls and microseconds an item (window, or mapping). With --against, the same measurement runs in a
child process from that checkout (its mapper/ and kernels/; e.g. a `git worktree` of an earlier commit), one
checkout after the other, and the ratio of the minima is printed. Both must find the same counts.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(args):
    """This checkout's numbers (run in the checkout's folder: `mapper` is imported from there)."""
    from mapper.backends import get_backend
    from mapper.backends.cuda_mapping import verify_windows
    from mapper.device import host, using
    from mapper.index import open_index
    from mapper.pipeline import per_read_e
    from mapper.reads import read_batches
    from mapper.seeding import strand_rows
    from mapper.verify import select_loci
    index = open_index(args.genome, None, args.index)
    backend = get_backend("cpu", 1, None)
    backend.load(index, None)
    batch = next(iter(read_batches(args.reads, args.reads_max)))
    rows = strand_rows(batch.codes(), batch.starts, per_read_e(batch, args.e, args.reads))
    cands, _ = backend.seed(rows, index)
    if args.stage == "loci":
        maps = backend.verify(rows, cands, index.reference)
        run, items = (lambda: len(select_loci(rows, maps, index.reference))), len(maps)
    else:
        cands = getattr(cands, "host", cands)
        start, end = cands.windows(rows, index.reference)
        r = cands.row
        windows = (index.reference.codes, rows.codes, rows.start[r], rows.length[r], rows.e[r], start, end - start)
        run, items = (lambda: int((verify_windows(*windows)[0] >= 0).sum())), len(start)
    seconds = []
    with using(host):  # one OpenMP thread: the cpu backend of get_backend(..., 1) set it
        for _ in range(args.repeat):
            t = time.perf_counter()
            found = run()
            seconds.append(time.perf_counter() - t)
    return {"items": items, "found": found, "min_s": min(seconds), "median_s": statistics.median(seconds)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("genome")
    p.add_argument("reads")
    p.add_argument("-e", type=int, required=True)
    p.add_argument("--stage", choices=("verify", "loci"), default="verify")
    p.add_argument("--index", help="index folder (default: next to the genome, built when missing)")
    p.add_argument("--reads-max", type=int, default=30_000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--against", help="another checkout whose kernel is timed the same way")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(measure(args)))
        return
    trees = [("this", ROOT)] + ([("against", Path(args.against).resolve())] if args.against else [])
    results = {}
    for label, tree in trees:
        command = [sys.executable, str(Path(__file__).resolve()), "--child", os.path.abspath(args.genome),
                   os.path.abspath(args.reads), "-e", str(args.e), "--stage", args.stage,
                   "--reads-max", str(args.reads_max), "--repeat", str(args.repeat)]
        if args.index:
            command += ["--index", os.path.abspath(args.index)]
        env = dict(os.environ, PYTHONPATH=str(tree))
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{label} ({tree}) failed: {done.stderr[-800:]}")
        results[label] = json.loads(done.stdout.strip().splitlines()[-1])
    item, found = ("window", "within e") if args.stage == "verify" else ("mapping", "loci")
    print(f"| tree | {item}s | {found} | min s | median s | us a {item} (min) |")
    print("|---|---|---|---|---|---|")
    for label, tree in trees:
        r = results[label]
        print(f"| {label} ({tree}) | {r['items']:,} | {r['found']:,} | {r['min_s']:.4f} | {r['median_s']:.4f} | "
              f"{1e6 * r['min_s'] / r['items']:.2f} |")
    if args.against:
        a, b = results["this"], results["against"]
        if (a["items"], a["found"]) != (b["items"], b["found"]):
            raise SystemExit(f"the two checkouts found different {found}")
        print(f"this / against (minima): {a['min_s'] / b['min_s']:.3f}")


if __name__ == "__main__":
    main()
