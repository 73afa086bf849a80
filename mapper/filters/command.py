"""`gkmap filter PAIRS.txt -e E`: the GateKeeper filter on a pairs file, one `<1|0>\\t<estimate>` line per pair.

Column 1 of PAIRS.txt is the reference segment or window, column 2 the read (the published sets' order; in
faithful mode column 1 is the string that gets shifted). Output lines are in input order; the estimate is as the
published program's: 0..E on accept, -1 on reject, -2 for an undefined pair (a non-ACGT letter) in faithful mode.
With --truth a third column holds edlib's distance (global for equal lengths, the read anywhere in a longer
window otherwise; N never matches). A summary goes to stderr.
"""
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mapper.alphabet import ENCODE
from mapper.errors import InputError
from mapper.filters.gatekeeper import DEVICES, ENCODINGS, MODES, backend, check_e, filter_pairs
from mapper.filters.pairs import read_pairs
from mapper.filters.truth import edit_distances

HELP = "GateKeeper pre-alignment filter on a pairs file (<segment or window>\\t<read> a line)"

log = logging.getLogger("gkmap")


def add_arguments(parser):
    parser.add_argument("pairs", metavar="PAIRS.txt", help="one <segment or window>\\t<read> a line")
    parser.add_argument("-e", type=int, required=True, metavar="E", help="edit threshold")
    parser.add_argument("--mode", choices=MODES, default="improved",
                        help="improved: sound (never rejects a pair within E edits); faithful: the published "
                             "GateKeeper-GPU, bit for bit")
    parser.add_argument("--device", choices=DEVICES, default="auto", help="auto: cuda when a GPU is there")
    parser.add_argument("--encoding", choices=ENCODINGS, default="host",
                        help="cuda only: 2-bit encoding by numpy (host) or by a kernel from ASCII (device)")
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


def _write_atomic(path, data):
    """Write the whole file beside its destination, then rename it into place (no half-written outputs)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _truth(pairs):
    distance = np.zeros(len(pairs), dtype=np.int64)
    for rows, first, second in pairs.groups():
        distance[rows] = edit_distances(ENCODE[second], ENCODE[first])
    return distance


def run(args):
    check_e(args.e, args.mode)
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
               f"{int((result.estimate == -2).sum())} undefined (mode {args.mode}, e={args.e}, {gk.name})",
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
        folder = Path(".")
    else:
        _write_atomic(args.output, text)
        folder = Path(args.output).parent
    if args.gatekeeper_files:
        for kind, column in (("filter", accept), ("edit", result.estimate)):
            _write_atomic(folder / f"gateKeeperGPU_1G_{kind}_output_err{args.e}.txt", _lines([column]))
    for line in summary:
        log.info(line)
    return 0
