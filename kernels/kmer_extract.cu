/* kmer_extract.cu: FASTA text -> base codes -> k-mer keys, on the GPU, for `gkmap kmers count` (the cuda
 * backend, mapper/kmers/gpu.py). The host only reads the file; parsing and k-mer building happen here.
 *
 * Codes (uint8): A=0, C=1, G=2, T=3 (CODE_A..CODE_T from mapper/alphabet.py), N = CODE_N = 4 for any other
 * letter; CODE_SKIP (a newline, a header byte: no code) and CODE_ODD (a byte the fast rules cannot place:
 * white space, '#' starting a line, non-ASCII) come from mapper/kmers/fasta.py, whose `fast_codes` these
 * kernels follow exactly. A block with an odd byte is parsed again on the host (fasta.general_codes).
 * FASTQ text: the same with mapper/kmers/fastq.py's rules (fastq_* below).
 *
 * Keys: a k-mer is C = ceil(k/32) uint64 channels; channel c holds bases 32c .. min(32c+32, k) - 1, first
 * base most significant, right-aligned; channel-major output (channel c of key i at keys[c * stride + i]).
 */
#include "tiles.cuh"

#ifndef CODE_A  /* the 2-bit code comes as -D from mapper/alphabet.py (kernels/common.cuh); for `make ptx` */
#define CODE_A 0
#define CODE_C 1
#define CODE_G 2
#define CODE_T 3
#define CODE_N 4
#endif

#ifndef CODE_SKIP
#define CODE_SKIP 5
#endif
#ifndef CODE_ODD
#define CODE_ODD 6
#endif

/* ---------------------------------------------------------------------------------------------------------
 * FASTA text, one thread per byte:
 *   fasta_bytes    the code of each byte alone: ACGT either case -> 0..3, '\n' -> SKIP, white space and
 *                  bytes >= 0x80 -> ODD, anything else (N, IUPAC, '>' inside a line...) -> N;
 *   fasta_lines    at each line start (byte 0 of the block, which starts a line, or a byte after '\n'):
 *                  '>' starts a header: the '>' becomes the N between records and the rest of the line
 *                  SKIP (the thread walks the header, which is short); '#' marks the byte ODD (a comment
 *                  line: the host takes the block). Runs after fasta_bytes, so its writes win;
 *   keep_flags     flags[i] = code[i] != SKIP, scanned by the host (kmer_sort.cu) into out_at;
 *   keep_compact   out[out_at[i]] = code[i] for the kept bytes, and *odd = 1 if any of them is ODD.
 * ------------------------------------------------------------------------------------------------------- */

__device__ __forceinline__ bool is_space(u8 b)
{
    return b == ' ' || (b >= '\t' && b <= '\r') || (b >= 0x1c && b <= 0x1f);
}

extern "C" __global__ void fasta_bytes(const u8 *text, u32 n, u8 *codes)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    u8 b = text[i], upper = b & 0xDF;
    u8 code = upper == 'A' ? CODE_A : upper == 'C' ? CODE_C : upper == 'G' ? CODE_G
                 : upper == 'T' ? CODE_T : CODE_N;
    if (b == '\n')
        code = CODE_SKIP;
    else if (b >= 0x80 || is_space(b))
        code = CODE_ODD;
    codes[i] = code;
}

extern "C" __global__ void fasta_lines(const u8 *text, u32 n, u8 *codes)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n || (i > 0 && text[i - 1] != '\n'))
        return;
    if (text[i] == '#') {
        codes[i] = CODE_ODD;
    } else if (text[i] == '>') {
        codes[i] = CODE_N;
        for (u32 j = i + 1; j < n && text[j] != '\n'; ++j)
            codes[j] = CODE_SKIP;
    }
}

extern "C" __global__ void keep_flags(const u8 *codes, u32 n, u32 *flags)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        flags[i] = codes[i] != CODE_SKIP;
}

extern "C" __global__ void keep_compact(const u8 *codes, u32 n, const u32 *out_at, u8 *out,
                                        u32 *odd)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n || codes[i] == CODE_SKIP)
        return;
    out[out_at[i]] = codes[i];
    if (codes[i] == CODE_ODD)
        *odd = 1;
}

/* ---------------------------------------------------------------------------------------------------------
 * FASTQ text (whole 4-line records, cut by mapper/kmers/reading.py), one thread per byte, with the rules of
 * mapper/kmers/fastq.py's fastq_codes (which the host runs where a block is not plain):
 *   newline_flags  flags[i] = 1 at a newline; the host scans them into line_of (the line of each byte) and
 *                  the number of lines, and takes the block itself unless it is a multiple of four ending in
 *                  a newline;
 *   fastq_bytes    a byte of a sequence line (line % 4 == 1): ACGT either case -> 0..3, anything else -> N,
 *                  its newline -> N (the separator after the read); a byte of any other line -> SKIP. The
 *                  newline ending line j sets ends[j] = i. What fastq.py would not take plainly sets *odd:
 *                  '\r' or a byte >= 0x80 anywhere, a header line not starting with '@', a third line that
 *                  is not a bare '+';
 *   fastq_records  thread r: record r's sequence and quality lines have the same length
 *                  (ends[4r+1] - ends[4r] == ends[4r+3] - ends[4r+2]), else *odd = 1.
 * The kept codes are then compacted by keep_flags / scan / keep_compact, as for FASTA.
 * ------------------------------------------------------------------------------------------------------- */

extern "C" __global__ void newline_flags(const u8 *text, u32 n, u32 *flags)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        flags[i] = text[i] == '\n';
}

extern "C" __global__ void fastq_bytes(const u8 *text, u32 n, const u32 *line_of, u8 *codes, u32 *ends,
                                       u32 *odd)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    u8 b = text[i], upper = b & 0xDF;
    u32 line = line_of[i], role = line % 4;
    bool line_start = i == 0 || text[i - 1] == '\n';
    if (b == '\n')
        ends[line] = i;
    if (b == '\r' || b >= 0x80 || (line_start && role == 0 && b != '@')
        || (line_start && role == 2 && (b != '+' || i + 1 >= n || text[i + 1] != '\n')))
        *odd = 1;
    u8 code = CODE_SKIP;
    if (role == 1)
        code = upper == 'A' ? CODE_A : upper == 'C' ? CODE_C : upper == 'G' ? CODE_G
                   : upper == 'T' ? CODE_T : CODE_N;
    codes[i] = code;
}

extern "C" __global__ void fastq_records(const u32 *ends, u32 records, u32 *odd)
{
    u32 r = blockIdx.x * BLOCK + threadIdx.x;
    if (r < records && ends[4 * r + 1] - ends[4 * r] != ends[4 * r + 3] - ends[4 * r + 2])
        *odd = 1;
}

/* ---------------------------------------------------------------------------------------------------------
 * k-mers of a code array of n bases, without reading k bytes per k-mer:
 *   pack_words   thread w packs bases 32w .. 32w+31 into a uint64 (first base in bits 63..62) and sets bit
 *                j of bad[w] when base 32w+j is not ACGT (bases past n count as bad). With `reverse`,
 *                the sequence packed is the reverse complement (base q = complement of base n-1-q: code ^ 3).
 *   kmer_flags   flags[p] = 1 when bases p .. p+k-1 are all ACGT: the bad masks of the (at most
 *                ceil(k/32) + 1) words that the window touches, cut to the window.
 *   kmer_keys    for each good p (out_at = exclusive scan of the flags): channel c is the 2 * len_c bits
 *                starting at base p + 32c, i.e. word w = (p + 32c) / 32 shifted left by 2 (p + 32c) % 32
 *                bits, the next word filling in from the right, then right-aligned. With `canonical`, the
 *                same is read from the packed reverse complement at n - k - p (the reverse complement of
 *                the k-mer at p) and the lexicographically smaller key is kept (channel 0 first).
 * ------------------------------------------------------------------------------------------------------- */

extern "C" __global__ void pack_words(const u8 *codes, u32 n, u32 words, u32 reverse,
                                      u64 *packed, u32 *bad)
{
    u32 w = blockIdx.x * BLOCK + threadIdx.x;
    if (w >= words)
        return;
    u64 word = 0;
    u32 mask = 0;
    for (u32 j = 0; j < 32; ++j) {
        u32 q = w * 32 + j;
        u8 code = CODE_N;
        if (q < n)
            code = reverse ? codes[n - 1 - q] : codes[q];
        if (code > CODE_T)
            mask |= 1u << j;
        else if (reverse)
            code ^= 3;
        word = word << 2 | (code & 3);
    }
    packed[w] = word;
    bad[w] = mask;
}

extern "C" __global__ void kmer_flags(const u32 *bad, u32 windows, u32 k, u32 *flags)
{
    u32 p = blockIdx.x * BLOCK + threadIdx.x;
    if (p >= windows)
        return;
    u32 last = p + k - 1, good = 1;
    for (u32 w = p / 32; w <= last / 32 && good; ++w) {
        u32 lo = w * 32 > p ? 0 : p - w * 32;
        u32 hi = last - w * 32 < 31 ? last - w * 32 : 31;
        u32 span = (hi == 31 ? 0xffffffffu : (1u << (hi + 1)) - 1u) & ~((1u << lo) - 1u);
        good = (bad[w] & span) == 0;
    }
    flags[p] = good;
}

/* kmer_keys_run: the k-mers of a code array by one thread that walks the codes once, for the cpu backend,
 * whose host threads each take a whole piece (mapper/kmers/backend.py HostExtractor). It keeps, channel by
 * channel (the layout of kmer_keys: channel c holds bases 32c .. 32c + len_c - 1 of the k-mer, first base in
 * the high bits), the key of the last k bases and of their reverse complement, and the length of the run of
 * ACGT bases ending here (a base above CODE_T ends it). A new base shifts the forward key one base up:
 * each channel takes the first base of the next one, the last channel takes the base; and the reverse
 * complement one base down: each channel takes the last base of the one before, the first channel takes the
 * complement (3 - base). Each position that closes a run of k or more writes its key (with `canonical`, the
 * lexicographically smaller strand, channel 0 first, as kmer_keys keeps), in order of position: the keys of
 * pack_words + kmer_flags + kmer_keys, at O(C) work a base where those read the packed words once per
 * window (a 4 M-base piece of reads on one host thread, canonical: k = 31 17 against 91 ms, k = 65 25
 * against 85 ms). On the GPU the three kernels stay: one thread walking a piece would serialise it.
 * Out: keys uint64 [channels][stride] (stride >= n - k + 1), found uint32 [1]. Launched with n = 1. */
#define RUN_CHANNELS 8  /* k <= 256 */
extern "C" __global__ void kmer_keys_run(const u8 *codes, u32 n, u32 k, u32 channels, u32 canonical, u64 *keys,
                                         u32 stride, u32 *found)
{
    if (blockIdx.x * BLOCK + threadIdx.x != 0)
        return;
    u64 fwd[RUN_CHANNELS], rev[RUN_CHANNELS];
    for (u32 c = 0; c < RUN_CHANNELS; ++c)
        fwd[c] = rev[c] = 0;
    const u32 last = channels - 1, last_len = k - 32 * last;
    const u32 top_last = 2 * (last_len - 1);  /* bit of the last channel's first base */
    const u64 mask_last = last_len == 32 ? ~0ull : (1ull << (2 * last_len)) - 1ull;
    u32 run = 0, out = 0;
    if (channels == 1) {  /* k <= 32, the common case: the same walk without the channel loops */
        u64 f = 0, r = 0;
        for (u32 i = 0; i < n; ++i) {
            const u32 code = codes[i];
            if (code > CODE_T) {
                run = 0;
                continue;
            }
            f = (f << 2 | code) & mask_last;
            r = r >> 2 | (u64)(3 - code) << top_last;
            if (++run >= k)
                keys[out++] = canonical && r < f ? r : f;
        }
        *found = out;
        return;
    }
    for (u32 i = 0; i < n; ++i) {
        const u32 code = codes[i];
        if (code > CODE_T) {
            run = 0;
            continue;
        }
        for (u32 c = 0; c < last; ++c)
            fwd[c] = fwd[c] << 2 | fwd[c + 1] >> (c + 1 == last ? top_last : 62);
        fwd[last] = (fwd[last] << 2 | code) & mask_last;
        for (u32 c = last; c > 0; --c)
            rev[c] = rev[c] >> 2 | (rev[c - 1] & 3ull) << (c == last ? top_last : 62);
        rev[0] = rev[0] >> 2 | (u64)(3 - code) << (last == 0 ? top_last : 62);
        if (++run < k)
            continue;
        int use_rc = 0;
        if (canonical)
            for (u32 c = 0; c < channels; ++c)
                if (fwd[c] != rev[c]) {
                    use_rc = rev[c] < fwd[c];
                    break;
                }
        for (u32 c = 0; c < channels; ++c)
            keys[(size_t)c * stride + out] = use_rc ? rev[c] : fwd[c];
        ++out;
    }
    *found = out;
}

/* The channel of 2 * len bits (len <= 32 bases) starting at base `start` of a packed sequence. */
__device__ __forceinline__ u64 channel_at(const u64 *packed, u32 start, u32 len)
{
    u32 w = start / 32, o = start % 32;
    u64 bits = packed[w] << (2 * o);
    if (o)
        bits |= packed[w + 1] >> (64 - 2 * o);
    return len == 32 ? bits : bits >> (64 - 2 * len);
}

extern "C" __global__ void kmer_keys(const u64 *packed, const u64 *packed_rc, u32 n, u32 k,
                                     u32 channels, const u32 *flags, const u32 *out_at,
                                     u32 windows, u64 *keys, u32 stride)
{
    u32 p = blockIdx.x * BLOCK + threadIdx.x;
    if (p >= windows || !flags[p])
        return;
    u64 *out = keys + out_at[p];
    u32 last_len = k - 32 * (channels - 1);
    if (!packed_rc) {
        for (u32 c = 0; c < channels; ++c)
            out[(size_t)c * stride] = channel_at(packed, p + 32 * c, c + 1 < channels ? 32 : last_len);
        return;
    }
    /* canonical: channel 0 decides (the rare tie, two strands sharing their first bases, is decided by
     * the first channel that differs); the chosen strand is written, channel 0 without reading it again */
    u32 q = n - k - p;
    u32 len0 = channels > 1 ? 32 : last_len;
    u64 fwd0 = channel_at(packed, p, len0), rev0 = channel_at(packed_rc, q, len0);
    int use_rc = rev0 < fwd0;
    if (fwd0 == rev0) {
        for (u32 c = 1; c < channels; ++c) {
            u32 len = c + 1 < channels ? 32 : last_len;
            u64 fwd = channel_at(packed, p + 32 * c, len), rev = channel_at(packed_rc, q + 32 * c, len);
            if (fwd != rev) {
                use_rc = rev < fwd;
                break;
            }
        }
    }
    out[0] = use_rc ? rev0 : fwd0;
    for (u32 c = 1; c < channels; ++c) {
        u32 len = c + 1 < channels ? 32 : last_len;
        out[(size_t)c * stride] = use_rc ? channel_at(packed_rc, q + 32 * c, len) : channel_at(packed, p + 32 * c, len);
    }
}
