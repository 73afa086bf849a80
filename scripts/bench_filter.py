#!/usr/bin/env python3
"""Benchmark the GateKeeper filter: both modes, both backends, every way in.

For each read length L and threshold E (default: L = 100, 150, 250 and E = 0 .. 10 % of L) and each kind of pairs
(`random`: unrelated sequences; `real`: a read copied from its reference segment with the simulator's errors,
1 % substitutions and one 1-2 base indel in 10 % of the reads, seed 11), prints one row per mode, backend and
way in (`enc`):
    host     ASCII rows in host memory, numpy encodes (cuda: 2-bit words streamed through pinned staging)
    device   ASCII rows in host memory copied to the GPU, encoded there (cuda only)
    packed   2-bit words already in pinned host memory (no N masks: the pairs hold none), streamed over several
             CUDA streams: the end-to-end rate from 2-bit arrays in host memory (cuda only)
    text     a pairs file (written to --text-dir; /dev/shm keeps it in memory like the page cache) to an output
             file beside it: `gkmap filter`'s path, parsed, encoded, filtered and formatted on the GPU(s) (cuda)
and the columns
    kernel s   the filter computation alone (cuda: the filter kernels' event time; cpu: the numpy core)
    filter s   end to end: from the input named above to decisions in host memory (text: to the output file)
    M pairs/s  pairs / kernel s and pairs / filter s
A different set of `--pairs` distinct pairs is tiled to the requested count (a filter's speed does not depend on
pairs being distinct). With --bandwidth, the bounds that the packed and text rows meet are measured first: pinned
host-to-device and device-to-host copy bandwidth, and the rate at which the text path's readers get a file's
bytes into pinned memory. Published GateKeeper-GPU figures, for comparison (not measured here):
    GTX 1080 Ti, paper Table S.17-S.19, 100 bp, e = 2: 102 M pairs/s kernel, 3.2 M pairs/s filter;
    the published program ported to CUDA 13 on one H100 (issue #4): 660 M pairs/s at 100 bp e = 5, 1390 M at e = 2,
    11-24 M pairs/s filtration and 3-4 M pairs/s with its output written, from a pairs file.

    python scripts/bench_filter.py --device cpu --count 262144
    python scripts/bench_filter.py --device cuda --count 16777216 --es 100:2,5,10 150:7 250:12
    python scripts/bench_filter.py --device cuda --count 16777216 --encodings packed text --bandwidth \
        --es 100:2,5 150:7 250:12 --kinds real --text-dir /dev/shm
"""
import argparse
import os
import sys
import tempfile
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


def run_packed(gk, mode, packed, L, e, out):
    """(kernel s, filter s) of one pass over pairs packed in pinned host memory (`pack_pinned`), the results
    copied into the pinned arrays `out`."""
    k0, t0 = gk.kernel_seconds, time.perf_counter()
    segments2, reads2 = packed
    if mode == "improved":
        gk.improved_packed(reads2, None, segments2, None, L, L, e, "global", out=out)
    else:
        gk.faithful_packed(segments2, reads2, None, L, e, out=out)
    return gk.kernel_seconds - k0, time.perf_counter() - t0


def pack_pinned(gk, segments, reads, count):
    """The 2-bit words (word-major) of segments and reads, tiled to `count` pairs, in pinned host memory."""
    from mapper.alphabet import ENCODE
    from mapper.filters._gpu import pack_words
    out = []
    for rows in (segments, reads):
        words = pack_words(ENCODE[rows])
        pinned = gk.pinned(len(words) * count, np.uint32).reshape(len(words), count)
        reps = -(-count // words.shape[1])
        for j in range(len(words)):
            pinned[j] = np.tile(words[j], reps)[:count]
        out.append(pinned)
    return out


def write_text(path, segments, reads, count):
    """A pairs file of `count` lines (the rows tiled) at `path`; its path."""
    n, L = segments.shape
    line = np.empty((n, 2 * L + 2), dtype=np.uint8)
    line[:, :L], line[:, L], line[:, L + 1:2 * L + 1], line[:, -1] = segments, 9, reads, 10
    path = Path(path)
    with open(path, "wb") as f:
        block = line.tobytes()
        for _ in range(count // n):
            f.write(block)
        f.write(line[:count % n].tobytes())
    return path


def run_text(path, mode, e, gpus, **options):
    """(kernel s, end-to-end s, setup s) of `gkmap filter`'s GPU text path, the output written beside the input.
    Setup (worker contexts, kernel modules, pinned buffers) is part of the end-to-end time."""
    from mapper.filters._text import filter_file
    with open(f"{path}.out", "wb") as out:
        result = filter_file(path, e, mode, out, gpus=gpus, **options)
    os.unlink(f"{path}.out")
    print("# profile: " + ", ".join(f"{k} {v:.3f} s" for k, v in sorted(result.profile.items())), flush=True)
    return result.kernel_seconds, result.seconds, result.setup_seconds


def bandwidth(text_path=None, nbytes=1 << 28):
    """Print pinned copy bandwidth both ways and the text path's file-reading rate (several reader counts)."""
    from concurrent.futures import ThreadPoolExecutor
    from mapper.filters._stream import Device
    from mapper.filters._text import read_range
    dev = Device()
    host, buffer, stream = dev.pinned(nbytes), dev.alloc(nbytes), dev.stream()
    host[:] = 1
    for name, copy in (("host to device", lambda: dev.htod(buffer, host, stream)),
                       ("device to host", lambda: dev.dtoh(host, buffer, stream))):
        copy()
        start = dev.record(stream)
        for _ in range(4):
            copy()
        end = dev.record(stream)
        dev.wait(end)
        seconds = dev.elapsed(start, end)
        print(f"# pinned {name}: {4 * nbytes / seconds / 1e9:.1f} GB/s ({nbytes >> 20} MiB copies)", flush=True)
    for readers in (4, 8, 12, 16) if text_path is not None else ():
        size = os.path.getsize(text_path)
        fd, pool = os.open(text_path, os.O_RDONLY), ThreadPoolExecutor(readers)
        t0 = time.perf_counter()
        for offset in range(0, size, nbytes):
            read_range(fd, pool, readers, memoryview(host)[:min(nbytes, size - offset)], offset)
        seconds = time.perf_counter() - t0
        os.close(fd)
        pool.shutdown()
        print(f"# reading {text_path.name} into pinned memory ({readers} threads): {size / seconds / 1e9:.1f} GB/s",
              flush=True)
    dev.free(host, buffer)


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
    ap.add_argument("--encodings", nargs="+", default=["host", "device"], choices=["host", "device", "packed", "text"],
                    help="ways in (module docstring); packed and text: cuda only")
    ap.add_argument("--text-dir", default=None, help="where the text rows' pairs files go (default: a temporary "
                                                     "folder; /dev/shm keeps them in memory)")
    ap.add_argument("--gpus", type=int, default=1, help="text rows: workers on GPUs 0..N-1")
    ap.add_argument("--readers", type=int, default=None, help="text rows: reading threads per GPU")
    ap.add_argument("--chunk", type=int, default=None, help="text rows: chunk bytes")
    ap.add_argument("--bandwidth", action="store_true", help="measure the copy and file-reading bounds first")
    args = ap.parse_args(argv)
    es = parse_es(args.es) if args.es else {L: list(range(0, -(-L // 10) + 1)) for L in args.lengths}
    devices = ["cpu", "cuda"] if args.device == "both" else [args.device]
    with tempfile.TemporaryDirectory(dir=args.text_dir, prefix="gkmap-bench-") as folder:
        measure(args, es, devices, folder)


def measure(args, es, devices, folder):
    """The table (module docstring)."""
    print(f"{'dev':4} {'enc':6} {'mode':8} {'kind':6} {'L':>4} {'E':>3} {'pairs':>9} {'kernel s':>9} "
          f"{'filter s':>9} {'kernel M/s':>10} {'filter M/s':>10}")
    gks = {device: backend(device) for device in devices}
    if "cuda" in devices:  # a long-running process keeps its GPUs' contexts: the text rows' workers reuse them
        from mapper.device import cuda
        held = [cuda.driver().Device(i).retain_primary_context() for i in range(args.gpus)]  # noqa: F841
    text_options = {k: v for k, v in (("readers", args.readers), ("chunk", args.chunk)) if v}
    measured_bandwidth = not args.bandwidth
    for L in es:
        rng = np.random.default_rng(11)
        for kind in args.kinds:
            distinct = make_pairs(kind, L, min(args.pairs, args.count), rng)
            reps = -(-args.count // len(distinct[0]))
            segments, reads, packed, text = None, None, None, None
            n = args.count
            for e in es[L]:
                for device in devices:
                    gk = gks[device]
                    for mode in args.modes:
                        check_e(e, mode)
                        for encoding in args.encodings if device == "cuda" else ["host"]:
                            if encoding in ("host", "device"):
                                if segments is None:
                                    segments = np.tile(distinct[0], (reps, 1))[:n]
                                    reads = np.tile(distinct[1], (reps, 1))[:n]
                                run_one(gk, mode, encoding, segments[:1024], reads[:1024], e)  # compile, warm up
                                kernel, total = run_one(gk, mode, encoding, segments, reads, e)
                            elif encoding == "packed":
                                if packed is None:
                                    packed = pack_pinned(gk, *distinct, n)
                                    out = gk.pinned(n, np.uint8), gk.pinned(n, np.int16)
                                run_packed(gk, mode, packed, L, e, out)  # compile, buffers, warm up
                                kernel, total = run_packed(gk, mode, packed, L, e, out)
                            else:
                                if text is None:
                                    text = write_text(f"{folder}/pairs_L{L}.txt", *distinct, n)
                                    small = write_text(f"{folder}/warm_L{L}.txt", *(a[:1024] for a in distinct), 1024)
                                if not measured_bandwidth:
                                    bandwidth(text)
                                    measured_bandwidth = True
                                run_text(small, mode, e, tuple(range(args.gpus)), **text_options)
                                kernel, total, setup = run_text(text, mode, e, tuple(range(args.gpus)),
                                                                **text_options)
                                print(f"# text {mode} L={L} E={e}: setup {setup:.3f} s of {total:.3f} s; "
                                      f"{n / (total - setup) / 1e6:.1f} M pairs/s after it, "
                                      f"{os.path.getsize(text) / total / 1e9:.1f} GB/s of file", flush=True)
                            print(f"{device:4} {encoding:6} {mode:8} {kind:6} {L:4d} {e:3d} {n:9d} {kernel:9.4f} "
                                  f"{total:9.4f} {n / kernel / 1e6:10.1f} {n / total / 1e6:10.2f}", flush=True)
            if text is not None:
                os.unlink(text)
                os.unlink(small)


if __name__ == "__main__":
    main()
