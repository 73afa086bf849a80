/* seed.cu: FastHASH seeding on the GPU.
 *
 * Produces exactly the candidates of the numpy seeder (mapper/seeding.py, whose docstring explains
 * every step): the row's non-overlapping WS-mers, cheap selection of the e+1 least frequent, emission of
 * the occurrences of the chosen ones as diagonals, de-duplication, the adjacency filter, and diagonal
 * bands of width e+1. The work is split so that the expensive step, the adjacency filter (a binary search
 * per k-mer of the row for every distinct diagonal), runs one thread per diagonal instead of serially
 * inside a row's thread; the sequential steps (a k-way merge, chaining) stay one thread per row.
 *
 * seed_select      per row: key, N flag and bucket size of each k-mer; a k-mer is chosen when its rank
 *                  in the row, ordered by (bucket size, position in the read), is below e+1 and its bucket
 *                  is not empty (an N k-mer counts as size 0); row_hits = total size of chosen buckets,
 *                  row_seeds = how many were chosen.
 * seed_diagonals   per row: the chosen buckets are position-sorted lists, so list j yields diagonals
 *                  (pos - j*WS) sorted by (contig, diagonal); a k-way merge visits all hits in that order
 *                  and writes each distinct (contig, diagonal) once at the row's slot (capacity row_hits).
 * seed_adjacent    per diagonal slot: diagonal d of row r is kept when at most e of the row's k-mers are
 *                  missing from [d + j*WS - e, d + j*WS + e] (binary search in their bucket; N k-mers are
 *                  missing). The slot's row is found by binary search in the rows' slot offsets.
 * seed_bands       per row: kept diagonals are chained while consecutive ones are <= e apart; a chain is
 *                  cut into bands (d - chain_first) / (e+1); each band is written as (contig, first
 *                  diagonal, last diagonal) at the row's slot.
 * seed_compact     per row: moves its bands from the slot to their place in the dense output.
 * The host prefix-sums row_hits (slot offsets) and the band counts (dense offsets) between launches and
 * launches rows in chunks whose total hits fit the buffers, so a read with huge buckets cannot exhaust memory.
 *
 * In : codes      uint8 [2T]  strand rows' codes (mapper/alphabet.py; CODE_N never part of a k-mer)
 *      row_start  int64 [R], nk int32 [R] (k-mers of the row, 0 = not seeded), kfirst int64 [R]
 *      row_e      int32 [R]
 *      offsets    OFFSET_T [4^WS + 1], positions uint32 [P]: the k-mer index, resident on the GPU
 *      contig_starts int64 [C]
 * Per k-mer (at kfirst[row] + j): kmer_key uint32, kmer_size int64, kmer_flags uint8 (1 = has N, 2 = chosen)
 * JIT constants (-D): WS, MAX_SEL (the largest e + 1), OFFSET_T.
 */
#include "common.cuh"

#ifndef WS
#define WS 12
#endif
#ifndef MAX_SEL
#define MAX_SEL 26
#endif
#ifndef OFFSET_T
#define OFFSET_T unsigned int
#endif

#define FLAG_N 1
#define FLAG_CHOSEN 2

extern "C" __global__ void seed_select(
    const uint8_t *__restrict__ codes, const long long *__restrict__ row_start,
    const int *__restrict__ nk, const long long *__restrict__ kfirst, const int *__restrict__ row_e,
    const int n_rows, const OFFSET_T *__restrict__ offsets,
    unsigned int *__restrict__ kmer_key, long long *__restrict__ kmer_size, uint8_t *__restrict__ kmer_flags,
    long long *__restrict__ row_hits, int *__restrict__ row_seeds)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rows)
        return;
    const int k = nk[r];
    const long long first = kfirst[r];
    const uint8_t *row = codes + row_start[r];
    for (int j = 0; j < k; ++j) {
        unsigned int key = 0;
        int has_n = 0;
        for (int i = 0; i < WS; ++i) {
            const uint8_t base = row[j * WS + i];
            key = (key << 2) | (base & 3u);
            has_n |= base == CODE_N;
        }
        kmer_key[first + j] = key;
        kmer_size[first + j] = has_n ? 0 : (long long)offsets[key + 1] - (long long)offsets[key];
        kmer_flags[first + j] = has_n ? FLAG_N : 0;
    }
    /* cheap selection: rank by (size, j); the e+1 lowest ranks with a non-empty bucket are chosen */
    const int keep = row_e[r] + 1;
    long long hits = 0;
    int seeds = 0;
    for (int j = 0; j < k; ++j) {
        const long long size = kmer_size[first + j];
        int rank = 0;
        for (int i = 0; i < k; ++i) {
            const long long other = kmer_size[first + i];
            rank += other < size || (other == size && i < j);
        }
        if (rank < keep && size > 0) {
            kmer_flags[first + j] |= FLAG_CHOSEN;
            hits += size;
            ++seeds;
        }
    }
    row_hits[r] = hits;
    row_seeds[r] = seeds;
}

/* index of the contig holding global position pos (contig_starts ascending, contig_starts[0] = 0) */
__device__ __forceinline__ int contig_of(const long long *contig_starts, int n_contigs, long long pos)
{
    int lo = 0, hi = n_contigs;
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (contig_starts[mid] <= pos)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* does `key` occur at a position in [lo, hi]? lower bound of lo in its (position-sorted) bucket */
__device__ __forceinline__ int occurs_within(const OFFSET_T *offsets, const unsigned int *positions,
                                             unsigned int key, long long lo, long long hi)
{
    long long a = offsets[key], b = offsets[key + 1];
    const long long end = b;
    while (a < b) {
        const long long mid = (a + b) >> 1;
        if ((long long)positions[mid] < lo)
            a = mid + 1;
        else
            b = mid;
    }
    return a < end && (long long)positions[a] <= hi;
}

extern "C" __global__ void seed_diagonals(
    const unsigned int *__restrict__ kmer_key, const uint8_t *__restrict__ kmer_flags,
    const int *__restrict__ nk, const long long *__restrict__ kfirst,
    const long long *__restrict__ slot, const int row_begin, const int n_rows,
    const OFFSET_T *__restrict__ offsets, const unsigned int *__restrict__ positions,
    const long long *__restrict__ contig_starts, const int n_contigs,
    int *__restrict__ diag_contig, long long *__restrict__ diag_value, int *__restrict__ n_diagonals)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_rows)
        return;
    const int r = row_begin + t;
    const int k = nk[r];
    const long long first = kfirst[r];

    /* the chosen lists: read offset j*WS, cursor and end in `positions`, current head (contig, diagonal).
     * Every access below uses a compile-time index (unrolled loops over MAX_SEL, with a select for the
     * list that advances), so the lists live in registers rather than in local memory. */
    long long cursor[MAX_SEL], end[MAX_SEL], head_diag[MAX_SEL];
    int shift[MAX_SEL], head_contig[MAX_SEL];
    int j = 0;
#pragma unroll
    for (int s = 0; s < MAX_SEL; ++s) {
        while (j < k && !(kmer_flags[first + j] & FLAG_CHOSEN))
            ++j;
        cursor[s] = end[s] = 0;
        shift[s] = 0;
        head_contig[s] = 0;
        head_diag[s] = 0;
        if (j < k) {
            const unsigned int key = kmer_key[first + j];
            cursor[s] = offsets[key];
            end[s] = offsets[key + 1];
            shift[s] = j * WS;
            const long long pos = positions[cursor[s]];
            head_contig[s] = contig_of(contig_starts, n_contigs, pos);
            head_diag[s] = pos - shift[s];
            ++j;
        }
    }

    long long out = slot[t];
    int diagonals = 0;
    int prev_contig = -1;
    long long prev_diag = 0;
    for (;;) {
        /* the list with the smallest head (contig, diagonal); ties go to the lowest list */
        int best = -1, c = 0;
        long long d = 0;
#pragma unroll
        for (int s = 0; s < MAX_SEL; ++s) {
            if (cursor[s] < end[s] && (best < 0 || head_contig[s] < c || (head_contig[s] == c && head_diag[s] < d))) {
                best = s;
                c = head_contig[s];
                d = head_diag[s];
            }
        }
        if (best < 0)
            break;
#pragma unroll
        for (int s = 0; s < MAX_SEL; ++s) {
            if (s == best && ++cursor[s] < end[s]) {
                const long long pos = positions[cursor[s]];
                head_contig[s] = contig_of(contig_starts, n_contigs, pos);
                head_diag[s] = pos - shift[s];
            }
        }
        if (c == prev_contig && d == prev_diag)
            continue; /* the same diagonal from another k-mer */
        prev_contig = c;
        prev_diag = d;
        diag_contig[out] = c;
        diag_value[out] = d;
        ++out;
        ++diagonals;
    }
    n_diagonals[t] = diagonals;
}

extern "C" __global__ void seed_adjacent(
    const unsigned int *__restrict__ kmer_key, const uint8_t *__restrict__ kmer_flags,
    const int *__restrict__ nk, const long long *__restrict__ kfirst, const int *__restrict__ row_e,
    const long long *__restrict__ slot, const int *__restrict__ n_diagonals, const int row_begin,
    const int n_rows, const long long n_slots,
    const OFFSET_T *__restrict__ offsets, const unsigned int *__restrict__ positions,
    const long long *__restrict__ diag_value, uint8_t *__restrict__ diag_kept)
{
    const long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n_slots)
        return;
    /* the row owning slot s: the last t with slot[t] <= s (rows without hits share their successor's slot) */
    int lo = 0, hi = n_rows;
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (slot[mid] <= s)
            lo = mid;
        else
            hi = mid;
    }
    if (s - slot[lo] >= n_diagonals[lo])
        return; /* a slot beyond the row's distinct diagonals */
    const int r = row_begin + lo;
    const int k = nk[r];
    const int e = row_e[r];
    const long long first = kfirst[r];
    const long long d = diag_value[s];
    int present = 0;
    for (int j = 0; j < k; ++j) {
        if (kmer_flags[first + j] & FLAG_N)
            continue;
        const long long target = d + (long long)j * WS;
        present += occurs_within(offsets, positions, kmer_key[first + j], target - e, target + e);
    }
    diag_kept[s] = k - present <= e;
}

extern "C" __global__ void seed_bands(
    const int *__restrict__ row_e, const long long *__restrict__ slot, const int *__restrict__ n_diagonals,
    const int row_begin, const int n_rows,
    const int *__restrict__ diag_contig, const long long *__restrict__ diag_value,
    const uint8_t *__restrict__ diag_kept,
    int *__restrict__ out_contig, long long *__restrict__ out_lo, long long *__restrict__ out_hi,
    int *__restrict__ n_adjacent, int *__restrict__ n_bands)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_rows)
        return;
    const int e = row_e[row_begin + t];
    const long long begin = slot[t], stop = slot[t] + n_diagonals[t];
    long long out = begin;
    int adjacent = 0, bands = 0;
    int have_band = 0, band_contig = -1;
    long long band_lo = 0, band_hi = 0, band_id = 0, chain_first = 0, last_diag = 0;
    for (long long i = begin; i < stop; ++i) {
        if (!diag_kept[i])
            continue;
        ++adjacent;
        const int c = diag_contig[i];
        const long long d = diag_value[i];
        const int new_chain = !have_band || c != band_contig || d - last_diag > e;
        if (new_chain)
            chain_first = d;
        const long long band = (d - chain_first) / (e + 1);
        if (new_chain || band != band_id) {
            if (have_band) {
                out_contig[out] = band_contig;
                out_lo[out] = band_lo;
                out_hi[out] = band_hi;
                ++out;
                ++bands;
            }
            have_band = 1;
            band_lo = d;
            band_id = band;
        }
        band_contig = c;
        band_hi = d;
        last_diag = d;
    }
    if (have_band) {
        out_contig[out] = band_contig;
        out_lo[out] = band_lo;
        out_hi[out] = band_hi;
        ++bands;
    }
    n_adjacent[t] = adjacent;
    n_bands[t] = bands;
}

extern "C" __global__ void seed_compact(
    const long long *__restrict__ slot, const long long *__restrict__ dense, const int *__restrict__ n_bands,
    const int row_begin, const int n_rows,
    const int *__restrict__ in_contig, const long long *__restrict__ in_lo, const long long *__restrict__ in_hi,
    int *__restrict__ row_out, int *__restrict__ contig_out, long long *__restrict__ lo_out,
    long long *__restrict__ hi_out)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_rows)
        return;
    for (int b = 0; b < n_bands[t]; ++b) {
        const long long from = slot[t] + b, to = dense[t] + b;
        row_out[to] = row_begin + t;
        contig_out[to] = in_contig[from];
        lo_out[to] = in_lo[from];
        hi_out[to] = in_hi[from];
    }
}
