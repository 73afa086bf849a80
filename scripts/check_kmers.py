#!/usr/bin/env python3
"""Check `gkmap kmers count` against jellyfish on whole genomes: E. coli and human chr20, k = 15, 31, 65, 127,
canonical and not (the matrix of issue #7; the CI tests cover the Shigella reads).

For each case both tools count the same uncompressed FASTA, then the script compares
  - the number of distinct k-mers and the sum of the counts,
  - `jellyfish histo` with gkmap's histogram, byte for byte,
  - an order-independent digest of every (k-mer, count) pair: the sum mod 2^64 of a 64-bit mix of the pair,
    computed over jellyfish's dump (parsed in blocks with numpy) and over gkmap's table (read back bin by
    bin). No text sort is needed, so chr20 at k = 127 stays affordable.

With `--against cpu` (on the GPU machine, which has no jellyfish) the reference is gkmap's cpu backend
(itself checked against jellyfish): both table files must have the same SHA-256.

    python scripts/check_kmers.py [--genomes ecoli chr20] [-k 15 31 65 127] [--device cpu]
                                  [--against jellyfish|cpu] [--workdir DIR]

Exit status 0 when every case agrees. Needs jellyfish on PATH unless --against cpu.
"""
import argparse
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("GKMAP_SHARED_DATA") or ROOT.parent / "shared" / "data")  # as tests/conftest.py
sys.path.insert(0, str(ROOT))

from mapper.alphabet import ENCODE  # noqa: E402
from mapper.kmers import KmerTable, count_kmers  # noqa: E402
from mapper.kmers.backend import CpuBackend, select  # noqa: E402
from mapper.kmers.encode import KmerLayout, keys_from_codes  # noqa: E402
from mapper.kmers.text import histogram_lines  # noqa: E402

GENOMES = SHARED_DATA / "genomes"
DATASETS = {
    "ecoli": GENOMES / "ecoli_K12_MG1655_NC_000913.2.fa.gz",
    "chr20": GENOMES / "human_GRCh37_chr20.fa.gz",
}
BLOCK_BYTES = 1 << 26


def uncompressed(path, workdir):
    """A plain copy of a gzip file in workdir (jellyfish reads plain files only); made once."""
    out = Path(workdir) / Path(path).name.removesuffix(".gz")
    if not out.exists():
        with gzip.open(path, "rb") as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 24)
    return out


def jellyfish_count(fasta, k, canonical, db, threads=2):
    """Run `jellyfish count`; returns its wall time in seconds."""
    cmd = ["jellyfish", "count", "-m", str(k), "-s", "100M", "-t", str(threads), "-o", str(db)]
    start = time.perf_counter()
    subprocess.run(cmd + (["-C"] if canonical else []) + [str(fasta)], check=True)
    return time.perf_counter() - start


def _mix(x):
    """splitmix64's finaliser: a bijective 64-bit mix (wrapping uint64 arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def pair_digest(keys, counts):
    """(distinct, total, digest) of keys uint64 [C, n] with counts; digest does not depend on order."""
    h = np.zeros(len(counts), dtype=np.uint64)
    for channel in keys:
        h = _mix(h ^ channel)
    h = _mix(h ^ counts.astype(np.uint64))
    return len(counts), int(counts.sum(dtype=np.uint64)), int(h.sum(dtype=np.uint64))


def _parse_dump_block(block, layout):
    """keys, counts of complete `KMER<TAB>COUNT` lines in a bytes block."""
    data = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(data == ord("\n"))
    starts = np.concatenate(([0], ends[:-1] + 1))
    codes = ENCODE[data[starts[:, None] + np.arange(layout.k)]]
    digits_start = starts + layout.k + 1
    ndigits = ends - digits_start
    width = int(ndigits.max())
    at = np.minimum(digits_start[:, None] + np.arange(width), len(data) - 1)
    digits = (data[at].astype(np.uint64) - ord("0")) * (np.arange(width) < ndigits[:, None])
    place = (ndigits[:, None] - 1 - np.arange(width)).clip(0)
    counts = (digits * np.uint64(10) ** place.astype(np.uint64)).sum(axis=1, dtype=np.uint64)
    return keys_from_codes(codes, layout), counts


def jellyfish_digest(db, k):
    """pair_digest over `jellyfish dump -c -t`, streamed in blocks."""
    layout = KmerLayout(k)
    distinct = total = digest = 0
    dump = subprocess.Popen(["jellyfish", "dump", "-c", "-t", str(db)], stdout=subprocess.PIPE)
    rest = b""
    while True:
        block = dump.stdout.read(BLOCK_BYTES)
        if not block:
            break
        block = rest + block
        cut = block.rfind(b"\n") + 1
        block, rest = block[:cut], block[cut:]
        if block:
            d, t, h = pair_digest(*_parse_dump_block(block, layout))
            distinct, total, digest = distinct + d, total + t, (digest + h) % 2 ** 64
    if dump.wait() != 0 or rest:
        raise RuntimeError("jellyfish dump failed")
    return distinct, total, digest


def table_digest(table):
    distinct = total = digest = 0
    for keys, counts in table:
        d, t, h = pair_digest(keys, counts)
        distinct, total, digest = distinct + d, total + t, (digest + h) % 2 ** 64
    return distinct, total, digest


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def against_cpu(fasta, k, canonical, table_path, workdir):
    """(same, distinct, total, reference seconds, SHA-256): gkmap's cpu backend counts the same input; the
    tables must be the same bytes (the digest and histogram are compared too when they are not, to show how
    far apart they are)."""
    path = Path(workdir) / "cpu.kmers"
    stats = count_kmers([fasta], path, k, canonical, make_backend=CpuBackend, memory_bytes=8 << 30, tmp_parent=workdir)
    ours, theirs = sha256(table_path), sha256(path)
    with KmerTable(path) as table:
        distinct, total = table.distinct, table.total
        if ours != theirs:
            with KmerTable(table_path) as mine:
                print(f"    gkmap {table_digest(mine)}, cpu {table_digest(table)}, histograms "
                      f"{'equal' if histogram_lines(mine) == histogram_lines(table) else 'differ'}")
    path.unlink()
    return ours == theirs, distinct, total, stats.seconds, ours


def against_jellyfish(fasta, k, canonical, table_path, workdir):
    """(same, distinct, total, jellyfish seconds, None): digests of every (k-mer, count) pair and histograms."""
    db = Path(workdir) / "jf.jf"
    seconds = jellyfish_count(fasta, k, canonical, db)
    theirs = jellyfish_digest(db, k)
    their_histo = subprocess.run(["jellyfish", "histo", str(db)], capture_output=True, text=True, check=True).stdout
    db.unlink()
    with KmerTable(table_path) as table:
        ours, our_histo = table_digest(table), histogram_lines(table)
    same = ours == theirs and our_histo == their_histo
    if not same:
        print(f"    gkmap {ours} histo {len(our_histo)} bytes; jellyfish {theirs} histo {len(their_histo)} bytes")
    return same, theirs[0], theirs[1], seconds, None


def check(name, fasta, k, canonical, make_backend, workdir, against):
    table_path = Path(workdir) / "gk.kmers"
    stats = count_kmers([fasta], table_path, k, canonical, make_backend=make_backend, memory_bytes=8 << 30,
                        tmp_parent=workdir)
    compare = against_cpu if against == "cpu" else against_jellyfish
    same, distinct, total, their_seconds, sha = compare(fasta, k, canonical, table_path, workdir)
    print(f"| {name} | {k} | {'yes' if canonical else 'no'} | {distinct:,} | {total:,} | {stats.seconds:.1f} | "
          f"{their_seconds:.1f} | {'same' if same else 'DIFFERENT'}{f' | {sha[:16]}' if sha else ''} |", flush=True)
    table_path.unlink()
    return same


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--genomes", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("-k", nargs="+", type=int, default=[15, 31, 65, 127])
    parser.add_argument("--canonical", choices=["both", "yes", "no"], default="both")
    parser.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu")
    parser.add_argument("--against", choices=["jellyfish", "cpu"], default="jellyfish",
                        help="the reference: jellyfish, or gkmap's cpu backend (where jellyfish is missing)")
    parser.add_argument("--workdir", help="for the uncompressed genomes and the tables [a temporary folder]")
    args = parser.parse_args()
    if args.against == "jellyfish" and shutil.which("jellyfish") is None:
        sys.exit("jellyfish is not on PATH (use --against cpu)")
    make_backend, device = select(args.device)
    modes = {"both": [False, True], "yes": [True], "no": [False]}[args.canonical]
    workdir = args.workdir or tempfile.mkdtemp(prefix="check_kmers-")
    reference_name = "jellyfish -t 2" if args.against == "jellyfish" else "gkmap cpu"
    print(f"gkmap device: {device}; reference: {reference_name}; seconds are wall time of the count alone\n")
    if args.against == "cpu":
        print("| genome | k | canonical | distinct | total | gkmap s | reference s | tables | SHA-256 |")
        print("|---|---|---|---|---|---|---|---|---|")
    else:
        print("| genome | k | canonical | distinct | total | gkmap s | reference s | dump digest + histo |")
        print("|---|---|---|---|---|---|---|---|")
    ok = True
    try:
        for name in args.genomes:
            fasta = uncompressed(DATASETS[name], workdir)
            for k in args.k:
                for canonical in modes:
                    ok &= check(name, fasta, k, canonical, make_backend, workdir, args.against)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print("\nall cases agree" if ok else "\nSOME CASES DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
