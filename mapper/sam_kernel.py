"""The SAM records of a batch, CIGAR, MD and NM included, written by compiled code: kernels/render.cu through
the host device layer (mapper/device/host.py: the kernel source compiled as C++, its threads on OpenMP).

Why: on a GPU run the host's rendering was the whole command's limit (about 11 CPU-seconds per million
100 bp reads with numpy, against 0.6 s of GPU mapping core). Here every record's alignment and text are
made by one compiled routine per record, and the lines are written straight into one buffer sized by a
first pass: no Python step per record, no string object per field. The same source compiles for the GPU
(`nvcc -ptx`), so it can move there without restating a rule.

The rules are those of mapper/align.py (CIGAR/MD: the ungapped alignment where it is optimal, else the
banded global alignment with its traceback preference) and mapper/sam.py (the record line). That numpy
renderer stays as the fallback where no C++ compiler is present (`available`) and as the tests' oracle:
both must give the same text byte for byte (tests/mapping/test_render_kernel.py).
"""
import numpy as np

from mapper.alphabet import COMPLEMENT_ASCII, MD_ASCII
from mapper.device import host
from mapper.options import MAX_E

_SOURCE = "render.cu"
GAPPED_CHUNK = 4096  # gapped records per align_gapped launch (a few MB of scratch)
GAPPED_BLOCK = 16    # ... in blocks this small: a launch is then work for 256 OpenMP iterations, not 16
# kernels/render.cu's `tables`: the letter rules of mapper/alphabet.py, handed over so none is restated there
_TABLES = np.concatenate([COMPLEMENT_ASCII, MD_ASCII]).astype(np.uint8)


def available():
    """Whether the compiled renderer can run here (a C++ compiler for the host layer)."""
    return host.available()


def load():
    """Build (once per machine: the kernel cache) and load the kernels now, where a compiler is present."""
    if available():
        _kernel("write_lines")


def _kernel(name):
    return host.function(_SOURCE, name, MAX_E=MAX_E)


def _i64(array):
    return np.ascontiguousarray(array, dtype=np.int64)


def _joined(names):
    """(uint8 bytes of `names`, each followed by a newline; int64 [len + 1] start of each name)."""
    blob = np.frombuffer(("\n".join(names) + "\n").encode(), dtype=np.uint8)
    return blob, np.r_[0, np.flatnonzero(blob == 10) + 1].astype(np.int64)


def records_text(batch, rows, reference, read, strand, loci, nh, mapq, second, read_group=None, threads=1,
                 secondary_seq=True, buffer=None):
    """What `sam.batch_records(batch, reference, ..., *align.describe(rows, loci, reference), ...)` returns
    for the same arguments (see there), computed by kernels/render.cu on `threads` OpenMP threads: the SAM
    lines of one batch in input order, as a uint8 array of their ASCII text (a render process writes it to a
    file as it is; str(text, "utf-8") is the str). With `buffer` (a TextBuffer) the text is written into
    memory the caller keeps for its next call: it must be done with the text by then."""
    n, m = len(batch), len(read)
    if not n:
        return np.zeros(0, dtype=np.uint8)
    kept = np.bincount(read, minlength=n)
    per_read = kept + (nh == 0)  # a read's records, or its unmapped record
    line_first = np.r_[0, np.cumsum(per_read)].astype(np.int64)
    lines = int(line_first[-1])
    if not lines:
        return np.zeros(0, dtype=np.uint8)
    line_read = np.repeat(np.arange(n, dtype=np.int64), per_read)
    rec_first = np.r_[0, np.cumsum(kept)[:-1]].astype(np.int64)
    names, name_start = _joined(batch.names)
    contig_names, contig_name_start = _joined(reference.names)
    seq, read_start = np.ascontiguousarray(batch.seq), _i64(batch.starts)
    qual = 0 if batch.qual is None else np.ascontiguousarray(batch.qual)
    genome = np.ascontiguousarray(reference.codes)
    codes = np.ascontiguousarray(rows.codes)
    # a record's read (codes from rec_at on its strand) and span
    rec = [_i64(rows.start[loci.row]), _i64(read), read_start, _i64(loci.start), _i64(loci.end), _i64(loci.edits)]
    launch = lambda name, count, *args, block=host.BLOCK: host.launch(_kernel(name), count, *args, block=block,
                                                                      workers=threads)

    md_text, md_at = _md_slots(rec)
    md_size = np.empty(max(m, 1), dtype=np.int64)
    launch("classify_records", m, codes, *rec, genome, _TABLES, md_text, md_at, m, md_size)
    gapped = np.flatnonzero(md_size[:m] < 0)
    gap_of = np.full(max(m, 1), -1, dtype=np.int64)
    gap_of[gapped] = np.arange(len(gapped))
    texts, text_at, cig_len, md_len, gap_nm = _align_gapped(launch, gapped, codes, rec, genome)

    tail = np.frombuffer(b"" if read_group is None else f"\tRG:Z:{read_group}".encode(), dtype=np.uint8)
    line_args = (names, name_start, seq, qual, read_start, _i64(nh), _i64(mapq), _i64(second), line_first,
                 rec_first, line_read, _i64(strand), _i64(loci.contig), rec[3], rec[5], md_text, md_at,
                 md_size, gap_of, texts, text_at, cig_len, md_len, gap_nm, _i64(reference.starts), contig_names,
                 contig_name_start, _TABLES, tail, len(tail), int(secondary_seq), lines)
    size = np.empty(lines, dtype=np.int64)
    launch("line_sizes", lines, *line_args, size)
    offset = np.zeros(lines, dtype=np.int64)
    np.cumsum(size[:-1], out=offset[1:])
    nbytes = int(offset[-1] + size[-1])
    text = np.empty(nbytes, dtype=np.uint8) if buffer is None else buffer.take(nbytes)
    launch("write_lines", lines, *line_args, offset, text)
    return text


class TextBuffer:
    """Memory for records_text's text that a caller keeps from one call to the next (a render process: it
    writes each job's text out before the next), grown as needed; a text of more than `limit` bytes gets
    memory of its own, which is not kept. Why: text written into fresh memory pays a page fault and the
    kernel's zeroing for every page (and their reclaim from the page cache on a busy host). 100 repeat reads
    at genome scale rendered as three jobs of 156 MB of text each on one core: 1.495 / 1.603 s with fresh
    buffers, 1.416 / 1.521 s with the kept one (-5 %); as one 560 MB text, which is not kept, write_lines
    took 0.48-0.64 s into fresh memory and 0.14 s into used memory."""

    LIMIT = 1 << 28  # a render job's text is tens of MB

    def __init__(self, limit=LIMIT):
        self.limit = limit
        self.kept = np.zeros(0, dtype=np.uint8)

    def take(self, nbytes):
        """uint8 [nbytes]: the start of the kept memory, or memory of its own past the limit."""
        if nbytes > self.limit:
            return np.empty(nbytes, dtype=np.uint8)
        if len(self.kept) < nbytes:
            self.kept = np.empty(nbytes, dtype=np.uint8)
        return self.kept[:nbytes]


def _md_slots(rec):
    """(md_text, md_at): a slot for the MD of each record that spans its read's length (classify_records
    writes the all-M alignment's MD there): up to d mismatches, each after a number of at most the read
    length's digits, and the trailing number; no room for the others."""
    read, read_start, start, end, d = rec[1], rec[2], rec[3], rec[4], rec[5]
    L = read_start[read + 1] - read_start[read]
    digits = np.ones(len(L), dtype=np.int64)
    power = 10
    while len(L) and power <= L.max():
        digits += L >= power
        power *= 10
    room = np.where(end - start == L, (d + 1) * (digits + 1), 0)
    md_at = np.r_[0, np.cumsum(room)].astype(np.int64)
    return np.empty(max(int(md_at[-1]), 1), dtype=np.uint8), md_at


def _align_gapped(launch, gapped, codes, rec, genome):
    """CIGAR and MD texts of the records `gapped` by kernels/render.cu's align_gapped: (texts, text_at,
    cig_len, md_len, nm), the i-th gapped record's CIGAR at texts[text_at[i]:][:cig_len[i]], its MD after.
    Twins (records of one read row and edits against spans of the same letters: a read's records in
    homopolymer or tandem runs) share one text: only the first of each set is aligned (_twins).
    Each record gets a slot that holds any alignment of cost d: at most 2d + 1 CIGAR runs and d + 1 MD
    tokens, each a number (at most 20 digits) and up to two letters, the letters of deletion runs (at
    most d) besides. The kernel's scratch (the padded span, a byte per DP cell and the columns: about
    (L + 1)(2d + 4) bytes a record) is one buffer reused by launches of GAPPED_CHUNK records, which keeps
    it in cache and spares the page faults of a fresh buffer per batch."""
    if not len(gapped):
        one = np.zeros(1, dtype=np.int64)
        return np.zeros(1, dtype=np.uint8), one, one, one, one
    heads, run = _twins(launch, _i64(gapped), rec, genome)
    gapped = gapped[heads]
    count = len(gapped)
    read, read_start, d = rec[1][gapped], rec[2], rec[5][gapped]
    L = read_start[read + 1] - read_start[read]
    text_room = (2 * d + 1) * 21 + (d + 1) * 22 + d
    text_at = np.r_[0, np.cumsum(text_room)]
    texts = np.empty(int(text_at[-1]), dtype=np.uint8)
    scratch_room = (L + 2 * d + 1) + (L + 1) * (2 * d + 2) + (L + d)
    cig_len, md_len, nm = (np.empty(count, dtype=np.int64) for _ in range(3))
    scratch = None
    for a in range(0, count, GAPPED_CHUNK):
        b = min(a + GAPPED_CHUNK, count)
        scratch_at = np.r_[0, np.cumsum(scratch_room[a:b])]
        if scratch is None or len(scratch) < scratch_at[-1]:
            scratch = np.empty(int(scratch_at[-1]), dtype=np.uint8)
        launch("align_gapped", b - a, codes, *rec, genome, _TABLES, _i64(gapped[a:b]), b - a, scratch,
               scratch_at, texts, text_at[a:b], cig_len[a:], md_len[a:], nm[a:], block=GAPPED_BLOCK)
    if count == len(run):
        return texts, text_at, cig_len, md_len, nm
    return texts, text_at[run], cig_len[run], md_len[run], nm[run]


def _twins(launch, gapped, rec, genome):
    """(heads, run): the gapped records aligned (the first of each set of twins, kernels/render.cu), and for
    each gapped record the number of its set's head among them. Records with equal span keys are proposed as
    twins of the first of them; twin_check keeps only true twins (a hash collision aligns on its own)."""
    count = len(gapped)
    key = np.empty(count, dtype=np.uint64)
    launch("span_keys", count, rec[0], *rec[3:], genome, gapped, count, key)
    order = np.argsort(key)
    ordered = key[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    source = np.empty(count, dtype=np.int64)
    source[order] = np.repeat(np.minimum.reduceat(order, starts), np.diff(np.r_[starts, count]))
    launch("twin_check", count, rec[0], rec[1], *rec[3:], genome, gapped, count, source)
    heads = np.flatnonzero(source == np.arange(count))
    slot = np.empty(count, dtype=np.int64)
    slot[heads] = np.arange(len(heads))
    return heads, slot[source]
