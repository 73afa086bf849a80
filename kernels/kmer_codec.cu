/* kmer_codec.cu: a sorted, counted table of k-mers -> the bytes of its bins in the table format (version 1,
 * docs/kmers.md; the numpy twin is mapper/kmers/codec.py, and both write the same bytes), for
 * `gkmap kmers count` (the cuda backend, mapper/kmers/gpu.py). The host lays the bins out from a few
 * totals per bin; everything per k-mer happens here.
 *
 * In : keys uint64 channel-major (channel c of key i at keys[c * stride + i]), sorted and distinct;
 *      counts uint64 [n]. A key's bin is key0 >> shift (its top bin_bits bits, mapper/kmers/binning.py).
 * Out: one byte buffer: per non-empty bin, its counts stream (Simple-8b words of count - 1, blocks of 60
 *      counts, each block with the narrowest selector whose n divides 60) then its k-mer stream (VLQ of
 *      channel-wise deltas, channel-major within the bin).
 *
 * JIT constants (-D): BLOCK threads per block.
 */
#include "tiles.cuh"

#define S8B_BLOCK 60

#ifndef __CUDACC__  /* compiled as host C++ by tests/host_cuda.py: what nvcc would provide */
#define __constant__
static inline int __clzll(unsigned long long x) { return x ? __builtin_clzll(x) : 64; }
#endif

/* ---------------------------------------------------------------------------------------------------------
 * count_keep / keep_pairs: --min-count. flags[i] = counts[i] >= min_count, scanned by the host into out_at;
 * the kept keys and counts are compacted (out_stride between output channels).
 * ------------------------------------------------------------------------------------------------------- */

extern "C" __global__ void count_keep(const u64 *counts, u32 n, u64 min_count, u32 *flags)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        flags[i] = counts[i] >= min_count;
}

extern "C" __global__ void keep_pairs(const u64 *keys, u32 stride, u32 channels,
                                      const u64 *counts, u32 n, const u32 *flags,
                                      const u32 *out_at, u64 *keys_out, u32 out_stride,
                                      u64 *counts_out)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n || !flags[i])
        return;
    u32 r = out_at[i];
    counts_out[r] = counts[i];
    for (u32 c = 0; c < channels; ++c)
        keys_out[(size_t)c * out_stride + r] = keys[(size_t)c * stride + i];
}

/* ---------------------------------------------------------------------------------------------------------
 * bin_starts: starts[b] = the first key of bin b or later (starts[bins] = n). Thread i (0 <= i <= n) fills
 * the bins from the bin after key i-1's up to key i's (up to `bins` for i = n), so every bin is written
 * once, also empty ones.
 * ------------------------------------------------------------------------------------------------------- */

extern "C" __global__ void bin_starts(const u64 *key0, u32 n, u32 shift, u32 bins,
                                      u32 *starts)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i > n)
        return;
    u32 from = i == 0 ? 0 : (u32)(key0[i - 1] >> shift) + 1;
    u32 to = i == n ? bins : (u32)(key0[i] >> shift);
    for (u32 b = from; b <= to; ++b)
        starts[b] = i;
}

/* ---------------------------------------------------------------------------------------------------------
 * k-mer stream:
 *   vlq_sizes  thread i: channel c's value is key_c[i] - key_c[i-1] when key i-1 is in the same bin and
 *              equal on channels 0..c-1, else key_c[i] (codec.encode_keys); values[c * n + i] = it and
 *              sizes[c * (n+1) + i] = its VLQ length (1..10 bytes: 7 bits a byte); thread n sets each
 *              channel's sizes[n] = 0. The host scans each channel's n+1 sizes (uint64) into positions.
 *   vlq_write  thread i writes channel c's value at chan_base[c * bins + bin] + pos[c * (n+1) + i], 7 bits a
 *              byte, least significant first, high bit set on all bytes but the last. chan_base (host)
 *              is where the bin's channel c starts in the buffer minus its first key's position (mod 2^64).
 * ------------------------------------------------------------------------------------------------------- */

__device__ __forceinline__ u64 vlq_size(u64 v)
{
    u32 bits = 64 - __clzll(v | 1);
    return (bits + 6) / 7;
}

extern "C" __global__ void vlq_sizes(const u64 *keys, u32 stride, u32 channels, u32 n,
                                     u32 shift, u64 *values, u64 *sizes)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i > n)
        return;
    if (i == n) {
        for (u32 c = 0; c < channels; ++c)
            sizes[(size_t)c * (n + 1) + n] = 0;
        return;
    }
    bool same = i > 0 && (keys[i] >> shift) == (keys[i - 1] >> shift);
    for (u32 c = 0; c < channels; ++c) {
        u64 key = keys[(size_t)c * stride + i];
        u64 previous = i > 0 ? keys[(size_t)c * stride + i - 1] : 0;
        u64 value = same ? key - previous : key;
        values[(size_t)c * n + i] = value;
        sizes[(size_t)c * (n + 1) + i] = vlq_size(value);
        same = same && key == previous;
    }
}

extern "C" __global__ void vlq_write(const u64 *values, const u64 *positions, const u64 *key0,
                                     u32 channels, u32 n, u32 shift, u32 bins,
                                     const u64 *chan_base, u8 *out)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    u32 bin = (u32)(key0[i] >> shift);
    for (u32 c = 0; c < channels; ++c) {
        u64 value = values[(size_t)c * n + i];
        u8 *at = out + (chan_base[(size_t)c * bins + bin] + positions[(size_t)c * (n + 1) + i]);
        while (value >= 0x80) {
            *at++ = (u8)(value | 0x80);
            value >>= 7;
        }
        *at = (u8)value;
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * counts stream: bin b has ceil(n_b / 60) blocks of 60 counts; block g (global numbering, block_first[b] =
 * the first block of bin b, block_first[bins] = the total) covers the bin's counts 60 j .. 60 j + 59
 * (j = g - block_first[b]; counts past the bin's end are zeros, the padding of the last block).
 *   s8b_words  thread g: the widest count - 1 of its block picks the narrowest of the selectors whose n
 *              divides 60: (selector, n, bits) = (2,60,1) (3,30,2) (4,20,3) (5,15,4) (6,12,5) (7,10,6)
 *              (10,6,10) (11,5,12) (12,4,15) (13,3,20) (14,2,30) (15,1,60); words[g] = 60 / n and
 *              selector[g]; thread `blocks` sets words[blocks] = 0. The host scans the words (uint32).
 *   s8b_pack   thread g writes its words at word_base[b] + 8 * word_at[g] (word_base from the host:
 *              where bin b's data starts minus 8 x the words before the bin, mod 2^64), a word being the
 *              selector in bits 63..60 and the n values of `bits` bits, first value lowest, stored
 *              little-endian byte by byte (bins start at any byte).
 * ------------------------------------------------------------------------------------------------------- */

__constant__ u8 S8B_SELECTOR[12] = {2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15};
__constant__ u8 S8B_N[12] = {60, 30, 20, 15, 12, 10, 6, 5, 4, 3, 2, 1};
__constant__ u8 S8B_BITS[12] = {1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60};

/* The bin of global block g: the last b with block_first[b] <= g (binary search over bins + 1 entries). */
__device__ __forceinline__ u32 bin_of_block(const u32 *block_first, u32 bins, u32 g)
{
    u32 lo = 0, hi = bins;  /* block_first[lo] <= g < block_first[hi] */
    while (hi - lo > 1) {
        u32 mid = (lo + hi) / 2;
        if (block_first[mid] <= g)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

extern "C" __global__ void s8b_words(const u64 *counts, const u32 *starts, const u32 *block_first,
                                     u32 bins, u32 blocks, u32 *words, u8 *choice)
{
    u32 g = blockIdx.x * BLOCK + threadIdx.x;
    if (g > blocks)
        return;
    if (g == blocks) {
        words[g] = 0;
        return;
    }
    u32 b = bin_of_block(block_first, bins, g);
    u32 lo = starts[b] + S8B_BLOCK * (g - block_first[b]);
    u32 hi = lo + S8B_BLOCK < starts[b + 1] ? lo + S8B_BLOCK : starts[b + 1];
    u64 widest = 0;
    for (u32 i = lo; i < hi; ++i)
        widest = counts[i] - 1 > widest ? counts[i] - 1 : widest;
    u32 s = 0;
    while (s < 11 && widest >= (1ull << S8B_BITS[s]))
        ++s;
    words[g] = S8B_BLOCK / S8B_N[s];
    choice[g] = (u8)s;
}

extern "C" __global__ void s8b_pack(const u64 *counts, const u32 *starts, const u32 *block_first,
                                    u32 bins, u32 blocks, const u8 *choice, const u32 *word_at,
                                    const u64 *word_base, u8 *out)
{
    u32 g = blockIdx.x * BLOCK + threadIdx.x;
    if (g >= blocks)
        return;
    u32 b = bin_of_block(block_first, bins, g);
    u32 lo = starts[b] + S8B_BLOCK * (g - block_first[b]), end = starts[b + 1];
    u32 s = choice[g], per_word = S8B_N[s], bits = S8B_BITS[s];
    u8 *at = out + (word_base[b] + 8ull * word_at[g]);
    for (u32 w = 0; w < S8B_BLOCK / per_word; ++w) {
        u64 word = (u64)S8B_SELECTOR[s] << 60;
        for (u32 v = 0; v < per_word; ++v) {
            u32 i = lo + w * per_word + v;
            if (i < end)
                word |= (counts[i] - 1) << (v * bits);
        }
        for (int byte = 0; byte < 8; ++byte)
            *at++ = (u8)(word >> (8 * byte));
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * bin_marks: what the host needs to lay the bins out, thread b <= bins: words_at[b] = word_at[block_first[b]]
 * (the words before bin b) and, per channel, pos_at[c * (bins+1) + b] = positions[c * (n+1) + starts[b]]
 * (the channel's bytes before bin b).
 * ------------------------------------------------------------------------------------------------------- */

extern "C" __global__ void bin_marks(const u32 *starts, const u32 *block_first, u32 bins,
                                     const u32 *word_at, const u64 *positions, u32 channels,
                                     u32 n, u64 *words_at, u64 *pos_at)
{
    u32 b = blockIdx.x * BLOCK + threadIdx.x;
    if (b > bins)
        return;
    words_at[b] = word_at[block_first[b]];
    for (u32 c = 0; c < channels; ++c)
        pos_at[(size_t)c * (bins + 1) + b] = positions[(size_t)c * (n + 1) + starts[b]];
}

/* ---------------------------------------------------------------------------------------------------------
 * vlq_decode: a bin's k-mer stream back to its keys (codec.decode_keys' contract), one thread per stream:
 * thread s decodes the stream of bytes[starts[s] .. starts[s+1]) into n[s] keys at keys + key_at[s]
 * (channel-major, stride n[s]). The values come channel after channel, each 7 bits a byte, least significant
 * first, the high bit set on all bytes of a value but its last. Channel c's value i is key_c[i] - key_c[i-1]
 * where keys i-1 and i are equal on channels 0..c-1 (channel 0: every key but the bin's first), else
 * key_c[i] itself; `same` (scratch, a byte for each item of `keys`, the stream's at key_at[s]) holds, between
 * channels, whether keys i-1 and i are equal on the channels decoded so far. A stream that ends inside a value or holds more bytes than
 * its values sets errors[s] = 1; a value longer than 10 bytes sets 2. Sequential within a stream: streams
 * (bins) are the parallel unit (the cpu decodes a bin a pool task; mapper/kmers/layout.py decode_keys).
 * ------------------------------------------------------------------------------------------------------- */

extern "C" __global__ void vlq_decode(const u8 *bytes, const u64 *starts, const u32 *n, const u64 *key_at,
                                      u32 streams, u32 channels, u8 *same, u64 *keys, u32 *errors)
{
    u32 s = blockIdx.x * BLOCK + threadIdx.x;
    if (s >= streams)
        return;
    u64 at = starts[s], end = starts[s + 1];
    u32 count = n[s];
    u64 *out = keys + key_at[s];
    u8 *equal = same + key_at[s];
    errors[s] = 0;
    for (u32 c = 0; c < channels; ++c) {
        u64 *key = out + (size_t)c * count;
        for (u32 i = 0; i < count; ++i) {
            u64 value = 0;
            u32 shift = 0;
            u8 byte;
            do {
                if (at >= end) {
                    errors[s] = 1;
                    return;
                }
                if (shift > 63) {
                    errors[s] = 2;
                    return;
                }
                byte = bytes[at++];
                value |= (u64)(byte & 0x7F) << shift;
                shift += 7;
            } while (byte & 0x80);
            bool restart = i == 0 || (c > 0 && !equal[i]);
            key[i] = restart ? value : key[i - 1] + value;
        }
        if (c + 1 < channels)
            for (u32 i = 0; i < count; ++i)
                equal[i] = i > 0 && (c == 0 || equal[i]) && key[i] == key[i - 1];
    }
    if (at != end)
        errors[s] = 1;
}

/* ---------------------------------------------------------------------------------------------------------
 * dump_sizes / dump_write: `gkmap kmers dump`'s text of n k-mers, a line each: the k letters, a tab, the
 * count in decimal, a newline (mapper/kmers/text.py dump_lines is the numpy twin). Keys are channel-major
 * (stride n); channel c holds min(32, k - 32 c) bases in its low bits, the first base most significant.
 * dump_sizes: thread i < n writes line i's length to sizes[i], thread n writes sizes[n] = 0; the host's
 * exclusive scan of those n + 1 values places the lines. dump_write: thread i writes line i at out + at[i].
 * ------------------------------------------------------------------------------------------------------- */

__device__ __forceinline__ u32 decimal_digits(u64 v)
{
    u32 digits = 1;
    while (v >= 10) {
        v /= 10;
        ++digits;
    }
    return digits;
}

extern "C" __global__ void dump_sizes(const u64 *counts, u32 n, u32 k, u64 *sizes)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i > n)
        return;
    sizes[i] = i == n ? 0 : k + 2 + decimal_digits(counts[i]);
}

extern "C" __global__ void dump_write(const u64 *keys, const u64 *counts, const u64 *at, u32 n, u32 k, u8 *out)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    u8 *p = out + at[i];
    for (u32 c = 0; 32 * c < k; ++c) {
        u32 width = k - 32 * c < 32 ? k - 32 * c : 32;
        u64 key = keys[(size_t)c * n + i];
        for (u32 j = 0; j < width; ++j)
            *p++ = "ACGT"[(key >> (2 * (width - 1 - j))) & 3];
    }
    *p++ = '\t';
    u64 count = counts[i];
    u32 digits = decimal_digits(count);
    for (u32 d = digits; d > 0; --d) {
        p[d - 1] = (u8)('0' + count % 10);
        count /= 10;
    }
    p[digits] = '\n';
}
