/* seed.cu: FastHASH seeding on the GPU.
 *
 * Produces exactly the candidates of the numpy seeder (mapper/seeding.py, whose docstring explains
 * every step): the row's non-overlapping WS-mers, cheap selection of the e+1 least frequent, emission of
 * the occurrences of the chosen ones as diagonals, de-duplication, the adjacency filter, and diagonal
 * bands of width e+1. The per-hit work (placing a hit in its row's sorted order by binary searches, the
 * adjacency filter's look-ups in the reference) runs in parallel over the hits; chaining runs a warp per
 * segment of a row.
 *
 * seed_select      per row: key, N flag, row and bucket size of each k-mer; a k-mer is chosen when its
 *                  rank in the row, ordered by (bucket size in the whole genome, position in the read), is
 *                  below e+1 and its bucket is not empty (an N k-mer counts as size 0); row_seeds = how many
 *                  were chosen; kmer_size then = the chosen list's size in the index part, row_hits = their
 *                  total, kmer_hit = the k-mer's first hit in the row.
 * seed_place       one thread per PLACE_CHUNK hit slots: each hit's k-mer, its slot in the row's (contig,
 *                  diagonal) order by look-ups in the row's other chosen buckets (a search, then galloping on
 *                  from the answer before; no merge, see the function), a duplicate flag, and for distinct
 *                  diagonals the adjacency filter (the chosen k-mers answered by those look-ups, the others
 *                  looked up in the reference codes).
 * seed_place_rows  the same result one thread per row, by merging the row's chosen lists (the host
 *                  layer's choice: few threads, big caches; see the function).
 * seed_segments    per block of a row's slots, LANES threads a block: where the row can be cut into
 *                  independent segments (a kept diagonal that certainly starts a new chain), so that a huge
 *                  row is chained by many warps.
 * seed_bands       per block with a cut, LANES threads a block (common.cuh): the segment from its cut to the
 *                  row's next cut; distinct kept diagonals are chained while consecutive ones are <= e apart;
 *                  a chain is cut into bands (d - chain_first) / (e+1); each band is written as (contig,
 *                  first diagonal, last diagonal) at the segment's slots; counts per block.
 * seed_scan        one item of LANES threads: the blocks' band offsets (an exclusive scan) and the launch's
 *                  sums, so that only the launch's total bands come back to the host.
 * seed_compact     per block, LANES threads a block: moves its bands to their place in the dense output.
 * The host prefix-sums row_hits (slot offsets) and launches rows in chunks whose total hits fit the
 * buffers, so a read with huge buckets cannot exhaust memory; between a launch's kernels it reads back
 * the launch's band total only, to place the bands in a candidate part.
 *
 * In : codes      uint8 [2T]  strand rows' codes (mapper/alphabet.py; CODE_N never part of a k-mer)
 *      row_start  int64 [R], nk int32 [R] (k-mers of the row, 0 = not seeded), kfirst int64 [R]
 *      row_e      int32 [R]
 *      offsets    OFFSET_T [4^WS + 1]: the whole index's buckets (for the selection), resident on the GPU
 *      list_offsets OFFSET_T [4^WS + 1], positions uint32: the buckets of the index part (the same arrays
 *                 as offsets and the whole positions when the index is not cut into parts)
 *      contig_starts, contig_ends int64 [C]
 *      genome     uint8 [G]: the reference codes, indexed by global position; an index part's buffer holds
 *                 only [genome_lo, genome_hi) (its pointer shifted so that global positions index it)
 * Per k-mer (at kfirst[row] + j): kmer_key uint32, kmer_size int64, kmer_flags uint8 (1 = has N, 2 = chosen),
 *      kmer_row int32, kmer_hit int64
 * JIT constants (-D): WS, OFFSET_T, PLACE_CHUNK (hit slots a thread of seed_place takes), SEED_LANES
 *      (threads launched per block of seed_segments, seed_bands and seed_compact, and for seed_scan: must be
 *      LANES).
 */
#include "common.cuh"

#ifndef WS
#define WS 12
#endif
#if WS > 15
#error "kmer_near rolls a k-mer's 2 * WS bits in a 32-bit word"
#endif
#ifndef OFFSET_T
#define OFFSET_T unsigned int
#endif
#ifndef PLACE_CHUNK
#define PLACE_CHUNK 4 /* consecutive hit slots a thread of seed_place takes */
#endif

#if defined(SEED_LANES) && SEED_LANES != LANES
#error "threads launched per row (the device layer's WARP) differ from LANES (common.cuh)"
#endif

#define FLAG_N 1
#define FLAG_CHOSEN 2
#define FLAG_MARGIN 4 /* diag_flags: a hit in the margin of an index part (never a candidate) */

extern "C" __global__ void seed_select(
    const uint8_t *__restrict__ codes, const long long *__restrict__ row_start,
    const int *__restrict__ nk, const long long *__restrict__ kfirst, const int *__restrict__ row_e,
    const int n_rows, const OFFSET_T *__restrict__ offsets, const OFFSET_T *__restrict__ list_offsets,
    unsigned int *__restrict__ kmer_key, long long *__restrict__ kmer_size, uint8_t *__restrict__ kmer_flags,
    int *__restrict__ kmer_row, long long *__restrict__ kmer_hit, long long *__restrict__ row_hits,
    int *__restrict__ row_seeds)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rows)
        return;
    const int k = nk[r];
    const long long first = kfirst[r];
    const uint8_t *row = codes + row_start[r];
    /* keys first, each bucket's bound fetched early (on the host: a row's buckets are random cache and TLB
     * misses, which the sizes' loop then finds in flight instead of waiting for one after the other) */
    for (int j = 0; j < k; ++j) {
        unsigned int key = 0;
        int has_n = 0;
        for (int i = 0; i < WS; ++i) {
            const uint8_t base = row[j * WS + i];
            key = (key << 2) | (base & 3u);
            has_n |= base == CODE_N;
        }
        PREFETCH(offsets + key);
        kmer_key[first + j] = key;
        kmer_flags[first + j] = has_n ? FLAG_N : 0;
        kmer_row[first + j] = r;
    }
    for (int j = 0; j < k; ++j) {
        const unsigned int key = kmer_key[first + j];
        kmer_size[first + j] = kmer_flags[first + j] ? 0 : (long long)offsets[key + 1] - (long long)offsets[key];
    }
    /* cheap selection: rank by (size, j); the e+1 lowest ranks with a non-empty bucket are chosen */
    const int keep = row_e[r] + 1;
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
            ++seeds;
        }
    }
    /* the chosen buckets' hits in this part of the index (all of it, unless it is cut into parts):
     * kmer_size becomes the size of the list seed_place walks */
    long long hits = 0;
    for (int j = 0; j < k; ++j) {
        kmer_hit[first + j] = hits;
        if (kmer_flags[first + j] & FLAG_CHOSEN) {
            const unsigned int key = kmer_key[first + j];
            kmer_size[first + j] = (long long)list_offsets[key + 1] - (long long)list_offsets[key];
            hits += kmer_size[first + j];
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

/* First index in [a, b) of the position-sorted bucket whose position is >= bound. A branchless binary search on
 * 32-bit words: seed_place is bound by instructions, not by memory (ncu on the 3.1 Gbp proxy: SM throughput
 * 85 %, DRAM 8 %, L1 hit rate 89 %, 16 of 32 lanes active), so a step is a load, a compare and a select, and
 * lanes that search ranges of one size take the same steps. Positions are below 2^32. */
__device__ __forceinline__ long long lower_bound(const unsigned int *positions, long long a, long long b,
                                                 long long bound)
{
    if (a >= b || bound <= 0)
        return a;
    if (bound > 0xffffffffLL)
        return b;
    const unsigned int key = (unsigned int)bound;
    const unsigned int *base = positions + a;
    unsigned int n = (unsigned int)(b - a);
    while (n > 1) {
        const unsigned int half = n >> 1;
        base = base[half] < key ? base + half : base;
        n -= half;
    }
    return (long long)(base - positions) + (*base < key);
}

/* does `key` occur at a position in [lo, hi]? (its bucket is position-sorted) */
__device__ __forceinline__ int occurs_within(const OFFSET_T *offsets, const unsigned int *positions,
                                             unsigned int key, long long lo, long long hi)
{
    const long long end = offsets[key + 1];
    const long long a = lower_bound(positions, offsets[key], end, lo);
    return a < end && (long long)positions[a] <= hi;
}

/* Does the k-mer `key` occur at a position in [lo, hi]? The adjacency filter's question, answered from the
 * reference codes instead of the k-mer's bucket: the WS + (hi - lo) bases from lo are read once (a cache
 * line or two) and rolled into 2-bit keys, where a binary search in a repeat's bucket of 10^4-10^5
 * positions costs 14-17 dependent loads. Exactly the index's answer: a position counts when the index
 * lists it, i.e. its WS bases hold no N, lie inside one contig (contig_starts/contig_ends), and, for an
 * index cut into parts, inside the bases [genome_lo, genome_hi) the part holds (index_parts.py). */
__device__ __forceinline__ int kmer_near(const uint8_t *genome, long long genome_lo, long long genome_hi,
                                         const long long *contig_starts, const long long *contig_ends,
                                         int n_contigs, unsigned int key, long long lo, long long hi)
{
    lo = lo > genome_lo ? lo : genome_lo;
    hi = hi < genome_hi - WS ? hi : genome_hi - WS;
    if (lo > hi)
        return 0;
    /* 32-bit words and no branch but the rare match's (the kernel is bound by instructions) */
    const uint8_t *text = genome + lo;
    const int n = (int)(hi - lo) + WS;
    const unsigned int mask = (1u << (2 * WS)) - 1u;
    unsigned int rolled = 0;
    int run = 0; /* bases since the last N: a k-mer ends at i once WS of them are in (then i >= WS - 1) */
    for (int i = 0; i < n; ++i) {
        const unsigned int base = text[i];
        run = base > 3 ? 0 : run + 1;
        rolled = ((rolled << 2) | (base & 3u)) & mask;
        if (run >= WS && rolled == key) {
            const long long at = lo + i - WS + 1;
            const int c = contig_of(contig_starts, n_contigs, at);
            if (at >= contig_starts[c] && at + WS <= contig_ends[c])
                return 1;
        }
    }
    return 0;
}

/* `value` clamped to [lo, hi] */
__device__ __forceinline__ long long clamp_to(long long value, long long lo, long long hi)
{
    return value < lo ? lo : (value > hi ? hi : value);
}

/* First slot of k-mer g of a launch (relative to k_begin): its row's first slot plus the row's hits before it. */
__device__ __forceinline__ long long kmer_slot(const int *kmer_row, const long long *kmer_hit, const long long *slot,
                                               int row_begin, long long k_begin, long long g)
{
    const long long kk = k_begin + g;
    return slot[kmer_row[kk] - row_begin] + kmer_hit[kk];
}

/* Where `lo` would go in the sorted positions[a, b) (lower_bound), searched outward from `from` by doubling
 * steps: costs the log of the distance moved, not of the bucket, when successive look-ups lie close. */
__device__ __forceinline__ long long gallop_lower(const unsigned int *positions, long long a, long long b,
                                                  long long from, long long lo)
{
    from = from < a ? a : (from > b ? b : from);
    if (from < b && (long long)positions[from] < lo) {          /* forward: the answer lies after from */
        long long step = 1, last_below = from;
        while (from + step < b && (long long)positions[from + step] < lo) {
            last_below = from + step;
            step <<= 1;
        }
        return lower_bound(positions, last_below + 1, from + step < b ? from + step : b, lo);
    }
    if (from == a || (long long)positions[from - 1] < lo)        /* from is the answer */
        return from;
    long long step = 1, first_at = from;                          /* backward: positions[first_at] >= lo */
    while (from - step > a && (long long)positions[from - step] >= lo) {
        first_at = from - step;
        step <<= 1;
    }
    return lower_bound(positions, from - step > a ? from - step : a, first_at, lo);
}

#define ROW_CHOSEN 32   /* chosen lists of a row: at most e + 1 <= MAX_E + 1 */
#define ROW_CURSORS 64  /* k-mers of a row whose adjacency look-ups keep a cursor; later ones search */

/* Every hit of a row's chosen buckets goes straight to its place in the row's sorted diagonal list, a
 * thread per PLACE_CHUNK consecutive hit slots of the launch (hit i of k-mer j0: slot[row] +
 * kmer_hit[k-mer] + i).
 *
 * The row's order is (contig, diagonal), ties to the lower k-mer. Hit i of chosen list j0 (position p,
 * contig c, diagonal d = p - j0*WS) has rank i + (hits of each other chosen list j ordered before it). Those
 * are a prefix of list j: (contig(q), q - j*WS) < (c, d) exactly when q < T with
 * T = clamp(d + j*WS, start of contig c, start of contig c+1), since contig(q) grows with q; for the lower
 * lists (j < j0), equal keys come first too (bound T' from d + j*WS + 1), and a hit with an equal key in
 * a lower list is a duplicate. So one look-up per chosen list places a hit: no merge, no sort.
 *
 * The look-ups: T grows with i (p grows, and across a contig's end T stays at or below the next contig's
 * start), so a thread's next hit of the same k-mer finds its answer in list j at or after the last one.
 * The chunk's first hit of a k-mer searches the whole list (a branchless binary search, lower_bound); the
 * others gallop on from the answer before (gallop_lower: the log of the distance moved, a load or two
 * where the lists are of like size, instead of 12-17 dependent steps). The kernel is bound by instructions
 * (ncu on the 3.1 Gbp human proxy: SM throughput 85 %, DRAM 8 %, L1 hit rate 89 %), so this is work
 * saved, where letting a warp's lanes share one search cost more than it saved (2.39 against 2.01 GPU-s
 * for 500,000 of the proxy's reads, a search per lane).
 *
 * Each distinct hit then runs the adjacency filter: at most e of the row's k-mers missing from
 * [d + j*WS - e, d + j*WS + e]; N k-mers are missing. The chosen lists answer from their look-up: every
 * hit of list j before the answer lies below T and every hit from it on at or above T, so positions[ans-1]
 * and positions[ans] decide (when [T - e, T + e] lies inside the diagonal's contig; else, and for the
 * k-mers not chosen, kmer_near reads the reference codes). The decision does not depend on the order in
 * which the k-mers are asked, only when it is known (the count stops once more than e are missing or
 * k - e are present), so the free answers come first. Every slot of the row is written:
 * diag_contig, diag_value and diag_flags (0: duplicate; bit 0: distinct; bit 1: kept by the filter;
 * FLAG_MARGIN: a hit outside [core_lo, core_hi), see below).
 *
 * Index parts (mapper/backends/index_parts.py): when the index is cut into parts of whole contigs, the
 * lists hold the part's positions plus a margin in the neighbouring contigs, which the adjacency filter of
 * a diagonal near a contig end may need. Margin hits are placed like the others (the order is over the
 * whole lists) but never become diagonals; an equal key in the core cannot exist (another contig). With
 * one part, [core_lo, core_hi) covers the genome.
 *
 * Lanes (common.cuh): every lane of a warp reaches the k-mer search's ballots, so a lane whose chunk starts
 * past the launch's last hit leaves only after them. On the host a warp is one lane. */
extern "C" __global__ void seed_place(
    const unsigned int *__restrict__ kmer_key, const uint8_t *__restrict__ kmer_flags,
    const int *__restrict__ kmer_row, const long long *__restrict__ kmer_hit,
    const int *__restrict__ nk, const long long *__restrict__ kfirst, const int *__restrict__ row_e,
    const long long *__restrict__ slot, const int row_begin, const long long k_begin, const long long n_kmers,
    const long long n_hits,
    const OFFSET_T *__restrict__ list_offsets, const unsigned int *__restrict__ positions,
    const long long core_lo, const long long core_hi,
    const long long *__restrict__ contig_starts, const long long *__restrict__ contig_ends, const int n_contigs,
    const uint8_t *__restrict__ genome, const long long genome_lo, const long long genome_hi,
    int *__restrict__ diag_contig, long long *__restrict__ diag_value, uint8_t *__restrict__ diag_flags)
{
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = (int)(thread % LANES);
    const long long h0 = (thread - lane) * PLACE_CHUNK; /* the warp's first slot */
    if (h0 >= n_hits)
        return; /* the whole warp */
    /* the k-mer of slot h0: the last whose first slot is <= h0 (a k-mer without hits shares its slot with
     * the next, so the last is the one holding h0). The warp finds it by a search of LANES + 1 ways: each
     * round every lane probes one of LANES evenly spaced k-mers of the range left, and a ballot keeps the
     * part from the last probe at or below h0 to the first above it, so two or three rounds of dependent
     * loads cover a launch's thousands of k-mers, where a binary search by one lane took a dozen (one lane,
     * on the host: a binary search). Each lane then steps on over the few k-mers its slots span. */
    const unsigned int all_lanes = 0xffffffffu >> (32 - LANES);
    long long g = 0, g_end = n_kmers; /* kmer_slot(g) <= h0 < kmer_slot(g_end); g_end = n_kmers: the end */
    while (g_end - g > 1) {
        /* in [g, g_end), non-decreasing by lane */
        const long long probe = g + (g_end - g) * (lane + 1) / (LANES + 1);
        const unsigned int at_or_below =
            lanes_ballot(kmer_slot(kmer_row, kmer_hit, slot, row_begin, k_begin, probe) <= h0);
        const int yes = last_lane(at_or_below), no = first_lane(~at_or_below & all_lanes);
        const long long g_yes = lanes_shfl(probe, yes < 0 ? 0 : yes), g_no = lanes_shfl(probe, no < 0 ? 0 : no);
        g = yes < 0 ? g : g_yes;
        g_end = no < 0 ? g_end : g_no;
    }
    unsigned int cursor[ROW_CHOSEN]; /* the answer in each other chosen list (by rank among them), from the base */
    long long kk = -1;               /* the k-mer of the hit before, whose answers the cursors hold */
    int c = 0;
    long long c_lo = 0, c_hi = 0;
    const long long h_end = thread * PLACE_CHUNK + PLACE_CHUNK < n_hits ? thread * PLACE_CHUNK + PLACE_CHUNK : n_hits;
    for (long long h = thread * PLACE_CHUNK; h < h_end; ++h) {
        while (g + 1 < n_kmers && kmer_slot(kmer_row, kmer_hit, slot, row_begin, k_begin, g + 1) <= h)
            ++g;
        const int same = k_begin + g == kk;
        kk = k_begin + g;
        const int r = kmer_row[kk];
        const long long first = kfirst[r], base = slot[r - row_begin];
        const int k = nk[r], e = row_e[r], j0 = (int)(kk - first);
        const long long i = h - base - kmer_hit[kk];
        const long long p = positions[list_offsets[kmer_key[kk]] + i];
        if (!same || p >= c_hi) { /* the hit before's contig holds p when p lies below its end */
            c = contig_of(contig_starts, n_contigs, p);
            c_lo = contig_starts[c];
            c_hi = c + 1 < n_contigs ? contig_starts[c + 1] : 0x7fffffffffffffffLL;
        }
        const long long d = p - (long long)j0 * WS;
        long long rank = i;
        int dup = 0, present = 1, missing = 0, chosen = 0; /* this hit's own k-mer is present */
        for (int j = 0; j < k; ++j) {
            const uint8_t f = kmer_flags[first + j];
            missing += (f & FLAG_N) != 0;
            if (j == j0 || !(f & FLAG_CHOSEN))
                continue;
            const unsigned int key = kmer_key[first + j];
            const long long a = list_offsets[key], b = list_offsets[key + 1];
            const long long target = d + (long long)j * WS;
            const long long bound = clamp_to(target, c_lo, c_hi);
            const long long at = same ? gallop_lower(positions, a, b, a + cursor[chosen], bound)
                                      : lower_bound(positions, a, b, bound);
            cursor[chosen++] = (unsigned int)(at - a);
            rank += at - a;
            if (j < j0 && at < b && (long long)positions[at] < clamp_to(target + 1, c_lo, c_hi)) {
                ++rank;
                dup = 1;
            }
            if (target - e >= c_lo && target + e < c_hi) {
                const int found = (at > a && (long long)positions[at - 1] >= target - e)
                                  || (at < b && (long long)positions[at] <= target + e);
                present += found;
                missing += !found;
            }
        }
        const long long out = base + rank;
        diag_contig[out] = c;
        diag_value[out] = d;
        if (p < core_lo || p >= core_hi) {
            diag_flags[out] = FLAG_MARGIN;
            continue;
        }
        if (dup) {
            diag_flags[out] = 0;
            continue;
        }
        /* the k-mers the look-ups did not answer, while the decision is open */
        for (int j = 0; j < k && missing <= e && present < k - e; ++j) {
            const uint8_t f = kmer_flags[first + j];
            const long long target = d + (long long)j * WS;
            if (j == j0 || (f & FLAG_N) || ((f & FLAG_CHOSEN) && target - e >= c_lo && target + e < c_hi))
                continue;
            const int found = kmer_near(genome, genome_lo, genome_hi, contig_starts, contig_ends, n_contigs,
                                        kmer_key[first + j], target - e, target + e);
            present += found;
            missing += !found;
        }
        diag_flags[out] = 1 | ((missing <= e) << 1);
    }
}


/* A hit's place in seed_place_rows' merge as one integer: contig in the high bits, then the diagonal
 * q - j*WS biased to be >= 0 (q < 2^32, j*WS < 2^32), so (contig, diagonal) order is integer order and a
 * list's head is compared with one instruction; MERGE_DONE for a list merged to its end. */
#define MERGE_D_BITS 34
#define MERGE_D_BIAS (1LL << 32)
#define MERGE_DONE 0x7fffffffffffffffLL

/* The merge key of list j's hit at `at` (MERGE_DONE at `end`); *contig follows the hits, which ascend. */
__device__ __forceinline__ long long merge_key(const unsigned int *positions, long long at, long long end, int j,
                                               const long long *contig_starts, int n_contigs, int *contig)
{
    if (at >= end)
        return MERGE_DONE;
    const long long q = positions[at];
    while (*contig + 1 < n_contigs && q >= contig_starts[*contig + 1])
        ++*contig;
    return ((long long)*contig << MERGE_D_BITS) + q - (long long)j * WS + MERGE_D_BIAS;
}

/* seed_place's result (every slot's contig, diagonal and flags) computed one thread per row, for a
 * processor with few, fast threads and big caches: the host layer (the cpu backend) launches this instead
 * of seed_place, whose threads pay e look-ups to place each hit.
 *
 * Each chosen list is already in the row's order (positions ascending: contig, then diagonal q - j*WS
 * ascending), so the row's order is their merge, ties to the lower k-mer: a hit's slot is its place in the
 * merge, and a distinct-key check against the hit merged just before finds the duplicates (an equal key
 * comes from a lower list, which the tie rule merged first).
 *
 * The adjacency filter asks seed_place's question (at most e of the row's k-mers missing from
 * [d + j*WS - e, d + j*WS + e]) in a cheaper order, with the same answer (the decision does not depend on
 * the order; only when it is known does the count stop). The chosen lists first: the merge's heads bracket
 * the answer, since every hit of list j before its head lies below T = d + j*WS and every hit from the head
 * on at or above it (when [T - e, T + e] lies inside the diagonal's contig; else a binary search), so
 * two loads decide, from lines the merge has just read. Then the other k-mers (the row's most frequent),
 * by a cursor per list moved by galloping (gallop_lower; the diagonals arrive in ascending order within a
 * contig, so each look-up starts next to its answer), and only while the decision is open: a diagonal
 * that one chosen list holds is rejected after one such look-up where asking in k-mer order took about
 * e + 1 mixed ones. Each list's head is kept as one merge key (merge_key), so a merge step compares
 * integers. Human chr20, 10,000 reads (5.0 M hits, 4.7 M distinct diagonals), one core: this kernel 0.38 s
 * in k-mer order, 0.30 s chosen lists first, 0.25 s with the merge keys (of which the merge 0.07 s, the
 * chosen lists' checks 0.08 s, the other k-mers' look-ups 0.10 s). (On the host the cursors beat reading
 * the reference as seed_place does, kmer_near: seeding 0.6 s against 1.5 s.) Flags
 * and margin hits are seed_place's, so the two kernels write the same bytes
 * (tests/device/test_cuda_backend.py). */
extern "C" __global__ void seed_place_rows(
    const unsigned int *__restrict__ kmer_key, const uint8_t *__restrict__ kmer_flags,
    const int *__restrict__ nk, const long long *__restrict__ kfirst, const int *__restrict__ row_e,
    const long long *__restrict__ slot, const int row_begin, const int n_rows,
    const OFFSET_T *__restrict__ list_offsets, const unsigned int *__restrict__ positions,
    const long long core_lo, const long long core_hi,
    const long long *__restrict__ contig_starts, const int n_contigs,
    int *__restrict__ diag_contig, long long *__restrict__ diag_value, uint8_t *__restrict__ diag_flags)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_rows)
        return;
    const int r = row_begin + t;
    const long long first = kfirst[r];
    const int k = nk[r], e = row_e[r];
    int m = 0, n_missing = 0, list_j[ROW_CHOSEN], list_contig[ROW_CHOSEN];
    long long begin[ROW_CHOSEN], next[ROW_CHOSEN], end[ROW_CHOSEN], head[ROW_CHOSEN], cursor[ROW_CURSORS];
    for (int j = 0; j < k; ++j) {
        const unsigned int key = kmer_key[first + j];
        if (j < ROW_CURSORS)
            cursor[j] = list_offsets[key];
        n_missing += (kmer_flags[first + j] & FLAG_N) != 0;
        if (!(kmer_flags[first + j] & FLAG_CHOSEN) || m == ROW_CHOSEN)
            continue;
        list_j[m] = j;
        begin[m] = next[m] = list_offsets[key];
        end[m] = list_offsets[key + 1];
        list_contig[m] = next[m] < end[m] ? contig_of(contig_starts, n_contigs, positions[next[m]]) : 0;
        head[m] = merge_key(positions, next[m], end[m], j, contig_starts, n_contigs, &list_contig[m]);
        ++m;
    }
    long long out = slot[t];
    int prev_c = -1;
    long long prev_d = 0;
    for (;;) {
        int best = 0;
        for (int x = 1; x < m; ++x)
            best = head[x] < head[best] ? x : best; /* ties: the lower k-mer, as the first minimum */
        if (!m || head[best] == MERGE_DONE)
            return;
        const int c = (int)(head[best] >> MERGE_D_BITS);
        const long long d = (head[best] & ((1LL << MERGE_D_BITS) - 1)) - MERGE_D_BIAS;
        const long long p = positions[next[best]++];
        head[best] = merge_key(positions, next[best], end[best], list_j[best], contig_starts, n_contigs,
                               &list_contig[best]);
        diag_contig[out] = c;
        diag_value[out] = d;
        const int dup = c == prev_c && d == prev_d;
        prev_c = c;
        prev_d = d;
        uint8_t flags;
        if (p < core_lo || p >= core_hi) {
            flags = FLAG_MARGIN;
        } else if (dup) {
            flags = 0;
        } else {
            int present = 1, missing = n_missing; /* this hit's own k-mer; N k-mers are missing */
            const long long c_lo = contig_starts[c];
            const long long c_hi = c + 1 < n_contigs ? contig_starts[c + 1] : 0x7fffffffffffffffLL;
            for (int x = 0; x < m && missing <= e && present < k - e; ++x) {
                if (x == best)
                    continue;
                const long long target = d + (long long)list_j[x] * WS;
                int found;
                if (target - e >= c_lo && target + e < c_hi)
                    found = (next[x] > begin[x] && (long long)positions[next[x] - 1] >= target - e)
                            || (next[x] < end[x] && (long long)positions[next[x]] <= target + e);
                else
                    found = occurs_within(list_offsets, positions, kmer_key[first + list_j[x]], target - e, target + e);
                present += found;
                missing += !found;
            }
            for (int j = 0, x = 0; j < k && missing <= e && present < k - e; ++j) {
                if (x < m && list_j[x] == j) { /* a merged list: asked above */
                    ++x;
                    continue;
                }
                if (kmer_flags[first + j] & FLAG_N)
                    continue;
                const long long target = d + (long long)j * WS;
                int found;
                if (j < ROW_CURSORS) {
                    const unsigned int key = kmer_key[first + j];
                    const long long b = list_offsets[key + 1];
                    cursor[j] = gallop_lower(positions, list_offsets[key], b, cursor[j], target - e);
                    found = cursor[j] < b && (long long)positions[cursor[j]] <= target + e;
                } else {
                    found = occurs_within(list_offsets, positions, kmer_key[first + j], target - e, target + e);
                }
                present += found;
                missing += !found;
            }
            flags = 1 | ((missing <= e) << 1);
        }
        diag_flags[out++] = flags;
    }
}

/* Where a row's diagonal list may be cut into segments that seed_bands can take independently: LANES
 * threads per block of `segment` entries of a row (block k of row t: entries slot[t] + k * segment on);
 * seg_at = the first entry i of the block that certainly starts a new chain, or -1 (block 0: the row's
 * first entry). Entry i does when it is kept and its predecessor in the list (kept or not) lies on another
 * contig or more than e diagonals before it: the list is in (contig, diagonal) order, so the previous
 * kept entry lies at least as far back. From such an entry on, nothing of the chain state before it
 * matters, so the row's bands are the bands of its segments, one after the other. A row of millions of
 * hits (a poly-A read) falls into as many segments as its repeat copies allow, instead of keeping one
 * warp busy for the whole launch. The lanes read LANES consecutive entries a round (one line of each
 * array, where a thread a block read them one by one) and stop at the first round that holds a cut. */
extern "C" __global__ void seed_segments(
    const int *__restrict__ row_e, const long long *__restrict__ slot, const int row_begin,
    const int *__restrict__ block_row, const int *__restrict__ block_index, const int n_blocks, const int segment,
    const int *__restrict__ diag_contig, const long long *__restrict__ diag_value,
    const uint8_t *__restrict__ diag_flags, long long *__restrict__ seg_at)
{
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int b = (int)(thread / LANES), lane = (int)(thread % LANES);
    if (b >= n_blocks)
        return; /* the whole warp: a block's lanes are one warp */
    const int t = block_row[b];
    const long long begin = slot[t], stop = slot[t + 1], from = begin + (long long)block_index[b] * segment;
    if (from == begin) {
        if (lane == 0)
            seg_at[b] = begin;
        return;
    }
    const int e = row_e[row_begin + t];
    const long long to = from + segment < stop ? from + segment : stop;
    for (long long round = from; round < to; round += LANES) {
        const long long i = round + lane;
        const int cut = i < to && (diag_flags[i] & 2)
                        && (diag_contig[i] != diag_contig[i - 1] || diag_value[i] - diag_value[i - 1] > e);
        const unsigned int cuts = lanes_ballot(cut);
        if (cuts) {
            if (lane == 0)
                seg_at[b] = round + first_lane(cuts);
            return;
        }
    }
    if (lane == 0)
        seg_at[b] = -1;
}

/* Bands of each segment of a row, LANES threads a block of seed_segments (common.cuh: a warp on the GPU,
 * one thread on the host): the block whose seg_at is a cut takes the segment from that cut to the next cut
 * of its row (found by the lanes in the blocks after it, LANES blocks a round) or to the row's end; a block
 * without a cut writes zero counts. Indexed by block, the segments need no compaction on the host: the
 * launch's cut points never leave the device. The serial rule: walk the kept distinct diagonals in order; a
 * diagonal starts a new chain when it is the segment's first, changes contig, or lies more than e after the
 * previous one; within a chain, band = (d - chain's first d) / (e + 1), and a new chain or band id starts a
 * band, written as (contig, its first d, its last d) at the segment's next output slot from its cut on (a
 * segment of m entries has at most m bands).
 *
 * The lanes take the segment LANES entries a round. Everything a kept entry needs from the entries before
 * it comes from the previous kept entry (for new chain and new band) and the latest chain start (for the
 * band id): within the round from the lane that holds it (ballot of kept lanes, then a shuffle), before the
 * round from the state carried from the round before (last kept entry's contig, d, band id and chain
 * start). A lane that starts a band writes its contig and first d at the cut + (bands started before it),
 * and the previous kept entry's d as the previous band's last; the last band is closed after the loop. The
 * result is the serial loop's, byte for byte. Counts per block, in `counts` (4 planes of n_blocks ints):
 * diagonals (distinct entries), adjacent (kept), bands, margin hits. */
extern "C" __global__ void seed_bands(
    const int *__restrict__ row_e, const int row_begin, const long long *__restrict__ slot,
    const int *__restrict__ block_row, const long long *__restrict__ seg_at, const int n_blocks,
    const int *__restrict__ diag_contig, const long long *__restrict__ diag_value,
    const uint8_t *__restrict__ diag_flags,
    int *__restrict__ out_contig, long long *__restrict__ out_lo, long long *__restrict__ out_hi,
    int *__restrict__ counts)
{
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int t = (int)(thread / LANES), lane = (int)(thread % LANES);
    if (t >= n_blocks)
        return; /* the whole warp: a block's lanes are one warp */
    int *n_diagonals = counts, *n_adjacent = counts + n_blocks, *n_bands = counts + 2 * n_blocks,
        *n_margin = counts + 3 * n_blocks;
    const long long begin = seg_at[t];
    if (begin < 0) {
        if (lane == 0)
            n_diagonals[t] = n_adjacent[t] = n_bands[t] = n_margin[t] = 0;
        return;
    }
    const int row = block_row[t];
    long long stop = slot[row + 1];
    for (int next = t + 1; next < n_blocks; next += LANES) { /* the next cut of the row, if any */
        const int j = next + lane;
        const int other = j >= n_blocks || block_row[j] != row;
        const long long at = other ? -1 : seg_at[j];
        const unsigned int cuts = lanes_ballot(at >= 0), ends = lanes_ballot(other);
        if (cuts) {
            stop = lanes_shfl(at, first_lane(cuts)); /* the row's blocks are consecutive: before any end */
            break;
        }
        if (ends)
            break;
    }
    const int e = row_e[row_begin + row];
    const unsigned int before = (1u << lane) - 1u, upto = before | (1u << lane);
    int diagonals = 0, adjacent = 0, margin = 0, last_c = -1;
    long long bands = 0, last_d = 0, last_band = 0, chain_first = 0;
    for (long long round = begin; round < stop; round += LANES) {
        const long long i = round + lane;
        const uint8_t f = i < stop ? diag_flags[i] : 0;
        margin += __popc(lanes_ballot(f == FLAG_MARGIN));
        diagonals += __popc(lanes_ballot(f & 1));
        const int kept = (f & 2) != 0;
        const unsigned int kept_lanes = lanes_ballot(kept);
        if (!kept_lanes)
            continue;
        adjacent += __popc(kept_lanes);
        const int c = kept ? diag_contig[i] : 0;
        const long long d = kept ? diag_value[i] : 0;
        const int prev = last_lane(kept_lanes & before);
        const int from = prev < 0 ? lane : prev;
        const int prev_c_lane = lanes_shfl(c, from);
        const long long prev_d_lane = lanes_shfl(d, from);
        const int prev_c = prev < 0 ? last_c : prev_c_lane;
        const long long prev_d = prev < 0 ? last_d : prev_d_lane;
        const int new_chain = kept && (c != prev_c || d - prev_d > e);
        const int start = last_lane(lanes_ballot(new_chain) & upto);
        const long long start_d = lanes_shfl(d, start < 0 ? lane : start);
        const long long first = start < 0 ? chain_first : start_d;
        const long long band = kept ? (d - first) / (e + 1) : 0;
        const long long prev_band_lane = lanes_shfl(band, from);
        const int new_band = kept && (new_chain || band != (prev < 0 ? last_band : prev_band_lane));
        const unsigned int band_lanes = lanes_ballot(new_band);
        if (new_band) {
            const long long at = begin + bands + __popc(band_lanes & before);
            out_contig[at] = c;
            out_lo[at] = d;
            if (at > begin)
                out_hi[at - 1] = prev_d;
        }
        bands += __popc(band_lanes);
        const int last = last_lane(kept_lanes);
        last_c = lanes_shfl(c, last);
        last_d = lanes_shfl(d, last);
        last_band = lanes_shfl(band, last);
        chain_first = lanes_shfl(first, last);
    }
    if (lane == 0) {
        if (bands)
            out_hi[begin + bands - 1] = last_d;
        n_diagonals[t] = diagonals;
        n_adjacent[t] = adjacent;
        n_bands[t] = (int)bands;
        n_margin[t] = margin;
    }
}

/* The launch's band offsets and sums, one item of LANES threads: dense[b] = the bands of the blocks before
 * block b (an exclusive scan of seed_bands' counts plane 2), and totals[0..3] = the sums of the four planes
 * (bands, diagonals, adjacent, margin hits). Why on the device: the host needs only the launch's total
 * bands (one small download) to place its bands, not every block's count. Each lane sums SCAN_ITEMS
 * consecutive blocks a round (independent loads), the lanes' sums are scanned by shuffles (Hillis-Steele:
 * log2 LANES steps), and the running offset carries from round to round. */
#define SCAN_ITEMS 8
extern "C" __global__ void seed_scan(
    const int *__restrict__ counts, const int n_blocks, long long *__restrict__ dense,
    long long *__restrict__ totals)
{
    const int lane = (int)(((long long)blockIdx.x * blockDim.x + threadIdx.x) % LANES);
    if ((long long)blockIdx.x * blockDim.x + threadIdx.x >= LANES)
        return;
    const int *n_diagonals = counts, *n_adjacent = counts + n_blocks, *n_bands = counts + 2 * n_blocks,
        *n_margin = counts + 3 * n_blocks;
    long long carry = 0, diagonals = 0, adjacent = 0, margin = 0;
    for (int round = 0; round < n_blocks; round += LANES * SCAN_ITEMS) {
        const int first = round + lane * SCAN_ITEMS;
        int item[SCAN_ITEMS];
        long long sum = 0;
        for (int k = 0; k < SCAN_ITEMS; ++k) {
            const int b = first + k;
            item[k] = b < n_blocks ? n_bands[b] : 0;
            sum += item[k];
            if (b < n_blocks) {
                diagonals += n_diagonals[b];
                adjacent += n_adjacent[b];
                margin += n_margin[b];
            }
        }
        long long inclusive = sum;
        for (int step = 1; step < LANES; step <<= 1) {
            const long long below = lanes_shfl(inclusive, lane >= step ? lane - step : lane);
            if (lane >= step)
                inclusive += below;
        }
        long long at = carry + inclusive - sum;
        for (int k = 0; k < SCAN_ITEMS && first + k < n_blocks; ++k) {
            dense[first + k] = at;
            at += item[k];
        }
        carry += lanes_shfl(inclusive, LANES - 1);
    }
    for (int step = 1; step < LANES; step <<= 1) { /* the lanes' sums: lane 0 ends with every lane's */
        diagonals += lanes_shfl(diagonals, (lane + step) % LANES);
        adjacent += lanes_shfl(adjacent, (lane + step) % LANES);
        margin += lanes_shfl(margin, (lane + step) % LANES);
    }
    if (lane == 0) {
        totals[0] = carry;
        totals[1] = diagonals;
        totals[2] = adjacent;
        totals[3] = margin;
    }
}

/* Each block's bands (seed_bands) from the slots after its cut to their place in the dense output (dense[t]:
 * the bands of the blocks before it), LANES threads a block (a band each); a block without a cut has none. */
extern "C" __global__ void seed_compact(
    const long long *__restrict__ seg_at, const long long *__restrict__ dense, const int *__restrict__ counts,
    const int *__restrict__ block_row, const int row_begin, const int n_blocks,
    const int *__restrict__ in_contig, const long long *__restrict__ in_lo, const long long *__restrict__ in_hi,
    int *__restrict__ row_out, int *__restrict__ contig_out, long long *__restrict__ lo_out,
    long long *__restrict__ hi_out)
{
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int t = (int)(thread / LANES), lane = (int)(thread % LANES);
    if (t >= n_blocks)
        return;
    const int n_bands = counts[2 * n_blocks + t];
    for (int b = lane; b < n_bands; b += LANES) {
        const long long from = seg_at[t] + b, to = dense[t] + b;
        row_out[to] = row_begin + block_row[t];
        contig_out[to] = in_contig[from];
        lo_out[to] = in_lo[from];
        hi_out[to] = in_hi[from];
    }
}
