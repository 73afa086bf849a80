"""The concordant TLEN range of a library, estimated when `--min`/`--max` are not given.

Input : TLENs (int64 [k], positive: leftmost to rightmost base) of the first `ESTIMATE_PAIRS` confidently
        paired read pairs, in input order: each mate has exactly one locus, both on one contig, in the
        library's orientation (FR for --pe, RF for --mp); or of those among the first `ESTIMATE_SCAN` read
        pairs when fewer are confident (the batches are held in memory until the range is known).
        mrFAST requires the range; estimating it is ours.
Output: (lo, hi), the range of a concordant pair's TLEN.

The rule is bwa-mem's, from the quartiles (robust to the discordant and chimeric pairs that are always
among them, and asymmetric like real insert-size distributions): lo = max(1, Q1 - 3 IQR), hi = Q3 + 3 IQR.
For a normal distribution this is mean +- 4.7 sd.
"""
import numpy as np

from mapper.errors import UsageError

ESTIMATE_PAIRS = 100_000
ESTIMATE_SCAN = 1_000_000
MIN_PAIRS = 20          # fewer confident pairs than this: no estimate, the user must give --min/--max
IQR_FACTOR = 3


def insert_range(tlens, orientation):
    """(lo, hi) from confident TLENs (see the module docstring); UsageError when there are too few."""
    if len(tlens) < MIN_PAIRS:
        raise UsageError(f"cannot estimate the insert size: only {len(tlens)} read pairs map uniquely in {orientation} "
                         f"orientation on one contig (at least {MIN_PAIRS} needed); give --min and --max")
    q1, q3 = np.percentile(tlens, [25, 75])
    iqr = q3 - q1
    return max(1, int(np.floor(q1 - IQR_FACTOR * iqr))), int(np.ceil(q3 + IQR_FACTOR * iqr))
