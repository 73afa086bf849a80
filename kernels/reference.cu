/* reference.cu: the reference's packed form (an index's seq2bit and nmask arrays) unpacked to one code a
 * base, the form every kernel reads (mapper/reference.py).
 *
 * Layout (mapper/alphabet.py pack_2bit, pack_n_mask): base i is bits 31 - 2(i % 16) and 30 - 2(i % 16) of
 * word i / 16 (the first base in the high bits; codes 0..3 = A, C, G, T), and N where bit 7 - i % 8 of
 * byte i / 8 of the N mask is set (np.packbits order); an N base's two bits are A's, so the mask decides.
 *
 * unpack_2bit: one thread per word w: its 16 codes go to codes[16w .. 16w + 15] as two 8-byte stores (byte
 * j of a store is base j of its half: the codes in memory order on a little-endian host; the GPU is one
 * too). The mask bytes 2w and 2w + 1 say which of them are N (bytes past n_mask read as 0). codes holds 16
 * bytes a word: a genome whose length is not a multiple of 16 gets codes past its end, which the caller
 * slices off. Why a kernel: numpy's table look-ups unpacked a 3.1 Gbp genome in 3.2-5.1 s on the 16 cores
 * of the H200 host, the longest step of a whole-genome index load.
 * In : words uint32 [n_words], nmask uint8 [n_mask]
 * Out: codes uint8 [16 n_words]
 */
#include "common.cuh"

typedef unsigned long long u64;

extern "C" __global__ void unpack_2bit(const unsigned int *__restrict__ words, const long long n_words,
                                       const uint8_t *__restrict__ nmask, const long long n_mask,
                                       uint8_t *__restrict__ codes)
{
    const long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= n_words)
        return;
    const unsigned int word = words[w];
    const unsigned int hi_mask = 2 * w < n_mask ? nmask[2 * w] : 0u;
    const unsigned int lo_mask = 2 * w + 1 < n_mask ? nmask[2 * w + 1] : 0u;
    const unsigned int n_bits = hi_mask << 8 | lo_mask; /* bit 15 - j: base j of the word is N */
    u64 half[2] = {0ull, 0ull};
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const u64 code = (n_bits >> (15 - j)) & 1u ? (u64)CODE_N : (u64)((word >> (30 - 2 * j)) & 3u);
        half[j >> 3] |= code << (8 * (j & 7));
    }
    u64 *out = (u64 *)(codes + 16 * w);
    out[0] = half[0];
    out[1] = half[1];
}
