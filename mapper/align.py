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


def cigar_md(read_codes, ref_codes, edits=-1):
    """(cigar, md, nm) of the read aligned end to end against ref_codes; `edits`, when known, bands edlib."""
    result = edlib.align(READ_ASCII[read_codes].tobytes(), REF_ASCII[ref_codes].tobytes(),
                         mode="NW", task="path", k=edits)
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
    n = len(loci)
    cigars, mds, nms = np.empty(n, dtype=object), np.empty(n, dtype=object), np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=bool)
    length = rows.length[loci.row]
    ungapped = np.flatnonzero(loci.end - loci.start == length)
    for L in np.unique(length[ungapped]).tolist():
        _describe_ungapped(rows, loci, reference, ungapped[length[ungapped] == L], L, cigars, mds, nms, done)
    for i in np.flatnonzero(~done).tolist():
        first = rows.start[loci.row[i]]
        cigars[i], mds[i], nms[i] = cigar_md(rows.codes[first:first + length[i]],
                                             reference.codes[loci.start[i]:loci.end[i]], int(loci.edits[i]))
    return cigars.tolist(), mds.tolist(), nms.tolist()


def _describe_ungapped(rows, loci, reference, group, L, cigars, mds, nms, done):
    """Fill in the mappings of `group` (reads of length L spanning L reference bases) whose Hamming distance
    equals their edit count: their all-M alignment is optimal. MD is built for all of them at once: a token
    "<matches before><reference base>" per mismatch, joined per mapping, then the trailing match count."""
    offsets = np.arange(L)
    read = rows.codes[rows.start[loci.row[group]][:, None] + offsets]
    ref = reference.codes[loci.start[group][:, None] + offsets]
    mismatch = (read != ref) | (read == CODE_N) | (ref == CODE_N)
    hamming = mismatch.sum(axis=1)
    exact = hamming == loci.edits[group]
    group, mismatch, ref, hamming = group[exact], mismatch[exact], ref[exact], hamming[exact]
    owner, column = np.nonzero(mismatch)
    first = np.ones(len(owner), dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    before = column - np.where(first, -1, np.roll(column, 1)) - 1
    tokens = np.strings.add(before.astype(str), MD_ASCII[ref[owner, column]].view("S1").astype(str))
    last = np.full(len(group), -1)
    last[owner] = column  # nonzero is row-major: the last write per row is its last mismatch
    md = (L - 1 - last).astype(str).astype(object)
    with_mismatch = np.flatnonzero(hamming > 0)
    if len(with_mismatch):
        joined = np.add.reduceat(tokens.astype(object), np.flatnonzero(first))
        md[with_mismatch] = joined + md[with_mismatch]
    cigars[group], mds[group], nms[group], done[group] = f"{L}M", md, hamming, True
