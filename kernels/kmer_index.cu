/* kmer_index.cu: the mapper's k-mer index built on the GPU (`gkmap index --device cuda`), the same arrays as
 * mapper/index.py's build_arrays, bit for bit:
 *   positions  uint32 [P]           global start of every ws-mer inside one contig without N, sorted by
 *                                   (key, position)
 *   offsets    uint32 [4^ws + 1]    bucket of key k is positions[offsets[k]:offsets[k + 1]]
 *
 * The build runs in device memory bounded by the codes plus a budget, whatever the genome (a 3.1 Gbp
 * genome's positions are 12.4 GB, and one sort of all its (key, position) words needed 50 GB): the keys are
 * cut into ranges [k0, k1) of at most a budget's worth of k-mers, and each range is built on its own
 * (mapper/backends/cuda_index.py drives the steps; the scan and the radix sort are mapper/kmers/gpu.py's):
 *   index_histogram  per valid start: counts[key >> shift] += 1 (coarse buckets, from which the host cuts
 *                    the key ranges);
 *   for each range, for each segment [s0, s1) of the starts (the flags of one segment at a time):
 *     index_flags    per start p: 1 when the ws-mer at p is valid (no N, ends inside p's contig: the contig
 *                    ends searched by binary search) and its key lies in [k0, k1), else 0;
 *     (scan of the flags: each kept start's rank)
 *     index_pack     per kept start p: words[rank] = key(p) << 32 | p; the segments in order, so the words
 *                    of a range are in position order;
 *   (a stable LSD radix sort of the range's words by their key bits only, 32 .. 32 + 2 ws: the positions
 *    of one key are already in order)
 *   index_split      per sorted word i of the range: positions[i] = its low 32 bits; and the bucket
 *                    boundaries: offsets[k] = base + i for every key k in (key(i - 1), key(i)], with
 *                    key(-1) = k0 - 1 (base: the k-mers of the ranges before); the range's last word also
 *                    fills offsets[k] = base + m for k in (key(m - 1), k1 - 1] (k1 = 4^ws + 1 for the last
 *                    range, so offsets[4^ws] = P). Every offsets entry is written exactly once;
 *   index_fill       offsets[k] = base for the keys [k0, k1) of a range without k-mers.
 * In : codes uint8 [G] (0..3, CODE_N), contig_ends int64 [C] ascending. JIT constant (-D): WS.
 */
#include "common.cuh"

#ifndef WS
#define WS 12
#endif

/* The key of the ws-mer at p when it is valid (no N, inside its contig), else -1. */
__device__ __forceinline__ long long valid_key(const uint8_t *__restrict__ codes, const long long p,
                                               const long long *__restrict__ contig_ends, const int n_contigs)
{
    int lo = 0, hi = n_contigs - 1; /* the contig of p: the first contig end > p */
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (contig_ends[mid] > p)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (p + WS > contig_ends[lo])
        return -1;
    long long key = 0;
    for (int i = 0; i < WS; ++i) {
        const uint8_t c = codes[p + i];
        if (c == CODE_N)
            return -1;
        key = (key << 2) | (c & 3u);
    }
    return key;
}

extern "C" __global__ void index_histogram(const uint8_t *__restrict__ codes, const long long n,
                                           const long long *__restrict__ contig_ends, const int n_contigs,
                                           const int shift, unsigned long long *__restrict__ counts)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n)
        return;
    const long long key = valid_key(codes, p, contig_ends, n_contigs);
    if (key >= 0)
        atomicAdd(counts + (key >> shift), 1ull);
}

extern "C" __global__ void index_flags(const uint8_t *__restrict__ codes, const long long s0, const long long s1,
                                       const long long *__restrict__ contig_ends, const int n_contigs,
                                       const long long k0, const long long k1, unsigned int *__restrict__ flags)
{
    const long long p = s0 + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= s1)
        return;
    const long long key = valid_key(codes, p, contig_ends, n_contigs);
    flags[p - s0] = key >= k0 && key < k1;
}

extern "C" __global__ void index_pack(const uint8_t *__restrict__ codes, const long long s0, const long long s1,
                                      const unsigned int *__restrict__ flags, const unsigned int *__restrict__ rank,
                                      unsigned long long *__restrict__ words)
{
    const long long p = s0 + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= s1 || !flags[p - s0])
        return;
    unsigned long long key = 0;
    for (int i = 0; i < WS; ++i)
        key = (key << 2) | (codes[p + i] & 3u);
    words[rank[p - s0]] = key << 32 | (unsigned long long)p;
}

extern "C" __global__ void index_split(const unsigned long long *__restrict__ words, const long long m,
                                       const long long base, const long long k0, const long long k1,
                                       unsigned int *__restrict__ positions, unsigned int *__restrict__ offsets)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m)
        return;
    const unsigned long long word = words[i];
    positions[i] = (unsigned int)word;
    const long long key = (long long)(word >> 32);
    const long long before = i ? (long long)(words[i - 1] >> 32) : k0 - 1;
    for (long long k = before + 1; k <= key; ++k)
        offsets[k] = (unsigned int)(base + i);
    if (i == m - 1)
        for (long long k = key + 1; k < k1; ++k)
            offsets[k] = (unsigned int)(base + m);
}

extern "C" __global__ void index_fill(const long long k0, const long long k1, const long long base,
                                      unsigned int *__restrict__ offsets)
{
    const long long k = k0 + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < k1)
        offsets[k] = (unsigned int)base;
}
