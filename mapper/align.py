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

Single-end records get their CIGAR/MD from kernels/render.cu (mapper/sam_kernel.py), which applies this
same rule in compiled code; this numpy version renders paired-end records (paired.py), is the fallback
where no C++ compiler is present, and is the compiled renderer's oracle in the tests.

The strings are spelled as bytes, not built from Python string pieces: each mapping's CIGAR (or MD) is a
run of tokens, a decimal number and up to two letters (`spell`), and the tokens of all mappings are
written into one buffer, a separator after each mapping, which is decoded and split once.
"""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mapper.alphabet import CODE_N, MD_ASCII

_READ_N = 255  # a read's N in the gapped aligner: never equal to a reference code
# One column of a gapped alignment, as the traceback records it; _NONE pads a row of columns on the
# left (alignments have different lengths), _END closes it.
_MATCH, _MISMATCH, _INS, _DEL, _NONE, _END = range(6)
SEPARATOR = ord("\n")  # ends each text in a spelled buffer: in no CIGAR, MD or SAM field
_CIGAR_OP = np.array([ord("M"), ord("M"), ord("I"), ord("D"), 0, SEPARATOR], dtype=np.uint8)  # by column kind
_CARET = ord("^")


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


def _windows(codes, starts, L):
    """uint8 [len(starts), L]: codes[s:s + L] for each start s, gathered row by row (no [G, L] index array)."""
    return sliding_window_view(codes, L)[starts]


def decimals(number):
    """The decimal text of each of the non-negative ints `number` (a list of str), spelled all at once."""
    return spell(number, np.full((len(number), 1), SEPARATOR, dtype=np.uint8))


def spell(number, letters):
    """The texts of a token stream, split at SEPARATOR: token t is the decimal `number[t]` (nothing where
    negative) followed by the non-zero bytes of `letters[t]` (uint8 [T, k], zeros last); the last token's
    letters end with SEPARATOR. Returns the list of texts."""
    if not len(number):
        return []
    digits = (number >= 0).astype(np.int64)
    power, top = 10, int(number.max())
    while power <= top:
        digits += number >= power
        power *= 10
    present = letters != 0
    tail = present.sum(axis=1)
    end = np.cumsum(digits + tail)
    out = np.empty(int(end[-1]), dtype=np.uint8)
    after = end - tail  # where each token's letters begin, its digits end
    out[(after[:, None] + np.arange(letters.shape[1]))[present]] = letters[present]
    has = digits > 0
    at, value = after[has], number[has]
    place = 1
    while len(at):  # one pass per decimal place, least significant first
        value, digit = np.divmod(value, 10)
        out[at - place] = digit + 48
        place += 1
        more = value > 0
        if not more.all():
            at, value = at[more], value[more]
    return out[:-1].tobytes().decode("ascii").split("\n")


def _describe_gapped(rows, loci, reference, group, L, cigars, mds, nms):
    """CIGAR/MD/NM of the mappings `group` (reads of length L) by a banded global alignment (module doc),
    in chunks that keep the DP table under about DP_CELLS cells."""
    chunk = max(64, DP_CELLS // ((L + 1) * (2 * int(loci.edits[group].max()) + 2)))
    for begin in range(0, len(group), chunk):
        part = group[begin:begin + chunk]
        read = _windows(rows.codes, rows.start[loci.row[part]], L)
        cigars[part], mds[part], nms[part] = _align_global(read, reference.codes, loci.start[part],
                                                           loci.end[part], int(loci.edits[part].max()))


DP_CELLS = 8_000_000


def _align_global(read, genome, start, end, K):
    """(cigars, mds, nms) of reads [G, L] aligned end to end to genome[start:end) (spans of length L - K ..
    L + K, distance <= K). D[i + 1, b, g] is the distance of read[:i] to span[:j] on diagonal
    j - i = b - K; row 0 and column b = B of D are padding that no step of the traceback can take."""
    G, L = read.shape
    B = 2 * K + 1
    W = (end - start).astype(np.int64)
    read = np.where(read == CODE_N, _READ_N, read)  # a read N then differs from every reference letter, N too
    # span letters, one row per offset: refT[i + b] holds, for every mapping, the letter at j - 1 of DP row i
    # and band column b (j = i + b - K); outside the span: N. Arrays are [band or offset, mapping] so that
    # every numpy step runs along the mappings.
    cols = np.arange(L + 2 * K + 1) - (K + 1)
    refT = genome.take(start[None, :] + cols[:, None], mode="clip")
    refT[(cols[:, None] < 0) | (cols[:, None] >= W[None, :])] = CODE_N
    readT = np.ascontiguousarray(read.T)
    # 'unreachable' is a large value that a path adds at most L + 2K to: int16 for short reads (half the
    # memory traffic of the DP), int32 beyond. The padding holds it too: a traceback step compares the
    # current cell (at most K, being on an optimal path) with a neighbour plus 0 or 1, never true there.
    dtype = np.int16 if L < 8000 else np.int32
    unreachable = 1 << 14 if dtype == np.int16 else 1 << 30
    # mis[i, b, g]: 1 where read letter i - 1 differs from span letter j - 1 (row 0: unused), in D's dtype
    # (the DP adds it without a cast) and laid out as D less its first row, so that one flat index serves
    # both in the traceback
    mis = np.zeros((L + 1, B + 1, G), dtype=dtype)
    np.not_equal(readT[:, None, :], sliding_window_view(refT, B, axis=0)[1:L + 1].transpose(0, 2, 1),
                 out=mis[1:, :B])
    k = (np.arange(B) - K)[:, None]
    # No mask is needed after row 0: a cell left of column 0 only descends from such cells (infinite), and a
    # cell right of the span's end cannot lie on a path to the end (j never decreases along a path).
    D = np.empty((L + 2, B + 1, G), dtype=dtype)
    D[0] = unreachable
    D[:, B] = unreachable
    D[1, :B] = np.where((k >= 0) & (k <= W[None, :]), np.maximum(k, 0), unreachable)
    step_in = np.empty((B, G), dtype=dtype)
    for i in range(1, L + 1):
        best = D[i + 1, :B]
        np.add(D[i, :B], mis[i, :B], out=best)
        np.add(D[i, 1:], 1, out=step_in)                                        # insertions
        np.minimum(best, step_in, out=best)
        shift = 1
        while shift < B:  # deletions: best[b] = min over c <= b of best[c] + (b - c), in doubling steps
            np.add(best[:-shift], shift, out=step_in[shift:])
            np.minimum(best[shift:], step_in[shift:], out=best[shift:])
            shift *= 2
    g = np.arange(G)
    end_b = W - L + K
    nms = D[L + 1, end_b, g].astype(np.int64)

    # traceback from (L, end), all reads in lock step: diagonal, else insertion, else deletion. `at` is the
    # flat index of each read's cell in D; mis shares it shifted by one row, which is also the diagonal step.
    row = (B + 1) * G
    flat_d, flat_mis = D.ravel(), mis.ravel()
    at = (L + 1) * row + end_b * G + g
    done_at = row + K * G + g  # cell (0, K): the alignment's start
    steps = L + K  # an alignment of cost <= K has at most L + K columns
    ops = np.full((steps, G), _NONE, dtype=np.int8)  # ops[s]: each alignment's column s from its end
    move = np.array([row, row, row - G, G, 0], dtype=np.int64)  # by op: _MATCH, _MISMATCH, _INS, _DEL, _NONE
    for step in range(steps):
        up = at - row
        here = flat_d.take(at)
        mismatch = flat_mis.take(up)
        diag = flat_d.take(up) + mismatch == here
        op = np.where(diag, mismatch, _DEL - (flat_d.take(up + G) + 1 == here))
        if step >= L:  # only after L steps can a read have reached row 0
            done = at == done_at
            if done.all():
                break
            op[done] = _NONE
        at -= move.take(op)
        ops[steps - 1 - step] = op
    columns = np.empty((G, steps + 1), dtype=np.int8)  # per read: padding, its columns in order, _END
    columns[:, :steps] = ops.T
    columns[:, steps] = _END
    return (*_strings(columns, L, genome, start), nms)


def _strings(columns, L, genome, start):
    """(cigars, mds) of the alignments in `columns` (_align_global), from their columns other than matches
    (events) alone: the columns of a read's alignment are padding, then L + (its deletions) columns.
    MD: before each mismatch (its reference letter) and each deletion run ('^' and its reference letters),
    the number of matches since the previous one; then the trailing matches. Insertions leave no trace."""
    G, width = columns.shape
    owner, column = np.divmod(np.flatnonzero((columns != _MATCH) & (columns != _NONE)), width)
    kind = columns[owner, column]
    is_del, is_ins = kind == _DEL, kind == _INS
    first = width - 1 - L - np.bincount(owner[is_del], minlength=G)  # each read's first column
    # span position (0-based) of a mismatch or deletion (the span's length at _END): the columns before it
    # in its alignment, less the insertions among them
    inserted = np.cumsum(is_ins) - is_ins
    row_start = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])  # every read has an _END event
    position = column - first[owner] - (inserted - inserted[row_start][owner])
    same_read = np.r_[False, owner[1:] == owner[:-1]]
    follows = same_read & (column == np.r_[-2, column[:-1]] + 1)    # right after the previous event
    repeats = follows & (kind == np.r_[-1, kind[:-1]])                # ... and the same op

    # CIGAR: per run of insertions or deletions, and at _END, the M run before it and then the run
    c = np.flatnonzero(kind != _MISMATCH)
    starts = np.flatnonzero(~repeats[c])                              # run starts, in c
    run, run_length = c[starts], np.diff(np.append(starts, len(c)))
    previous = c[np.maximum(starts - 1, 0)]                           # the last column of the run before
    previous_end = np.where((starts > 0) & (owner[previous] == owner[run]), column[previous],
                            first[owner[run]] - 1)
    matches = column[run] - previous_end - 1
    number = np.stack([np.where(matches > 0, matches, -1), np.where(kind[run] == _END, -1, run_length)], axis=1)
    letters = np.stack([np.where(matches > 0, ord("M"), 0), _CIGAR_OP[kind[run]]], axis=1).astype(np.uint8)
    cigars = spell(number.ravel(), letters.reshape(-1, 1))

    # MD, over mismatches, deletions and _END
    m = np.flatnonzero(~is_ins)
    kind, position, owner = kind[m], position[m], owner[m]
    count = position - np.where(np.r_[True, owner[1:] != owner[:-1]], -1, np.r_[0, position[:-1]]) - 1
    on_span = kind != _END
    letter = np.zeros(len(m), dtype=np.uint8)
    letter[on_span] = MD_ASCII[genome[start[owner[on_span]] + position[on_span]]]
    deletion_start = (kind == _DEL) & ~repeats[m]
    letters = np.zeros((len(m), 2), dtype=np.uint8)
    letters[:, 0] = np.where(on_span, np.where(deletion_start, _CARET, letter), SEPARATOR)
    letters[deletion_start, 1] = letter[deletion_start]
    count[(kind == _DEL) & repeats[m]] = -1
    return cigars, spell(count, letters)


def all_m_mismatches(rows, row, start, edits, reference, L):
    """The all-M rule for mappings of read length L spanning L reference bases (strand rows `row` of
    `rows`, reference starts `start`, edit counts `edits`): (exact bool [G]: the all-M alignment is optimal,
    its mismatches as many as the edits, and is the one reported; mismatch bool [G, L]: its mismatched
    columns; ref uint8 [G, L]: the reference codes). Equal codes are a match unless N."""
    read = _windows(rows.codes, rows.start[row], L)
    ref = _windows(reference.codes, start, L)
    mismatch = (read != ref) | (read == CODE_N)
    return mismatch.sum(axis=1) == edits, mismatch, ref


def _describe_ungapped(rows, loci, reference, group, L, cigars, mds, nms, done):
    """Fill in the mappings of `group` (reads of length L spanning L reference bases) whose Hamming distance
    equals their edit count: their all-M alignment is optimal. MD is spelled for all of them at once: a
    token "<matches before><reference base>" per mismatch, then "<trailing matches>" per mapping."""
    exact, mismatch, ref = all_m_mismatches(rows, loci.row[group], loci.start[group], loci.edits[group],
                                            reference, L)
    if not exact.any():
        return
    mismatch = np.flatnonzero(mismatch & exact[:, None])
    owner, column = np.divmod(mismatch, L)
    renumber = np.cumsum(exact) - 1
    owner, letter = renumber[owner], MD_ASCII[ref.ravel()[mismatch]]
    group, hamming = group[exact], loci.edits[group][exact]  # as many mismatches as edits (all_m_mismatches)
    # the stream: each mapping's mismatches, then its end token (column L)
    G, M = len(group), len(owner)
    where_end = np.cumsum(np.bincount(owner, minlength=G)) + np.arange(G)
    where_mismatch = np.arange(M) + owner
    position = np.empty(M + G, dtype=np.int64)
    letters = np.empty((M + G, 1), dtype=np.uint8)
    position[where_mismatch], letters[where_mismatch, 0] = column, letter
    position[where_end], letters[where_end, 0] = L, SEPARATOR
    previous = np.empty_like(position)  # the previous token's column in the same mapping, else -1
    previous[0] = -1
    previous[1:] = np.where(letters[:-1, 0] == SEPARATOR, -1, position[:-1])
    cigars[group], mds[group], nms[group], done[group] = f"{L}M", spell(position - previous - 1, letters), hamming, True
