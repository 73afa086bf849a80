/* render.cu: the SAM records of a batch of single-end mappings, CIGAR, MD and NM included, written as text
 * straight into one output buffer (mapper/sam_kernel.py drives it; mapper/align.py and mapper/sam.py hold the
 * numpy renderer that states the same rules and serves as the fallback and the tests' oracle).
 *
 * Input, per read r of the batch: its name (names[name_start[r] .. name_start[r + 1] - 1), a separator after
 * each), its ASCII bases seq[read_start[r] .. read_start[r + 1]) and qualities (qual, same offsets; NULL for
 * FASTA), nh[r] (loci found), mapq[r] (of its primary record) and second[r] (the second-best edit distance, or
 * -1). Per record k (a reported mapping, grouped by read in report order): rec_read, rec_strand, rec_contig,
 * rec_start, rec_end (global reference coordinates, end exclusive), rec_edits (the verifier's edit distance)
 * and rec_at, where the read's 2-bit codes on the record's strand begin in `codes` (seeding.StrandRows: the
 * reads forward, then reverse-complemented).
 * Output lines are in input order: the records of read r are lines line_first[r] .. line_first[r + 1] - 1
 * (records rec_first[r] ..), or one unmapped record when nh[r] = 0; line_read[j] is line j's read.
 *
 * Steps (each a launch, one thread per item, no block cooperation):
 *   1. classify_records: when the mapping spans the read's length and its Hamming distance (an N never
 *      matches) equals its edit count, the all-M alignment is optimal and is the one reported: its MD is
 *      written into the record's slot of `md_text` and md_size[k] is its length; -1 otherwise;
 *   2. for the others, span_keys and twin_check: which records align the same strand row of one read with the
 *      same edits against spans of the same letters (twins, whose alignments are one), so that only the first
 *      of each set is aligned; align_gapped, for those: a global alignment of the read against exactly the
 *      span in the band of diagonals |j - i| <= d, traced back from the end preferring a diagonal step, then
 *      an insertion, then a deletion (the rule of mapper/align.py), its CIGAR and MD written into the record's
 *      slot of `texts`;
 *   3. line_sizes: the bytes of each line; the host scans them into offsets;
 *   4. write_lines: each line written at its offset.
 * Steps 3 and 4 run the same routine (render_line<WRITE>), which only counts when WRITE is false, so a line's
 * size and its text cannot disagree.
 *
 * `tables` (mapper/sam_kernel.py builds it from mapper/alphabet.py, so no letter rule is restated here):
 * bytes 0-255 the complement of an ASCII letter (SEQ of the reverse strand), 256-260 the MD letter of a code.
 */
#include <stdint.h>
#include <string.h>

#include "common.cuh"

#define T_COMPLEMENT 0
#define T_MD 256

/* The operations of an alignment column, as align_gapped's traceback records them. */
#define OP_MATCH 0
#define OP_MISMATCH 1
#define OP_INS 2
#define OP_DEL 3

/* A record's reference span is a random place in the genome, a cache miss: on the host the span of the
 * record AHEAD items on is fetched early (PREFETCH, common.cuh), its first two cache lines (a 100 bp span). */
#define AHEAD 8

__device__ __forceinline__ void prefetch_span(const uint8_t *span)
{
    PREFETCH(span);
    PREFETCH(span + 64);
}

/* A writer: with WRITE it puts bytes at p[n..], without it only counts them (n). */
template <bool WRITE> struct Out {
    uint8_t *p;
    long long n;
};

template <bool WRITE> __device__ __forceinline__ void put(Out<WRITE> &o, uint8_t c)
{
    if (WRITE)
        o.p[o.n] = c;
    o.n++;
}

template <bool WRITE> __device__ __forceinline__ void put_bytes(Out<WRITE> &o, const uint8_t *s, long long len)
{
    if (WRITE)
        memcpy(o.p + o.n, s, len);
    o.n += len;
}

/* A string literal (field separators and tag prefixes), less its NUL: a copy of a size known when compiled. */
template <bool WRITE, int N> __device__ __forceinline__ void put_str(Out<WRITE> &o, const char (&s)[N])
{
    if (WRITE)
        memcpy(o.p + o.n, s, N - 1);
    o.n += N - 1;
}

__device__ __forceinline__ int digits(long long v)
{
    int d = 1;
    for (long long p = 10; p <= v; p *= 10)
        d++;
    return d;
}

/* v in decimal, '-' first when negative. */
template <bool WRITE> __device__ __forceinline__ void put_int(Out<WRITE> &o, long long v)
{
    if (v < 0) {
        put(o, '-');
        v = -v;
    }
    const int d = digits(v);
    if (WRITE)
        for (int i = d - 1; i >= 0; i--, v /= 10)
            o.p[o.n + i] = (uint8_t)('0' + v % 10);
    o.n += d;
}

/* A read letter and a reference letter match when their codes are equal and not N (CONVENTIONS.md). */
__device__ __forceinline__ int differ(uint8_t x, uint8_t y) { return x != y || x == CODE_N; }

#define LOW7 0x7F7F7F7F7F7F7F7FULL
#define HIGH1 0x8080808080808080ULL

/* The top bit of each zero byte of v: (v & 7f..) + 7f.. sets a byte's top bit unless its low bits are all
 * zero, and no carry crosses a byte (each byte adds at most 0x7f + 0x7f). */
__device__ __forceinline__ uint64_t zero_bytes(uint64_t v) { return ~(((v & LOW7) + LOW7) | v | LOW7); }

/* Bytes [i, i + 8) of x and y compared by `differ` at once: the top bit of each differing byte, bytes past
 * `len` (the read's length) left out. Little-endian loads: byte k of the word is bits 8k .. 8k + 7. */
__device__ __forceinline__ uint64_t differ_bits(const uint8_t *x, const uint8_t *y, long long i, long long len)
{
    uint64_t u = 0, v = 0;
    const long long n = len - i;
    if (n >= 8) {
        memcpy(&u, x + i, 8);
        memcpy(&v, y + i, 8);
    } else {
        for (int b = 0; b < n; b++) {
            u |= (uint64_t)x[i + b] << (8 * b);
            v |= (uint64_t)y[i + b] << (8 * b);
        }
    }
    const uint64_t bits = (~zero_bytes(u ^ v) & HIGH1) | zero_bytes(u ^ (CODE_N * 0x0101010101010101ULL));
    return n >= 8 ? bits : bits & ((1ULL << (8 * n)) - 1);
}

/* The byte (0 .. 7) of the lowest set top bit of a differ_bits word (a count of trailing zeros: the host's
 * popcount without -mpopcnt is a library call). */
__device__ __forceinline__ int first_byte(uint64_t bits)
{
#ifdef GKMAP_HOST
    return __builtin_ctzll(bits) / 8;
#else
    return (__ffsll((long long)bits) - 1) / 8;
#endif
}

/* Step 1. One thread per record k: the all-M alignment's MD (the matches before each mismatch and the
 * mismatch's reference letter, then the matches after the last) is written while the mismatches are counted,
 * so the record's span is read once: steps 3 and 4 copy it. Its slot (md_at[k], host-sized) holds the MD of
 * up to rec_edits[k] mismatches; a record found gapped leaves what it wrote there unused. */
extern "C" __global__ void classify_records(const uint8_t *codes, const long long *rec_at, const long long *rec_read,
                                            const long long *read_start, const long long *rec_start,
                                            const long long *rec_end, const long long *rec_edits,
                                            const uint8_t *genome, const uint8_t *tables, uint8_t *md_text,
                                            const long long *md_at, long long m, long long *md_size)
{
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= m)
        return;
    if (k + AHEAD < m)
        prefetch_span(genome + rec_start[k + AHEAD]);
    const long long r = rec_read[k], L = read_start[r + 1] - read_start[r], g = rec_start[k], edits = rec_edits[k];
    if (rec_end[k] - g != L) {
        md_size[k] = -1;
        return;
    }
    const uint8_t *x = codes + rec_at[k], *y = genome + g;
    Out<true> o = {md_text + md_at[k], 0};
    long long hamming = 0, last = -1;  // last: the previous mismatch
    for (long long i = 0; i < L && hamming <= edits; i += 8) {
        for (uint64_t bits = differ_bits(x, y, i, L); bits && ++hamming <= edits; bits &= bits - 1) {
            const long long at = i + first_byte(bits);
            put_int(o, at - last - 1);
            put(o, tables[T_MD + y[at]]);
            last = at;
        }
    }
    if (hamming == edits)
        put_int(o, L - last - 1);
    md_size[k] = hamming == edits ? o.n : -1;
}

/* Twins: gapped records that align the same strand row of one read (rec_at) with the same edits against spans
 * of the same letters. align_gapped reads nothing else (the span's padding is N whatever the place), so twins
 * have one alignment. A read in homopolymer or tandem runs (a genome-scale all-mapping's heaviest reads: four
 * poly-C/G reads made 97 % of the records of 5,000 reads of the 3.1 Gbp proxy) has thousands of records whose
 * spans hold the same letters at places e + 1 or more apart, each a banded alignment of (L + 1)(2d + 1) cells
 * where finding its twin costs a hash and a comparison of the spans, 8 bytes a step. The host
 * (mapper/sam_kernel.py) proposes, for each record, the first record of its key (span_keys); twin_check keeps
 * the proposal only for a true twin. Each thread reads inputs and writes its own entry: no thread waits for
 * another's result. */

/* Whether gapped records k and p are twins. The read too, not only its row's start: an empty read's rows start
 * where another read's row does (seeding.strand_rows), and the read's length is part of the alignment. */
__device__ __forceinline__ bool twins(const long long *rec_at, const long long *rec_read, const long long *rec_start,
                                      const long long *rec_end, const long long *rec_edits, const uint8_t *genome,
                                      long long k, long long p)
{
    const long long W = rec_end[k] - rec_start[k];
    if (rec_at[k] != rec_at[p] || rec_read[k] != rec_read[p] || rec_edits[k] != rec_edits[p]
        || rec_end[p] - rec_start[p] != W)
        return false;
    return same_bytes(genome + rec_start[k], genome + rec_start[p], W); /* common.cuh */
}

/* Step 2a. One thread per gapped record gapped[t]: key[t], a hash (common.cuh bytes_hash) of its span's letters
 * seeded with its read row, edits and span width: twins have equal keys. */
extern "C" __global__ void span_keys(const long long *rec_at, const long long *rec_start, const long long *rec_end,
                                     const long long *rec_edits, const uint8_t *genome, const long long *gapped,
                                     long long count, unsigned long long *key)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count)
        return;
    if (t + AHEAD < count)
        prefetch_span(genome + rec_start[gapped[t + AHEAD]]);
    const long long k = gapped[t], W = rec_end[k] - rec_start[k];
    const uint64_t seed = ((uint64_t)rec_at[k] << 16) ^ ((uint64_t)rec_edits[k] << 8) ^ (uint64_t)W;
    key[t] = bytes_hash(genome + rec_start[k], W, seed);
}

/* Step 2b. One thread per gapped record gapped[t]: source[t] (the host's proposal: the first gapped record with
 * t's key, t itself when it is that first) stays only when the two are twins; otherwise (a hash collision)
 * source[t] = t, and t is aligned itself. A proposed record is always the first of its key, its own source. */
extern "C" __global__ void twin_check(const long long *rec_at, const long long *rec_read, const long long *rec_start,
                                      const long long *rec_end, const long long *rec_edits, const uint8_t *genome,
                                      const long long *gapped, long long count, long long *source)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count || source[t] == t)
        return;
    if (!twins(rec_at, rec_read, rec_start, rec_end, rec_edits, genome, gapped[t], gapped[source[t]]))
        source[t] = t;
}

/* Step 2c. One thread per gapped record gapped[t] (the first of each set of twins) with edit distance d and span W
 * = end - start, over the read (length L) on its strand. D[i][b] (b = 0 .. 2d) is the fewest edits of read[0, i)
 * against span[0, j) on diagonal j = i + b - d: row 0 is j (0 <= j <= W), each later row takes the least of the
 * diagonal step (plus 1 unless read[i - 1] matches span[j - 1], a letter outside the span matching nothing), the
 * insertion from (i - 1, b + 1) plus 1 and the deletion from (i, b - 1) plus 1, left to right. The traceback from
 * (L, W) takes the diagonal step when it gives the cell's value, else the insertion, else the deletion, to (0, 0).
 * An alignment of cost d never leaves the band, so these values and choices are those of the unbanded table. Only
 * the diagonals k = j - i that an alignment of cost d can cross are computed: |k| + |(W - L) - k| <= d (k edits to
 * reach the diagonal, then at least |W - L - k| to end at (L, W)); the band's other cells are unreachable. That
 * changes no choice: a neighbour that gives a path cell's value lies on an optimal alignment too, so inside these
 * diagonals, and its value, like every value along an optimal alignment, comes from cells inside them; the cells
 * left out cannot make a comparison true that was false. D is held in bytes: a value above CAP (> every cost the
 * traceback compares, <= d <= MAX_E) is held at CAP, which keeps every value <= d exact and every larger one above
 * d, so the choices are the same. The record's scratch (host-sized) holds the span's letters padded with N on both
 * sides (L + 2d + 1 bytes), D ((L + 1) rows of 2d + 2 bytes: the band, then a column no step can take) and the
 * columns (L + d op bytes). The CIGAR (runs of M, I and D) and then the MD (matches before each mismatch, its
 * reference letter, '^' and the letters of a deletion run; insertions leave no trace; then the trailing matches)
 * are written at texts[text_at[t]]; their lengths and the alignment's cost in cig_len, md_len and gap_nm. */
#ifndef MAX_E
#define MAX_E 25
#endif
#define CAP (MAX_E + 2)

extern "C" __global__ void align_gapped(const uint8_t *codes, const long long *rec_at, const long long *rec_read,
                                        const long long *read_start, const long long *rec_start,
                                        const long long *rec_end, const long long *rec_edits, const uint8_t *genome,
                                        const uint8_t *tables, const long long *gapped, long long count,
                                        uint8_t *scratch, const long long *scratch_at, uint8_t *texts,
                                        const long long *text_at, long long *cig_len, long long *md_len,
                                        long long *gap_nm)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count)
        return;
    if (t + AHEAD < count)
        prefetch_span(genome + rec_start[gapped[t + AHEAD]]);
    const long long k = gapped[t], r = rec_read[k], L = read_start[r + 1] - read_start[r];
    const long long g = rec_start[k], W = rec_end[k] - g;
    const int d = (int)rec_edits[k], B = 2 * d + 1;
    const uint8_t *x = codes + rec_at[k];
    uint8_t *span = scratch + scratch_at[t];  // span[q]: the letter at j - 1 = q - d - 1
    const int C = B + 1;
    uint8_t *D = span + L + 2 * d + 1, *ops = D + (L + 1) * C;
    const long long shown = W < L + d ? W : L + d;  // span letters the band reaches (W <= L + d anyway)
    memset(span, CODE_N, d + 1);
    memcpy(span + d + 1, genome + g, shown);
    memset(span + d + 1 + shown, CODE_N, L + d - shown);
    const int delta = (int)(W - L), slack = (d - (delta < 0 ? -delta : delta)) / 2;
    const int lo = d + (delta < 0 ? delta : 0) - slack, hi = d + (delta > 0 ? delta : 0) + slack;  // in b
    for (int b = lo; b <= hi; b++)
        D[b] = b - d >= 0 && b - d <= W ? (uint8_t)(b - d) : (uint8_t)CAP;
    D[hi + 1] = CAP;  // in every row: the insertion step into diagonal hi comes from outside
    for (long long i = 1; i <= L; i++) {
        const uint8_t *up = D + (i - 1) * C, xi = x[i - 1], *y = span + i;  // y[b]: (i, b)'s j - 1
        const unsigned xn = xi == CODE_N;
        uint8_t *row = D + i * C;
        unsigned left = CAP, u = up[lo];  // the cell before (deletion step); the cell above (diagonal step)
        for (int b = lo; b <= hi; b++) {
            const unsigned above_right = up[b + 1];
            unsigned v = u + ((xi != y[b]) | xn);
            v = above_right + 1 < v ? above_right + 1 : v;
            v = left + 1 < v ? left + 1 : v;
            v = v < CAP ? v : CAP;
            row[b] = (uint8_t)v;
            left = v;
            u = above_right;
        }
        row[hi + 1] = CAP;
    }
    long long i = L, b = W - L + d, n_ops = 0;
    const long long steps = L + d;
    gap_nm[t] = D[i * C + b];
    while (i > 0 || b != d) {
        const int here = D[i * C + b];
        int op = OP_DEL;
        if (i > 0) {
            const int mis = differ(x[i - 1], span[i + b]);
            if (D[(i - 1) * C + b] + mis == here)
                op = mis ? OP_MISMATCH : OP_MATCH;
            else if (D[(i - 1) * C + b + 1] + 1 == here)
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
    Out<true> o = {texts + text_at[t], 0};
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

/* One line's text (counted, or written with WRITE): a read's record, or its unmapped record. SAM columns
 * (README, "What gkmap map reports"): QNAME FLAG RNAME POS MAPQ CIGAR * 0 0 SEQ QUAL, then NM MD AS [XS] NH HI
 * [RG]. FLAG 16 on the reverse strand, plus 256 after the read's first record; MAPQ the read's for its first
 * record, else 0; POS 1-based in the contig; SEQ reverse-complemented and QUAL reversed on the reverse strand,
 * '*' for an empty read (QUAL '*' for FASTA); AS is -NM, XS minus the second-best distance when there is one;
 * HI counts the read's records from 1. An unmapped read: FLAG 4, RNAME '*', POS and MAPQ 0, CIGAR '*', SEQ and
 * QUAL forward, no tags but RG. `tail` is "\tRG:Z:ID" with -R, else empty. With `secondary_seq` 0
 * (--no-secondary-seq) a secondary record's SEQ and QUAL are '*', as bwa mem and minimap2 write them: a
 * read's first record carries its bases and qualities. An ungapped record's CIGAR is
 * "<L>M" and its MD lists the matches before each mismatch and the mismatch's reference letter, then the
 * matches after the last. */
#define LINE_PARAMS const uint8_t *names, const long long *name_start, const uint8_t *seq, const uint8_t *qual, \
    const long long *read_start, const long long *nh, const long long *mapq, const long long *second, \
    const long long *line_first, const long long *rec_first, const long long *line_read, \
    const long long *rec_strand, const long long *rec_contig, const long long *rec_start, \
    const long long *rec_edits, const uint8_t *md_text, const long long *md_at, const long long *md_size, \
    const long long *gap_of, const uint8_t *texts, const long long *text_at, const long long *cig_len, \
    const long long *md_len, const long long *gap_nm, const long long *contig_start, \
    const uint8_t *contig_names, const long long *contig_name_start, const uint8_t *tables, \
    const uint8_t *tail, long long tail_len, long long secondary_seq, long long lines
#define LINE_ARGS names, name_start, seq, qual, read_start, nh, mapq, second, line_first, rec_first, line_read, \
    rec_strand, rec_contig, rec_start, rec_edits, md_text, md_at, md_size, gap_of, texts, text_at, cig_len, md_len, \
    gap_nm, contig_start, contig_names, contig_name_start, tables, tail, tail_len, secondary_seq, lines

/* SEQ or QUAL: bytes [a, a + L) of `src`, or on the reverse strand the same bytes reversed (and mapped by
 * `complement` when given); '*' for an empty read or no bytes (FASTA's QUAL). */
template <bool WRITE>
__device__ __forceinline__ void put_read_field(Out<WRITE> &o, const uint8_t *src, long long a, long long L,
                                               long long reverse, const uint8_t *complement)
{
    if (L == 0 || !src) {
        put(o, '*');
    } else if (!reverse) {
        put_bytes(o, src + a, L);
    } else {
        if (WRITE && complement) {
            for (long long i = 0; i < L; i++)
                o.p[o.n + i] = complement[src[a + L - 1 - i]];
        } else if (WRITE) {  // 8 bytes a step, their order swapped
            long long i = 0;
            for (; i + 8 <= L; i += 8) {
                uint64_t w;
                memcpy(&w, src + a + L - 8 - i, 8);
                w = (w >> 56) | ((w >> 40) & 0xFF00ULL) | ((w >> 24) & 0xFF0000ULL) | ((w >> 8) & 0xFF000000ULL)
                    | ((w << 8) & 0xFF00000000ULL) | ((w << 24) & 0xFF0000000000ULL)
                    | ((w << 40) & 0xFF000000000000ULL) | (w << 56);
                memcpy(o.p + o.n + i, &w, 8);
            }
            for (; i < L; i++)
                o.p[o.n + i] = src[a + L - 1 - i];
        }
        o.n += L;
    }
}

template <bool WRITE> __device__ __forceinline__ void render_line(long long j, Out<WRITE> &o, LINE_PARAMS)
{
    const long long r = line_read[j], a = read_start[r], L = read_start[r + 1] - a;
    put_bytes(o, names + name_start[r], name_start[r + 1] - 1 - name_start[r]);
    long long strand = 0, k = -1, bare = 0;
    if (nh[r] == 0) {
        put_str(o, "\t4\t*\t0\t0\t*");
    } else {
        const long long hi = j - line_first[r];
        k = rec_first[r] + hi;
        bare = hi && !secondary_seq;
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
    if (bare) {
        put_str(o, "*\t*");
    } else {
        put_read_field(o, seq, a, L, strand, tables + T_COMPLEMENT);
        put(o, '\t');
        put_read_field(o, qual, a, L, strand, (const uint8_t *)0);
    }
    if (k >= 0) {
        const long long t = gap_of[k];
        const long long nm = t >= 0 ? gap_nm[t] : rec_edits[k];
        put_str(o, "\tNM:i:");
        put_int(o, nm);
        put_str(o, "\tMD:Z:");
        if (t >= 0)
            put_bytes(o, texts + text_at[t] + cig_len[t], md_len[t]);
        else
            put_bytes(o, md_text + md_at[k], md_size[k]);
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
    Out<false> o = {0, 0};
    render_line(j, o, LINE_ARGS);
    size[j] = o.n;
}

/* Step 4. One thread per line j, written at text[offset[j]] (offset: the exclusive scan of the sizes). */
extern "C" __global__ void write_lines(LINE_PARAMS, const long long *offset, uint8_t *text)
{
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= lines)
        return;
    Out<true> o = {text + offset[j], 0};
    render_line(j, o, LINE_ARGS);
}
