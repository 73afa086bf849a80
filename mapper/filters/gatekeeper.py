"""GateKeeper pre-alignment filter, two modes on two backends behind one interface.

Modes
- `improved` (default): GateKeeper's shifted match masks over the real window (flanks included, N never
  matching), counted by an exact bit-parallel walk through the masks (`_improved.py`). Its estimate is the
  banded edit distance, so it never rejects a window that holds the read within e edits.
- `faithful`: the published GateKeeper-GPU, decision and estimate bit for bit (`_faithful.py`,
  ../shared/spec/gatekeeper-gpu.md), with run-time L and e.

Backends: `cpu` (numpy, vectorised across pairs) and `cuda` (kernels/gatekeeper.cu through mapper.device.cuda,
imported only when asked for); both give the same decisions and estimates.

For the mapper (interface in mapper/filters/__init__.py):

    filt = make_filter("improved", "cpu")
    accept, estimate = filt(reads, windows, e)     # uint8 codes [n, L] and [n, W >= L]; read anywhere in window

    filt = make_filter("faithful", "cpu")
    accept, estimate = filt(reads, segments, e)    # segments [n, L]: the reference at the candidate diagonal,
                                                   # the string the published filter shifts; estimate -2 = N
For pairs files: `filter_pairs(read_pairs(path), e, mode, device)`.
"""
import time
from dataclasses import dataclass

import numpy as np

from mapper.alphabet import ENCODE
from mapper.device import resolve_device
from mapper.errors import InputError, UsageError
from mapper.filters import _faithful, _improved

MODES = ("improved", "faithful")
ENCODINGS = ("host", "device")
FAITHFUL_MAX_E = _faithful.MAX_E

# Faithful mode passes any pair with a byte other than upper-case A, C, G, T (spec section 1).
_NOT_ACGT = np.ones(256, dtype=bool)
_NOT_ACGT[np.frombuffer(b"ACGT", dtype=np.uint8)] = False


class CpuGateKeeper:
    """numpy backend. Every call adds the seconds its core took to `kernel_seconds`."""

    name = "cpu"

    def __init__(self):
        self.kernel_seconds = 0.0

    def improved(self, reads, windows, e, ends):
        """reads codes [n, L], windows codes [n, W]; ends "global" (W == L) or "infix" -> accept, estimate."""
        t = time.perf_counter()
        out = _improved.improved(reads, windows, e, ends)
        self.kernel_seconds += time.perf_counter() - t
        return out

    def faithful(self, shifted, fixed, e, undefined):
        """codes [n, L] of the shifted and the fixed string, undefined bool [n] -> accept, estimate."""
        t = time.perf_counter()
        out = _faithful.faithful(shifted, fixed, e, undefined)
        self.kernel_seconds += time.perf_counter() - t
        return out

    def improved_ascii(self, reads, windows, e, ends):
        """The same from ASCII (the cpu backend has one encoding path: a table lookup)."""
        return self.improved(ENCODE[reads], ENCODE[windows], e, ends)

    def faithful_ascii(self, shifted, fixed, e):
        shifted, fixed, undefined = encode_faithful(shifted, fixed)
        return self.faithful(shifted, fixed, e, undefined)


def encode_faithful(shifted, fixed):
    """ASCII [n, L] twice -> codes (0..3) twice and the undefined pairs (a byte other than upper-case ACGT)."""
    undefined = _NOT_ACGT[shifted].any(axis=1) | _NOT_ACGT[fixed].any(axis=1)
    return ENCODE[shifted] & 3, ENCODE[fixed] & 3, undefined


def backend(device):
    """The GateKeeper backend object for a device name ('auto', 'cpu', 'cuda')."""
    if resolve_device(device) == "cpu":
        return CpuGateKeeper()
    from mapper.filters._gpu import GpuGateKeeper
    return GpuGateKeeper()


def check_e(e, mode):
    if e < 0 or (mode == "faithful" and e > FAITHFUL_MAX_E):
        limit = f"0..{FAITHFUL_MAX_E} in faithful mode" if mode == "faithful" else ">= 0"
        raise UsageError(f"-e must be {limit}, not {e}")


def make_filter(mode="improved", device="cpu"):
    """The mapper's filter callable `filt(reads, windows, e) -> (accept, estimate)` (module docstring)."""
    if mode not in MODES:
        raise UsageError(f"filter mode must be one of {', '.join(MODES)}, not {mode!r}")
    gk = backend(device)

    def improved(reads, windows, e):
        return gk.improved(reads, windows, e, "infix")

    def faithful(reads, segments, e):
        if segments.shape != reads.shape:
            raise ValueError(f"faithful GateKeeper takes equal-length segments, not {segments.shape} for {reads.shape}")
        undefined = (reads > 3).any(axis=1) | (segments > 3).any(axis=1)
        return gk.faithful(segments, reads, e, undefined)

    return improved if mode == "improved" else faithful


def check_lengths(pairs, mode):
    """InputError for the first line whose column lengths the mode cannot take: improved needs a window (column 1)
    at least as long as the read, faithful two columns of equal length."""
    shorter = pairs.len1 < pairs.len2 if mode == "improved" else pairs.len1 != pairs.len2
    if shorter.any():
        need = "a window (column 1) at least as long as the read (column 2)" if mode == "improved" else \
            "two columns of equal length in faithful mode"
        raise InputError(pairs.path, f"expected {need}, got {pairs.len1[shorter][0]} and {pairs.len2[shorter][0]}",
                         line=pairs.line_of(np.argmax(shorter)))


@dataclass
class PairsResult:
    accept: np.ndarray       # bool [n], input order
    estimate: np.ndarray     # int16 [n]
    kernel_seconds: float    # the filter computation alone (cuda: kernel events)
    filter_seconds: float    # encoding + transfers + computation


def filter_pairs(pairs, e, mode="improved", device="cpu", encoding="host", gk=None):
    """Filter every line of a `pairs.Pairs`. Column 1 is the window (improved; equal lengths = global, a longer
    window = the read anywhere in it) or the shifted string (faithful), column 2 the read. `encoding`: where
    ASCII becomes 2-bit code on the cuda backend ('host': numpy; 'device': an encoding kernel)."""
    check_e(e, mode)
    gk = gk or backend(device)
    n = len(pairs)
    accept = np.zeros(n, dtype=bool)
    estimate = np.zeros(n, dtype=np.int16)
    check_lengths(pairs, mode)
    k0, t0 = gk.kernel_seconds, time.perf_counter()
    for rows, first, second in pairs.groups():
        if mode == "improved":
            ends = "global" if first.shape[1] == second.shape[1] else "infix"
            if encoding == "host":
                out = gk.improved(ENCODE[second], ENCODE[first], e, ends)
            else:
                out = gk.improved_ascii(second, first, e, ends)
        elif encoding == "host":
            shifted, fixed, undefined = encode_faithful(first, second)
            out = gk.faithful(shifted, fixed, e, undefined)
        else:
            out = gk.faithful_ascii(first, second, e)
        accept[rows], estimate[rows] = out
    return PairsResult(accept, estimate, gk.kernel_seconds - k0, time.perf_counter() - t0)
