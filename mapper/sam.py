"""SAM output: header, and the records of a batch in input read order.

Input : a `ReadBatch`, its selected loci (`verify.Mappings`, in report order), their CIGAR/MD/NM, NH and the
        read's scores (`read_scores`: MAPQ and the second-best edit distance, from every locus found).
Output: text; per read either its records (primary first, then FLAG 256 secondaries, CONVENTIONS.md) or
one unmapped record (FLAG 4). MAPQ (README, "MAPQ and tags"): 0 when two or more loci share the read's
fewest edits, else 20 per edit between the best locus and the second-best (e + 1 when no other locus lies
within e), at most 60, as bwa's scale; secondaries 0. Tags: NM, MD, AS (-edits), XS (-edits of the
second-best locus, bwa's meaning on AS's scale), NH (loci found), HI (1-based index of the record among
the read's) and RG with -R. The reverse strand's SEQ is reverse-complemented and its QUAL reversed; with
--no-secondary-seq a secondary record's SEQ and QUAL are '*' (bwa mem's and minimap2's default).
"""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mapper.version import __version__
from mapper.align import SEPARATOR, decimals
from mapper.alphabet import COMPLEMENT_ASCII

FLAG_UNMAPPED, FLAG_REVERSE, FLAG_SECONDARY = 4, 16, 256
BARE_SEQ_QUAL = "\t*\t0\t0\t*\t*"  # RNEXT PNEXT TLEN SEQ QUAL of a secondary record without its bases
MAPQ_MAX = 60        # bwa's ceiling
MAPQ_PER_EDIT = 20   # Phred per edit of gap to the second-best locus (~1% divergence a base: 100x per edit)

# control characters as escapes: a command line (or any header text) never breaks a header line or field
_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(32), 127)} | {9: "\\t", 10: "\\n", 13: "\\r"}


def escape_text(text):
    """`text` with tabs, line breaks and other control characters written as escapes (\\t, \\n, \\r, \\xNN)."""
    return text.translate(_ESCAPES)


def header(reference, command_line, read_group=None, comments=()):
    """The SAM header. @HD: records are in input order, not sorted (SO:unsorted), and all the records of a
    read (of a read pair) are together (GO:query, the spec's grouping by QNAME). `read_group`: the @RG line
    of -R (checked by MapOptions); `comments`: @CO texts (checked); the @PG command line is escaped."""
    lines = ["@HD\tVN:1.6\tSO:unsorted\tGO:query"]
    lines += [f"@SQ\tSN:{name}\tLN:{length}" for name, length in zip(reference.names, reference.lengths.tolist())]
    if read_group:
        lines.append(read_group)
    lines.append(f"@PG\tID:gkmap\tPN:gkmap\tVN:{__version__}\tCL:{escape_text(command_line)}")
    lines += [f"@CO\t{escape_text(text)}" for text in comments]
    return "\n".join(lines) + "\n"


def read_scores(read, edits, n, e):
    """(MAPQ of each read's primary record, the second-best edit distance or -1) [n], from every locus found
    (`read`, `edits`: grouped by read, fewest edits first; `e` [n]: each read's threshold). MAPQ: 0 when
    two or more loci share the fewest edits, else 20 x (second-best - best) capped at 60, the second-best
    being e + 1 (nothing else within e) for a read with one locus; 0 for an unmapped read."""
    nh = np.bincount(read, minlength=n)
    first = np.cumsum(nh) - nh
    mapped, two = nh > 0, nh > 1
    best = np.zeros(n, dtype=np.int64)
    best[mapped] = edits[first[mapped]]
    second = np.full(n, -1, dtype=np.int64)
    second[two] = edits[first[two] + 1]
    gap = np.where(two, second, np.asarray(e, dtype=np.int64) + 1) - best
    mapq = np.where(mapped, np.clip(MAPQ_PER_EDIT * gap, 0, MAPQ_MAX), 0)
    return mapq, second


def batch_records(batch, reference, read, strand, loci, cigars, mds, nms, nh, mapq, second, read_group=None,
                  secondary_seq=True):
    """SAM lines of one batch. `read`/`strand` give each locus' read (batch index) and strand; `nh` [n]
    is the number of loci found per read (before any -n cap), `mapq` and `second` [n] the read's primary
    MAPQ and second-best edit distance (`read_scores`), `read_group` the ID of -R (RG:Z on every record);
    without `secondary_seq` (--no-secondary-seq) the secondary records' SEQ and QUAL are '*'.
    Returns one string, records in input order.

    The numpy renderer: render() uses it only where no C++ compiler is present (kernels/render.cu writes
    the same text, mapper/sam_kernel.py), and the tests hold the compiled text to it byte for byte.
    Built column by column, not record by record: a table [records, fields] of string pieces (each
    distinct FLAG and RNAME, MAPQ, NM, AS, XS, NH and HI text made once, POS spelled for all records at
    once, SEQ/QUAL once per read and strand) is joined in one call."""
    n = len(batch)
    if not n:
        return ""
    unmapped = np.flatnonzero(nh == 0)
    # Table rows in input order: a read's records are contiguous and already in report order.
    owner = np.concatenate([read, unmapped])
    row = np.empty(len(owner), dtype=np.int64)
    row[np.argsort(owner, kind="stable")] = np.arange(len(owner))
    mapped, unmapped_rows = row[:len(read)], row[len(read):]
    is_secondary = np.zeros(len(read), dtype=bool)
    is_secondary[1:] = read[1:] == read[:-1]
    shown = slice(None) if secondary_seq else ~is_secondary  # the records that carry SEQ/QUAL
    needed = np.zeros((2, n), dtype=bool)
    needed[strand[shown], read[shown]] = True
    needed[0, unmapped] = True
    seq_qual = read_fields(batch, needed)
    group_start = np.flatnonzero(~is_secondary)[np.cumsum(~is_secondary) - 1]
    flag = strand + 2 * is_secondary  # index into _FLAGS
    nms = np.asarray(nms, dtype=np.int64)
    end = f"\tRG:Z:{read_group}\n" if read_group is not None else "\n"
    pieces = np.empty((len(owner), 13), dtype=object)
    pieces[row, 0] = np.array(batch.names, dtype=object)[owner]
    pieces[mapped, 1] = value_texts(loci.contig * 4 + flag,
                                    lambda key: f"\t{_FLAGS[key % 4]}\t{reference.names[key // 4]}\t")
    pieces[mapped, 2] = decimals(loci.start - reference.starts[loci.contig] + 1)
    pieces[mapped, 3] = value_texts(np.where(is_secondary, 0, mapq[read]), "\t{}\t".format)
    pieces[mapped, 4] = cigars
    pieces[mapped, 5] = np.where(is_secondary & (not secondary_seq), BARE_SEQ_QUAL, seq_qual[strand, read])
    pieces[mapped, 6] = value_texts(nms, "\tNM:i:{}\tMD:Z:".format)
    pieces[mapped, 7] = mds
    pieces[mapped, 8] = value_texts(nms, lambda v: f"\tAS:i:{-v}")
    pieces[mapped, 9] = value_texts(second + 1, lambda v: f"\tXS:i:{1 - v}" if v else "")[read]
    pieces[mapped, 10] = value_texts(nh, "\tNH:i:{}".format)[read]
    pieces[mapped, 11] = value_texts(np.arange(len(read)) - group_start + 1, "\tHI:i:{}".format)
    pieces[:, 12] = end
    pieces[unmapped_rows, 1] = f"\t{FLAG_UNMAPPED}\t*\t0\t0\t*"
    pieces[unmapped_rows, 2:5] = ""
    pieces[unmapped_rows, 5] = seq_qual[0, unmapped]
    pieces[unmapped_rows, 6:12] = ""
    return "".join(pieces.ravel().tolist())


_FLAGS = (0, FLAG_REVERSE, FLAG_SECONDARY, FLAG_SECONDARY | FLAG_REVERSE)


def value_texts(values, text):
    """Object array [len(values)]: text(v) for each of `values` (non-negative ints, or floats), each distinct
    value formatted once. The distinct ints are counted over their range where it is small (NM, NH, FLAG and
    RNAME of a reference with few contigs), else, and floats, sorted out."""
    top = int(values.max(initial=0)) + 1
    if values.dtype.kind == "f" or top > 4 * len(values):
        distinct, inverse = np.unique(values, return_inverse=True)
        return np.array([text(v) for v in distinct.tolist()], dtype=object)[inverse]
    table = np.empty(top, dtype=object)
    distinct = np.flatnonzero(np.bincount(values, minlength=top))
    table[distinct] = [text(v) for v in distinct.tolist()]
    return table[values]


def read_fields(batch, needed, prefix=b"\t*\t0\t0\t", middle=b"\t"):
    """Object array [2, n]: for the reads `needed` (bool [2, n]) on the forward strand (row 0) and on the
    reverse one (row 1: SEQ reverse-complemented, QUAL reversed), prefix + SEQ + middle + QUAL; by default
    "\t*\t0\t0\tSEQ\tQUAL" (RNEXT, PNEXT, TLEN, SEQ, QUAL of a single-end record; sam_pairs.py asks for
    "\tSEQ\tQUAL" and the OEA tags "\tNS:Z:SEQ\tNQ:Z:QUAL"). An empty read has SEQ and QUAL '*', FASTA
    input QUAL '*'.

    Each read's bytes are copied into a row of a [reads, width] table as one slice (shorter reads padded
    to the longest with NUL bytes, dropped afterwards: _unpadded), and the rows are decoded and split at
    once; reads of lengths far apart get tables of their own (_by_length)."""
    out = np.empty(needed.shape, dtype=object)
    fastq = batch.qual is not None
    prefix, middle = np.frombuffer(prefix, dtype=np.uint8), np.frombuffer(middle, dtype=np.uint8)
    for side in (0, 1):
        chosen = np.flatnonzero(needed[side])
        if not len(chosen):
            continue
        for group in _by_length(batch.starts[chosen + 1] - batch.starts[chosen]):
            reads = chosen[group]
            out[side, reads] = _field_rows(batch, reads, side, prefix, middle, fastq)
    return out


def _field_rows(batch, reads, side, prefix, middle, fastq):
    """read_fields' texts of `reads` on strand `side`, as a list."""
    length = batch.starts[reads + 1] - batch.starts[reads]
    widest = max(int(length.max()), 1)
    seq_at = len(prefix)
    qual_at = seq_at + widest + len(middle)
    rows = np.empty((len(reads), qual_at + (widest if fastq else 1) + 1), dtype=np.uint8)
    rows[:, :seq_at] = prefix
    rows[:, seq_at:seq_at + widest] = _slices(batch.seq, batch.starts, reads, widest, side, COMPLEMENT_ASCII)
    rows[:, seq_at + widest:qual_at] = middle
    if fastq:
        rows[:, qual_at:-1] = _slices(batch.qual, batch.starts, reads, widest, side, None)
        rows[length == 0, qual_at] = ord("*")
    else:
        rows[:, qual_at] = ord("*")
    rows[length == 0, seq_at] = ord("*")
    rows[:, -1] = SEPARATOR
    shown = np.maximum(length, 1)  # an empty read shows its '*'
    if (shown < widest).any():
        padding = np.arange(widest) >= shown[:, None]
        rows[:, seq_at:seq_at + widest][padding] = 0
        if fastq:
            rows[:, qual_at:qual_at + widest][padding] = 0
    return _unpadded(rows)[:-1].split("\n")


def _slices(buffer, starts, reads, width, reverse, complement):
    """uint8 [len(reads), width]: each read's first `width` bytes from the ASCII `buffer` (past its end,
    whatever follows), or with `reverse` its bytes reversed (and mapped by `complement`)."""
    first = starts[reads]
    if reverse:
        buffer, first = buffer[::-1], len(buffer) - starts[reads + 1]
    if first.max() + width > len(buffer):
        buffer = np.concatenate([buffer, np.zeros(width, dtype=np.uint8)])
    rows = sliding_window_view(buffer, width)[first]
    return complement[rows] if reverse and complement is not None else rows


def unmapped_records(batch, reads):
    """The reads `reads` of a batch as FASTQ (or FASTA for FASTA input), for --unmapped: '@' (or '>') and the
    name, the bases, and for FASTQ '+' and the qualities, each on its line (an empty read's lines empty).

    Built as tables, not read by read (a read without a locus is common in real data): a row per read holds
    its record with names and reads padded by NUL bytes to the longest of its table, which one pass over
    the text then drops (names are printable ASCII, bases letters and qualities '!' to '~':
    reads.check_batch). Reads of lengths far apart go into tables of their own (_by_length), each row then
    ended by a byte that splits them, and the records are joined in read order."""
    if not len(reads):
        return ""
    length = batch.starts[reads + 1] - batch.starts[reads]
    groups = _by_length(length)
    if len(groups) == 1:
        return _unmapped_table(batch, reads, length, b"")
    out = np.empty(len(reads), dtype=object)
    for group in groups:
        out[group] = _unmapped_table(batch, reads[group], length[group], b"\1").split("\1")[:-1]
    return "".join(out.tolist())


def _unmapped_table(batch, reads, length, end):
    """unmapped_records' text of `reads` (their lengths `length`), each record followed by `end`."""
    fastq = batch.qual is not None
    names = np.asarray(np.asarray(batch.names, dtype=object)[reads], dtype=bytes)
    widest = max(int(length.max()), 1)
    seq_at = 2 + names.itemsize
    width = seq_at + widest + 1 + (2 + widest + 1 if fastq else 0)
    rows = np.empty((len(reads), width + len(end)), dtype=np.uint8)
    rows[:, 0] = ord("@" if fastq else ">")
    rows[:, 1:seq_at - 1] = names.view(np.uint8).reshape(len(reads), -1)
    rows[:, seq_at - 1] = rows[:, seq_at + widest] = rows[:, width - 1] = ord("\n")
    rows[:, width:] = np.frombuffer(end, dtype=np.uint8)
    padding = np.arange(widest) >= length[:, None]
    sources = [(seq_at, batch.seq)] + ([(seq_at + widest + 3, batch.qual)] if fastq else [])
    for at, source in sources:
        piece = rows[:, at:at + widest]
        piece[...] = _slices(source, batch.starts, reads, widest, False, None)
        piece[padding] = 0
    if fastq:
        rows[:, seq_at + widest + 1] = ord("+")
        rows[:, seq_at + widest + 2] = ord("\n")
    return _unpadded(rows)


def _unpadded(rows):
    """The text of a uint8 table whose rows are padded with NUL bytes, the padding dropped in one pass (a NUL
    is never part of a record: names, bases and qualities are checked printable, reads.check_batch)."""
    return rows.tobytes().replace(b"\0", b"").decode("ascii")


def _by_length(length):
    """Index arrays into `length` grouping reads whose lengths share a power-of-two class (1, 2, 3-4, 5-8,
    ...), so that a table padded to its longest read holds at most about twice its reads' bytes: one long
    read among short ones costs its own length, not all of theirs (reads.py's promise). One group, all the
    reads in order, when they share one class (the usual batch)."""
    kind = np.ceil(np.log2(np.maximum(length, 1))).astype(np.int64)
    if (kind == kind[0]).all():
        return [np.arange(len(length))]
    order = np.argsort(kind, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(kind[order])) + 1)
