/* kmer_index.cu: the mapper's k-mer index built on the GPU (`gkmap index --device cuda`), the same arrays as
 * mapper/index.py's build_arrays, bit for bit:
 *   positions  uint32 [P]           global start of every ws-mer inside one contig without N, sorted by
 *                                   (key, position)
 *   offsets    uint32/64 [4^ws + 1] bucket of key k is positions[offsets[k]:offsets[k + 1]]
 * Steps (mapper/backends/cuda_index.py drives them; the scan and the radix sort are mapper/kmers/gpu.py's):
 *   index_flags    per start p < n: 1 when the ws-mer at p has no N and ends inside p's contig (contig ends
 *                  searched by binary search), else 0;
 *   (scan of the flags: each valid start's rank)
 *   index_pack     per valid start p: words[rank] = key(p) << 32 | p, the key 2 bits a base, first base most
 *                  significant;
 *   (LSD radix sort of the words over their 32 + 2 ws bits)
 *   index_split    per sorted word i: positions[i] = low 32 bits; and bucket boundaries: for every key k in
 *                  (key(i - 1), key(i)], offsets[k] = i (with key(-1) = -1), and the last word also fills
 *                  offsets[k] = P for k in (key(P - 1), 4^ws]. Every offsets entry is written exactly once.
 * In : codes uint8 [G] (0..3, CODE_N), contig_ends int64 [C] ascending. JIT constants (-D): WS, OFFSET_T.
 */
#include "common.cuh"

#ifndef WS
#define WS 12
#endif
#ifndef OFFSET_T
#define OFFSET_T unsigned int
#endif

extern "C" __global__ void index_flags(const uint8_t *__restrict__ codes, const long long n,
                                       const long long *__restrict__ contig_ends, const int n_contigs,
                                       unsigned int *__restrict__ flags)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n)
        return;
    /* the contig of p: the first contig end > p */
    int lo = 0, hi = n_contigs - 1;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (contig_ends[mid] > p)
            hi = mid;
        else
            lo = mid + 1;
    }
    int ok = p + WS <= contig_ends[lo];
    for (int i = 0; i < WS && ok; ++i)
        ok = codes[p + i] != CODE_N;
    flags[p] = ok;
}

extern "C" __global__ void index_pack(const uint8_t *__restrict__ codes, const long long n,
                                      const unsigned int *__restrict__ flags, const unsigned int *__restrict__ rank,
                                      unsigned long long *__restrict__ words)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n || !flags[p])
        return;
    unsigned long long key = 0;
    for (int i = 0; i < WS; ++i)
        key = (key << 2) | (codes[p + i] & 3u);
    words[rank[p]] = key << 32 | (unsigned long long)p;
}

extern "C" __global__ void index_split(const unsigned long long *__restrict__ words, const long long m,
                                       unsigned int *__restrict__ positions, OFFSET_T *__restrict__ offsets)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m)
        return;
    const unsigned long long word = words[i];
    positions[i] = (unsigned int)word;
    const long long key = (long long)(word >> 32);
    const long long before = i ? (long long)(words[i - 1] >> 32) : -1;
    for (long long k = before + 1; k <= key; ++k)
        offsets[k] = (OFFSET_T)i;
    if (i == m - 1)
        for (long long k = key + 1; k <= (1LL << (2 * WS)); ++k)
            offsets[k] = (OFFSET_T)m;
}

/* index_empty: the offsets of an index without any valid ws-mer (all zero). */
extern "C" __global__ void index_empty(const long long buckets, OFFSET_T *__restrict__ offsets)
{
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k <= buckets)
        offsets[k] = 0;
}
