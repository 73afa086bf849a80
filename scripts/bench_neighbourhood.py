#!/usr/bin/env python3
"""Benchmark of the neighbourhood index (issue #8): the MAROSE paper's Figure 8, Table I and Table II at our
scale, every number measured in this run, the published figures printed beside ours.

    scripts/bench_neighbourhood.py [--genome CHR20.fa.gz] [--fig8-genome GENOME] [--reads 1000000]
        [--nb-errors 1 2] [--bwa PATH] [--bwa-gaps 0 1] [--work DIR] [--published DIR] [--out REPORT.md]
        [--skip fig8,table1,kmer,bwa]

1. Figure 8 (GPU): neighbourhoods looked up per second by kernels/phf.cu's nb_lookup, one thread per pattern,
   perfect hash vs binary search vs list traversal, seed length 4 and neighbourhood length 4, 8, 16, for the
   exact neighbourhood and every neighbourhood within 1 and 2 substitutions. Queries are patterns taken at
   random positions of --fig8-genome (so every exact one is present); each kernel runs on as many queries as
   fill about 0.2 s (list traversal of large blocks is slow), timed with CUDA events, the best of 3 launches.
   The three methods' slots are compared on a common prefix of the queries (they must agree).
2. Table I: 40 bp reads sampled from --genome (N-free windows, half reverse-complemented) with exactly 3
   substitutions at distinct random positions (seed 11), mapped with e = 3 by the neighbourhood index
   (ls = 8, ln = 7, delta = 1, spaced seed ######-##, --nb-errors as given; cuda), by the k-mer index path
   (`gkmap map`, cuda) and by bwa aln -n 3 -l 1024 (no seed: 3 differences anywhere) -o 0 and -o 1 / samse: non-mapped, mapped, uniquely mapped and
   multi-hit reads, and the mean number of hits of a multi-hit read (gkmap: NH, the loci within e; bwa:
   X0 + X1, its best and second-best hits), plus how many reads were found at their true position.
3. Table II: run time of the same mappings (index building excluded; gkmap: FASTQ to SAM, index loading
   and upload included; bwa: `aln` with -t = the machine's cores, the coordinate phase the paper timed,
   and `samse`).
Indexes go to --work and are reused when present (build them beforehand to overlap their build with other
work). Reference: Tran, Giraud, Varré, IPDPSW 2015 (../shared/data/published/README.md).
"""
import argparse
import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mapper.alphabet import BASES, COMPLEMENT
from mapper.index import build_index as build_kmer_index
from mapper.neighbourhood.index import build_index, load_index, packed_keys
from mapper.neighbourhood.seeding import substitution_masks
from mapper.options import MapOptions
from mapper.runners import map_reads
from mapper.reference import read_fasta
from mapper.simulate import draw_starts

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GKMAP_SHARED_DATA") or ROOT.parent / "shared" / "data")
SPACED = "######-##"
TARGET_S = 0.2


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def nb_index(genome, mask, ln, work):
    folder = work / f"{Path(genome).name}.{mask.replace('#', 'x')}.{ln}.nbx"
    if (folder / "meta.json").exists():
        return load_index(genome, folder)
    t = time.perf_counter()
    index = build_index(genome, mask, ln, folder)
    log(f"built {folder.name} in {time.perf_counter() - t:.1f} s")
    return index


def figure8(genome, work):
    from mapper.neighbourhood.gpu import ResidentIndex
    rows = []
    for ln in (4, 8, 16):
        index = nb_index(genome, "####", ln, work)
        rng = np.random.default_rng(11)
        starts = rng.choice(len(index.positions), 1 << 20)
        starts = index.positions[starts].astype(np.int64)
        block, _ = packed_keys(index.reference.codes, index.seed_offsets, starts)
        key, _ = packed_keys(index.reference.codes, index.nb_offsets, starts)
        resident = ResidentIndex(index)
        sizes = np.diff(index.nboff)
        for errors in (0, 1, 2):
            n_masks = len(substitution_masks(ln, errors))
            slots = {}
            for method in ("phf", "binary", "list"):
                pilot = 2048
                resident.lookup(method, block[:pilot], key[:pilot], errors)  # compile, warm up
                _, _, seconds = resident.lookup(method, block[:pilot], key[:pilot], errors)
                n = int(np.clip(pilot * TARGET_S / max(seconds, 1e-6), pilot, len(block)))
                slot, hits, seconds = resident.lookup(method, block[:n], key[:n], errors, repeat=3)
                slots[method] = slot[:pilot]
                rows.append(dict(ls=4, ln=ln, errors=errors, method=method, queries=n, neighbourhoods=n * n_masks,
                                 seconds=seconds, gnb_per_s=n * n_masks / seconds / 1e9,
                                 mean_block=float(sizes[sizes > 0].mean())))
                log(f"fig8 ln={ln} errors={errors} {method}: {rows[-1]['gnb_per_s']:.3f} G neighbourhoods/s")
            assert (slots["phf"] == slots["binary"]).all() and (slots["phf"] == slots["list"]).all()
        del resident
    return rows


def three_substitution_reads(genome, n, path, length=40, seed=11):
    """FASTQ of n reads with exactly 3 substitutions (module docstring); names carry the truth."""
    reference = read_fasta(genome, path.with_suffix(".fai"))
    rng = np.random.default_rng(seed)
    starts = draw_starts(reference, length, n, rng)
    seqs = reference.codes[starts[:, None] + np.arange(length)]
    where = np.argsort(rng.random((n, length)), axis=1)[:, :3]
    at = (np.arange(n)[:, None], where)
    seqs[at] = (seqs[at] + rng.integers(1, 4, size=(n, 3))) % 4
    reverse = rng.random(n) < 0.5
    seqs[reverse] = COMPLEMENT[seqs[reverse, ::-1]]
    letters = np.frombuffer(BASES.encode(), dtype=np.uint8)[seqs].view(f"S{length}").ravel().astype(str)
    contig = np.searchsorted(reference.starts, starts, side="right") - 1
    pos = starts - reference.starts[contig] + 1
    names = [f"t{i}|{reference.names[c]}:{p}:{'-' if r else '+'}" for i, (c, p, r) in
             enumerate(zip(contig.tolist(), pos.tolist(), reverse.tolist()))]
    quals = "I" * length
    path.write_text("".join(f"@{a}\n{s}\n+\n{quals}\n" for a, s in zip(names, letters.tolist())))
    return path


def sam_counts(path, bwa=False):
    """Table I's columns from a SAM (primary records only): hits = NH (gkmap) or X0 + X1 (bwa)."""
    unmapped = unique = multi = true = 0
    multi_hits = 0
    with open(path) as f:
        for line in f:
            if line[0] == "@":
                continue
            fields = line.split("\t", 11)
            flag = int(fields[1])
            if flag & 256:
                continue
            if flag & 4:
                unmapped += 1
                continue
            tags = dict((t[:2], t[5:]) for t in fields[11].rstrip("\n").split("\t")) if len(fields) > 11 else {}
            hits = int(tags.get("X0", 1)) + int(tags.get("X1", 0)) if bwa else int(tags.get("NH", 1))
            _, truth = fields[0].split("|", 1)
            contig, pos, _ = truth.rsplit(":", 2)
            true += fields[2] == contig and abs(int(fields[3]) - int(pos)) <= 3
            if hits > 1:
                multi += 1
                multi_hits += hits
            else:
                unique += 1
    mapped = unique + multi
    return dict(non_mapped=unmapped, mapped=mapped, unique=unique, multi=multi,
                mean_hits=multi_hits / multi if multi else 0.0, primary_at_truth=true)


def gkmap_run(genome, reads, out, **kw):
    counters = map_reads(MapOptions(str(genome), str(reads), e=3, output=str(out), quiet=True, **kw))
    return dict(seconds=counters.seconds, stages=" ".join(f"{k}={v:.2f}" for k, v in counters.times.items()),
                windows=counters.seeding.bands, summary=counters.summary())


def table1(genome, n_reads, nb_errors, bwa, work, device, bwa_gaps=("0", "1"), kmer=True):
    reads = work / f"reads40_3sub_{n_reads}.fq"
    if not reads.exists():
        three_substitution_reads(genome, n_reads, reads)
    rows = []
    nb = nb_index(genome, SPACED, 7, work)
    kmer_folder = work / "chr.gkx"
    if kmer and not (kmer_folder / "meta.json").exists():
        build_kmer_index(genome, 12, kmer_folder)
    warm = work / "warmup.fq"
    with open(reads) as f:
        warm.write_text("".join(f.readline() for _ in range(4000)))
    gkmap_run(genome, warm, work / "warmup.sam", index_kind="neighbourhood", index_dir=str(nb.folder),
              nb_errors=1, batch_size=1000, device=device)  # kernel compilation stays out of the times

    def neighbourhood(k):
        out = work / f"nb{k}.sam"
        run = gkmap_run(genome, reads, out, index_kind="neighbourhood", index_dir=str(nb.folder), nb_errors=k,
                        device=device, batch_size=100_000 if k < 2 else 10_000)  # k = 2: ~10x the windows
        rows.append(dict(tool=f"gkmap neighbourhood (ls 8, ln 7, {SPACED}, delta 1, nb-errors {k}, e 3)", **run,
                         **sam_counts(out)))
        log(rows[-1])
    neighbourhood(nb_errors[0])  # the other settings after the k-mer path and bwa (the slowest last)
    if kmer:
        out = work / "kmer.sam"
        run = gkmap_run(genome, reads, out, index_dir=str(kmer_folder), device=device)
        rows.append(dict(tool="gkmap k-mer index (ws 12, e 3)", **run, **sam_counts(out)))
        log(rows[-1])
    if bwa:
        prefix = work / "bwa_chr"
        if not Path(f"{prefix}.bwt").exists():
            subprocess.run([bwa, "index", "-p", str(prefix), str(genome)], check=True, capture_output=True)
        threads = str(os.cpu_count())
        for gaps in bwa_gaps:
            sai, out = work / f"bwa{gaps}.sai", work / f"bwa{gaps}.sam"
            t = time.perf_counter()
            with open(sai, "wb") as f:
                subprocess.run([bwa, "aln", "-t", threads, "-n", "3", "-o", gaps, "-l", "1024", str(prefix), str(reads)],
                               stdout=f, stderr=subprocess.DEVNULL, check=True)
            aln = time.perf_counter() - t
            with open(out, "wb") as f:
                subprocess.run([bwa, "samse", str(prefix), str(sai), str(reads)], stdout=f,
                               stderr=subprocess.DEVNULL, check=True)
            samse = time.perf_counter() - aln - t
            rows.append(dict(tool=f"bwa 0.7.17 aln -n 3 -o {gaps} -l 1024 -t {threads} / samse", seconds=aln + samse,
                             stages=f"aln={aln:.2f} samse={samse:.2f}", aln_seconds=aln, **sam_counts(out, bwa=True)))
            log(rows[-1])
    for k in nb_errors[1:]:
        neighbourhood(k)
    return rows


def published(folder):
    tables = {}
    for name in ("marose_sensitivity", "marose_runtime"):
        path = Path(folder) / f"{name}.csv"
        tables[name] = list(csv.DictReader(open(path))) if path.exists() else []
    return tables


def report(fig8, table, n_reads, pub, device):
    out = [f"# Neighbourhood index benchmark ({device})", ""]
    if fig8:
        out += ["## Figure 8: G neighbourhoods looked up per second (nb_lookup, ls = 4)", "",
                "| ln | substitutions | phf | binary | list | phf / binary | phf / list | mean block (slots) |",
                "|---|---|---|---|---|---|---|---|"]
        for ln in (4, 8, 16):
            for errors in (0, 1, 2):
                r = {x["method"]: x for x in fig8 if x["ln"] == ln and x["errors"] == errors}
                out.append(f"| {ln} | {errors} | {r['phf']['gnb_per_s']:.3f} | {r['binary']['gnb_per_s']:.3f} | "
                           f"{r['list']['gnb_per_s']:.4f} | {r['phf']['gnb_per_s'] / r['binary']['gnb_per_s']:.1f}x | "
                           f"{r['phf']['gnb_per_s'] / r['list']['gnb_per_s']:.0f}x | {r['phf']['mean_block']:.0f} |")
        out += ["", "Published (GTX 480, OpenCL): perfect hashing up to 10x faster than binary search (Figure 8; "
                "the paper gives the curves, not a table).", ""]
    if table:
        out += [f"## Table I: {n_reads:,} reads of 40 bp, exactly 3 substitutions (ours), e = 3", "",
                "| mapper | non-mapped | mapped | uniquely mapped | multi-hit reads | mean hits | primary at truth |",
                "|---|---|---|---|---|---|---|"]
        for r in table:
            out.append(f"| {r['tool']} | {r['non_mapped']:,} | {r['mapped']:,} | {r['unique']:,} | {r['multi']:,} | "
                       f"{r['mean_hits']:.2f} | {r['primary_at_truth']:,} |")
        out += ["", "Published Table I (10,000,000 reads against the whole human genome, 2.7 Gbp):", "",
                "| mapper | non-mapped | mapped | uniquely mapped | multi-hit reads | mean hits |", "|---|---|---|---|---|---|"]
        for r in pub["marose_sensitivity"]:
            out.append(f"| {r['software']} | {r['non_mapped_reads']} | {r['mapped_reads']} | "
                       f"{r['uniquely_mapped_reads']} | {r['multiple_hits_number']} | {r['multiple_hits_mean']} |")
        out += ["", f"## Table II: run time, same {n_reads:,} reads, same machine (index building excluded)", "",
                "| mapper | seconds | reads/s | stages (s) |", "|---|---|---|---|"]
        for r in table:
            out.append(f"| {r['tool']} | {r['seconds']:.2f} | {n_reads / r['seconds']:,.0f} | {r['stages']} |")
        out += ["", "Published Table II (460,544 reads of 40 bp, 3 substitutions, human chr10, Titan + i7-2700K):", "",
                "| tool | bwa -o | seconds |", "|---|---|---|"]
        for r in pub["marose_runtime"]:
            out.append(f"| {r['tool']} | {r['bwa_gap_option']} | {r['runtime_s']} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--genome", default=str(SHARED / "genomes" / "human_GRCh37_chr20.fa.gz"))
    p.add_argument("--fig8-genome", default=str(SHARED / "genomes" / "shigella_dysenteriae_ATCC13313_GCF_002949675.1.fna.gz"))
    p.add_argument("--reads", type=int, default=1_000_000)
    p.add_argument("--nb-errors", type=int, nargs="+", default=[1, 2])
    p.add_argument("--bwa", default=shutil.which("bwa"))
    p.add_argument("--work", default=str(ROOT / ".bench-neighbourhood"))
    p.add_argument("--published", default=str(SHARED / "published"))
    p.add_argument("--out", default=None)
    p.add_argument("--skip", default="", help="comma-separated: fig8, table1, kmer (Table I's k-mer row), bwa")
    p.add_argument("--bwa-gaps", nargs="+", default=["0", "1"], help="bwa aln -o values to run")
    p.add_argument("--device", default="cuda", help="backend of the Table I/II gkmap runs (cpu: a dry run here)")
    args = p.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    if args.device == "cuda":
        from mapper.device import cuda
        machine = f"{cuda.driver().Device(0).name()}, {os.cpu_count()} cpu cores"
    else:
        machine = f"cpu only, {os.cpu_count()} cores"
    fig8 = figure8(args.fig8_genome, work) if "fig8" not in skip else []
    table = (table1(args.genome, args.reads, args.nb_errors, None if "bwa" in skip else args.bwa, work, args.device,
                    args.bwa_gaps, "kmer" not in skip) if "table1" not in skip else [])
    text = report(fig8, table, args.reads, published(args.published), machine)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
