/* common.cuh: the 2-bit code and the bit helpers every gkmap kernel shares.
 *
 * The code values come from mapper/alphabet.py as -D constants (mapper/backends/cuda.py passes them), so numpy
 * and CUDA cannot disagree; the defaults below only let `make ptx` compile a kernel on its own.
 *
 * Layout of 2-bit data (CONVENTIONS.md): 16 bases a uint32 word, base k of a sequence in bits 31-2(k%16) and
 * 30-2(k%16) of word k/16 (first base in the two most significant bits), the last word zero-padded.
 * N masks: 32 bases a uint32 word, base k at bit 31-(k%32) of word k/32 (1 = N, or any non-ACGT letter).
 * Batches are word-major: word j of pair i at words[j * n + i], so consecutive threads read consecutive words.
 */
#ifndef GKMAP_COMMON_CUH
#define GKMAP_COMMON_CUH

#include <stdint.h>
#include <string.h>

#ifndef CODE_A
#define CODE_A 0
#endif
#ifndef CODE_C
#define CODE_C 1
#endif
#ifndef CODE_G
#define CODE_G 2
#endif
#ifndef CODE_T
#define CODE_T 3
#endif
#ifndef CODE_N
#define CODE_N 4
#endif

/* PREFETCH(p): on the host (one thread walks many items in order) a load known early is started early, so
 * its cache miss overlaps other work; a GPU hides latency by its many threads, so it does nothing there. */
#ifdef GKMAP_HOST
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p)
#endif

#ifndef __CUDACC__
/* Compiled as host C++ (mapper/backends/host.py), where a launch's threads run on OpenMP threads. */
static inline unsigned long long atomicAdd(unsigned long long *address, unsigned long long value)
{
    return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}
#endif

/* Whether the n bytes at a and b are equal, compared 8 at a time. */
__device__ __forceinline__ bool same_bytes(const uint8_t *a, const uint8_t *b, long long n)
{
    long long i = 0;
    for (uint64_t u, v; i + 8 <= n; i += 8) {
        memcpy(&u, a + i, 8);
        memcpy(&v, b + i, 8);
        if (u != v)
            return false;
    }
    for (; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* A hash of the n bytes at `text` and `seed`, 8 bytes a step: a multiply and a shift per word, so n bytes cost
 * n / 8 dependent multiplies (a byte a step, FNV-1a, made a chain of n of them: 38 % of verify_wide's own time
 * in the render processes at genome scale). Only a hint: its users confirm every match byte for byte. */
__device__ __forceinline__ uint64_t bytes_hash(const uint8_t *text, long long n, uint64_t seed)
{
    uint64_t h = seed * 0x9e3779b97f4a7c15ull, word;
    long long j = 0;
    for (; j + 8 <= n; j += 8) {
        memcpy(&word, text + j, 8);
        h = (h ^ word) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    for (word = 0; j < n; ++j)
        word = word << 8 | text[j];
    h = (h ^ word ^ (uint64_t)n) * 0xc4ceb9fe1a85ec53ull;
    return h ^ h >> 32;
}

/* Lanes: a kernel may give one item (a seeding row) LANES threads that step through its array together,
 * LANES entries a round, and exchange what they hold with ballots (which lanes have a property) and
 * shuffles (a value from another lane). On the GPU the lanes are a whole warp (32): every lane of the warp
 * must reach every ballot and shuffle, so a lane kernel keeps its loops uniform across the warp. On the host
 * (mapper/device/host.py runs a launch's threads one after another) an item has one lane, and the same code
 * is the plain serial loop: a ballot is the lane's own bit, a shuffle its own value. The launch gives
 * LANES threads per item (the device layers' WARP). */
#ifdef __CUDACC__
#define LANES 32
__device__ __forceinline__ unsigned int lanes_ballot(int predicate) { return __ballot_sync(0xffffffffu, predicate); }
template <typename T> __device__ __forceinline__ T lanes_shfl(T value, int lane) { return __shfl_sync(0xffffffffu, value, lane); }
/* the highest lane set in `mask`, -1 for none */
__device__ __forceinline__ int last_lane(unsigned int mask) { return mask ? 31 - __clz(mask) : -1; }
/* the lowest lane set in `mask`, -1 for none */
__device__ __forceinline__ int first_lane(unsigned int mask) { return __ffs(mask) - 1; }
#else
#define LANES 1
static inline unsigned int lanes_ballot(int predicate) { return predicate ? 1u : 0u; }
template <typename T> static inline T lanes_shfl(T value, int) { return value; }
static inline int last_lane(unsigned int mask) { return mask ? 0 : -1; }
static inline int first_lane(unsigned int mask) { return mask ? 0 : -1; }
#endif

/* The 16 high (hi = 1) or low (hi = 0) code bits of a 2-bit word, as a 16-bit value with base 0 in bit 15:
 * keep every other bit, then squeeze the kept bits together in four halving steps (bit 2i -> bit i). */
__device__ __forceinline__ uint32_t code_bits16(uint32_t w, int hi)
{
    uint32_t x = (hi ? w >> 1 : w) & 0x55555555u;
    x = (x | (x >> 1)) & 0x33333333u;
    x = (x | (x >> 2)) & 0x0F0F0F0Fu;
    x = (x | (x >> 4)) & 0x00FF00FFu;
    x = (x | (x >> 8)) & 0x0000FFFFu;
    return x;
}

/* One bit plane word j (32 bases, base 32j in bit 31) from 2-bit words 2j and 2j+1 of a word-major batch. */
__device__ __forceinline__ uint32_t plane_word(const uint32_t *words2, int nwords2, int j, int n, int i, int hi)
{
    uint32_t upper = code_bits16(words2[(size_t)(2 * j) * n + i], hi);
    uint32_t lower = 2 * j + 1 < nwords2 ? code_bits16(words2[(size_t)(2 * j + 1) * n + i], hi) : 0u;
    return (upper << 16) | lower;
}

/* 2-bit code of one ASCII letter; lower case is a base unless lower_is_n (the published filter's rule). */
__device__ __forceinline__ uint32_t encode_base(uint8_t c, int lower_is_n)
{
    if (!lower_is_n && c >= 'a' && c <= 'z')
        c -= 'a' - 'A';
    switch (c) {
    case 'A': return CODE_A;
    case 'C': return CODE_C;
    case 'G': return CODE_G;
    case 'T': return CODE_T;
    default: return CODE_N;
    }
}

#endif
