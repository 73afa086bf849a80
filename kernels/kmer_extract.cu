/* kmer_extract.cu: FASTA text -> base codes -> k-mer keys, on the GPU, for `gkmap kmers count` (the cuda
 * backend, mapper/kmers/gpu.py). The host only reads the file; parsing and k-mer building happen here.
 *
 * Codes (uint8): A=0, C=1, G=2, T=3 (CODE_A..CODE_T from mapper/alphabet.py), N = CODE_N = 4 for any other
 * letter; CODE_SKIP (a newline, a header byte: no code) and CODE_ODD (a byte the fast rules cannot place:
 * white space, '#' starting a line, non-ASCII) come from mapper/kmers/fasta.py, whose `fast_codes` these
 * kernels follow exactly. A block with an odd byte is parsed again on the host (fasta.general_codes).
 *
 * Keys: a k-mer is C = ceil(k/32) uint64 channels; channel c holds bases 32c .. min(32c+32, k) - 1, first
 * base most significant, right-aligned; channel-major output (channel c of key i at keys[c * stride + i]).
 */
#include "common.cuh"

#ifndef BLOCK
#define BLOCK 256
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

__device__ __forceinline__ bool is_space(uint8_t b)
{
    return b == ' ' || (b >= '\t' && b <= '\r') || (b >= 0x1c && b <= 0x1f);
}

extern "C" __global__ void fasta_bytes(const uint8_t *text, uint32_t n, uint8_t *codes)
{
    uint32_t i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    uint8_t b = text[i], upper = b & 0xDF;
    uint8_t code = upper == 'A' ? CODE_A : upper == 'C' ? CODE_C : upper == 'G' ? CODE_G
                 : upper == 'T' ? CODE_T : CODE_N;
    if (b == '\n')
        code = CODE_SKIP;
    else if (b >= 0x80 || is_space(b))
        code = CODE_ODD;
    codes[i] = code;
}

extern "C" __global__ void fasta_lines(const uint8_t *text, uint32_t n, uint8_t *codes)
{
    uint32_t i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n || (i > 0 && text[i - 1] != '\n'))
        return;
    if (text[i] == '#') {
        codes[i] = CODE_ODD;
    } else if (text[i] == '>') {
        codes[i] = CODE_N;
        for (uint32_t j = i + 1; j < n && text[j] != '\n'; ++j)
            codes[j] = CODE_SKIP;
    }
}

extern "C" __global__ void keep_flags(const uint8_t *codes, uint32_t n, uint32_t *flags)
{
    uint32_t i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        flags[i] = codes[i] != CODE_SKIP;
}

extern "C" __global__ void keep_compact(const uint8_t *codes, uint32_t n, const uint32_t *out_at, uint8_t *out,
                                        uint32_t *odd)
{
    uint32_t i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n || codes[i] == CODE_SKIP)
        return;
    out[out_at[i]] = codes[i];
    if (codes[i] == CODE_ODD)
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

extern "C" __global__ void pack_words(const uint8_t *codes, uint32_t n, uint32_t words, uint32_t reverse,
                                      uint64_t *packed, uint32_t *bad)
{
    uint32_t w = blockIdx.x * BLOCK + threadIdx.x;
    if (w >= words)
        return;
    uint64_t word = 0;
    uint32_t mask = 0;
    for (uint32_t j = 0; j < 32; ++j) {
        uint32_t q = w * 32 + j;
        uint8_t code = CODE_N;
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

extern "C" __global__ void kmer_flags(const uint32_t *bad, uint32_t windows, uint32_t k, uint32_t *flags)
{
    uint32_t p = blockIdx.x * BLOCK + threadIdx.x;
    if (p >= windows)
        return;
    uint32_t last = p + k - 1, good = 1;
    for (uint32_t w = p / 32; w <= last / 32 && good; ++w) {
        uint32_t lo = w * 32 > p ? 0 : p - w * 32;
        uint32_t hi = last - w * 32 < 31 ? last - w * 32 : 31;
        uint32_t span = (hi == 31 ? 0xffffffffu : (1u << (hi + 1)) - 1u) & ~((1u << lo) - 1u);
        good = (bad[w] & span) == 0;
    }
    flags[p] = good;
}

/* The channel of 2 * len bits (len <= 32 bases) starting at base `start` of a packed sequence. */
__device__ __forceinline__ uint64_t channel_at(const uint64_t *packed, uint32_t start, uint32_t len)
{
    uint32_t w = start / 32, o = start % 32;
    uint64_t bits = packed[w] << (2 * o);
    if (o)
        bits |= packed[w + 1] >> (64 - 2 * o);
    return len == 32 ? bits : bits >> (64 - 2 * len);
}

extern "C" __global__ void kmer_keys(const uint64_t *packed, const uint64_t *packed_rc, uint32_t n, uint32_t k,
                                     uint32_t channels, const uint32_t *flags, const uint32_t *out_at,
                                     uint32_t windows, uint64_t *keys, uint32_t stride)
{
    uint32_t p = blockIdx.x * BLOCK + threadIdx.x;
    if (p >= windows || !flags[p])
        return;
    uint64_t *out = keys + out_at[p];
    uint32_t last_len = k - 32 * (channels - 1);
    if (!packed_rc) {
        for (uint32_t c = 0; c < channels; ++c)
            out[(size_t)c * stride] = channel_at(packed, p + 32 * c, c + 1 < channels ? 32 : last_len);
        return;
    }
    /* canonical: decide on the first channel that differs, then write the chosen strand */
    uint32_t q = n - k - p;
    int use_rc = 0;
    for (uint32_t c = 0; c < channels; ++c) {
        uint32_t len = c + 1 < channels ? 32 : last_len;
        uint64_t fwd = channel_at(packed, p + 32 * c, len), rev = channel_at(packed_rc, q + 32 * c, len);
        if (fwd != rev) {
            use_rc = rev < fwd;
            break;
        }
    }
    for (uint32_t c = 0; c < channels; ++c) {
        uint32_t len = c + 1 < channels ? 32 : last_len;
        out[(size_t)c * stride] = use_rc ? channel_at(packed_rc, q + 32 * c, len) : channel_at(packed, p + 32 * c, len);
    }
}
