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
both must give the same text byte for byte (tests/test_render_kernel.py).
"""
import numpy as np

from mapper.alphabet import COMPLEMENT, COMPLEMENT_ASCII, ENCODE, MD_ASCII
from mapper.device import host

_SOURCE = "render.cu"
# kernels/render.cu's `tables`: the letter rules of mapper/alphabet.py, handed over so none is restated there
_TABLES = np.concatenate([ENCODE, COMPLEMENT[ENCODE], COMPLEMENT_ASCII, MD_ASCII]).astype(np.uint8)


def available():
    """Whether the compiled renderer can run here (a C++ compiler for the host layer)."""
    return host.available()


def _i64(array):
    return np.ascontiguousarray(array, dtype=np.int64)


def _joined(names):
    """(uint8 bytes of `names`, each followed by a newline; int64 [len + 1] start of each name)."""
    blob = np.frombuffer(("\n".join(names) + "\n").encode(), dtype=np.uint8)
    return blob, np.r_[0, np.flatnonzero(blob == 10) + 1].astype(np.int64)


def records_text(batch, reference, read, strand, loci, nh, mapq, second, read_group=None, threads=1):
    """What `sam.batch_records(batch, ..., *align.describe(...), ...)` returns for the same arguments (see
    there), computed by kernels/render.cu on `threads` OpenMP threads: the SAM lines of one batch in input
    order, one string."""
    n, m = len(batch), len(read)
    if not n:
        return ""
    kept = np.bincount(read, minlength=n)
    per_read = kept + (nh == 0)  # a read's records, or its unmapped record
    line_first = np.r_[0, np.cumsum(per_read)].astype(np.int64)
    lines = int(line_first[-1])
    line_read = np.repeat(np.arange(n, dtype=np.int64), per_read)
    rec_first = np.r_[0, np.cumsum(kept)[:-1]].astype(np.int64)
    names, name_start = _joined(batch.names)
    contig_names, contig_name_start = _joined(reference.names)
    seq, read_start = np.ascontiguousarray(batch.seq), _i64(batch.starts)
    qual = np.intp(0) if batch.qual is None else np.ascontiguousarray(batch.qual)
    genome = np.ascontiguousarray(reference.codes)
    rec = [_i64(read), _i64(strand), _i64(loci.start), _i64(loci.end), _i64(loci.edits)]
    rec_contig = _i64(loci.contig)
    launch = lambda name, count, *args: host.launch(host.function(_SOURCE, name), count, *args, workers=threads)

    ungapped = np.empty(max(m, 1), dtype=np.uint8)
    launch("classify_records", m, seq, read_start, *rec, genome, _TABLES, np.int64(m), ungapped)
    gapped = np.flatnonzero(ungapped[:m] == 0)
    gap_of = np.full(max(m, 1), -1, dtype=np.int64)
    gap_of[gapped] = np.arange(len(gapped))
    texts, text_at, cig_len, md_len, gap_nm = _align_gapped(launch, gapped, seq, read_start, rec, genome)

    tail = np.frombuffer(f"\tRG:Z:{read_group}".encode() if read_group is not None else b"\0", dtype=np.uint8)
    line_args = (names, name_start, seq, qual, read_start, _i64(nh), _i64(mapq), _i64(second), line_first,
                 rec_first, line_read, rec[1], rec_contig, rec[2], rec[4], gap_of, texts, text_at, cig_len,
                 md_len, gap_nm, genome, _i64(reference.starts), contig_names, contig_name_start, _TABLES, tail,
                 np.int64(len(tail) if read_group is not None else 0), np.int64(lines))
    size = np.empty(lines, dtype=np.int64)
    launch("line_sizes", lines, *line_args, size)
    offset = np.zeros(lines, dtype=np.int64)
    np.cumsum(size[:-1], out=offset[1:])
    text = np.empty(int(offset[-1] + size[-1]), dtype=np.uint8)
    launch("write_lines", lines, *line_args, offset, text)
    return text.tobytes().decode()


def _align_gapped(launch, gapped, seq, read_start, rec, genome):
    """CIGAR and MD texts of the records `gapped` by kernels/render.cu's align_gapped: (texts, text_at,
    cig_len, md_len, nm), the i-th gapped record's CIGAR at texts[text_at[i]:][:cig_len[i]], its MD after.
    Each record gets a slot that holds any alignment of cost d: at most 2d + 1 CIGAR runs and d + 1 MD
    tokens, each a number (at most 20 digits) and up to two letters, the letters of deletion runs (at
    most d) besides; and a DP scratch of (L + 1)(2d + 1) ints and L + d op bytes."""
    count = len(gapped)
    if not count:
        one = np.zeros(1, dtype=np.int64)
        return np.zeros(1, dtype=np.uint8), one, one, one, one
    read, d = rec[0][gapped], rec[4][gapped]
    L = read_start[read + 1] - read_start[read]
    text_room = (2 * d + 1) * 21 + (d + 1) * 22 + d
    scratch_room = -(-((L + 1) * (2 * d + 1) * 4 + L + d) // 8) * 8
    text_at = np.r_[0, np.cumsum(text_room)]
    scratch_at = np.r_[0, np.cumsum(scratch_room)]
    texts = np.empty(int(text_at[-1]), dtype=np.uint8)
    scratch = np.empty(int(scratch_at[-1]), dtype=np.uint8)
    cig_len, md_len, nm = (np.empty(count, dtype=np.int64) for _ in range(3))
    launch("align_gapped", count, seq, read_start, *rec, genome, _TABLES, _i64(gapped), np.int64(count), scratch,
           scratch_at, texts, text_at, cig_len, md_len, nm)
    return texts, text_at, cig_len, md_len, nm
