/* render.cu: the SAM records of a batch of single-end mappings, CIGAR, MD and NM included, written as text
 * straight into one output buffer (mapper/sam_kernel.py drives it; mapper/align.py and mapper/sam.py hold the
 * numpy renderer that states the same rules and serves as the fallback and the tests' oracle).
 *
 * Input, per read r of the batch: its name (names[name_start[r] .. name_start[r + 1] - 1), a separator after
 * each), its ASCII bases seq[read_start[r] .. read_start[r + 1]) and qualities (qual, same offsets; NULL for
 * FASTA), nh[r] (loci found), mapq[r] (of its primary record) and second[r] (the second-best edit distance, or
 * -1). Per record k (a reported mapping, grouped by read in report order): rec_strand, rec_contig, rec_start,
 * rec_end (global reference coordinates, end exclusive) and rec_edits (the verifier's edit distance).
 * Output lines are in input order: the records of read r are lines line_first[r] .. line_first[r + 1] - 1
 * (records rec_first[r] ..), or one unmapped record when nh[r] = 0; line_read[j] is line j's read.
 *
 * Steps (each a launch, one thread per item, no block cooperation):
 *   1. classify_records: ungapped[k] = 1 when the mapping spans the read's length and its Hamming distance
 *      (an N never matches) equals its edit count: the all-M alignment is then optimal and is the one reported;
 *   2. align_gapped, for the others: a global alignment of the read against exactly the span in the band of
 *      diagonals |j - i| <= d, traced back from the end preferring a diagonal step, then an insertion, then a
 *      deletion (the rule of mapper/align.py), its CIGAR and MD written into the record's slot of `texts`;
 *   3. line_sizes: the bytes of each line; the host scans them into offsets;
 *   4. write_lines: each line written at its offset.
 * Steps 3 and 4 run the same routine (render_line), which only counts when given no buffer, so a line's size
 * and its text cannot disagree.
 *
 * `tables` (mapper/sam_kernel.py builds it from mapper/alphabet.py, so no letter rule is restated here):
 * bytes 0-255 the code of an ASCII base, 256-511 the code of its complement, 512-767 the complement of an
 * ASCII letter (SEQ of the reverse strand), 768-772 the MD letter of a reference code.
 */
#include <stdint.h>

#include "common.cuh"

#define T_CODE 0
#define T_RCODE 256
#define T_COMPLEMENT 512
#define T_MD 768

/* The operations of an alignment column, as align_gapped's traceback records them. */
#define OP_MATCH 0
#define OP_MISMATCH 1
#define OP_INS 2
#define OP_DEL 3

#define UNREACHABLE (1 << 28)  /* a DP value no path adds enough to to overflow, never equal to one <= d */

/* A writer that only counts when p is NULL (step 3) and writes when it is not (step 4). */
struct Out {
    uint8_t *p;
    long long n;
};

__device__ __forceinline__ void put(Out &o, uint8_t c)
{
    if (o.p)
        o.p[o.n] = c;
    o.n++;
}

__device__ __forceinline__ void put_bytes(Out &o, const uint8_t *s, long long len)
{
    if (o.p)
        for (long long i = 0; i < len; i++)
            o.p[o.n + i] = s[i];
    o.n += len;
}

/* A NUL-terminated literal (field separators and tag prefixes). */
__device__ __forceinline__ void put_str(Out &o, const char *s)
{
    while (*s)
        put(o, (uint8_t)*s++);
}

/* v in decimal, '-' first when negative. */
__device__ __forceinline__ void put_int(Out &o, long long v)
{
    if (v < 0) {
        put(o, '-');
        v = -v;
    }
    int digits = 1;
    for (long long p = 10; p <= v; p *= 10)
        digits++;
    if (o.p)
        for (int i = digits - 1; i >= 0; i--, v /= 10)
            o.p[o.n + i] = (uint8_t)('0' + v % 10);
    o.n += digits;
}

/* Code of base i of read r on its strand: the strand's sequence is the read reverse-complemented for strand 1. */
__device__ __forceinline__ uint8_t read_code(const uint8_t *seq, long long a, long long L, long long strand,
                                             long long i, const uint8_t *tables)
{
    return strand ? tables[T_RCODE + seq[a + L - 1 - i]] : tables[T_CODE + seq[a + i]];
}

/* A read letter and a reference letter match when their codes are equal and not N (CONVENTIONS.md). */
__device__ __forceinline__ int differ(uint8_t x, uint8_t y) { return x != y || x == CODE_N; }

/* Step 1. One thread per record k. */
extern "C" __global__ void classify_records(const uint8_t *seq, const long long *read_start, const long long *rec_read,
                                            const long long *rec_strand, const long long *rec_start,
                                            const long long *rec_end, const long long *rec_edits,
                                            const uint8_t *genome, const uint8_t *tables, long long m,
                                            uint8_t *ungapped)
{
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= m)
        return;
    const long long r = rec_read[k], a = read_start[r], L = read_start[r + 1] - a, g = rec_start[k];
    if (rec_end[k] - g != L) {
        ungapped[k] = 0;
        return;
    }
    long long hamming = 0;
    for (long long i = 0; i < L && hamming <= rec_edits[k]; i++)
        hamming += differ(read_code(seq, a, L, rec_strand[k], i, tables), genome[g + i]);
    ungapped[k] = hamming == rec_edits[k];
}

/* Step 2. One thread per gapped record gapped[t] with edit distance d and span W = end - start, over the read
 * (length L) on its strand. D[i][b] (b = 0 .. 2d) is the fewest edits of read[0, i) against span[0, j) on
 * diagonal j = i + b - d: row 0 is j (0 <= j <= W), each later row takes the least of the diagonal step (plus
 * 1 unless read[i - 1] matches span[j - 1], a letter outside the span matching nothing), the insertion from
 * (i - 1, b + 1) plus 1 and the deletion from (i, b - 1) plus 1, left to right. The traceback from (L, W)
 * takes the diagonal step when it gives the cell's value, else the insertion, else the deletion, to (0, 0).
 * An alignment of cost d never leaves the band, so these values and choices are those of the unbanded table.
 * The record's scratch (host-sized: (L + 1)(2d + 1) ints, then L + d op bytes) holds D and the columns.
 * The CIGAR (runs of M, I and D) and then the MD (matches before each mismatch, its reference letter, '^' and
 * the letters of a deletion run; insertions leave no trace; then the trailing matches) are written at
 * texts[text_at[t]]; their lengths and the alignment's cost in cig_len, md_len and gap_nm. */
extern "C" __global__ void align_gapped(const uint8_t *seq, const long long *read_start, const long long *rec_read,
                                        const long long *rec_strand, const long long *rec_start,
                                        const long long *rec_end, const long long *rec_edits, const uint8_t *genome,
                                        const uint8_t *tables, const long long *gapped, long long count,
                                        uint8_t *scratch, const long long *scratch_at, uint8_t *texts,
                                        const long long *text_at, long long *cig_len, long long *md_len,
                                        long long *gap_nm)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count)
        return;
    const long long k = gapped[t], r = rec_read[k], a = read_start[r], L = read_start[r + 1] - a;
    const long long strand = rec_strand[k], g = rec_start[k], W = rec_end[k] - g, d = rec_edits[k], B = 2 * d + 1;
    int *D = (int *)(scratch + scratch_at[t]);
    uint8_t *ops = scratch + scratch_at[t] + (L + 1) * B * (long long)sizeof(int);
    for (long long b = 0; b < B; b++)
        D[b] = b - d >= 0 && b - d <= W ? (int)(b - d) : UNREACHABLE;
    for (long long i = 1; i <= L; i++) {
        const uint8_t x = read_code(seq, a, L, strand, i - 1, tables);
        int *row = D + i * B;
        const int *up = row - B;
        for (long long b = 0; b < B; b++) {
            const long long j = i + b - d;
            const uint8_t y = j - 1 >= 0 && j - 1 < W ? genome[g + j - 1] : (uint8_t)CODE_N;
            int best = up[b] + differ(x, y);
            if (b + 1 < B && up[b + 1] + 1 < best)
                best = up[b + 1] + 1;
            if (b > 0 && row[b - 1] + 1 < best)
                best = row[b - 1] + 1;
            row[b] = best;
        }
    }
    long long i = L, b = W - L + d, n_ops = 0;
    const long long steps = L + d;
    gap_nm[t] = D[i * B + b];
    while (i > 0 || b != d) {
        const int here = D[i * B + b];
        int op = OP_DEL;
        if (i > 0) {
            const long long j = i + b - d;
            const uint8_t y = j - 1 >= 0 && j - 1 < W ? genome[g + j - 1] : (uint8_t)CODE_N;
            const int mis = differ(read_code(seq, a, L, strand, i - 1, tables), y);
            if (D[(i - 1) * B + b] + mis == here)
                op = mis ? OP_MISMATCH : OP_MATCH;
            else if (b + 1 < B && D[(i - 1) * B + b + 1] + 1 == here)
                op = OP_INS;
        }
        ops[steps - 1 - n_ops++] = (uint8_t)op;
        if (op == OP_MATCH || op == OP_MISMATCH)
            i--;
        else if (op == OP_INS)
            i--, b++;
        else
            b--;
    }
    const uint8_t *col = ops + steps - n_ops;
    Out o = {texts + text_at[t], 0};
    for (long long c = 0; c < n_ops;) {  // CIGAR: run-length of M (match or mismatch), I, D
        const int kind = col[c] == OP_MISMATCH ? OP_MATCH : col[c];
        long long run = 0;
        while (c < n_ops && (col[c] == OP_MISMATCH ? OP_MATCH : col[c]) == kind)
            run++, c++;
        put_int(o, run);
        put(o, kind == OP_MATCH ? 'M' : kind == OP_INS ? 'I' : 'D');
    }
    cig_len[t] = o.n;
    long long matches = 0, p = 0;  // matches since the last MD event; span position
    for (long long c = 0; c < n_ops; c++) {
        const int op = col[c];
        if (op == OP_MATCH) {
            matches++, p++;
        } else if (op == OP_MISMATCH || op == OP_DEL) {
            if (op == OP_DEL && c > 0 && col[c - 1] == OP_DEL) {
                put(o, tables[T_MD + genome[g + p]]);  // a deletion run goes on
            } else {
                put_int(o, matches);
                if (op == OP_DEL)
                    put(o, '^');
                put(o, tables[T_MD + genome[g + p]]);
                matches = 0;
            }
            p++;
        }
    }
    put_int(o, matches);
    md_len[t] = o.n - cig_len[t];
}

/* One line's text (Out o counting or writing): a read's record, or its unmapped record. SAM columns (README,
 * "What gkmap map reports"): QNAME FLAG RNAME POS MAPQ CIGAR * 0 0 SEQ QUAL, then NM MD AS [XS] NH HI [RG].
 * FLAG 16 on the reverse strand, plus 256 after the read's first record; MAPQ the read's for its first record,
 * else 0; POS 1-based in the contig; SEQ reverse-complemented and QUAL reversed on the reverse strand, '*'
 * for an empty read (QUAL '*' for FASTA); AS is -NM, XS minus the second-best distance when there is one;
 * HI counts the read's records from 1. An unmapped read: FLAG 4, RNAME '*', POS and MAPQ 0, CIGAR '*', SEQ and
 * QUAL forward, no tags but RG. `tail` is "\tRG:Z:ID" with -R, else empty. */
#define LINE_PARAMS const uint8_t *names, const long long *name_start, const uint8_t *seq, const uint8_t *qual, \
    const long long *read_start, const long long *nh, const long long *mapq, const long long *second, \
    const long long *line_first, const long long *rec_first, const long long *line_read, \
    const long long *rec_strand, const long long *rec_contig, const long long *rec_start, \
    const long long *rec_edits, const long long *gap_of, const uint8_t *texts, const long long *text_at, \
    const long long *cig_len, const long long *md_len, const long long *gap_nm, const uint8_t *genome, \
    const long long *contig_start, const uint8_t *contig_names, const long long *contig_name_start, \
    const uint8_t *tables, const uint8_t *tail, long long tail_len, long long lines

__device__ void render_line(long long j, Out &o, LINE_PARAMS)
{
    const long long r = line_read[j], a = read_start[r], L = read_start[r + 1] - a;
    put_bytes(o, names + name_start[r], name_start[r + 1] - 1 - name_start[r]);
    long long strand = 0, k = -1;
    if (nh[r] == 0) {
        put_str(o, "\t4\t*\t0\t0\t*");
    } else {
        const long long hi = j - line_first[r];
        k = rec_first[r] + hi;
        strand = rec_strand[k];
        const long long contig = rec_contig[k];
        put(o, '\t');
        put_int(o, 16 * strand + (hi ? 256 : 0));
        put(o, '\t');
        put_bytes(o, contig_names + contig_name_start[contig],
                  contig_name_start[contig + 1] - 1 - contig_name_start[contig]);
        put(o, '\t');
        put_int(o, rec_start[k] - contig_start[contig] + 1);
        put(o, '\t');
        put_int(o, hi ? 0 : mapq[r]);
        put(o, '\t');
        if (gap_of[k] >= 0) {
            put_bytes(o, texts + text_at[gap_of[k]], cig_len[gap_of[k]]);
        } else {
            put_int(o, L);
            put(o, 'M');
        }
    }
    put_str(o, "\t*\t0\t0\t");
    if (L == 0)
        put(o, '*');
    else if (o.p && strand)
        for (long long i = 0; i < L; i++)
            o.p[o.n + i] = tables[T_COMPLEMENT + seq[a + L - 1 - i]];
    else if (o.p)
        for (long long i = 0; i < L; i++)
            o.p[o.n + i] = seq[a + i];
    if (L)
        o.n += L;
    put(o, '\t');
    if (L == 0 || !qual)
        put(o, '*');
    else if (o.p && strand)
        for (long long i = 0; i < L; i++)
            o.p[o.n + i] = qual[a + L - 1 - i];
    else if (o.p)
        for (long long i = 0; i < L; i++)
            o.p[o.n + i] = qual[a + i];
    if (L && qual)
        o.n += L;
    if (k >= 0) {
        const long long t = gap_of[k];
        const long long g = rec_start[k], nm = t >= 0 ? gap_nm[t] : rec_edits[k];
        put_str(o, "\tNM:i:");
        put_int(o, nm);
        put_str(o, "\tMD:Z:");
        if (t >= 0) {
            put_bytes(o, texts + text_at[t] + cig_len[t], md_len[t]);
        } else {  // the ungapped MD: matches before each mismatch and its reference letter, then the rest
            long long matches = 0;
            for (long long i = 0; i < L; i++) {
                const uint8_t y = genome[g + i];
                if (differ(read_code(seq, a, L, strand, i, tables), y)) {
                    put_int(o, matches);
                    put(o, tables[T_MD + y]);
                    matches = 0;
                } else {
                    matches++;
                }
            }
            put_int(o, matches);
        }
        put_str(o, "\tAS:i:");
        put_int(o, -nm);
        if (second[r] >= 0) {
            put_str(o, "\tXS:i:");
            put_int(o, -second[r]);
        }
        put_str(o, "\tNH:i:");
        put_int(o, nh[r]);
        put_str(o, "\tHI:i:");
        put_int(o, j - line_first[r] + 1);
    }
    put_bytes(o, tail, tail_len);
    put(o, '\n');
}

/* Step 3. One thread per line j. */
extern "C" __global__ void line_sizes(LINE_PARAMS, long long *size)
{
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= lines)
        return;
    Out o = {0, 0};
    render_line(j, o, names, name_start, seq, qual, read_start, nh, mapq, second, line_first, rec_first, line_read,
                rec_strand, rec_contig, rec_start, rec_edits, gap_of, texts, text_at, cig_len, md_len, gap_nm, genome,
                contig_start, contig_names, contig_name_start, tables, tail, tail_len, lines);
    size[j] = o.n;
}

/* Step 4. One thread per line j, written at text[offset[j]] (offset: the exclusive scan of the sizes). */
extern "C" __global__ void write_lines(LINE_PARAMS, const long long *offset, uint8_t *text)
{
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= lines)
        return;
    Out o = {text + offset[j], 0};
    render_line(j, o, names, name_start, seq, qual, read_start, nh, mapq, second, line_first, rec_first, line_read,
                rec_strand, rec_contig, rec_start, rec_edits, gap_of, texts, text_at, cig_len, md_len, gap_nm, genome,
                contig_start, contig_names, contig_name_start, tables, tail, tail_len, lines);
}
