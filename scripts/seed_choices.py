#!/usr/bin/env python3
"""How many seed hits a read would cost under other choices of its e + 1 seeds (issue #17, deliverable 4:
"fewer candidates per read at the same sensitivity"), counted from an index's bucket sizes.

    scripts/seed_choices.py GENOME READS [--index DIR] [-e 5] [--reads 1000] [--longer 14,16]

For the first --reads reads, both strands, the hits (positions in the chosen buckets) of:
  fixed    gkmap's rule: the e + 1 smallest buckets among the read's non-overlapping ws-mers at 0, ws,
           2 ws, ... (an empty one is chosen and adds nothing; mapper/seeding.py, seed.cu seed_select);
  shifted  the same rule on the best of the tilings that start at 0 .. L mod ws;
  optimal  any e + 1 non-overlapping ws-mers of the read, chosen to minimise the total (the optimal seed
           solver of Xin et al., Bioinformatics 2016, as a dynamic programme over read positions; an empty
           bucket costs 0 and still counts as a seed, since pigeonhole only needs e + 1 disjoint ws-mers).
  fixedS   (--longer S) the rule on tiles of S > ws bases at 0, S, 2 S, ...: the hits a longer k would
           cost, each S-mer counted in its ws-mer's bucket narrowed by its next S - ws bases (an index
           would need its buckets sorted by those bases to look such seeds up).
Each keeps the pigeonhole guarantee; a choice with fewer hits than `fixed` would find the same loci
from fewer candidates. Prints the mean hits a read of each. Analysis only (a Python loop a read).
"""
import argparse

import numpy as np

from mapper.alphabet import CODE_N, COMPLEMENT
from mapper.index import kmer_keys, open_index
from mapper.reads import read_batches


def bucket_sizes(index, codes):
    """Size of the bucket of every ws-mer of `codes` (0 for a k-mer with an N)."""
    ws, nk = index.ws, len(codes) - index.ws + 1
    keys, has_n = np.zeros(nk, np.int64), np.zeros(nk, bool)
    for i in range(ws):
        base = codes[i:i + nk]
        keys = (keys << 2) | (base & 3)
        has_n |= base == CODE_N
    sizes = index.bucket_sizes(keys)
    sizes[has_n] = 0
    return sizes


def longer_sizes(index, codes, length):
    """Occurrences in the genome of each tile of `length` bases of `codes` at 0, length, 2 length, ... (0 for
    a tile with an N): its ws-mer bucket's positions whose next length - ws bases are the tile's."""
    genome, ws = index.reference.codes, index.ws
    sizes = []
    for at in range(0, len(codes) - length + 1, length):
        tile = codes[at:at + length]
        if (tile == CODE_N).any():
            sizes.append(0)
            continue
        key = int(kmer_keys(tile[:ws], ws)[0])
        hits = np.asarray(index.positions[index.offsets[key]:index.offsets[key + 1]], dtype=np.int64)
        hits = hits[hits + length <= len(genome)]  # a tile cannot run past the genome's end
        follow = hits[:, None] + np.arange(ws, length)
        sizes.append(int((genome[follow] == tile[ws:]).all(axis=1).sum()))
    return np.array(sizes, dtype=np.int64)


def tiling_cost(sizes, start, ws, seeds):
    """Hits of the rule on the tiling from `start`: the e + 1 lowest ranks by size, an empty bucket (size 0)
    taking its rank and adding nothing."""
    tiles = sizes[start:len(sizes):ws]
    return int(np.sort(tiles)[:seeds].sum())


def optimal_cost(sizes, ws, seeds):
    """Least total size of `seeds` non-overlapping ws-mers (best[c] over read prefixes, c seeds placed)."""
    inf = np.iinfo(np.int64).max // 4
    length = len(sizes) + ws - 1
    best = np.full((length + 1, seeds + 1), inf, dtype=np.int64)
    best[:, 0] = 0
    for end in range(ws, length + 1):
        take = best[end - ws, :-1] + sizes[end - ws]
        best[end] = best[end - 1]
        best[end, 1:] = np.minimum(best[end, 1:], take)
    return int(best[length, seeds])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("genome")
    p.add_argument("reads")
    p.add_argument("--index", help="index folder (default: beside the genome)")
    p.add_argument("-e", type=int, default=5)
    p.add_argument("--reads", dest="n", type=int, default=1000)
    p.add_argument("--longer", default="", help="comma-separated tile lengths above ws to count (e.g. 14,16)")
    args = p.parse_args()
    index = open_index(args.genome, None, args.index)
    longer = [int(x) for x in args.longer.split(",") if x]
    if any(s <= index.ws for s in longer):
        p.error(f"--longer lengths must exceed the index's k-mer length ({index.ws})")
    batch = next(iter(read_batches(args.reads, args.n)))
    codes, starts, seeds, ws = batch.codes(), batch.starts, args.e + 1, index.ws
    totals = {"fixed": 0, "shifted": 0, "optimal": 0, **{f"fixed{s}": 0 for s in longer}}
    too_short = 0
    for r in range(len(batch)):
        forward = codes[starts[r]:starts[r + 1]]
        if len(forward) < seeds * max([ws, *longer]):
            too_short += 1
            continue
        for strand in (forward, COMPLEMENT[forward[::-1]]):
            sizes = bucket_sizes(index, strand)
            totals["fixed"] += tiling_cost(sizes, 0, ws, seeds)
            totals["shifted"] += min(tiling_cost(sizes, s, ws, seeds) for s in range(len(strand) % ws + 1))
            totals["optimal"] += optimal_cost(sizes, ws, seeds)
            for s in longer:
                totals[f"fixed{s}"] += int(np.sort(longer_sizes(index, strand, s))[:seeds].sum())
    n = len(batch) - too_short
    print(f"{n:,} reads (both strands), ws {ws}, e {args.e}" + (f"; {too_short} too short for e + 1 tiles skipped"
                                                                if too_short else ""))
    for name, total in totals.items():
        print(f"{name:8s} {total / max(n, 1):12,.1f} hits a read  ({total / max(totals['fixed'], 1):.3f} of fixed)")


if __name__ == "__main__":
    main()
