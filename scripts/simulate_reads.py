#!/usr/bin/env python3
"""Simulate reads with a known truth from a real genome (model: mapper/simulate.py, CONVENTIONS.md).

    scripts/simulate_reads.py GENOME.fa[.gz] N L --seed 11 -o reads.fq
"""
import argparse
import sys
import tempfile
from pathlib import Path

from mapper.outputs import atomic_output
from mapper.reference import read_fasta
from mapper.simulate import simulate, write_fastq


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("genome")
    p.add_argument("n", type=int)
    p.add_argument("length", type=int)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("-o", "--output", default="-")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        reference = read_fasta(args.genome, Path(tmp) / "ref.fai")
    with atomic_output(args.output) as out:
        write_fastq(simulate(reference, args.n, args.length, args.seed), out)


if __name__ == "__main__":
    sys.exit(main())
