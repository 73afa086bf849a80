"""CIGAR and MD of a reported mapping: one host routine for every backend, so two backends can never
pick different co-optimal alignments (CONVENTIONS.md).

Input : the read on its strand (uint8 codes) and the reference codes of [start, end) of the mapping.
Output: CIGAR with M/I/D, the spec's MD string ([0-9]+(([A-Z]|\\^[A-Z]+)[0-9]+)*) and NM.
edlib's global (NW) alignment of exactly that span gives the path; its distance equals the verifier's.
"""
import re

import edlib

from mapper.alphabet import MD_ASCII, READ_ASCII, REF_ASCII

_OPS = re.compile(r"(\d+)([=XID])")


def cigar_md(read_codes, ref_codes):
    """(cigar, md, nm) of the read aligned end to end against ref_codes."""
    result = edlib.align(READ_ASCII[read_codes].tobytes(), REF_ASCII[ref_codes].tobytes(),
                         mode="NW", task="path")
    ref_letters = MD_ASCII[ref_codes].tobytes().decode()
    cigar, md = [], []
    run_op, run_len = None, 0
    matched, r = 0, 0
    for count, op in _OPS.findall(result["cigar"]):
        count = int(count)
        sam_op = "M" if op in "=X" else op
        if sam_op == run_op:
            run_len += count
        else:
            if run_op:
                cigar.append(f"{run_len}{run_op}")
            run_op, run_len = sam_op, count
        if op == "=":
            matched += count
        elif op == "X":
            for base in ref_letters[r:r + count]:
                md.append(f"{matched}{base}")
                matched = 0
        elif op == "D":
            md.append(f"{matched}^{ref_letters[r:r + count]}")
            matched = 0
        if op != "I":
            r += count
    cigar.append(f"{run_len}{run_op}")
    md.append(str(matched))
    return "".join(cigar), "".join(md), result["editDistance"]
