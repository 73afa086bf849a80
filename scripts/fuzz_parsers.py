#!/usr/bin/env python3
"""Seeded fuzzing of gkmap's input parsers, in process, counted (issue #19): the reads parser (FASTQ and
FASTA, plain and gzip), the reference FASTA reader (plain and gzip), the pairs parser of `gkmap filter`,
and the index loader (meta.json and arrays damaged). Each execution feeds one damaged input (bytes
flipped, inserted, deleted or cut, before or after compressing) and must either parse or raise gkmap's
own error (GkmapError: one line, a non-zero exit in the CLI); anything else is a crash, printed with its
input saved beside the report.

    scripts/fuzz_parsers.py [--execs 100000] [--seed 19] [--parsers reads,fasta,pairs,index] [--out DIR]

tests/cli/test_bad_input.py runs a 5-second version of this in CI; this is the long run whose counts the
README and closing notes quote.
"""
import argparse
import gzip
import json
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

from mapper.errors import GkmapError
from mapper.filters.pairs import parse_pairs
from mapper.index import build_index, load_index
from mapper.reads import read_batches
from mapper.reference import read_fasta

READS = b"".join(b"@r%d desc\nACGTNACGTTGCAAGT%s\n+\nIIIII#IIIIIIIIII%s\n" % (i, b"ACGT" * (i % 5), b"I" * (4 * (i % 5)))
                 for i in range(12))
FASTA_READS = b"".join(b">r%d\nACGTTGCAAGGCTA%s\n" % (i, b"GT" * i) for i in range(12))
REFERENCE = b">chr1 test\n" + b"ACGTTGCAAGGCTAGGATCCA" * 20 + b"\nNNNNACGT\n>chr2\n" + b"TTGACCA" * 30 + b"\n"
PAIRS = b"".join(b"ACGTTGCAAG%s\tACGATGCAAG%s\n" % (b"T" * i, b"T" * i) for i in range(1, 15))


def damage(rng, data):
    """A few random flips, insertions, deletions or a cut."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not data:
            break
        at, what = rng.randrange(len(data)), rng.random()
        if what < 0.4:
            data[at] = rng.randrange(256)
        elif what < 0.6:
            data.insert(at, rng.choice(b"\n\t >@+*=N\x00\xe9ACGT"))
        elif what < 0.85:
            del data[at]
        else:
            del data[at:]
    return bytes(data)


def damaged_file(rng, folder, name, raw):
    compress = rng.random() < 0.5
    if compress and rng.random() < 0.5:
        content = damage(rng, gzip.compress(raw, mtime=0))
    else:
        content = damage(rng, raw)
        content = gzip.compress(content, mtime=0) if compress else content
    path = folder / (name + (".gz" if compress else ""))
    path.write_bytes(content)
    return path, content


def run_reads(rng, folder):
    raw, name = (READS, "r.fq") if rng.random() < 0.5 else (FASTA_READS, "r.fa")
    path, content = damaged_file(rng, folder, name, raw)
    for batch in read_batches(str(path), 5):
        batch.codes()
    return content


def run_fasta(rng, folder):
    path, content = damaged_file(rng, folder, "g.fa", REFERENCE)
    read_fasta(path)
    return content


def run_pairs(rng, folder):
    content = damage(rng, PAIRS)
    parse_pairs(content, "pairs.txt")
    return content


class IndexDamage:
    """A small index built once; each execution damages a copy of one of its files and loads it."""

    def __init__(self, folder):
        (folder / "ref.fa").write_bytes(REFERENCE)
        build_index(folder / "ref.fa", 10, folder / "good")
        self.folder = folder

    def __call__(self, rng, folder):
        copy = folder / "idx"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(self.folder / "good", copy)
        target = copy / rng.choice(["meta.json", "offsets.npy", "positions.npy", "seq2bit.npy", "nmask.npy"])
        if target.name == "meta.json" and rng.random() < 0.5:
            meta = json.loads(target.read_text())
            key = rng.choice(sorted(meta))
            meta[key] = rng.choice([None, -1, 0, 10**12, "x", [], {}, meta[key]])
            target.write_text(json.dumps(meta))
            content = target.read_bytes()
        else:
            content = damage(rng, target.read_bytes())
            target.write_bytes(content)
        index = load_index(self.folder / "ref.fa", copy)
        np.asarray(index.positions[:10])
        return content


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--execs", type=int, default=100_000, help="executions per parser")
    p.add_argument("--seed", type=int, default=19)
    p.add_argument("--parsers", default="reads,fasta,pairs,index")
    p.add_argument("--out", help="where crashing inputs are saved (default: a temporary folder)")
    args = p.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="gkmap-fuzz-"))
    out.mkdir(parents=True, exist_ok=True)
    crashes_total = 0
    with tempfile.TemporaryDirectory(prefix="gkmap-fuzz-work-") as work:
        work = Path(work)
        parsers = {"reads": run_reads, "fasta": run_fasta, "pairs": run_pairs}
        if "index" in args.parsers.split(","):
            (work / "base").mkdir()
            parsers["index"] = IndexDamage(work / "base")
        for name in args.parsers.split(","):
            rng, run = random.Random(f"{args.seed}-{name}"), parsers[name]
            outcomes, crashes, t0 = {"parsed": 0, "refused": 0}, [], time.perf_counter()
            for i in range(args.execs):
                content = b""
                try:
                    content = run(rng, work)
                    outcomes["parsed"] += 1
                except GkmapError as error:
                    outcomes["refused"] += 1
                    if "\n" in str(error):
                        raise SystemExit(f"{name}: a multi-line error: {error!r}")
                except Exception:  # a crash: any exception that is not gkmap's own error
                    crashes.append(traceback.format_exc(limit=3))
                    (out / f"{name}-{i}.input").write_bytes(content or b"")
            crashes_total += len(crashes)
            print(f"{name}: {args.execs:,} executions in {time.perf_counter() - t0:.0f} s: {outcomes['parsed']:,} "
                  f"parsed, {outcomes['refused']:,} refused with one line, {len(crashes)} crashes", flush=True)
            for text in crashes[:3]:
                print(text, file=sys.stderr)
    return 1 if crashes_total else 0


if __name__ == "__main__":
    sys.exit(main())
