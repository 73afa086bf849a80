/* sam_to_bam.cu: SAM record lines to BAM records, and records moved into a new order (mapper/bam.py).
 *
 * The host layer (mapper/device/host.py) runs these kernels as multi-threaded C++ on the CPU; they compile for
 * the GPU too (one thread per record, no block cooperation), as every kernel here does.
 *
 * Input: `text`, whole SAM record lines each ending with '\n', and `ends`, int64 [n + 1]: ends[0] = -1 and
 * ends[i + 1] the position of line i's '\n', so line i is text[ends[i] + 1, ends[i + 1]).
 * Reference names: `names` (the @SQ names back to back), `name_at` int64 [n_ref + 1] (name k is
 * names[name_at[k], name_at[k + 1])), sorted bytewise, and `name_id` int32 [n_ref], the @SQ rank (refID) of
 * the k-th sorted name, so RNAME and RNEXT are found by binary search.
 *
 * The lines are found first: line_counts counts the '\n' of each segment of `seg` bytes, the host takes the
 * exclusive prefix sum of the counts, and line_ends writes each segment's newline positions from there.
 * Two passes then share one parser (encode_record), so the sizes and the bytes cannot disagree:
 *   1. bam_sizes: sizes[i] = bytes of record i's BAM encoding (block_size included), or -code for a line
 *      that is not a SAM record gkmap can encode (codes below; mapper/bam.py words them);
 *   2. the host takes the exclusive prefix sum of sizes (numpy's cumsum), then bam_records writes record i at
 *      out + at[i] and its sort key keys[i] (see record_key).
 * gather_records then copies records, given by address and length, to consecutive places of one buffer (the
 * sorted writer's reordering and merge).
 *
 * The encoding is the SAM specification's BAM layout (little-endian, unaligned), with samtools' choices where
 * the specification leaves one: an integer tag takes the smallest of c/C/s/S/i/I that holds it (C/S/I for
 * values >= 0), QUAL '*' is 0xFF per base, bin = reg2bin(pos, end) with end = pos + 1 for an unmapped record
 * or one without reference length, and htslib's repairs of inconsistent records: RNAME set with POS 0 is
 * unplaced (refID -1), a record without refID or CIGAR gets FLAG 0x4, RNEXT set with PNEXT 0 becomes -1.
 * So the output is byte for byte what `samtools view -b` makes of the same lines. Stricter than samtools: an
 * RNAME or RNEXT the header lacks is an error (samtools warns and unmaps), and so are a NUL byte, a QNAME or
 * QUAL byte outside '!'-'~' and a tag name other than [A-Za-z][A-Za-z0-9], as the specification says.
 */
#include <stdint.h>
#ifdef GKMAP_HOST
#include <stdlib.h>
#endif
#ifndef __CUDACC__
#define __constant__
#endif

#define BAM_BAD_FIELDS 1     /* fewer than 11 tab-separated fields */
#define BAM_BAD_QNAME 2      /* empty, longer than 254, or a byte outside '!'-'~' */
#define BAM_BAD_FLAG 3
#define BAM_BAD_RNAME 4      /* not an @SQ name */
#define BAM_BAD_POS 5
#define BAM_BAD_MAPQ 6
#define BAM_BAD_CIGAR 7      /* syntax, an op longer than 2^28 - 1, or more than 65535 ops */
#define BAM_BAD_RNEXT 8
#define BAM_BAD_PNEXT 9
#define BAM_BAD_TLEN 10
#define BAM_BAD_SEQ 11       /* length differs from the CIGAR's query length */
#define BAM_BAD_QUAL 12      /* length differs from SEQ's, or a byte outside '!'-'~' */
#define BAM_BAD_TAG 13       /* not TG:T:VALUE with a known type, or a value its type cannot hold */
#define BAM_BAD_BYTE 14      /* a NUL byte in the line */

#define MAX_POS 2147483647LL /* 1-based POS / PNEXT; the 0-based pos + 1 then fits the key's 31 bits */

/* Little-endian stores at any alignment. */
__device__ __forceinline__ void put16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

__device__ __forceinline__ void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* An integer in `size` (1, 2 or 4) little-endian bytes, two's complement for a negative one. */
__device__ __forceinline__ void put_int(uint8_t *p, int size, long long x)
{
    if (size == 1)
        p[0] = (uint8_t)x;
    else if (size == 2)
        put16(p, (uint32_t)x);
    else
        put32(p, (uint32_t)x);
}

/* A float32's IEEE bits, little-endian (the machine's float is little-endian, as BAM's). */
__device__ __forceinline__ void put_float(uint8_t *p, float f)
{
    const uint8_t *b = (const uint8_t *)&f;
    for (int k = 0; k < 4; k++)
        p[k] = b[k];
}

/* Eight bytes at p as a little-endian word, p at any alignment (on the host one unaligned load). */
__device__ __forceinline__ unsigned long long load8(const uint8_t *p)
{
#ifdef GKMAP_HOST
    unsigned long long v;
    __builtin_memcpy(&v, p, 8);
    return v;
#else
    unsigned long long v = 0;
    for (int k = 7; k >= 0; k--)
        v = v << 8 | p[k];
    return v;
#endif
}

/* The top bit of exactly the bytes of x equal to c: y = x ^ (c in every byte) is zero there; adding 0x7f to
 * each byte's low 7 bits of y carries into its top bit unless they are zero, and y's own top bit is or-ed
 * in; no carry crosses a byte (0x7f + 0x7f < 0x100). */
__device__ __forceinline__ unsigned long long bytes_equal(unsigned long long x, uint8_t c)
{
    const unsigned long long low7 = 0x7F7F7F7F7F7F7F7FULL, y = x ^ (0x0101010101010101ULL * c);
    return ~(((y & low7) + low7) | y | low7);
}

/* How many bytes have their top bit set in a bytes_equal word (a multiply sums the bytes into the top one). */
__device__ __forceinline__ int count_bytes(unsigned long long bits)
{
    return (int)(((bits >> 7) * 0x0101010101010101ULL) >> 56);
}

/* The index (0-7) of the lowest byte whose top bit is set in a nonzero bytes_equal word. */
__device__ __forceinline__ int lowest_byte(unsigned long long bits)
{
#ifdef __CUDACC__
    return (__ffsll((long long)bits) - 1) >> 3;
#else
    return __builtin_ctzll(bits) >> 3;
#endif
}

/* The first tab of [p, e), or e: a word at a time. */
__device__ __forceinline__ const uint8_t *next_tab(const uint8_t *p, const uint8_t *e)
{
    for (; p + 8 <= e; p += 8) {
        const unsigned long long bits = bytes_equal(load8(p), '\t');
        if (bits)
            return p + lowest_byte(bits);
    }
    while (p < e && *p != '\t')
        p++;
    return p;
}

/* [p, q) as a decimal without sign: false when empty, with a non-digit, or above `max`. */
__device__ bool parse_uint(const uint8_t *p, const uint8_t *q, long long max, long long *value)
{
    if (p >= q)
        return false;
    long long v = 0;
    for (; p < q; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (*p - '0');
        if (v > max)
            return false;
    }
    *value = v;
    return true;
}

/* [p, q) as a decimal with an optional '-' (or '+'), within [min, max]. */
__device__ bool parse_int(const uint8_t *p, const uint8_t *q, long long min, long long max, long long *value)
{
    const bool negative = p < q && *p == '-';
    if (p < q && (*p == '-' || *p == '+'))
        p++;
    long long v;
    if (!parse_uint(p, q, negative ? -min : max, &v))
        return false;
    *value = negative ? -v : v;
    return true;
}

/* [p, q) as a float the way C's strtod then a cast to float reads it. Decimal mantissa m (its first 19
 * significant digits) and exponent x: when m < 2^53 and |x| <= 22 both m and 10^|x| are exact doubles, so one
 * multiplication or division rounds correctly (the common case: "0.5", "-12.25"); otherwise the host build
 * asks strtod itself, and a GPU build multiplies by powers of ten (within an ulp or two). */
__device__ bool parse_float(const uint8_t *from, const uint8_t *q, float *value)
{
    const uint8_t *p = from;
    const bool negative = p < q && *p == '-';
    if (p < q && (*p == '-' || *p == '+'))
        p++;
    unsigned long long m = 0;
    int digits = 0, x = 0;
    bool any = false, point = false;
    for (; p < q; p++) {
        if (*p == '.' && !point) {
            point = true;
            continue;
        }
        if (*p < '0' || *p > '9')
            break;
        any = true;
        if (m == 0 && *p == '0') {  /* leading zeros: not significant */
            x -= point;
            continue;
        }
        if (digits < 19) {
            m = m * 10 + (*p - '0');
            digits++;
            x -= point;
        } else {
            x += !point;
        }
    }
    if (!any)
        return false;
    if (p < q && (*p == 'e' || *p == 'E')) {
        long long e;
        if (!parse_int(p + 1, q, -100000, 100000, &e))
            return false;
        x += (int)e;
        p = q;
    }
    if (p != q)
        return false;
    const double exact[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                              1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    double v;
    if (m < (1ULL << 53) && x >= -22 && x <= 22) {
        v = x >= 0 ? (double)m * exact[x] : (double)m / exact[-x];
        v = negative ? -v : v;
    } else {
#ifdef GKMAP_HOST
        char copy[64];
        if (q - from >= (long long)sizeof copy)
            return false;
        for (int k = 0; k < q - from; k++)
            copy[k] = (char)from[k];
        copy[q - from] = 0;
        v = strtod(copy, 0);
#else
        v = (double)m;
        for (; x > 0; x--)
            v *= 10.0;
        for (; x < 0; x++)
            v /= 10.0;
        v = negative ? -v : v;
#endif
    }
    *value = (float)v;
    return true;
}

/* The refID of the name [p, q): binary search of the sorted names (bytewise, a shorter prefix first);
 * -1 when absent. */
__device__ int find_ref(const uint8_t *p, const uint8_t *q, const uint8_t *names, const long long *name_at,
                        const int *name_id, int n_ref)
{
    int lo = 0, hi = n_ref;
    const long long len = q - p;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        const uint8_t *s = names + name_at[mid];
        const long long slen = name_at[mid + 1] - name_at[mid];
        int cmp = 0;
        for (long long k = 0; k < len && k < slen && !cmp; k++)
            cmp = (int)s[k] - (int)p[k];
        if (!cmp)
            cmp = slen < len ? -1 : slen > len ? 1 : 0;
        if (!cmp)
            return name_id[mid];
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* BAM's 4-bit base code of each byte of SEQ: "=ACMGRSVTWYHKDBN" in either case, 0-15, and the digits 0-3 as
 * A, C, G, T (as htslib reads them); anything else (U included) 15, N. */
__constant__ uint8_t BASE_CODE[256] = {
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
     1,  2,  4,  8, 15, 15, 15, 15, 15, 15, 15, 15, 15,  0, 15, 15,
    15,  1, 14,  2, 13, 15, 15,  4, 11, 15, 15, 12, 15,  3, 15, 15,
    15, 15,  5,  6,  8, 15,  7,  9, 15, 10, 15, 15, 15, 15, 15, 15,
    15,  1, 14,  2, 13, 15, 15,  4, 11, 15, 15, 12, 15,  3, 15, 15,
    15, 15,  5,  6,  8, 15,  7,  9, 15, 10, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15
};

/* CIGAR op letter to its BAM code (MIDNSHP=X -> 0..8), -1 for another byte. */
__device__ __forceinline__ int cigar_op(uint8_t c)
{
    switch (c) {
    case 'M': return 0;
    case 'I': return 1;
    case 'D': return 2;
    case 'N': return 3;
    case 'S': return 4;
    case 'H': return 5;
    case 'P': return 6;
    case '=': return 7;
    case 'X': return 8;
    default: return -1;
    }
}

/* The BAI bin of [beg, end) (end exclusive): the smallest bin of the 6-level scheme (16 kbp leaves, each
 * level 8 times wider) that holds both ends; the first bin of the level at shift s is ((1 << (29 - s)) - 1) / 7. */
__device__ __forceinline__ uint32_t reg2bin(long long beg, long long end)
{
    end--;
    for (int shift = 14; shift < 29; shift += 3)
        if (beg >> shift == end >> shift)
            return (uint32_t)(((1LL << (29 - shift)) - 1) / 7 + (beg >> shift));
    return 0;
}

/* A B-array element type's size in bytes (0: not a type). */
__device__ __forceinline__ int element_size(uint8_t t)
{
    return t == 'c' || t == 'C' ? 1 : t == 's' || t == 'S' ? 2 : t == 'i' || t == 'I' || t == 'f' ? 4 : 0;
}

__device__ __forceinline__ bool is_letter(uint8_t c)
{
    return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
}

/* Whether [p, q) holds a NUL byte (which a C-string SAM parser would take for the line's end), a word at a
 * time. */
__device__ bool has_nul(const uint8_t *p, const uint8_t *q)
{
    for (; p + 8 <= q; p += 8)
        if (bytes_equal(load8(p), 0))
            return true;
    for (; p < q; p++)
        if (!*p)
            return true;
    return false;
}

/* Bytes of one optional field [p, q) ("TG:T:VALUE") in BAM, written at `out` when it is not null; -1 when
 * the field is malformed. i: the smallest integer type (negative: c, s, i; otherwise C, S, I); A: one
 * character; f: float32; Z, H (even length): the string and a NUL; B: subtype, count, elements. */
__device__ long long encode_tag(const uint8_t *p, const uint8_t *q, uint8_t *out)
{
    if (q - p < 5 || !is_letter(p[0]) || !(is_letter(p[1]) || (p[1] >= '0' && p[1] <= '9')) || p[2] != ':' ||
        p[4] != ':')
        return -1;
    const uint8_t type = p[3];
    const uint8_t *v = p + 5;
    if (out) {
        out[0] = p[0];
        out[1] = p[1];
    }
    if (type == 'A') {
        if (q - v != 1)
            return -1;
        if (out) {
            out[2] = 'A';
            out[3] = *v;
        }
        return 4;
    }
    if (type == 'i') {
        long long x;
        if (!parse_int(v, q, -2147483648LL, 4294967295LL, &x))
            return -1;
        const uint8_t t = x < 0 ? (x >= -128 ? 'c' : x >= -32768 ? 's' : 'i')
                                : (x <= 255 ? 'C' : x <= 65535 ? 'S' : 'I');
        const int size = element_size(t);
        if (out) {
            out[2] = t;
            put_int(out + 3, size, x);
        }
        return 3 + size;
    }
    if (type == 'f') {
        float f;
        if (!parse_float(v, q, &f))
            return -1;
        if (out) {
            out[2] = 'f';
            put_float(out + 3, f);
        }
        return 7;
    }
    if (type == 'Z' || type == 'H') {
        if (type == 'H' && (q - v) % 2)
            return -1;
        if (out) {
            out[2] = type;
            for (long long k = 0; k < q - v; k++)
                out[3 + k] = v[k];
            out[3 + (q - v)] = 0;
        }
        return 3 + (q - v) + 1;
    }
    if (type == 'B') {
        const int size = q - v >= 1 ? element_size(v[0]) : 0;
        if (!size || (q - v > 1 && v[1] != ','))
            return -1;
        long long count = 0;
        for (const uint8_t *c = v + 1; c < q; c++)
            count += *c == ',';
        if (out) {
            out[2] = 'B';
            out[3] = v[0];
            put32(out + 4, (uint32_t)count);
        }
        const uint8_t *e = v + 1;
        for (long long k = 0; k < count; k++) {
            const uint8_t *s = e + 1;  /* past the ',' */
            for (e = s; e < q && *e != ','; e++)
                ;
            uint8_t *o = out ? out + 8 + k * size : 0;
            if (v[0] == 'f') {
                float f;
                if (!parse_float(s, e, &f))
                    return -1;
                if (o)
                    put_float(o, f);
                continue;
            }
            const bool is_signed = v[0] == 'c' || v[0] == 's' || v[0] == 'i';
            const long long bits = 8LL * size;
            long long x;
            if (!parse_int(s, e, is_signed ? -(1LL << (bits - 1)) : 0,
                           is_signed ? (1LL << (bits - 1)) - 1 : (1LL << bits) - 1, &x))
                return -1;
            if (o)
                put_int(o, size, x);
        }
        return 8 + count * size;
    }
    return -1;
}

/* The sort key of samtools' coordinate order: refID as unsigned (so -1, unmapped, sorts last) in the high 32
 * bits, then (pos + 1) << 1 (pos >= -1, pos + 1 < 2^31), then the reverse-strand bit (FLAG 0x10). */
__device__ __forceinline__ unsigned long long record_key(int ref, long long pos, uint32_t flag)
{
    return (unsigned long long)(uint32_t)ref << 32 | (unsigned long long)(pos + 1) << 1 | ((flag >> 4) & 1);
}

/* One SAM line [s, e) to its BAM record. Fields are cut at tabs (the first 11 are mandatory, the rest are
 * tags), each is parsed and checked, the record's size is the sum of its parts; with `out` not null the
 * parts are written there and the key to *key. Returns the size (block_size's 4 bytes included) or -code. */
__device__ long long encode_record(const uint8_t *s, const uint8_t *e, const uint8_t *names,
                                   const long long *name_at, const int *name_id, int n_ref, uint8_t *out,
                                   unsigned long long *key)
{
    const uint8_t *field[12];  /* field k is [field[k], field[k + 1] - 1) for k < 11 */
    int nf = 0;
    field[nf++] = s;
    for (const uint8_t *c = next_tab(s, e); c < e && nf < 12; c = next_tab(c + 1, e))
        field[nf++] = c + 1;
    if (nf < 11)
        return -BAM_BAD_FIELDS;
    const uint8_t *qual_end = e;
    if (nf == 12)
        qual_end = field[11] - 1;
    else
        field[11] = e + 1;
#define END(k) ((k) == 10 ? qual_end : field[(k) + 1] - 1)
    const long long l_name = END(0) - field[0];
    if (l_name < 1 || l_name > 254)
        return -BAM_BAD_QNAME;
    for (long long k = 0; k < l_name; k++)
        if (field[0][k] < '!' || field[0][k] > '~')
            return -BAM_BAD_QNAME;
    long long flag, pos, mapq, pnext, tlen;
    if (!parse_uint(field[1], END(1), 65535, &flag))
        return -BAM_BAD_FLAG;
    int ref = -1;
    if (!(END(2) - field[2] == 1 && field[2][0] == '*')) {
        ref = find_ref(field[2], END(2), names, name_at, name_id, n_ref);
        if (ref < 0)
            return -BAM_BAD_RNAME;
    }
    if (!parse_uint(field[3], END(3), MAX_POS, &pos))
        return -BAM_BAD_POS;
    pos -= 1;
    if (pos < 0)
        ref = -1;
    if (ref < 0)
        flag |= 4;
    if (!parse_uint(field[4], END(4), 255, &mapq))
        return -BAM_BAD_MAPQ;
    /* CIGAR: count and check the ops, their reference and query lengths */
    long long n_cigar = 0, ref_len = 0, query_len = 0;
    const bool has_cigar = !(END(5) - field[5] == 1 && field[5][0] == '*');
    if (has_cigar) {
        long long len = 0;
        bool digits = false;
        for (const uint8_t *c = field[5]; c < END(5); c++) {
            if (*c >= '0' && *c <= '9') {
                len = len * 10 + (*c - '0');
                digits = true;
                if (len >= (1 << 28))
                    return -BAM_BAD_CIGAR;
                continue;
            }
            const int op = cigar_op(*c);
            if (op < 0 || !digits)
                return -BAM_BAD_CIGAR;
            if (out)
                put32(out + 36 + l_name + 1 + 4 * n_cigar, (uint32_t)(len << 4 | op));
            n_cigar++;
            ref_len += (op == 0 || op == 2 || op == 3 || op == 7 || op == 8) ? len : 0;
            query_len += (op == 0 || op == 1 || op == 4 || op == 7 || op == 8) ? len : 0;
            len = 0;
            digits = false;
        }
        if (digits || n_cigar == 0 || n_cigar > 65535)
            return -BAM_BAD_CIGAR;
    } else {
        flag |= 4;
    }
    int next_ref = -1;
    if (END(6) - field[6] == 1 && field[6][0] == '=') {
        next_ref = ref;
    } else if (!(END(6) - field[6] == 1 && field[6][0] == '*')) {
        next_ref = find_ref(field[6], END(6), names, name_at, name_id, n_ref);
        if (next_ref < 0)
            return -BAM_BAD_RNEXT;
    }
    if (!parse_uint(field[7], END(7), MAX_POS, &pnext))
        return -BAM_BAD_PNEXT;
    if (pnext == 0)
        next_ref = -1;
    if (!parse_int(field[8], END(8), -2147483647LL - 1, 2147483647LL, &tlen))
        return -BAM_BAD_TLEN;
    const bool no_seq = END(9) - field[9] == 1 && field[9][0] == '*';
    const long long l_seq = no_seq ? 0 : END(9) - field[9];
    if (has_cigar && l_seq && query_len != l_seq)
        return -BAM_BAD_SEQ;
    const bool no_qual = END(10) - field[10] == 1 && field[10][0] == '*';
    if (!no_qual && END(10) - field[10] != l_seq)
        return -BAM_BAD_QUAL;
    bool outside = false;  /* no early exit: the loop vectorises */
    for (long long k = 0; k < l_seq && !no_qual; k++)
        outside |= field[10][k] < '!' || field[10][k] > '~';
    if (outside)
        return -BAM_BAD_QUAL;
    if (!out && has_nul(s, e))  /* pass 1 only: pass 2 sees lines pass 1 accepted */
        return -BAM_BAD_BYTE;
    long long size = 36 + l_name + 1 + 4 * n_cigar + (l_seq + 1) / 2 + l_seq;
    /* tags, from the 12th field on */
    for (const uint8_t *t = field[11]; t < e;) {
        const uint8_t *te = next_tab(t, e);
        const long long bytes = encode_tag(t, te, out ? out + size : 0);
        if (bytes < 0)
            return -BAM_BAD_TAG;
        size += bytes;
        t = te + 1;
    }
    if (out) {
        const long long end_pos = pos + (((flag & 4) || ref_len == 0) ? 1 : ref_len);
        put32(out, (uint32_t)(size - 4));
        put32(out + 4, (uint32_t)ref);
        put32(out + 8, (uint32_t)pos);
        out[12] = (uint8_t)(l_name + 1);
        out[13] = (uint8_t)mapq;
        put16(out + 14, reg2bin(pos, end_pos));
        put16(out + 16, (uint32_t)n_cigar);
        put16(out + 18, (uint32_t)flag);
        put32(out + 20, (uint32_t)l_seq);
        put32(out + 24, (uint32_t)next_ref);
        put32(out + 28, (uint32_t)(pnext - 1));
        put32(out + 32, (uint32_t)tlen);
        for (long long k = 0; k < l_name; k++)
            out[36 + k] = field[0][k];
        out[36 + l_name] = 0;
        uint8_t *seq = out + 36 + l_name + 1 + 4 * n_cigar;
        const uint8_t *bases = field[9], *quals = field[10];
        long long k = 0;
        for (; k + 1 < l_seq; k += 2)
            seq[k / 2] = (uint8_t)(BASE_CODE[bases[k]] << 4 | BASE_CODE[bases[k + 1]]);
        if (k < l_seq)
            seq[k / 2] = (uint8_t)(BASE_CODE[bases[k]] << 4);
        uint8_t *qual = seq + (l_seq + 1) / 2;
        if (no_qual)
            for (k = 0; k < l_seq; k++)
                qual[k] = 0xFF;
        else
            for (k = 0; k < l_seq; k++)
                qual[k] = (uint8_t)(quals[k] - 33);
        *key = record_key(ref, pos, (uint32_t)flag);
    }
#undef END
    return size;
}

/* One thread per segment s of `seg` bytes of text[0, nbytes): counts[s] = its '\n' bytes, a word at a time. */
extern "C" __global__ void line_counts(const uint8_t *text, long long nbytes, long long seg, long long *counts)
{
    const long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long lo = s * seg;
    if (lo >= nbytes)
        return;
    const long long hi = lo + seg < nbytes ? lo + seg : nbytes;
    long long c = 0, k = lo;
    for (; k + 8 <= hi; k += 8)
        c += count_bytes(bytes_equal(load8(text + k), '\n'));
    for (; k < hi; k++)
        c += text[k] == '\n';
    counts[s] = c;
}

/* One thread per segment s: the positions of its '\n' bytes, in order, at ends[first[s]] on. */
extern "C" __global__ void line_ends(const uint8_t *text, long long nbytes, long long seg, const long long *first,
                                     long long *ends)
{
    const long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long lo = s * seg;
    if (lo >= nbytes)
        return;
    const long long hi = lo + seg < nbytes ? lo + seg : nbytes;
    long long *out = ends + first[s];
    long long k = lo;
    for (; k + 8 <= hi; k += 8)
        for (unsigned long long bits = bytes_equal(load8(text + k), '\n'); bits; bits &= bits - 1)
            *out++ = k + lowest_byte(bits);
    for (; k < hi; k++)
        if (text[k] == '\n')
            *out++ = k;
}

/* Pass 1. One thread per line: its record's size, or -code. */
extern "C" __global__ void bam_sizes(const uint8_t *text, const long long *ends, long long n, const uint8_t *names,
                                     const long long *name_at, const int *name_id, int n_ref, long long *sizes)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    sizes[i] = encode_record(text + ends[i] + 1, text + ends[i + 1], names, name_at, name_id, n_ref, 0, 0);
}

/* Pass 2. One thread per line (every line was accepted by pass 1): record i at out + at[i], key to keys[i]. */
extern "C" __global__ void bam_records(const uint8_t *text, const long long *ends, long long n,
                                       const uint8_t *names, const long long *name_at, const int *name_id,
                                       int n_ref, const long long *at, uint8_t *out, unsigned long long *keys)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    encode_record(text + ends[i] + 1, text + ends[i + 1], names, name_at, name_id, n_ref, out + at[i], keys + i);
}

/* One thread per record i: copy len[i] bytes from address src[i] (a record anywhere in the process: the
 * sorter's arena or a merge window) to out + at[i]. */
extern "C" __global__ void gather_records(const long long *src, const long long *len, const long long *at,
                                          long long n, uint8_t *out)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const uint8_t *from = (const uint8_t *)src[i];
    uint8_t *to = out + at[i];
    for (long long k = 0; k < len[i]; k++)
        to[k] = from[k];
}
