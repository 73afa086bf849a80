/* kmer_sort.cu: sort + run-length encoding of k-mer keys, the cuda backend of `gkmap kmers count`.
 * Design: SNCGPU (the project's background thesis): a full bin of 2-bit k-mers is sorted lexicographically
 * over its 64-bit channels, then run-length encoded by adjacent difference, prefix sum and scatter.
 *
 * Keys: C channels of uint64, channel-major (channel c of key i at keys[c * n + i]); channel 0 is the most
 *       significant (mapper/kmers/encode.py). Indices are uint32: one call sorts fewer than 2^32 keys.
 *
 * Sort (host loop in mapper/kmers/gpu.py): least-significant-digit radix sort of a permutation `perm`.
 *   For channel c = C-1 down to 0: gather channel c in the current order (gather_u64), then one stable pass
 *   per 4-bit digit of the channel's 2 x bases bits, least significant first. A pass is
 *     radix_count   per tile of TILE keys, the count of each of the 16 digits, stored digit-major
 *                   (counts[d * tiles + tile]) so that one exclusive scan of the array gives each
 *                   (digit, tile) its first output slot, in digit order then tile order: that is stability
 *                   across tiles;
 *     scan_tiles / scan_add   the exclusive prefix sum (uint32), per tile then the tile totals (recursively);
 *     radix_scatter a tile is loaded into shared memory; thread t owns the ITEMS consecutive keys
 *                   t*ITEMS .. t*ITEMS+ITEMS-1 and counts its digits; a per-digit exclusive scan over the
 *                   threads gives each thread's first slot, so keys keep their order within a digit
 *                   (stability within the tile). Keys and the permutation move together.
 *   Because every pass is stable, after channel 0 the permutation orders the keys by channel 0, then 1, ...
 *
 * RLE:  run_heads   flags[i] = 1 where key i differs from key i-1 on any channel (and at i = 0);
 *       scan of the flags = the run of each head;
 *       run_compact keys_out[c * runs + r] and starts[r] at each head;
 *       run_lengths counts[r] = starts[r+1] - starts[r] (the last run ends at n);
 *       run_weights counts[r] += weights[perm[i]] (atomics), when the keys carry counts already (merging).
 *
 * JIT constants (-D): BLOCK threads per block (every launch uses it), ITEMS keys per thread of a tile;
 * TILE = BLOCK * ITEMS. Every kernel checks its index against n.
 */
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 8
#endif
#define TILE (BLOCK * ITEMS)
#define RADIX_BITS 4
#define RADIX (1 << RADIX_BITS)

#define DIGIT(key, shift) ((uint32_t)((key) >> (shift)) & (RADIX - 1))

extern "C" __global__ void iota_u32(uint32_t *out, uint32_t n)
{
    uint32_t i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        out[i] = i;
}

/* out[i] = in[perm[i]] */
extern "C" __global__ void gather_u64(const uint64_t *in, const uint32_t *perm, uint64_t *out, uint32_t n)
{
    uint32_t i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        out[i] = in[perm[i]];
}

/* counts[d * gridDim.x + tile]: how many keys of the tile have digit d at `shift` */
extern "C" __global__ void radix_count(const uint64_t *keys, uint32_t n, uint32_t shift, uint32_t *counts)
{
    __shared__ uint32_t histogram[RADIX];
    if (threadIdx.x < RADIX)
        histogram[threadIdx.x] = 0;
    __syncthreads();
    size_t base = (size_t)blockIdx.x * TILE;
    for (int j = 0; j < ITEMS; ++j) {
        size_t i = base + (size_t)j * BLOCK + threadIdx.x;
        if (i < n)
            atomicAdd(&histogram[DIGIT(keys[i], shift)], 1u);
    }
    __syncthreads();
    if (threadIdx.x < RADIX)
        counts[threadIdx.x * gridDim.x + blockIdx.x] = histogram[threadIdx.x];
}

/* The stable scatter of one pass; offsets = exclusive scan of radix_count's counts. */
extern "C" __global__ void radix_scatter(const uint64_t *keys_in, const uint32_t *perm_in, uint64_t *keys_out,
                                         uint32_t *perm_out, uint32_t n, uint32_t shift, const uint32_t *offsets)
{
    __shared__ uint64_t keys[TILE];
    __shared__ uint32_t perm[TILE];
    __shared__ uint32_t slots[RADIX][BLOCK];
    size_t base = (size_t)blockIdx.x * TILE;
    for (int j = 0; j < ITEMS; ++j) {  /* coalesced load of the tile */
        uint32_t t = j * BLOCK + threadIdx.x;
        if (base + t < n) {
            keys[t] = keys_in[base + t];
            perm[t] = perm_in[base + t];
        }
    }
    __syncthreads();
    uint32_t count[RADIX];
    for (int d = 0; d < RADIX; ++d)
        count[d] = 0;
    for (int j = 0; j < ITEMS; ++j) {
        uint32_t t = threadIdx.x * ITEMS + j;
        if (base + t < n)
            ++count[DIGIT(keys[t], shift)];
    }
    for (int d = 0; d < RADIX; ++d)
        slots[d][threadIdx.x] = count[d];
    __syncthreads();
    if (threadIdx.x < RADIX) {  /* exclusive scan over the threads, one digit per thread */
        uint32_t sum = offsets[threadIdx.x * gridDim.x + blockIdx.x];
        for (int t = 0; t < BLOCK; ++t) {
            uint32_t c = slots[threadIdx.x][t];
            slots[threadIdx.x][t] = sum;
            sum += c;
        }
    }
    __syncthreads();
    for (int d = 0; d < RADIX; ++d)
        count[d] = slots[d][threadIdx.x];  /* now: this thread's next output slot per digit */
    for (int j = 0; j < ITEMS; ++j) {
        uint32_t t = threadIdx.x * ITEMS + j;
        if (base + t < n) {
            uint32_t slot = count[DIGIT(keys[t], shift)]++;
            keys_out[slot] = keys[t];
            perm_out[slot] = perm[t];
        }
    }
}

/* Exclusive prefix sum of each tile of data, in place; tile_sums[tile] = the tile's total. */
extern "C" __global__ void scan_tiles(uint32_t *data, uint32_t n, uint32_t *tile_sums)
{
    __shared__ uint32_t tile[TILE];
    __shared__ uint32_t sums[BLOCK];
    size_t base = (size_t)blockIdx.x * TILE;
    for (int j = 0; j < ITEMS; ++j) {
        uint32_t t = j * BLOCK + threadIdx.x;
        tile[t] = base + t < n ? data[base + t] : 0;
    }
    __syncthreads();
    uint32_t own = 0;
    for (int j = 0; j < ITEMS; ++j)
        own += tile[threadIdx.x * ITEMS + j];
    sums[threadIdx.x] = own;
    __syncthreads();
    for (int offset = 1; offset < BLOCK; offset <<= 1) {  /* inclusive scan of the thread sums */
        uint32_t add = threadIdx.x >= offset ? sums[threadIdx.x - offset] : 0;
        __syncthreads();
        sums[threadIdx.x] += add;
        __syncthreads();
    }
    uint32_t running = sums[threadIdx.x] - own;
    for (int j = 0; j < ITEMS; ++j) {
        uint32_t t = threadIdx.x * ITEMS + j;
        uint32_t value = tile[t];
        tile[t] = running;
        running += value;
    }
    __syncthreads();
    for (int j = 0; j < ITEMS; ++j) {
        uint32_t t = j * BLOCK + threadIdx.x;
        if (base + t < n)
            data[base + t] = tile[t];
    }
    if (threadIdx.x == BLOCK - 1)
        tile_sums[blockIdx.x] = sums[BLOCK - 1];
}

/* data[i] += tile_offsets[tile of i]: the second half of a multi-tile scan. */
extern "C" __global__ void scan_add(uint32_t *data, uint32_t n, const uint32_t *tile_offsets)
{
    size_t base = (size_t)blockIdx.x * TILE;
    for (int j = 0; j < ITEMS; ++j) {
        size_t i = base + (size_t)j * BLOCK + threadIdx.x;
        if (i < n)
            data[i] += tile_offsets[blockIdx.x];
    }
}

/* flags[i] = 1 when sorted key i starts a run (differs from key i-1 on some channel, or i = 0) */
extern "C" __global__ void run_heads(const uint64_t *sorted, uint32_t channels, uint32_t n, uint32_t *flags)
{
    uint32_t i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    uint32_t head = i == 0;
    for (uint32_t c = 0; c < channels && !head; ++c)
        head = sorted[(size_t)c * n + i] != sorted[(size_t)c * n + i - 1];
    flags[i] = head;
}

/* At each head i with run r = run_of[i]: starts[r] = i and the key, channel-major over `runs` columns. */
extern "C" __global__ void run_compact(const uint64_t *sorted, uint32_t channels, uint32_t n, const uint32_t *flags,
                                       const uint32_t *run_of, uint32_t runs, uint64_t *keys_out, uint32_t *starts)
{
    uint32_t i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n || !flags[i])
        return;
    uint32_t r = run_of[i];
    starts[r] = i;
    for (uint32_t c = 0; c < channels; ++c)
        keys_out[(size_t)c * runs + r] = sorted[(size_t)c * n + i];
}

/* counts[r] = length of run r */
extern "C" __global__ void run_lengths(const uint32_t *starts, uint32_t runs, uint32_t n, uint64_t *counts)
{
    uint32_t r = blockIdx.x * BLOCK + threadIdx.x;
    if (r < runs)
        counts[r] = (r + 1 < runs ? starts[r + 1] : n) - starts[r];
}

/* counts[run of i] += weights[perm[i]]; counts zeroed before. run of i = run_of[i] + flags[i] - 1. */
extern "C" __global__ void run_weights(const uint64_t *weights, const uint32_t *perm, const uint32_t *flags,
                                       const uint32_t *run_of, uint32_t n, uint64_t *counts)
{
    uint32_t i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        atomicAdd((unsigned long long *)&counts[run_of[i] + flags[i] - 1],
                  (unsigned long long)weights[perm[i]]);
}
