/* phf.cu: neighbourhood look-ups and seed-and-filter over the resident neighbourhood index (MAROSE's scheme;
 * mapper/neighbourhood/, docs/neighbourhood.md).
 *
 * Index (device copies of mapper/neighbourhood/index.py's arrays; B = 4^ls seed blocks, S slots, V vertices):
 *   nboff  int64 [B+1]   block s owns slots nboff[s]..nboff[s+1]-1; nbkeys uint32 [S] sorted inside a block
 *   posoff int64 [S+1]   slot k's pattern starts are positions[posoff[k]..posoff[k+1]-1] (uint32, global)
 *   seed_j uint32 [B], voff int64 [B+1], g uint8 [ceil(V/4)] (2 bits a vertex), vslot int32 [V]: the perfect
 *   hash of each block (hashing.py): r = (voff[s+1]-voff[s])/3; lookup2's mix of (0x9e3779b9 + key,
 *   0x9e3779b9, J + 4) gives words a, b, c; the key's vertices are voff[s] + (a mod r, r + b mod r,
 *   2r + c mod r); j = (g[v0] + g[v1] + g[v2]) mod 3; slot = vslot[v_j], a hit only if nbkeys[slot] == key.
 *
 * Look-up (compile-time LOOKUP, so each variant is a branch-free kernel of its own):
 *   LOOKUP 0  perfect hash: 3 reads of g, 1 of vslot, 1 of nbkeys, whatever the block size;
 *   LOOKUP 1  binary search of the block's sorted keys (lower bound): log2(block size) dependent reads;
 *   LOOKUP 2  list traversal: the block's keys one after the other until the key or a larger one.
 * All three return the same slot (tests/neighbourhood/test_neighbourhood_gpu.py compares them with numpy).
 *
 * Degenerated neighbourhoods: key ^ masks[m] for the n_masks XOR masks of mapper/neighbourhood/seeding.py
 * (at most NB_ERRORS non-zero 2-bit digits): every neighbourhood within that Hamming distance, each once.
 *
 * Patterns of a strand row (a read or its reverse complement, codes 0..3, CODE_N, in `rows`): at offsets
 * i = 0, step, 2 step, ... <= L - (MASK_LEN + NB_LEN); the seed is the bases at the set bits of SEED_BITS
 * (bit k = mask position k, first base most significant in the key), the neighbourhood the NB_LEN bases after
 * the mask (N packed as A, i.e. counted as a mismatch by the degenerated look-ups). A seed with an N is skipped.
 * A hit at reference position p gives the candidate (contig of p, diagonal p - i), encoded for sorting as
 *   key = contig << 40 | (p - i + 2^20)      (contig < 2^24, genome < 2^32, reads < 2^20 bases)
 *
 * Seed-and-filter (a block per row, a thread per pattern, as in the paper): sf_walk counts each row's hits;
 * the host turns the counts into row segments (prefix sums); sf_walk again writes each row's candidate keys
 * into its segment (unordered); sf_dedup sorts each segment (bitonic network in shared memory, or in the segment
 * itself when it does not fit) and compacts the distinct keys to its front; sf_gather packs the distinct
 * keys of all rows into one array. The host decodes them into (row, contig, diagonal), sorted and distinct:
 * exactly the numpy seeder's candidates.
 *
 * Index build (pb_*, further down): the same arrays as the numpy build, bit for bit (gpu_build.py).
 *
 * JIT constants (-D): LOOKUP, MASK_LEN, SEED_BITS, NB_LEN, and the 2-bit code (common.cuh). Every kernel checks
 * its index against n. The kernels without __syncthreads also run as host C++ (tests/host_cuda.py, one thread
 * at a time), with the atomicAdd below standing in for the device's.
 */
#include "common.cuh"

#ifndef LOOKUP
#define LOOKUP 0
#endif
#ifndef MASK_LEN
#define MASK_LEN 8
#endif
#ifndef SEED_BITS
#define SEED_BITS 0xFFu
#endif
#ifndef NB_LEN
#define NB_LEN 7
#endif
#define GOLDEN 0x9E3779B9u
#define DIAG_BIAS (1ll << 20)
#define SORT_CAP 2048  /* keys a row sorts in shared memory (16 KiB) */

typedef unsigned long long u64;

/* Bob Jenkins' lookup2 mix: three rounds of three subtract/xor-shift lines over the 96-bit state. */
__device__ __forceinline__ void mix(uint32_t &a, uint32_t &b, uint32_t &c)
{
    a -= b; a -= c; a ^= c >> 13;  b -= c; b -= a; b ^= a << 8;   c -= a; c -= b; c ^= b >> 13;
    a -= b; a -= c; a ^= c >> 12;  b -= c; b -= a; b ^= a << 16;  c -= a; c -= b; c ^= b >> 5;
    a -= b; a -= c; a ^= c >> 3;   b -= c; b -= a; b ^= a << 10;  c -= a; c -= b; c ^= b >> 15;
}

/* The block-local vertices of `key` in a block of member J and thirds of r: lookup2's mix of (0x9e3779b9 + key,
 * 0x9e3779b9, J + 4) (the hash of the key's 4 bytes) picks one vertex in each third. */
__device__ __forceinline__ void key_vertices(uint32_t key, uint32_t J, uint32_t r, long long v[3])
{
    uint32_t a = GOLDEN + key, b = GOLDEN, c = J + 4u;
    mix(a, b, c);
    v[0] = a % r;
    v[1] = r + (long long)(b % r);
    v[2] = 2ll * r + c % r;
}

__device__ __forceinline__ uint32_t g_at(const uint8_t *g, long long v)
{
    return (g[v >> 2] >> (2 * (v & 3))) & 3u;
}

struct Index {
    const long long *nboff;
    const uint32_t *nbkeys;
    const long long *posoff;
    const uint32_t *positions;
    const uint32_t *seed_j;
    const long long *voff;
    const uint8_t *g;
    const int *vslot;
};
/* The index travels as eight pointer arguments (PyCUDA and the host emulation pass no structs). */
#define INDEX_PARAMS const long long *nboff, const uint32_t *nbkeys, const long long *posoff, \
    const uint32_t *positions, const uint32_t *seed_j, const long long *voff, const uint8_t *g, const int *vslot
#define INDEX_MAKE const Index ix = {nboff, nbkeys, posoff, positions, seed_j, voff, g, vslot}

/* Slot of `key` in seed block `block`, or -1 (the method is LOOKUP; see the header). */
__device__ __forceinline__ long long find_slot(const Index &ix, long long block, uint32_t key)
{
#if LOOKUP == 0
    long long v0 = ix.voff[block];
    uint32_t r = (uint32_t)((ix.voff[block + 1] - v0) / 3);
    if (r == 0)
        return -1;
    long long v[3];
    key_vertices(key, ix.seed_j[block], r, v);
    uint32_t j = (g_at(ix.g, v0 + v[0]) + g_at(ix.g, v0 + v[1]) + g_at(ix.g, v0 + v[2])) % 3u;
    long long slot = ix.vslot[v0 + v[j]];
    return slot >= 0 && ix.nbkeys[slot] == key ? slot : -1;
#elif LOOKUP == 1
    long long lo = ix.nboff[block], hi = ix.nboff[block + 1], end = hi;
    while (lo < hi) {
        long long mid = (lo + hi) >> 1;
        if (ix.nbkeys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < end && ix.nbkeys[lo] == key ? lo : -1;
#else
    long long at = ix.nboff[block], end = ix.nboff[block + 1];
    while (at < end && ix.nbkeys[at] < key)
        ++at;
    return at < end && ix.nbkeys[at] == key ? at : -1;
#endif
}

/* nb_lookup: one thread per query (block[i], key[i]); looks up every degenerated neighbourhood key ^ masks[m].
 * Out: slot0[i] = slot of the exact key (or -1); hits[i] = positions found over all n_masks variants.
 * This is the kernel of the paper's Figure 8 (neighbourhoods processed per second). */
extern "C" __global__ void nb_lookup(const long long *block, const uint32_t *key, int n, const uint32_t *masks,
                                     int n_masks, INDEX_PARAMS, long long *slot0, long long *hits)
{
    INDEX_MAKE;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    long long total = 0, first = -1;
    for (int m = 0; m < n_masks; ++m) {
        long long slot = find_slot(ix, block[i], key[i] ^ masks[m]);
        if (m == 0)
            first = slot;
        if (slot >= 0)
            total += ix.posoff[slot + 1] - ix.posoff[slot];
    }
    slot0[i] = first;
    hits[i] = total;
}

/* Seed and neighbourhood keys of the pattern at `start` in the row codes; false when the seed has an N. */
__device__ __forceinline__ bool pattern_keys(const uint8_t *rows, long long start, uint32_t &seed, uint32_t &nb)
{
    seed = 0;
    nb = 0;
    for (int k = 0; k < MASK_LEN; ++k) {
        if (!((SEED_BITS >> k) & 1u))
            continue;
        uint8_t c = rows[start + k];
        if (c == CODE_N)
            return false;
        seed = seed << 2 | (c & 3u);
    }
    for (int k = 0; k < NB_LEN; ++k)
        nb = nb << 2 | (rows[start + MASK_LEN + k] & 3u);
    return true;
}

/* Number of patterns of row `row` (0 for an inactive or too short row). */
__device__ __forceinline__ int n_patterns(const long long *row_len, const uint8_t *active, int row, int step)
{
    long long width = MASK_LEN + NB_LEN;
    return active[row] && row_len[row] >= width ? (int)((row_len[row] - width) / step) + 1 : 0;
}

/* Contig of global position p: the last contig start <= p (binary search of n_contigs starts). */
__device__ __forceinline__ long long contig_of(const long long *contig_starts, int n_contigs, long long p)
{
    int lo = 0, hi = n_contigs;
    while (hi - lo > 1) {
        int mid = (lo + hi) >> 1;
        if (contig_starts[mid] <= p)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* sf_walk: block row_base + blockIdx.x is one strand row (row_base: chunks of rows, and the host emulation);
 * its threads take its patterns in turn (a thread per pattern when the row has at most blockDim.x of them) and
 * look up every degenerated neighbourhood of each. Two passes over the same walk:
 *   count (out == NULL): adds the row's looked-up patterns and hits to n_looked[row], n_hits[row] (zeroed);
 *   emit  (out != NULL): every hit's candidate key goes to the row's segment, out[seg[row] + fill[row]++]
 *                        (fill zeroed by the host; the segment has exactly the counted size). */
extern "C" __global__ void sf_walk(const uint8_t *rows, const long long *row_start, const long long *row_len,
                                   const uint8_t *active, int n_rows, int step, const uint32_t *masks,
                                   int n_masks, INDEX_PARAMS, const long long *contig_starts, int n_contigs,
                                   const long long *seg, u64 *fill, u64 *out, u64 *n_looked, u64 *n_hits,
                                   int row_base)
{
    INDEX_MAKE;
    int row = row_base + blockIdx.x;
    if (row >= n_rows)
        return;
    int np = n_patterns(row_len, active, row, step);
    for (int p = threadIdx.x; p < np; p += blockDim.x) {
        uint32_t seed, nb;
        long long offset = (long long)p * step;
        if (!pattern_keys(rows, row_start[row] + offset, seed, nb))
            continue;
        u64 total = 0;
        for (int m = 0; m < n_masks; ++m) {
            long long slot = find_slot(ix, seed, nb ^ masks[m]);
            if (slot < 0)
                continue;
            total += ix.posoff[slot + 1] - ix.posoff[slot];
            for (long long k = ix.posoff[slot]; out && k < ix.posoff[slot + 1]; ++k) {
                long long pos = ix.positions[k];
                u64 key = (u64)contig_of(contig_starts, n_contigs, pos) << 40 | (u64)(pos - offset + DIAG_BIAS);
                out[seg[row] + atomicAdd(&fill[row], 1ull)] = key;
            }
        }
        if (!out) {
            atomicAdd(&n_looked[row], 1ull);
            atomicAdd(&n_hits[row], total);
        }
    }
}

/* sf_gather: block row_base + blockIdx.x copies the n_unique[row] distinct keys at the front of its segment
 * to out[out_off[row] ...]. */
extern "C" __global__ void sf_gather(const u64 *keys, const long long *seg, const long long *n_unique,
                                     const long long *out_off, int n_rows, u64 *out, int row_base)
{
    int row = row_base + blockIdx.x;
    if (row >= n_rows)
        return;
    for (long long k = threadIdx.x; k < n_unique[row]; k += blockDim.x)
        out[out_off[row] + k] = keys[seg[row] + k];
}

/* ---- Index build on the GPU (mapper/neighbourhood/gpu_build.py): index.py's and hashing.py's arrays, bit for
 * bit. Reference patterns go into seed buckets as words nb << 32 | position (pb_count, pb_scatter); each bucket
 * is sorted (pb_sort: (neighbourhood, position) order, the cpu's sort); then a thread per bucket finds its
 * distinct neighbourhoods (pb_runs, pb_emit) and builds its perfect hash (pb_peel); pb_pack packs g. ---- */

/* Seed and neighbourhood keys of the reference pattern at global position p: false when its window
 * [p, p + MASK_LEN + NB_LEN) leaves p's contig or has an N on a seed or neighbourhood base (not indexed). */
__device__ __forceinline__ bool ref_pattern(const uint8_t *codes, const long long *starts, const long long *ends,
                                            int n_contigs, long long p, uint32_t &seed, uint32_t &nb)
{
    if (p + MASK_LEN + NB_LEN > ends[contig_of(starts, n_contigs, p)])
        return false;
    seed = 0;
    nb = 0;
    for (int k = 0; k < MASK_LEN + NB_LEN; ++k) {
        bool in_seed = k < MASK_LEN && ((SEED_BITS >> k) & 1u);
        if (k < MASK_LEN && !in_seed)
            continue;
        uint8_t c = codes[p + k];
        if (c == CODE_N)
            return false;
        if (in_seed)
            seed = seed << 2 | (c & 3u);
        else
            nb = nb << 2 | (c & 3u);
    }
    return true;
}

/* pb_count: one thread per start p < n; count[seed] += 1 for each indexed pattern (count zeroed). */
extern "C" __global__ void pb_count(const uint8_t *codes, long long n, const long long *starts,
                                    const long long *ends, int n_contigs, u64 *count)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t seed, nb;
    if (p < n && ref_pattern(codes, starts, ends, n_contigs, p, seed, nb))
        atomicAdd(&count[seed], 1ull);
}

/* pb_scatter: the same walk; the pattern's word nb << 32 | p goes to its seed's bucket,
 * words[boff[seed] + fill[seed]++] (boff: prefix sums of pb_count's counts; fill zeroed); unordered. */
extern "C" __global__ void pb_scatter(const uint8_t *codes, long long n, const long long *starts,
                                      const long long *ends, int n_contigs, const long long *boff, u64 *fill,
                                      u64 *words)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t seed, nb;
    if (p < n && ref_pattern(codes, starts, ends, n_contigs, p, seed, nb))
        words[boff[seed] + atomicAdd(&fill[seed], 1ull)] = (u64)nb << 32 | (u64)p;
}

/* pb_runs: one thread per seed bucket s (sorted words[boff[s] .. boff[s+1])): m[s] = its distinct
 * neighbourhoods, the size of block s. */
extern "C" __global__ void pb_runs(const u64 *words, const long long *boff, int n_buckets, long long *m)
{
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n_buckets)
        return;
    long long count = 0;
    for (long long k = boff[s]; k < boff[s + 1]; ++k)
        count += k == boff[s] || words[k] >> 32 != words[k - 1] >> 32;
    m[s] = count;
}

/* pb_emit: one thread per seed bucket s: its distinct neighbourhoods become slots nboff[s] ... (nbkeys), a slot's
 * positions start at its first word (posoff; the words are already in (nb, position) order) and every word's
 * low 32 bits go to positions. */
extern "C" __global__ void pb_emit(const u64 *words, const long long *boff, const long long *nboff, int n_buckets,
                                   uint32_t *nbkeys, long long *posoff, uint32_t *positions)
{
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n_buckets)
        return;
    long long slot = nboff[s];
    for (long long k = boff[s]; k < boff[s + 1]; ++k) {
        if (k == boff[s] || words[k] >> 32 != words[k - 1] >> 32) {
            nbkeys[slot] = (uint32_t)(words[k] >> 32);
            posoff[slot++] = k;
        }
        positions[k] = (uint32_t)words[k];
    }
}

/* pb_peel: one thread builds the perfect hash of seed block s (slots nboff[s] .., m keys, vertices voff[s] ..,
 * 3 thirds of r): hashing.py's construction, which this reproduces exactly.
 * For J = 0, 1, ... (at most max_attempts): degrees and xor of incident edge ids (local slot numbers) of the 3r
 * vertices; a FIFO queue starts with every vertex of degree 1. A round takes the queue's current entries:
 *   A. (degrees frozen) each entry still of degree 1 names its edge e = xor; e, if not yet taken, is peeled
 *      this round, freed by its first vertex of degree 1 (state[e] = 1 + that position), listed in order[];
 *   B. the round's edges leave the graph; a vertex whose degree drops to 1 joins the queue (next round).
 * That is the cpu's synchronous rounds, whatever the order inside one. All m edges peeled: in reverse peeling
 * order each edge gives its free vertex u g[u] = (position - the other two g) mod 3 (the other two are final:
 * see hashing.py) and vslot[u] = its slot; else J + 1. failed[0] counts blocks with no acyclic member.
 * Scratch (global): degree, xorid, queue [V], order [S], state [S]; g1 (one byte a vertex, zeroed),
 * vslot (-1) and seed_j are the outputs. */
extern "C" __global__ void pb_peel(const uint32_t *nbkeys, const long long *nboff, const long long *voff,
                                   int n_buckets, int max_attempts, uint32_t *degree, uint32_t *xorid,
                                   uint32_t *queue, uint32_t *order, uint8_t *state, uint8_t *g1, int *vslot,
                                   uint32_t *seed_j, u64 *failed)
{
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n_buckets)
        return;
    const uint32_t *keys = nbkeys + nboff[s];
    uint32_t m = (uint32_t)(nboff[s + 1] - nboff[s]);
    long long v0 = voff[s];
    uint32_t nv = (uint32_t)(voff[s + 1] - v0), r = nv / 3;
    seed_j[s] = 0;
    if (m == 0)
        return;
    uint32_t *deg = degree + v0, *inc = xorid + v0, *fifo = queue + v0, *peeled = order + nboff[s];
    uint8_t *st = state + nboff[s];
    for (uint32_t J = 0; J < (uint32_t)max_attempts; ++J) {
        long long v[3];
        for (uint32_t u = 0; u < nv; ++u)
            deg[u] = inc[u] = 0;
        for (uint32_t e = 0; e < m; ++e) {
            key_vertices(keys[e], J, r, v);
            for (int k = 0; k < 3; ++k) {
                deg[v[k]] += 1;
                inc[v[k]] ^= e;
            }
            st[e] = 0;
        }
        uint32_t head = 0, tail = 0, n_peeled = 0;
        for (uint32_t u = 0; u < nv; ++u)
            if (deg[u] == 1)
                fifo[tail++] = u;
        while (head < tail) {
            uint32_t round_end = tail, round_first = n_peeled;
            for (; head < round_end; ++head) {
                uint32_t u = fifo[head], e = inc[u];
                if (deg[u] != 1 || st[e])
                    continue;
                key_vertices(keys[e], J, r, v);
                st[e] = deg[v[0]] == 1 ? 1 : deg[v[1]] == 1 ? 2 : 3;
                peeled[n_peeled++] = e;
            }
            for (uint32_t i = round_first; i < n_peeled; ++i) {
                uint32_t e = peeled[i];
                key_vertices(keys[e], J, r, v);
                for (int k = 0; k < 3; ++k) {
                    inc[v[k]] ^= e;
                    if (--deg[v[k]] == 1)
                        fifo[tail++] = (uint32_t)v[k];
                }
            }
        }
        if (n_peeled < m)
            continue;
        for (uint32_t i = n_peeled; i-- > 0;) {
            uint32_t e = peeled[i];
            int j = st[e] - 1;
            key_vertices(keys[e], J, r, v);
            int others = g1[v0 + v[0]] + g1[v0 + v[1]] + g1[v0 + v[2]] - g1[v0 + v[j]];
            g1[v0 + v[j]] = (uint8_t)(((j - others) % 3 + 3) % 3);
            vslot[v0 + v[j]] = (int)(nboff[s] + e);
        }
        seed_j[s] = J;
        return;
    }
    atomicAdd(failed, 1ull);
}

/* pb_pack: one thread per output byte i: vertices 4i .. 4i+3 of g1 (one byte each, n_vertices) as 2 bits
 * each, vertex 4i in the low bits (hashing.py's layout). */
extern "C" __global__ void pb_pack(const uint8_t *g1, long long n_vertices, uint8_t *g)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (n_vertices + 3) / 4)
        return;
    uint32_t byte = 0;
    for (int k = 0; k < 4; ++k)
        if (4 * i + k < n_vertices)
            byte |= (uint32_t)g1[4 * i + k] << (2 * k);
    g[i] = (uint8_t)byte;
}

#ifdef __CUDACC__
/* Sort a[0..n) ascending with the block's threads: a bitonic network in its all-ascending form (each merge
 * starts by comparing i with its mirror i ^ (2h - 1), then half-cleans with i ^ h), so that the virtual
 * padding up to a power of two acts as +infinity and never moves. */
__device__ void block_sort(u64 *a, long long n)
{
    long long size = 1;
    while (size < n)
        size <<= 1;
    for (long long h = 1; h < size; h <<= 1) {
        for (long long d = h; d > 0; d >>= 1) {
            for (long long t = threadIdx.x; t < size / 2; t += blockDim.x) {
                long long lo = (t / d) * 2 * d + t % d;
                long long hi = d == h ? (lo | (2 * d - 1)) - (lo & (2 * d - 1)) : lo + d;
                if (hi < n && a[hi] < a[lo]) {
                    u64 x = a[lo];
                    a[lo] = a[hi];
                    a[hi] = x;
                }
            }
            __syncthreads();
        }
    }
}

/* sf_dedup: block row_base + blockIdx.x sorts its row's segment keys[seg[row] .. + count[row]) (in shared
 * memory when it fits) and writes the distinct keys, in order, to the front of the segment; n_unique[row] is
 * their number. Compaction: a block-wide prefix sum of "differs from its predecessor" flags, a chunk of
 * blockDim.x keys at a time. blockDim.x must be a power of two <= 1024. */
extern "C" __global__ void sf_dedup(u64 *keys, const long long *seg, const long long *count, int n_rows,
                                    long long *n_unique, int row_base)
{
    __shared__ u64 buf[SORT_CAP];
    __shared__ int scan[1024];
    int row = row_base + blockIdx.x;
    if (row >= n_rows)
        return;
    long long n = count[row];
    u64 *seg_keys = keys + seg[row];
    u64 *a = n <= SORT_CAP ? buf : seg_keys;
    if (n <= SORT_CAP)
        for (long long k = threadIdx.x; k < n; k += blockDim.x)
            a[k] = seg_keys[k];
    __syncthreads();
    block_sort(a, n);
    long long written = 0;
    for (long long base = 0; base < n; base += blockDim.x) {
        long long k = base + threadIdx.x;
        int flag = k < n && (k == 0 || a[k] != a[k - 1]);
        u64 value = k < n ? a[k] : 0;
        scan[threadIdx.x] = flag;
        __syncthreads();
        for (int s = 1; s < blockDim.x; s <<= 1) {  /* Hillis-Steele inclusive scan */
            int add = threadIdx.x >= s ? scan[threadIdx.x - s] : 0;
            __syncthreads();
            scan[threadIdx.x] += add;
            __syncthreads();
        }
        int total = scan[blockDim.x - 1];
        __syncthreads();  /* every thread read a[k - 1] and the total before anything is overwritten */
        if (flag)
            seg_keys[written + scan[threadIdx.x] - 1] = value;
        written += total;
        __syncthreads();
    }
    if (threadIdx.x == 0)
        n_unique[row] = written;
}
/* pb_sort: block bucket_base + blockIdx.x sorts its bucket words[boff[s] .. boff[s+1]) ascending (bitonic,
 * in shared memory when it fits, else in place): (neighbourhood, position) order. */
extern "C" __global__ void pb_sort(u64 *words, const long long *boff, int n_buckets, int bucket_base)
{
    __shared__ u64 buf[SORT_CAP];
    int s = bucket_base + blockIdx.x;
    if (s >= n_buckets)
        return;
    long long n = boff[s + 1] - boff[s];
    u64 *seg = words + boff[s];
    u64 *a = n <= SORT_CAP ? buf : seg;
    if (n <= SORT_CAP)
        for (long long k = threadIdx.x; k < n; k += blockDim.x)
            a[k] = seg[k];
    __syncthreads();
    block_sort(a, n);
    if (n <= SORT_CAP)
        for (long long k = threadIdx.x; k < n; k += blockDim.x)
            seg[k] = a[k];
}
#endif
