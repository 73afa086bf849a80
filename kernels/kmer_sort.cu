/* kmer_sort.cu: radix sort and run-length encoding of k-mer keys, for `gkmap kmers count` (the cuda
 * backend, mapper/kmers/gpu.py). Design: SNCGPU (the project's background thesis): k-mers as 2-bit bases in
 * 64-bit channels are sorted lexicographically over their channels, then run-length encoded by adjacent
 * difference, prefix sum (scan.cu) and scatter.
 *
 * Keys: C channels of uint64, channel-major (channel c of key i at keys[c * stride + i]); channel 0 is the
 *       most significant (mapper/kmers/encode.py). Item indices are uint32: one sort takes fewer than
 *       2^32 keys.
 *
 * JIT constants (-D): BLOCK threads per block (a multiple of 32; every launch of this file uses it),
 * ITEMS items per thread of a tile, TILE = BLOCK * ITEMS.
 */
#include "tiles.cuh"

#define WARPS (BLOCK / 32)
#define RADIX_BITS 8
#define RADIX (1 << RADIX_BITS)
#define FULL_MASK 0xffffffffu

#define DIGIT(key, shift) ((u32)((key) >> (shift)) & (RADIX - 1))

/* ---------------------------------------------------------------------------------------------------------
 * LSD radix sort, 8-bit digits (host loop in gpu.py: one pass per digit of the key's significant bits,
 * least significant first; for several channels, a permutation is sorted channel C-1 first, each channel
 * gathered in the current order). A pass over n keys at bit `shift`:
 *
 *   radix_histogram  per tile of TILE keys, the count of each of the 256 digits, stored digit-major
 *                    (counts[d * tiles + tile]) so that one exclusive scan of the array gives each
 *                    (digit, tile) its first output slot, in digit order then tile order: stability across
 *                    tiles. Counting is per warp, without atomics: the lanes that hold the same digit find
 *                    each other with 8 ballots (one per digit bit), and the lowest of them adds their number.
 *   radix_scatter    warp w of the block owns the tile's keys w*ITEMS*32 .. (w+1)*ITEMS*32 - 1, taken 32 at a
 *                    time (round j, lane l: key w*ITEMS*32 + 32 j + l, a coalesced load), so in the tile's
 *                    order. Each key's rank among the equal digits of its warp = the warp's running count of
 *                    that digit + the equal-digit lanes below it in the round (the same ballots). Then per
 *                    digit: the warps' counts are scanned (rank within the tile) and the digit totals are
 *                    scanned (the digit's first slot in the tile). The keys are placed in shared memory in
 *                    sorted tile order and written out in that order: key at tile slot p with digit d goes
 *                    to global slot offsets[d * tiles + tile] + p - first slot of d in the tile; consecutive
 *                    threads write consecutive addresses within a digit. Stable: the tile order is the input
 *                    order, ranks follow it. Optional uint32 values (the permutation) move with the keys.
 * ------------------------------------------------------------------------------------------------------- */

/* The lanes of the warp (among `active`) whose digit equals this lane's. */
__device__ __forceinline__ u32 same_digit_lanes(u32 digit, u32 active)
{
    u32 peers = active;
#pragma unroll
    for (int b = 0; b < RADIX_BITS; ++b) {
        u32 bit = (digit >> b) & 1u;
        u32 vote = __ballot_sync(FULL_MASK, bit);
        peers &= bit ? vote : ~vote;
    }
    return peers;
}

extern "C" __global__ void radix_histogram(const u64 *keys, u32 n, u32 shift, u32 *counts)
{
    __shared__ u32 hist[WARPS][RADIX];
    for (int d = threadIdx.x; d < WARPS * RADIX; d += BLOCK)
        (&hist[0][0])[d] = 0;
    __syncthreads();
    u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    size_t base = (size_t)blockIdx.x * TILE + (size_t)warp * ITEMS * 32;
    for (int j = 0; j < ITEMS; ++j) {
        size_t i = base + (size_t)j * 32 + lane;
        bool valid = i < n;
        u32 digit = valid ? DIGIT(keys[i], shift) : 0;
        u32 peers = same_digit_lanes(digit, __ballot_sync(FULL_MASK, valid));
        if (valid && lane == __ffs(peers) - 1)
            hist[warp][digit] += __popc(peers);
        __syncwarp();
    }
    __syncthreads();
    for (int d = threadIdx.x; d < RADIX; d += BLOCK) {
        u32 total = 0;
        for (int w = 0; w < WARPS; ++w)
            total += hist[w][d];
        counts[(size_t)d * gridDim.x + blockIdx.x] = total;
    }
}

template <bool VALUES>
__device__ void radix_scatter(const u64 *keys_in, const u32 *values_in, u64 *keys_out,
                              u32 *values_out, u32 n, u32 shift, const u32 *offsets)
{
    __shared__ u64 tile_keys[TILE];
    __shared__ u32 tile_values[VALUES ? TILE : 1];
    __shared__ u32 warp_count[WARPS][RADIX];  /* per warp and digit: count, then first rank in the tile */
    __shared__ u32 digit_first[RADIX];        /* the digit's first slot in the tile */
    __shared__ u32 digit_out[RADIX];          /* the digit's first slot in the output, for this tile */
    for (int d = threadIdx.x; d < WARPS * RADIX; d += BLOCK)
        (&warp_count[0][0])[d] = 0;
    __syncthreads();

    u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    size_t tile_base = (size_t)blockIdx.x * TILE;
    size_t base = tile_base + (size_t)warp * ITEMS * 32;
    u64 key[ITEMS];
    u32 value[ITEMS], rank[ITEMS];
    for (int j = 0; j < ITEMS; ++j) {
        size_t i = base + (size_t)j * 32 + lane;
        bool valid = i < n;
        key[j] = valid ? keys_in[i] : 0;
        if (VALUES)
            value[j] = valid ? values_in[i] : 0;
        u32 digit = DIGIT(key[j], shift);
        u32 peers = same_digit_lanes(digit, __ballot_sync(FULL_MASK, valid));
        u32 before = warp_count[warp][digit];
        rank[j] = before + __popc(peers & ((1u << lane) - 1u));
        __syncwarp();
        if (valid && lane == __ffs(peers) - 1)
            warp_count[warp][digit] = before + __popc(peers);
        __syncwarp();
    }
    __syncthreads();
    for (int d = threadIdx.x; d < RADIX; d += BLOCK) {
        u32 sum = 0;
        for (int w = 0; w < WARPS; ++w) {
            u32 c = warp_count[w][d];
            warp_count[w][d] = sum;
            sum += c;
        }
        digit_first[d] = sum;  /* the digit's total in the tile, scanned below */
        digit_out[d] = offsets[(size_t)d * gridDim.x + blockIdx.x];
    }
    __syncthreads();
    if (warp == 0) {  /* exclusive scan of the RADIX digit totals: each lane scans RADIX / 32 of them */
        const int per_lane = RADIX / 32;
        u32 own[per_lane], total = 0;
        for (int q = 0; q < per_lane; ++q) {
            own[q] = digit_first[lane * per_lane + q];
            total += own[q];
        }
        u32 inclusive = total;
        for (int offset = 1; offset < 32; offset <<= 1) {
            u32 up = __shfl_up_sync(FULL_MASK, inclusive, offset);
            if (lane >= offset)
                inclusive += up;
        }
        u32 running = inclusive - total;
        for (int q = 0; q < per_lane; ++q) {
            digit_first[lane * per_lane + q] = running;
            running += own[q];
        }
    }
    __syncthreads();
    for (int j = 0; j < ITEMS; ++j) {
        if (base + (size_t)j * 32 + lane < n) {
            u32 digit = DIGIT(key[j], shift);
            u32 slot = digit_first[digit] + warp_count[warp][digit] + rank[j];
            tile_keys[slot] = key[j];
            if (VALUES)
                tile_values[slot] = value[j];
        }
    }
    __syncthreads();
    u32 in_tile = n - tile_base < TILE ? (u32)(n - tile_base) : TILE;
    for (u32 p = threadIdx.x; p < in_tile; p += BLOCK) {
        u64 k = tile_keys[p];
        u32 digit = DIGIT(k, shift);
        u32 slot = digit_out[digit] + p - digit_first[digit];
        keys_out[slot] = k;
        if (VALUES)
            values_out[slot] = tile_values[p];
    }
}

extern "C" __global__ void radix_scatter_keys(const u64 *keys_in, u64 *keys_out, u32 n,
                                              u32 shift, const u32 *offsets)
{
    radix_scatter<false>(keys_in, 0, keys_out, 0, n, shift, offsets);
}

extern "C" __global__ void radix_scatter_pairs(const u64 *keys_in, const u32 *values_in,
                                               u64 *keys_out, u32 *values_out, u32 n,
                                               u32 shift, const u32 *offsets)
{
    radix_scatter<true>(keys_in, values_in, keys_out, values_out, n, shift, offsets);
}

/* ---------------------------------------------------------------------------------------------------------
 * Element-wise helpers, one thread per item.
 * ------------------------------------------------------------------------------------------------------- */

extern "C" __global__ void iota_u32(u32 *out, u32 n)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        out[i] = i;
}

extern "C" __global__ void fill_u64(u64 *out, u64 value, u32 n)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        out[i] = value;
}

/* out[i] = in[perm[i]] */
extern "C" __global__ void gather_u64(const u64 *in, const u32 *perm, u64 *out, u32 n)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        out[i] = in[perm[i]];
}

/* *total += the sum of values[0 .. n): a warp sum by shuffles, then one atomic per warp. */
extern "C" __global__ void sum_u64(const u64 *values, u32 n, u64 *total)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    u64 v = i < n ? values[i] : 0;
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(FULL_MASK, v, offset);
    if (threadIdx.x % 32 == 0 && v)
        atomicAdd(total, v);
}

/* ---------------------------------------------------------------------------------------------------------
 * Run-length encoding of sorted keys (stride: distance between channels):
 *   run_heads    flags[i] = 1 where key i differs from key i-1 on any channel (and at i = 0);
 *   (host)       run_of = exclusive scan of the flags: the run of each head;
 *   run_compact  keys_out[c * runs + r] and starts[r] at each head i of run r = run_of[i];
 *   run_lengths  counts[r] = starts[r+1] - starts[r] (the last run ends at n);
 *   run_weights  counts[run of i] += weights[perm[i]] (atomics; counts zeroed before), when the keys carry
 *                counts already (merging runs); the run of i is run_of[i] + flags[i] - 1.
 * ------------------------------------------------------------------------------------------------------- */

extern "C" __global__ void run_heads(const u64 *sorted, u32 stride, u32 channels, u32 n,
                                     u32 *flags)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    u32 head = i == 0;
    for (u32 c = 0; c < channels && !head; ++c)
        head = sorted[(size_t)c * stride + i] != sorted[(size_t)c * stride + i - 1];
    flags[i] = head;
}

extern "C" __global__ void run_compact(const u64 *sorted, u32 stride, u32 channels, u32 n,
                                       const u32 *flags, const u32 *run_of, u32 runs,
                                       u64 *keys_out, u32 *starts)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n || !flags[i])
        return;
    u32 r = run_of[i];
    starts[r] = i;
    for (u32 c = 0; c < channels; ++c)
        keys_out[(size_t)c * runs + r] = sorted[(size_t)c * stride + i];
}

extern "C" __global__ void run_lengths(const u32 *starts, u32 runs, u32 n, u64 *counts)
{
    u32 r = blockIdx.x * BLOCK + threadIdx.x;
    if (r < runs)
        counts[r] = (r + 1 < runs ? starts[r + 1] : n) - starts[r];
}

extern "C" __global__ void run_weights(const u64 *weights, const u32 *perm, const u32 *flags,
                                       const u32 *run_of, u32 n, u64 *counts)
{
    u32 i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        atomicAdd(&counts[run_of[i] + flags[i] - 1], weights[perm[i]]);
}
