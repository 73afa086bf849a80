/* scan.cu: exclusive prefix sums on the GPU, the project's one scan (mapper/device/cuda.py exclusive_scan
 * drives it; mapper/device/host.py's counterpart is numpy's cumsum). The k-mer counter places kept k-mers,
 * runs and encoded bytes with it; the mapper's fused filter (gatekeeper.cu gatekeeper_candidates) places its
 * survivors in their seeded order, which the verifier's stretches need (gather.cu keep_candidates).
 *
 * Items are uint32 (indices) or uint64 (byte positions); n < 2^32.
 * JIT constants (-D): BLOCK threads per block (a multiple of 32), ITEMS items per thread of a tile,
 * TILE = BLOCK * ITEMS.
 */
#include "tiles.cuh"

/* Exclusive prefix sum, in place, of n items (the host recurses on the tile totals):
 *   scan_tiles  one block per tile of TILE items: the tile is loaded into shared memory (coalesced), each
 *               thread sums its ITEMS consecutive items, a Hillis-Steele scan over the BLOCK thread sums
 *               gives each thread its start, and the thread writes its items' exclusive sums; the tile's
 *               total goes to tile_sums[tile];
 *   scan_add    adds the (scanned) total of the tiles before to every item of a tile.
 */
template <typename T>
__device__ void scan_tile(T *data, u32 n, T *tile_sums)
{
    __shared__ T tile[TILE];
    __shared__ T sums[BLOCK];
    size_t base = (size_t)blockIdx.x * TILE;
    for (int j = 0; j < ITEMS; ++j) {
        u32 t = j * BLOCK + threadIdx.x;
        tile[t] = base + t < n ? data[base + t] : 0;
    }
    __syncthreads();
    T own = 0;
    for (int j = 0; j < ITEMS; ++j)
        own += tile[threadIdx.x * ITEMS + j];
    sums[threadIdx.x] = own;
    __syncthreads();
    for (int offset = 1; offset < BLOCK; offset <<= 1) {
        T add = threadIdx.x >= offset ? sums[threadIdx.x - offset] : 0;
        __syncthreads();
        sums[threadIdx.x] += add;
        __syncthreads();
    }
    T running = sums[threadIdx.x] - own;
    for (int j = 0; j < ITEMS; ++j) {
        u32 t = threadIdx.x * ITEMS + j;
        T value = tile[t];
        tile[t] = running;
        running += value;
    }
    __syncthreads();
    for (int j = 0; j < ITEMS; ++j) {
        u32 t = j * BLOCK + threadIdx.x;
        if (base + t < n)
            data[base + t] = tile[t];
    }
    if (threadIdx.x == BLOCK - 1)
        tile_sums[blockIdx.x] = sums[BLOCK - 1];
}

template <typename T>
__device__ void scan_add(T *data, u32 n, const T *tile_offsets)
{
    size_t base = (size_t)blockIdx.x * TILE;
    for (int j = 0; j < ITEMS; ++j) {
        size_t i = base + (size_t)j * BLOCK + threadIdx.x;
        if (i < n)
            data[i] += tile_offsets[blockIdx.x];
    }
}

extern "C" __global__ void scan_tiles_u32(u32 *data, u32 n, u32 *tile_sums)
{
    scan_tile<u32>(data, n, tile_sums);
}

extern "C" __global__ void scan_tiles_u64(u64 *data, u32 n, u64 *tile_sums)
{
    scan_tile<u64>(data, n, tile_sums);
}

extern "C" __global__ void scan_add_u32(u32 *data, u32 n, const u32 *tile_offsets)
{
    scan_add<u32>(data, n, tile_offsets);
}

extern "C" __global__ void scan_add_u64(u64 *data, u32 n, const u64 *tile_offsets)
{
    scan_add<u64>(data, n, tile_offsets);
}
