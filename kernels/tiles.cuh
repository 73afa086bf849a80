/* tiles.cuh: the short integer names of the k-mer counter's kernels and the scan (kmer_*.cu, scan.cu), and the
 * tile constants of those that work a tile of items a block (scan.cu, kmer_sort.cu). JIT constants (-D):
 * BLOCK threads per block (a multiple of 32), ITEMS items per thread of a tile; TILE = BLOCK * ITEMS. */
#ifndef GKMAP_TILES_CUH
#define GKMAP_TILES_CUH

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 8
#endif
#define TILE (BLOCK * ITEMS)

#endif
