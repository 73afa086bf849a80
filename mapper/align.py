"""CIGAR and MD of a reported mapping: one host routine for every backend, so two backends can never
pick different co-optimal alignments (CONVENTIONS.md).

Input : the read on its strand (uint8 codes) and the reference codes of [start, end) of the mapping.
Output: CIGAR with M/I/D, the spec's MD string ([0-9]+(([A-Z]|\\^[A-Z]+)[0-9]+)*) and NM.

Two ways, one rule: when the span has the read's length and its Hamming distance (N never matching)
equals the mapping's edit count, the ungapped alignment is optimal and is the one reported (most
mappings; built for a whole batch at once). Otherwise edlib's global (NW) alignment of exactly that span
gives the path; its distance equals the verifier's.
"""
import re

import edlib
import numpy as np

from mapper.alphabet import CODE_N, MD_ASCII, READ_ASCII, REF_ASCII

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


def describe(rows, loci, reference):
    """(cigars, mds, nms) lists for every mapping of `loci` (verify.Mappings) of `rows` (StrandRows)."""
    length = rows.length[loci.row]
    ungapped = np.flatnonzero(loci.end - loci.start == length)
    cigars, mds, nms = [None] * len(loci), [None] * len(loci), [None] * len(loci)
    if len(ungapped):
        _describe_ungapped(rows, loci, reference, ungapped, cigars, mds, nms)
    for i in range(len(loci)):
        if cigars[i] is None:
            first = rows.start[loci.row[i]]
            cigars[i], mds[i], nms[i] = cigar_md(rows.codes[first:first + rows.length[loci.row[i]]],
                                                 reference.codes[loci.start[i]:loci.end[i]])
    return cigars, mds, nms


def _describe_ungapped(rows, loci, reference, which, cigars, mds, nms):
    """Fill in the mappings of `which` whose Hamming distance equals their edit count (all-M alignments)."""
    for L in np.unique(rows.length[loci.row[which]]).tolist():
        group = which[rows.length[loci.row[which]] == L]
        offsets = np.arange(L)
        read = rows.codes[rows.start[loci.row[group]][:, None] + offsets]
        ref = reference.codes[loci.start[group][:, None] + offsets]
        mismatch = (read != ref) | (read == CODE_N) | (ref == CODE_N)
        hamming = mismatch.sum(axis=1)
        exact = hamming == loci.edits[group]
        owner, column = np.nonzero(mismatch[exact])
        letters = MD_ASCII[ref[exact][owner, column]].tobytes().decode()
        bounds = np.searchsorted(owner, np.arange(exact.sum() + 1)).tolist()
        columns = column.tolist()
        cigar = f"{L}M"
        for k, (i, nm) in enumerate(zip(group[exact].tolist(), hamming[exact].tolist())):
            md, previous = [], -1
            for c in range(bounds[k], bounds[k + 1]):
                md.append(f"{columns[c] - previous - 1}{letters[c]}")
                previous = columns[c]
            md.append(str(L - 1 - previous))
            cigars[i], mds[i], nms[i] = cigar, "".join(md), nm
