"""The verifier's distance, the one the improved filter must never exceed: edlib, N never matching.

Input : reads uint8 codes [n, L], windows uint8 codes [n, W] (4 = N)
Output: int64 [n] edit distances: global (NW) when W == L, the read anywhere in the window (HW) when W > L.

One edlib call per pair: this is an oracle (tests, `gkmap filter --truth`), not a hot path.
"""
import edlib
import numpy as np

from mapper.alphabet import READ_ASCII, REF_ASCII


def edit_distances(reads, windows):
    """Module docstring. Read N is spelled 'N' and window N 'n', so that edlib never matches them."""
    mode = "NW" if reads.shape[1] == windows.shape[1] else "HW"
    read_ascii, window_ascii = READ_ASCII[reads], REF_ASCII[windows]
    return np.array([edlib.align(r.tobytes(), w.tobytes(), mode=mode)["editDistance"]
                     for r, w in zip(read_ascii, window_ascii)], dtype=np.int64)
