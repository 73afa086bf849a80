"""`gkmap filter PAIRS.txt -e E`: the GateKeeper filter on a pairs file, one `<1|0>\\t<estimate>` line per pair.

Column 1 of PAIRS.txt is the reference segment or window, column 2 the read (the published sets' order; in
faithful mode column 1 is the string that gets shifted). Output lines are in input order; the estimate is as the
published program's: 0..E on accept, -1 on reject, -2 for an undefined pair (a non-ACGT letter) in faithful mode.
With --truth a third column holds edlib's distance (global for equal lengths, the read anywhere in a longer
window otherwise; N never matches). A summary goes to stderr.

On cuda with the device encoding (the default) the file goes through `_text.filter_file`: read in chunks and
parsed, encoded, filtered and formatted on the GPU(s), the output streamed to its temporary file. Otherwise (cpu,
--encoding host, --truth, or pairs from a pipe) numpy parses the whole file first (`pairs.read_pairs`).
"""
import argparse
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

from mapper.alphabet import ENCODE
from mapper.errors import InputError, UsageError
from mapper.device import DEVICES, resolve_device
from mapper.filters.gatekeeper import ENCODINGS, MODES, backend, check_e, filter_pairs
from mapper.outputs import atomic_output, check_outputs
from mapper.filters.pairs import read_pairs
from mapper.filters.truth import edit_distances
from mapper.filters.windows import MODES as FILTER_MODES

FILTERS = tuple(name for name, mode in FILTER_MODES.items() if mode)   # gkmap map --filter's names but none
FILTER_NAMES = {mode: name for name, mode in FILTER_MODES.items() if mode}

HELP = "GateKeeper pre-alignment filter on a pairs file (<segment or window>\\t<read> a line)"

log = logging.getLogger("gkmap")


def add_arguments(parser):
    parser.add_argument("pairs", metavar="PAIRS.txt", help="one <segment or window>\\t<read> a line")
    parser.add_argument("-e", type=int, required=True, metavar="E", help="edit threshold")
    parser.add_argument("--filter", choices=FILTERS, default="gatekeeper",
                        help="gatekeeper: sound (never rejects a pair within E edits); gatekeeper-faithful: the "
                             "published GateKeeper-GPU, bit for bit (gkmap map --filter's names)")
    parser.add_argument("--mode", choices=MODES, default=None, help=argparse.SUPPRESS)  # the names before 0.2
    parser.add_argument("--device", choices=DEVICES, default="auto", help="auto: cuda when a GPU is there")
    parser.add_argument("--encoding", choices=ENCODINGS, default="device",
                        help="cuda only: device: the file's bytes go to the GPU, which parses, encodes, filters "
                             "and formats the output, streamed in chunks (the fast way); host: numpy parses the "
                             "file and packs 2-bit words, streamed to the GPU")
    parser.add_argument("--gpus", type=int, default=1, metavar="N",
                        help="cuda, device encoding: spread the file's chunks over GPUs 0..N-1 (output in input "
                             "order)")
    parser.add_argument("-o", "--output", default="-", metavar="OUT.tsv", help="output file ('-': stdout)")
    parser.add_argument("--truth", action="store_true",
                        help="add edlib's distance as a third column and count false accepts and rejects")
    parser.add_argument("--gatekeeper-files", action="store_true",
                        help="also write the published program's two files (decisions, estimates) beside the "
                             "output: gateKeeperGPU_1G_filter_output_errE.txt, gateKeeperGPU_1G_edit_output_errE.txt")


def _lines(columns):
    """int columns -> one tab-separated text line per row, as bytes. Rows take few distinct values, so each
    distinct row is formatted once and the output is assembled by lookup (no per-row formatting)."""
    columns = [np.asarray(c, dtype=np.int64) for c in columns]
    if len(columns[0]) == 0:
        return b""
    low = [int(c.min()) for c in columns]
    span = [int(c.max()) - lo + 1 for c, lo in zip(columns, low)]
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for c, lo, sp in zip(columns, low, span):
        key = key * sp + (c - lo)
    distinct, inverse = np.unique(key, return_inverse=True)
    text = []
    for k in distinct.tolist():
        values = []
        for lo, sp in zip(reversed(low), reversed(span)):
            k, v = divmod(k, sp)
            values.append(v + lo)
        text.append(("\t".join(map(str, reversed(values))) + "\n").encode())
    return b"".join(np.array(text, dtype=object)[inverse.ravel()].tolist())


def _truth(pairs):
    distance = np.zeros(len(pairs), dtype=np.int64)
    for rows, first, second in pairs.groups():
        distance[rows] = edit_distances(ENCODE[second], ENCODE[first])
    return distance


def _gpu_count():
    import pycuda.driver as drv
    drv.init()
    return drv.Device.count()


def _run_text(args):
    """The GPU text path (module docstring)."""
    from mapper.filters._text import filter_file
    if args.gpus > _gpu_count():
        raise UsageError(f"--gpus {args.gpus}: only {_gpu_count()} GPU(s) here")
    with atomic_output(args.output, "wb") as out:
        result = filter_file(args.pairs, args.e, args.mode, out, gpus=tuple(range(args.gpus)),
                             keep=args.gatekeeper_files)
        out.flush()
    n, accepted = result.pairs, result.accepted
    log.info(f"{n} pairs, {accepted} accepted, {n - accepted} rejected, {result.undefined} undefined "
             f"(--filter {FILTER_NAMES[args.mode]}, e={args.e}, cuda, {args.gpus} GPU(s), pairs file parsed on "
             f"the GPU)")
    log.info(f"filter {result.seconds:.3f} s end to end ({n / max(result.seconds, 1e-9) / 1e6:.2f} M pairs/s from "
             f"the file to the output), kernel {result.kernel_seconds:.3f} s, reading {result.read_seconds:.3f} s "
             f"(overlapping the GPU)")
    if args.gatekeeper_files:
        _write_gatekeeper_files(args, result.accept.astype(np.int64), result.estimate)
    return 0


def _write_gatekeeper_files(args, accept, estimate):
    folder = Path(args.output).parent if args.output != "-" else Path(".")
    for kind, column in (("filter", accept), ("edit", estimate)):
        with atomic_output(folder / f"gateKeeperGPU_1G_{kind}_output_err{args.e}.txt", "wb") as out:
            out.write(_lines([column]))


def run(args):
    if args.mode is not None:  # --mode improved|faithful, the old names: accepted, said once
        log.warning("--mode %s is --filter %s now", args.mode, FILTER_NAMES[args.mode])
    else:
        args.mode = FILTER_MODES[args.filter]
    check_e(args.e, args.mode)
    if args.gpus < 1:
        raise UsageError(f"--gpus must be >= 1, not {args.gpus}")
    check_outputs({"-o": args.output}, [args.pairs])
    text_path = resolve_device(args.device) == "cuda" and args.encoding == "device" and not args.truth \
        and os.path.isfile(args.pairs)
    if text_path:
        return _run_text(args)
    if args.gpus != 1:
        raise UsageError("--gpus N needs --device cuda, the device encoding, no --truth and a pairs file on disk")
    t0 = time.perf_counter()
    try:
        pairs = read_pairs(args.pairs)
    except OSError as e:
        raise InputError(args.pairs, f"cannot read: {e.strerror}") from None
    read_seconds = time.perf_counter() - t0
    gk = backend(args.device)
    result = filter_pairs(pairs, args.e, mode=args.mode, encoding=args.encoding, gk=gk)
    accept = result.accept.astype(np.int64)
    columns = [accept, result.estimate]
    summary = [f"{len(pairs)} pairs, {int(accept.sum())} accepted, {len(pairs) - int(accept.sum())} rejected, "
               f"{int((result.estimate == -2).sum())} undefined (--filter {FILTER_NAMES[args.mode]}, e={args.e}, "
               f"{gk.name})",
               f"filter {result.filter_seconds:.3f} s ({len(pairs) / max(result.filter_seconds, 1e-9) / 1e6:.2f} "
               f"M pairs/s), kernel {result.kernel_seconds:.3f} s, reading {read_seconds:.3f} s"]
    if args.truth:
        distance = _truth(pairs)
        within = distance <= args.e
        columns.append(distance)
        summary.append(f"truth: {int(within.sum())} within e, {int((result.accept & ~within).sum())} false accepts, "
                       f"{int((~result.accept & within).sum())} false rejects")
    text = _lines(columns)
    if args.output == "-":
        sys.stdout.buffer.write(text)
        sys.stdout.flush()
    else:
        with atomic_output(args.output, "wb") as out:
            out.write(text)
    if args.gatekeeper_files:
        _write_gatekeeper_files(args, accept, result.estimate)
    for line in summary:
        log.info(line)
    return 0
