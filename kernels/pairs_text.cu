/* pairs_text.cu: the bytes of a pairs file to lines and columns on the GPU, and the filter's output lines back
 * to bytes: the device side of `gkmap filter`'s text path (mapper/filters/_text.py). Its decisions equal those
 * of the numpy parser mapper/filters/pairs.py, which the host runs on a chunk only to word an error.
 *
 * A chunk is whole lines: `nbytes` bytes ending with '\n' (the host adds one after a last line without it), at
 * most 2 GiB, so positions are uint32 offsets into the chunk. The buffer holds at least 8 bytes past nbytes
 * (word loads may read past the end; the bytes there are never used).
 *
 * Steps, all queued on one stream without waiting for the host:
 *   1. count_newlines: newlines per 64-byte segment (counts[s], and counts[nseg] = 0);
 *   2. exclusive scan of counts (scan_reduce / scan_serial / scan_spread): first[s] = lines ending before
 *      segment s, first[nseg] = the number of lines n;
 *   3. line_ends: ends[first[s] + k] = position of the k-th '\n' of segment s (compaction), for the first `cap`
 *      lines (the room in ends and tabs: nbytes / 4 + 1; more lines than that means lines shorter than
 *      "A\tA\n", and one of the first cap lines is then bad, as cap good lines take 4 cap > nbytes bytes);
 *   4. line_stats: stats = {flags 0, n, length of column 1 and 2 of line 0};
 *   5. parse_lines: per line, its tab (tabs[i]) and its checks, as flag bits in stats[0] (atomicOr):
 *      BAD_LINE    not exactly one tab, an empty column, or a byte other than a letter;
 *      BAD_LENGTHS faithful: columns of different lengths; improved: column 1 shorter than column 2;
 *      MIXED       the line's column lengths differ from line 0's (the host then filters length groups).
 * The host reads stats, runs encode_lines (gatekeeper.cu) and the filter kernel for the chunk's lengths, then:
 *   6. format_widths: bytes of each output line "<1|0>\t<estimate>\n"; scan; format_lines writes them.
 * Line i spans [ends[i-1] + 1, ends[i]) (from 0 for i = 0), less a CR before its '\n'.
 * Kernels launched before the host knows n read it from memory (`count`) and loop over lines with a stride of
 * `nthreads`, the launch's thread count. No shared memory and no __syncthreads: tests/host_cuda.py runs these
 * kernels on the CPU in CI, one thread after another.
 */
#include <stdint.h>

#define SEG 64
#define BAD_LINE 1u
#define BAD_LENGTHS 2u
#define MIXED 4u

#ifndef __CUDACC__
/* tests/host_cuda.py runs one thread at a time, so a plain read-modify-write is atomic there. */
static inline uint32_t atomicOr(uint32_t *address, uint32_t value)
{
    const uint32_t old = *address;
    *address = old | value;
    return old;
}
#endif

/* '\n' bytes in a 64-bit word: y = x ^ 0x0a..0a is zero exactly at them, and ~(((y & 7f..) + 7f..) | y | 7f..)
 * sets the top bit of exactly the zero bytes of y (no carry crosses a byte: each byte adds at most 0x7f + 0x7f). */
__device__ __forceinline__ uint64_t newline_bits(uint64_t x)
{
    const uint64_t low = 0x7F7F7F7F7F7F7F7FULL, y = x ^ 0x0A0A0A0A0A0A0A0AULL;
    return ~(((y & low) + low) | y | low);
}

/* Step 1. One thread per segment s of SEG bytes; thread nseg writes the scan's total slot. */
extern "C" __global__ void count_newlines(const uint8_t *text, int nbytes, int nseg, uint32_t *counts)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s > nseg)
        return;
    int c = 0;
    const int base = s * SEG;
    if (s < nseg && base + SEG <= nbytes) {
        const uint64_t *words = (const uint64_t *)(text + base);
        for (int k = 0; k < SEG / 8; k++)
            c += __popcll(newline_bits(words[k]));
    } else {
        for (int j = base; j < nbytes && s < nseg; j++)
            c += text[j] == '\n';
    }
    counts[s] = c;
}

/* Step 2, an exclusive scan without shared memory, in levels of `span` items: scan_reduce sums each span of
 * data into partial[t]; the top level (at most span items) is scanned by one thread (scan_serial); scan_spread
 * then rewrites each span of data as its exclusive prefix sums, starting from the scanned partial[t]. */
extern "C" __global__ void scan_reduce(const uint32_t *data, int n, int span, uint32_t *partial)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int lo = t * span;
    if (lo >= n)
        return;
    const int hi = lo + span < n ? lo + span : n;
    uint32_t sum = 0;
    for (int j = lo; j < hi; j++)
        sum += data[j];
    partial[t] = sum;
}

extern "C" __global__ void scan_serial(uint32_t *data, int n)
{
    if (blockIdx.x * blockDim.x + threadIdx.x)  // one thread of the launch's block
        return;
    uint32_t run = 0;
    for (int j = 0; j < n; j++) {
        const uint32_t v = data[j];
        data[j] = run;
        run += v;
    }
}

extern "C" __global__ void scan_spread(uint32_t *data, int n, int span, const uint32_t *partial)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int lo = t * span;
    if (lo >= n)
        return;
    const int hi = lo + span < n ? lo + span : n;
    uint32_t run = partial[t];
    for (int j = lo; j < hi; j++) {
        const uint32_t v = data[j];
        data[j] = run;
        run += v;
    }
}

/* Step 3. Segment s writes the positions of its newlines from ends[first[s]] on. */
extern "C" __global__ void line_ends(const uint8_t *text, int nbytes, int nseg, const uint32_t *first,
                                     uint32_t cap, uint32_t *ends)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= nseg)
        return;
    uint32_t k = first[s];
    const int base = s * SEG;
    if (base + SEG <= nbytes) {
        const uint64_t *words = (const uint64_t *)(text + base);
        for (int w = 0; w < SEG / 8; w++) {
            uint64_t bits = newline_bits(words[w]);
            while (bits) {  // bit 8b + 7 set for byte b (little-endian load: byte b is bits 8b..8b+7)
                const int b = __popcll((bits & (0 - bits)) - 1) / 8;
                if (k < cap)
                    ends[k] = base + 8 * w + b;
                k++;
                bits &= bits - 1;
            }
        }
    } else {
        for (int j = base; j < nbytes; j++)
            if (text[j] == '\n' && k++ < cap)
                ends[k - 1] = j;
    }
}

__device__ __forceinline__ uint32_t line_start(const uint32_t *ends, uint32_t i) { return i ? ends[i - 1] + 1 : 0; }

/* End of line i's text: its '\n', or the CR before it. */
__device__ __forceinline__ uint32_t line_stop(const uint8_t *text, const uint32_t *ends, uint32_t i)
{
    const uint32_t start = line_start(ends, i), end = ends[i];
    return end > start && text[end - 1] == '\r' ? end - 1 : end;
}

/* Step 4, one thread. Column lengths of line 0 as parse_lines measures them (position of the first tab). */
extern "C" __global__ void line_stats(const uint8_t *text, const uint32_t *ends, const uint32_t *count,
                                      uint32_t *stats)
{
    if (blockIdx.x * blockDim.x + threadIdx.x)  // one thread of the launch's block
        return;
    const uint32_t n = *count;
    stats[0] = 0;
    stats[1] = n;
    stats[2] = stats[3] = 0;
    if (n == 0)
        return;
    const uint32_t stop = line_stop(text, ends, 0);
    uint32_t tab = 0;
    while (tab < stop && text[tab] != '\t')
        tab++;
    stats[2] = tab;
    stats[3] = tab < stop ? stop - tab - 1 : 0;
}

__device__ __forceinline__ bool is_letter(uint32_t c) { return (c | 0x20u) - 'a' < 26u; }

/* Step 5, for the first `cap` lines. Bytes are read four at a time from the aligned word holding them. */
extern "C" __global__ void parse_lines(const uint8_t *text, const uint32_t *ends, const uint32_t *count,
                                       uint32_t cap, int nthreads, int faithful, uint32_t *tabs, uint32_t *stats)
{
    const uint32_t n = *count < cap ? *count : cap;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += nthreads) {
        const uint32_t start = line_start(ends, i), stop = line_stop(text, ends, i);
        uint32_t tab = stop, ntabs = 0;
        bool letters = true;
        for (uint32_t a = start & ~3u; a < stop; a += 4) {
            const uint32_t word = *(const uint32_t *)(text + a);
            for (uint32_t b = 0; b < 4; b++) {
                const uint32_t j = a + b, c = (word >> (8 * b)) & 0xFFu;
                if (j < start || j >= stop)
                    continue;
                if (c == '\t') {
                    tab = ntabs ? tab : j;
                    ntabs++;
                } else {
                    letters = letters && is_letter(c);
                }
            }
        }
        tabs[i] = tab;
        const uint32_t len1 = tab - start, len2 = ntabs ? stop - tab - 1 : 0;
        uint32_t flags = 0;
        if (!letters || ntabs != 1 || len1 == 0 || len2 == 0)
            flags = BAD_LINE;
        else if (faithful ? len1 != len2 : len1 < len2)
            flags = BAD_LENGTHS;
        if (len1 != stats[2] || len2 != stats[3])
            flags |= MIXED;
        if (flags)
            atomicOr(stats, flags);
    }
}

/* Results of a length group (row r = line rows[r]) into the chunk's per-line arrays. */
extern "C" __global__ void scatter_results(const uint32_t *rows, int n, const uint8_t *accept_group,
                                           const int16_t *estimate_group, uint8_t *accept, int16_t *estimate)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n)
        return;
    accept[rows[r]] = accept_group[r];
    estimate[rows[r]] = estimate_group[r];
}

/* Characters of v in decimal, a minus sign included. */
__device__ __forceinline__ uint32_t decimal_width(int v)
{
    uint32_t u = v < 0 ? -v : v, width = v < 0 ? 2 : 1;
    for (; u >= 10; u /= 10)
        width++;
    return width;
}

/* Step 6: "<accept>\t<estimate>\n" takes 3 bytes plus the estimate's digits; thread n writes the total slot. */
extern "C" __global__ void format_widths(const int16_t *estimate, int n, uint32_t *widths)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n)
        widths[i] = i < n ? 3 + decimal_width(estimate[i]) : 0;
}

extern "C" __global__ void format_lines(const uint8_t *accept, const int16_t *estimate, const uint32_t *offsets,
                                        int n, uint8_t *out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const int v = estimate[i];
    uint8_t *p = out + offsets[i];
    const uint32_t width = decimal_width(v);
    p[0] = accept[i] ? '1' : '0';
    p[1] = '\t';
    uint32_t u = v < 0 ? -v : v;
    for (uint32_t k = width; k-- > 0;) {  // digits from the last, then the sign
        p[2 + k] = k == 0 && v < 0 ? '-' : '0' + u % 10;
        u /= 10;
    }
    p[2 + width] = '\n';
}
