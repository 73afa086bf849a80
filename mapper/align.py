"""CIGAR and MD of a reported mapping: one host routine for every backend, so two backends can never
pick different co-optimal alignments (CONVENTIONS.md).

Input : the read on its strand (uint8 codes) and the reference codes of [start, end) of the mapping.
Output: CIGAR with M/I/D, the spec's MD string ([0-9]+(([A-Z]|\\^[A-Z]+)[0-9]+)*) and NM.

Two ways, one rule, both vectorised over a batch's mappings (no Python step per mapping):
- ungapped: when the span has the read's length and its Hamming distance (N never matching) equals the
  mapping's edit count, the all-M alignment is optimal and is the one reported (most mappings);
- gapped: a global (end-to-end) edit-distance alignment of the read against exactly the span, computed
  for all such mappings at once in a band of diagonals |j - i| <= d (an alignment of cost d never leaves
  it), then traced back from the end preferring a diagonal step (match/mismatch), then an insertion, then
  a deletion. Its cost equals the verifier's d by the definition of the span (verify.py).
"""
import numpy as np

from mapper.alphabet import CODE_N, MD_ASCII

_READ_N = 255  # a read's N in the gapped aligner: never equal to a reference code
_M, _I, _D = 0, 1, 2
_OP_CHAR = np.array(["M", "I", "D"], dtype=object)


def describe(rows, loci, reference):
    """(cigars, mds, nms) lists for every mapping of `loci` (verify.Mappings) of `rows` (StrandRows)."""
    n = len(loci)
    cigars, mds, nms = np.empty(n, dtype=object), np.empty(n, dtype=object), np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=bool)
    length = rows.length[loci.row]
    ungapped = np.flatnonzero(loci.end - loci.start == length)
    for L in np.unique(length[ungapped]).tolist():
        _describe_ungapped(rows, loci, reference, ungapped[length[ungapped] == L], L, cigars, mds, nms, done)
    gapped = np.flatnonzero(~done)
    for L in np.unique(length[gapped]).tolist():
        _describe_gapped(rows, loci, reference, gapped[length[gapped] == L], L, cigars, mds, nms)
    return cigars.tolist(), mds.tolist(), nms.tolist()


def _join(pieces, owner, n):
    """Per owner 0..n-1 (owner sorted ascending, every owner present): its pieces (object strings) joined."""
    first = np.ones(len(owner), dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    out = np.empty(n, dtype=object)
    out[owner[first]] = np.add.reduceat(pieces, np.flatnonzero(first))
    return out


def _describe_gapped(rows, loci, reference, group, L, cigars, mds, nms):
    """CIGAR/MD/NM of the mappings `group` (reads of length L) by a banded global alignment (module doc),
    in chunks that keep the DP table under about DP_CELLS cells."""
    chunk = max(64, DP_CELLS // ((L + 1) * (2 * int(loci.edits[group].max()) + 1)))
    for begin in range(0, len(group), chunk):
        part = group[begin:begin + chunk]
        read = rows.codes[rows.start[loci.row[part]][:, None] + np.arange(L)]
        cigars[part], mds[part], nms[part] = _align_global(read, reference.codes, loci.start[part],
                                                           loci.end[part], int(loci.edits[part].max()))


DP_CELLS = 8_000_000


def _align_global(read, genome, start, end, K):
    """(cigars, mds, nms) of reads [G, L] aligned end to end to genome[start:end) (spans of length L - K ..
    L + K, distance <= K). D[i, g, b] is the distance of read[:i] to span[:j] on diagonal j - i = b - K."""
    G, L = read.shape
    B = 2 * K + 1
    W = (end - start).astype(np.int64)
    read = np.where(read == CODE_N, _READ_N, read)  # a read N then differs from every reference letter, N too
    # span letters, one row per offset: refT[i + b] holds, for every mapping, the letter at j - 1 of DP row i
    # and band column b (j = i + b - K); outside the span: N. Arrays are [band or offset, mapping] so that
    # every numpy step runs along the mappings.
    cols = np.arange(L + 2 * K + 1) - (K + 1)
    inside = (cols[:, None] >= 0) & (cols[:, None] < W[None, :])
    refT = np.where(inside, genome[np.clip(start[None, :] + cols[:, None], 0, len(genome) - 1)], CODE_N)
    refT = refT.astype(np.uint8)
    readT = np.ascontiguousarray(read.T)
    k = (np.arange(B) - K)[:, None]
    # No mask is needed after row 0: a cell left of column 0 only descends from such cells (infinite), and a
    # cell right of the span's end cannot lie on a path to the end (j never decreases along a path).
    # 'unreachable' is a large value that a path adds at most L + 2K to: int16 for short reads (half the
    # memory traffic of the DP), int32 beyond
    dtype = np.int16 if L < 8000 else np.int32
    unreachable = 1 << 14 if dtype == np.int16 else 1 << 30
    D = np.empty((L + 1, B, G), dtype=dtype)
    D[0] = np.where((k >= 0) & (k <= W[None, :]), np.maximum(k, 0), unreachable)
    ins = np.full((B, G), unreachable, dtype=dtype)
    kd = k.astype(dtype)
    for i in range(1, L + 1):
        best = D[i]
        np.add(D[i - 1], readT[i - 1][None, :] != refT[i:i + B], out=best, dtype=dtype)
        np.add(D[i - 1][1:], 1, out=ins[:-1])
        np.minimum(best, ins, out=best)
        best -= kd
        np.minimum.accumulate(best, axis=0, out=best)                           # deletions: a prefix minimum
        best += kd
    g = np.arange(G)
    end_b = W - L + K
    nms = D[L, end_b, g].astype(np.int64)

    # traceback from (L, end), all reads in lock step: diagonal, else insertion, else deletion
    steps = L + K
    ops = np.full((G, steps), -1, dtype=np.int8)
    letter = np.zeros((G, steps), dtype=np.uint8)
    mism = np.zeros((G, steps), dtype=bool)
    i, b = np.full(G, L, dtype=np.int64), end_b.copy()
    for step in range(steps):
        live = (i > 0) | (b != K)
        if not live.any():
            break
        here = D[i, b, g]
        up = np.maximum(i - 1, 0)
        t = refT[i + b, g]
        mis = read[g, up] != t
        diag = live & (i > 0) & (i + b - K > 0) & (here == D[up, b, g] + mis)
        insert = live & ~diag & (i > 0) & (b + 1 < B) & (here == D[up, np.minimum(b + 1, B - 1), g] + 1)
        delete = live & ~diag & ~insert
        ops[:, step] = np.where(diag, _M, np.where(insert, _I, np.where(delete, _D, -1)))
        letter[:, step] = t
        mism[:, step] = diag & mis
        i -= diag | insert
        b += insert.astype(np.int64) - delete
    owner, col = np.nonzero(ops[:, ::-1] >= 0)          # row-major: each read's ops in forward order
    col = steps - 1 - col
    op, ref_letter, mismatch = ops[owner, col], letter[owner, col], mism[owner, col]
    return _cigar_strings(op, owner, G), _md_strings(op, owner, ref_letter, mismatch, G), nms


def _runs(op, owner):
    """bool: op starts a run of equal ops within its read."""
    start = np.ones(len(op), dtype=bool)
    start[1:] = (owner[1:] != owner[:-1]) | (op[1:] != op[:-1])
    return start


def _cigar_strings(op, owner, G):
    starts = np.flatnonzero(_runs(op, owner))
    run_len = np.diff(np.append(starts, len(op)))
    tokens = np.strings.add(run_len.astype(str), _OP_CHAR[op[starts]].astype(str)).astype(object)
    return _join(tokens, owner[starts], G)


def _md_strings(op, owner, ref_letter, mismatch, G):
    """MD: before each mismatch (its reference letter) and each deletion run ('^' and its reference
    letters), the number of matches since the previous one; then the trailing matches. Insertions leave
    no trace in MD."""
    is_match = (op == _M) & ~mismatch
    matches = np.cumsum(is_match)                       # matches up to and including each op
    first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    last = np.append(first[1:], len(op)) - 1
    start_count = np.where(first > 0, matches[first - 1], 0)
    run_start = _runs(op, owner)
    del_start = (op == _D) & run_start
    event = np.flatnonzero(((op == _M) & mismatch) | del_start)
    ev_owner = owner[event]
    ev_first = np.r_[True, ev_owner[1:] != ev_owner[:-1]]
    before = matches[event] - np.where(ev_first, start_count[ev_owner], matches[np.roll(event, 1)])
    letters = lambda positions: MD_ASCII[ref_letter[positions]].view("S1").astype(str).astype(object)
    text = letters(event)
    if del_start.any():
        run_id = np.cumsum(del_start) - 1
        deleted = np.flatnonzero(op == _D)
        runs = _join(letters(deleted), run_id[deleted], int(del_start.sum()))
        is_del = op[event] == _D
        text[is_del] = "^" + runs[run_id[event[is_del]]]
    md = np.full(G, "", dtype=object)
    if len(event):
        pieces = np.strings.add(before.astype(str), text.astype(str)).astype(object)
        has = np.unique(ev_owner)
        md[has] = _join(pieces, ev_owner, G)[has]
    last_count = start_count.copy()
    ev_last = np.r_[ev_owner[1:] != ev_owner[:-1], True] if len(event) else np.zeros(0, dtype=bool)
    last_count[ev_owner[ev_last]] = matches[event[ev_last]]
    return md + (matches[last] - last_count).astype(str).astype(object)


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
