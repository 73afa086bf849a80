"""What a pre-alignment filter sees of the mapper's candidates (mapper/filters/__init__.py's interface):
candidates grouped by (read length L, threshold e), and for each group the read on its strand and

- improved GateKeeper: the verification window [lo - e, hi + L + e] of the contig, padded with N to one
  width, L + 3e, per group (N never matches, so padding keeps the filter sound);
- faithful (published) GateKeeper: the L reference bases at the band's first diagonal, the string the
  published filter shifts (N outside the contig: the published program passes such a pair undefined).

Both backends use these definitions: the cpu backend gathers on the host (`host_rows`), the cuda backend
gathers the same letters on the GPU from the resident genome (kernels/gather.cu).
"""
import numpy as np

from mapper.alphabet import CODE_N, READ_ASCII
from mapper.options import MAX_E
from mapper.seeding import Candidates

MODES = {"none": None, "gatekeeper": "improved", "gatekeeper-faithful": "faithful"}


def groups(rows, cands):
    """Yield (members, L, e): indices of the candidates whose read has length L and threshold e."""
    length, e = rows.length[cands.row], rows.e[cands.row]
    key = length * (MAX_E + 1) + e
    for g in np.unique(key):
        members = np.flatnonzero(key == g)
        yield members, int(length[members[0]]), int(e[members[0]])


def spans(mode, rows, cands, reference, members, L, e):
    """(start, lo, hi, width) of the reference rows the filter compares: position start_i + j is shown when
    lo_i <= it < hi_i, else N."""
    contig = cands.contig[members]
    if mode == "faithful":
        start = cands.lo[members]
        return start, reference.starts[contig], np.minimum(start + L, reference.ends[contig]), L
    wstart, wend = cands.windows(rows, reference)
    return wstart[members], wstart[members], wend[members], L + 3 * e


def host_rows(codes, start, lo, hi, width):
    """uint8 codes [n, width]: codes[start_i + j] where lo_i <= start_i + j < hi_i, else N."""
    pos = start[:, None] + np.arange(width)
    out = codes[np.clip(pos, 0, len(codes) - 1)]
    out[(pos < lo[:, None]) | (pos >= hi[:, None])] = CODE_N
    return out


def candidate_pairs(rows, cands, reference):
    """The candidates as the standard pair file (CONVENTIONS.md): one line `<reference segment>\t<read>` per
    candidate, in candidate order; the segment is the faithful filter's (the read's length at the band's
    first diagonal), the read is on the candidate's strand; any non-ACGT letter is written N."""
    if not len(cands):
        return ""
    # a table per group of one read length (rows in the group's candidate order), no Python step per
    # candidate; with several groups their lines are put back in candidate order and joined
    parts = list(groups(rows, cands))
    texts = [_pair_lines(rows, cands, reference, members, L, e) for members, L, e in parts]
    if len(parts) == 1:  # one group holds every candidate, in order
        return texts[0]
    lines = np.empty(len(cands), dtype=object)
    for (members, _, _), text in zip(parts, texts):
        lines[members] = text.split("\n")[:-1]
    return "\n".join(lines.tolist()) + "\n"


# --dump-candidates text goes to its writer in pieces of about this many bytes (a line is 2L + 2), never a
# batch's candidates at once: a group of repeat reads can have 10^8 candidates, 20 GB of pair lines.
DUMP_BYTES = 8 << 20


def candidate_pair_texts(rows, cands, reference, piece_bytes=None):
    """candidate_pairs' text, in pieces of consecutive candidates: each piece's lines start within
    `piece_bytes` (default DUMP_BYTES) of its first, so a piece holds at most piece_bytes plus one line."""
    if not len(cands):
        return
    piece_bytes = piece_bytes or DUMP_BYTES
    host = Candidates(cands.row, cands.contig, cands.lo, cands.hi)  # a device's candidates fetched once
    line = 2 * rows.length[host.row] + 2
    piece = (np.cumsum(line) - line) // piece_bytes
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(piece)) + 1, [len(line)]])
    for a, b in zip(bounds[:-1], bounds[1:]):
        yield candidate_pairs(rows, host.subset(slice(a, b)), reference)


def _pair_lines(rows, cands, reference, members, L, e):
    """candidate_pairs' lines of the candidates `members` (reads of length L), each with its line break."""
    read_start = rows.start[cands.row[members]]
    line = np.empty((len(members), 2 * L + 2), dtype=np.uint8)
    line[:, :L] = READ_ASCII[host_rows(reference.codes, *spans("faithful", rows, cands, reference, members, L, e))]
    line[:, L] = ord("\t")
    line[:, L + 1:2 * L + 1] = READ_ASCII[host_rows(rows.codes, read_start, read_start, read_start + L, L)]
    line[:, 2 * L + 1] = ord("\n")
    return line.tobytes().decode("ascii")
