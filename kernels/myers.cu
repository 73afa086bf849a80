/* myers.cu: verification of candidate windows on the GPU, one thread per window.
 *
 * What it computes (the contract of mapper/verify.py, which computes the same on the host): for the read
 * R (length L) and its window T (length W), D[j] = D[L][j], the semi-global edit distance of the whole
 * read ending at column j (free start in T), and the window's *cover*:
 *   repeat: take the column j with the fewest edits D[j] <= e (leftmost on ties) among those not yet
 *           covered, and cover every column within e of j;
 *   best   = the fewest edits D[j] of the window, or -1 when it is above e;
 *   ends   = the taken columns (0-based, inclusive), in the order taken; edits = their D[j];
 *   starts = for each end, the leftmost s such that the global distance NW(R, T[s..end]) == D[end].
 * The cover keeps every end within e of a reported one without chaining ends transitively (mapper/verify.py
 * select_loci turns the windows' covers into the read's loci). N never matches: a read N sets no bit of
 * any Peq mask, a reference N (code CODE_N) has Eq = 0.
 *
 * Algorithm: Myers' bit-vector edit distance (J. ACM 46(3), 1999) in the block form of Hyyrö (2003):
 * the column of D is held as vertical delta vectors Pv (+1) and Mv (-1), one bit per read row, in
 * ceil(L/64) 64-bit words; a reference base advances one column. Per word, with Eq = Peq[base]:
 *     Xv = Eq | Mv
 *     Xh = (((Eq & Pv) + Pv) ^ Pv) | Eq          (Eq also gets bit 0 set when the carry-in hin is -1)
 *     Ph = Mv | ~(Xh | Pv),  Mh = Pv & Xh        horizontal deltas +1 / -1
 *     hout = top bit of Ph - top bit of Mh       carried into the next word as its hin
 *     Ph = Ph << 1 | (hin == +1),  Mh = Mh << 1 | (hin == -1)
 *     Pv = Mh | ~(Xv | Ph),  Mv = Ph & Xv
 * The score of the last row moves by (Ph - Mh) at bit (L-1) of the last word, read before the shift.
 * Boundaries: the first column D[i][0] = i (Pv all ones, score L). The top row is free in the forward,
 * semi-global pass (hin = 0 into word 0) and costs one per column in the reverse prefix pass (hin = +1).
 *
 * The cover is taken level by level from the stored last row D (one byte a column): for d = best..e, a
 * left-to-right sweep takes each column still at d and overwrites its e-neighbourhood with 255, which is the
 * order (d, column) of the rule exactly.
 *
 * Starts: for each end, a second pass aligns the reversed read against the window read backwards from
 * that end (prefix mode, anchored at the end); the largest column whose last-row score equals the end's
 * distance gives the leftmost start. That is exactly how edlib finds its start locations.
 *
 * In : genome      uint8  [G]   codes 0..3, CODE_N; resident for the whole run
 *      reads       uint8  [R]   the batch's strand rows, concatenated codes
 *      read_start  int64  [n]   first base of each window's read in `reads`; read_len int32 [n]
 *      max_e       int32  [n]   e of each window's read
 *      win_start   int64  [n]   first genome base of each window; win_len int32 [n]
 *      win_skip    int32  [n]   or null: leading columns that are not ends (alignments may still start
 *                              there): locus refinement (mapper/verify.py) covers only a stretch's zone
 * Out: best       int32  [n]   the window's fewest edits, or -1
 *      n_ends     int32  [n]   number of taken ends; more than MAX_ENDS, or a window longer than MAX_WIN,
 *                              is reported as MAX_ENDS + 1 and verify_wide (below) redoes the window
 *      ends, starts, edits int32 [MAX_ENDS * n], word-major (ends[k * n + i]), relative to the window start
 * JIT constants (-D): MAX_WORDS = ceil(longest read / 64), MAX_ENDS, MAX_WIN (the longest window,
 * L + 3e for a band of e + 1 diagonals), CODE_N.
 */
#include "common.cuh"

#ifndef MAX_WORDS
#define MAX_WORDS 4
#endif
#ifndef MAX_ENDS
#define MAX_ENDS 8
#endif
#ifndef MAX_WIN
#define MAX_WIN (64 * MAX_WORDS + 76)
#endif
typedef unsigned long long u64;

/* A window is a random place in the genome, a cache miss that the host's thread waited for at its first
 * base (a fifth of the verifier's samples on human chr20): there the window AHEAD on is fetched early
 * (PREFETCH, common.cuh; nothing on the GPU, whose many threads hide the latency). Human chr20, 10,000
 * reads, one core: verify_windows 0.33-0.36 s -> 0.27-0.30 s (2, 8 and 16 ahead did the same). */
#define AHEAD 4

/* PEQ(w): word w of the Peq mask of `base` (0 for N). A GPU predicates the chain of selects; compiled for the
 * host, the chain became branches that random bases mispredict, and one load from a table of the four masks
 * (codes 0-3, common.cuh) verifies a 150 bp window about 12 % faster. The table stays off the GPU, where
 * indexing a register array by a runtime value would move it to local memory. */
#ifdef GKMAP_HOST
#if CODE_A != 0 || CODE_C != 1 || CODE_G != 2 || CODE_T != 3
#error "PEQ's table needs the codes A, C, G, T = 0, 1, 2, 3"
#endif
#define PEQ(w) (base < 4 ? masks[base][w] : 0ull)
#define PEQ_TABLE const u64 *masks[4] = {pA, pC, pG, pT};
#else
#define PEQ(w) (base == CODE_A ? pA[w] : base == CODE_C ? pC[w] : base == CODE_G ? pG[w] : base == CODE_T ? pT[w] : 0ull)
#define PEQ_TABLE
#endif

/* One column step of the block algorithm over nw words (the loop bound is a compile-time constant so
 * that the register arrays stay in registers). Returns the last row's score change. */
__device__ __forceinline__ int advance(u64 (&Pv)[MAX_WORDS], u64 (&Mv)[MAX_WORDS],
                                       const u64 (&pA)[MAX_WORDS], const u64 (&pC)[MAX_WORDS],
                                       const u64 (&pG)[MAX_WORDS], const u64 (&pT)[MAX_WORDS],
                                       uint8_t base, int nw, int last_bit, int top_hin)
{
    PEQ_TABLE
    int hin = top_hin;
    int delta = 0;
#pragma unroll
    for (int w = 0; w < MAX_WORDS; ++w) {
        if (w < nw) {
            u64 Eq = PEQ(w);
            const u64 hin_neg = hin < 0 ? 1ull : 0ull;
            const u64 Xv = Eq | Mv[w];
            Eq |= hin_neg;
            const u64 Xh = (((Eq & Pv[w]) + Pv[w]) ^ Pv[w]) | Eq;
            u64 Ph = Mv[w] | ~(Xh | Pv[w]);
            u64 Mh = Pv[w] & Xh;
            if (w == nw - 1)
                delta = (int)((Ph >> last_bit) & 1ull) - (int)((Mh >> last_bit) & 1ull);
            const int hout = (int)(Ph >> 63) - (int)(Mh >> 63);
            Ph = (Ph << 1) | (hin > 0 ? 1ull : 0ull);
            Mh = (Mh << 1) | hin_neg;
            Pv[w] = Mh | ~(Xv | Ph);
            Mv[w] = Ph & Xv;
            hin = hout;
        }
    }
    return delta;
}

#ifdef GKMAP_HOST
#include <stdlib.h>
/* The masks a host thread built last (build_peq), forward [0] and reversed [1], and the read they are of.
 * On the heap, reached through one pointer of thread-local storage: a library's thread-local variables
 * come out of the process's small static TLS block (the kernels' blockIdx and threadIdx are initial-exec),
 * which arrays of masks, one set per MAX_WORDS build, exhausted after five builds, and the next kernel
 * library then failed to load. One block per thread and build, kept for the process's life. */
struct HeldPeq {
    const uint8_t *read[2];
    int len[2];
    u64 masks[2][4][MAX_WORDS];
};
GKMAP_TLS HeldPeq *held_peq;
#endif

#if defined(GKMAP_HOST) && defined(__SSE2__)
#include <emmintrin.h>
#include <string.h>
/* The bits of x in reverse order (bit 0 <-> bit 63). */
static inline u64 reverse_bits(u64 x)
{
    x = __builtin_bswap64(x);
    x = ((x >> 4) & 0x0F0F0F0F0F0F0F0Full) | ((x & 0x0F0F0F0F0F0F0F0Full) << 4);
    x = ((x >> 2) & 0x3333333333333333ull) | ((x & 0x3333333333333333ull) << 2);
    return ((x >> 1) & 0x5555555555555555ull) | ((x & 0x5555555555555555ull) << 1);
}

/* build_peq's masks on an x86-64 host: 16 bases compared with each code at once and their bits collected
 * by movemask (SSE2, which every x86-64 processor has), where the loop over bases spent a fifth of the
 * verifier's time on Shigella's 150 bp reads (one or two windows a read, so the kept masks rarely serve).
 * The reversed read's masks are the forward ones with the read's L bits in reverse order: the 64
 * MAX_WORDS-bit number reversed word by word, then shifted down by 64 MAX_WORDS - L. */
static inline void peq_sse2(const uint8_t *read, int len, int reverse, u64 (&pA)[MAX_WORDS],
                            u64 (&pC)[MAX_WORDS], u64 (&pG)[MAX_WORDS], u64 (&pT)[MAX_WORDS])
{
    u64 *const out[4] = {pA, pC, pG, pT};
    const __m128i code[4] = {_mm_set1_epi8(CODE_A), _mm_set1_epi8(CODE_C), _mm_set1_epi8(CODE_G),
                             _mm_set1_epi8(CODE_T)};
    for (int w = 0; w < MAX_WORDS; ++w) {
        u64 bits[4] = {0ull, 0ull, 0ull, 0ull};
        for (int q = 0; q < 4 && w * 64 + q * 16 < len; ++q) {
            const int i = w * 64 + q * 16;
            __m128i v;
            if (i + 16 <= len) {
                v = _mm_loadu_si128((const __m128i *)(read + i));
            } else { /* the read's last bases, padded with a byte that is no code */
                uint8_t tail[16];
                memset(tail, 0xff, sizeof tail);
                memcpy(tail, read + i, len - i);
                v = _mm_loadu_si128((const __m128i *)tail);
            }
            for (int x = 0; x < 4; ++x)
                bits[x] |= (u64)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, code[x])) << (16 * q);
        }
        for (int x = 0; x < 4; ++x)
            out[x][w] = bits[x];
    }
    if (!reverse)
        return;
    const int shift = 64 * MAX_WORDS - len; /* 0 <= shift < 64 * MAX_WORDS */
    const int words = shift / 64, bits = shift % 64;
    for (int x = 0; x < 4; ++x) {
        u64 full[MAX_WORDS];
        for (int k = 0; k < MAX_WORDS; ++k)
            full[k] = reverse_bits(out[x][MAX_WORDS - 1 - k]);
        for (int k = 0; k < MAX_WORDS; ++k) {
            const int from = k + words;
            const u64 low = from < MAX_WORDS ? full[from] : 0ull;
            const u64 high = from + 1 < MAX_WORDS ? full[from + 1] : 0ull;
            out[x][k] = bits ? (low >> bits) | (high << (64 - bits)) : low;
        }
    }
}
#endif

/* Peq masks of the read, forward (reverse = 0) or reversed (reverse = 1): bit i of word i/64 of pX is
 * set when read base i (of the possibly reversed read) is X.
 * On the host a launch's block of threads runs in order on one OpenMP thread, and consecutive windows are
 * mostly one read's (candidates come in read order), so the masks last built there are kept and reused
 * while the read is the same one (the same bases at the same address: within one block, hence one launch;
 * the block's first thread drops what an earlier launch left). Human chr20, 10,000 reads, one core:
 * verify_windows 0.27-0.28 s -> 0.24-0.25 s; on the GPU each thread builds its own. */
__device__ __forceinline__ void build_peq(const uint8_t *read, int len, int reverse,
                                          u64 (&pA)[MAX_WORDS], u64 (&pC)[MAX_WORDS],
                                          u64 (&pG)[MAX_WORDS], u64 (&pT)[MAX_WORDS])
{
#ifdef GKMAP_HOST
    if (!held_peq) /* once per OpenMP thread; without it, no masks are kept */
        held_peq = (HeldPeq *)calloc(1, sizeof(HeldPeq));
    HeldPeq *const held = held_peq;
    if (held && threadIdx.x == 0)
        held->read[0] = held->read[1] = nullptr;
    if (held && held->read[reverse] == read && held->len[reverse] == len) {
        for (int w = 0; w < MAX_WORDS; ++w) {
            pA[w] = held->masks[reverse][0][w];
            pC[w] = held->masks[reverse][1][w];
            pG[w] = held->masks[reverse][2][w];
            pT[w] = held->masks[reverse][3][w];
        }
        return;
    }
#endif
#if defined(GKMAP_HOST) && defined(__SSE2__)
    peq_sse2(read, len, reverse, pA, pC, pG, pT);
#else
#pragma unroll
    for (int w = 0; w < MAX_WORDS; ++w) {
        u64 a = 0, c = 0, g = 0, t = 0;
        for (int b = 0; b < 64; ++b) {
            const int i = w * 64 + b;
            if (i >= len)
                break;
            const uint8_t base = read[reverse ? len - 1 - i : i];
            const u64 bit = 1ull << b;
            a |= base == CODE_A ? bit : 0ull;
            c |= base == CODE_C ? bit : 0ull;
            g |= base == CODE_G ? bit : 0ull;
            t |= base == CODE_T ? bit : 0ull;
        }
        pA[w] = a; pC[w] = c; pG[w] = g; pT[w] = t;
    }
#endif
#ifdef GKMAP_HOST
    if (!held)
        return;
    held->read[reverse] = read;
    held->len[reverse] = len;
    for (int w = 0; w < MAX_WORDS; ++w) {
        held->masks[reverse][0][w] = pA[w];
        held->masks[reverse][1][w] = pC[w];
        held->masks[reverse][2][w] = pG[w];
        held->masks[reverse][3][w] = pT[w];
    }
#endif
}

__device__ __forceinline__ void reset(u64 (&Pv)[MAX_WORDS], u64 (&Mv)[MAX_WORDS])
{
#pragma unroll
    for (int w = 0; w < MAX_WORDS; ++w) {
        Pv[w] = ~0ull;
        Mv[w] = 0ull;
    }
}

/* The forward, semi-global pass: D[j] = the last row at column j (one byte, 255 for the `skip` leading
 * columns and for distances above 254) for j < W. Returns the fewest edits over the columns from `skip`
 * on, or e + 1 when none is within e.
 * Two cuts keep the pass to the cells that can hold a distance within e:
 *   - Words of the read join as their rows come within reach (Ukkonen's cut-off, as edlib's blocks do): an
 *     alignment of the first r read bases ending at column c consumed at most c window bases, so
 *     D[r][c] >= r - c, and word w (rows 64w + 1 ..) is not computed before column 64w + 1 - e. It then
 *     starts from the row above it plus one a row (Pv all ones): those values are at least the true ones,
 *     which are all above e there, so every cell within e is still exact (its optimal path runs through
 *     cells within e) and the rest stay above e. `score` follows the bottom row of the last computed word
 *     (the last row once all are): it moves by that word's carry out (advance's delta at bit 63).
 *   - Once the last row's score exceeds e by more than the columns left, no later column can come within
 *     e (the last row moves by at most one a column): the pass stops there and the rest of D is 255 (a
 *     candidate window that is no alignment, most of them, stops about a third of the way before its end).
 * For 100 bp reads a failing window then costs about one word-step a column instead of two. */
__device__ __forceinline__ int last_row(const uint8_t *read, int L, const uint8_t *win, int W, int skip, int e,
                                        uint8_t *D)
{
    u64 pA[MAX_WORDS], pC[MAX_WORDS], pG[MAX_WORDS], pT[MAX_WORDS], Pv[MAX_WORDS], Mv[MAX_WORDS];
    const int nw = (L + 63) / 64, last_bit = (L - 1) & 63;
    build_peq(read, L, 0, pA, pC, pG, pT);
    reset(Pv, Mv);
    int active = 1; /* words computed: word `active` joins at column 64 active + 1 - e (step j = 64 active - e) */
    while (active < nw && 64 * active - e <= 0)
        ++active;
    int score = active == nw ? L : 64 * active, best = e + 1;
    for (int j = 0; j < W; ++j) {
        if (active < nw && j >= 64 * active - e) {
            score += (active == nw - 1 ? L : 64 * (active + 1)) - 64 * active;
            ++active;
        }
        const bool full = active == nw;
        score += advance(Pv, Mv, pA, pC, pG, pT, win[j], active, full ? last_bit : 63, 0);
        D[j] = j < skip || !full ? 255 : (uint8_t)min(score, 255);
        if (full && j >= skip)
            best = min(best, score);
        if (full && score - (W - 1 - j) > e) {
            for (int rest = j + 1; rest < W; ++rest)
                D[rest] = 255;
            break;
        }
    }
    return best;
}

/* The leftmost start of an alignment of the whole read costing d and ending at win[end] (the reverse
 * prefix pass, see above; the reversed read's masks in pA..pT). An alignment of L read bases with d edits
 * spans at most L + d reference bases. The words of the read join as last_row's do, with d for e: anchored
 * at the end, the first r reversed read bases against c window bases cost at least r - c, so word w is
 * above d before column 64w + 1 - d, and every cell within d (all this pass reads: the last row where it
 * equals d) comes out exact. For 100 bp reads that spares about a quarter of the pass's word-steps. */
__device__ __forceinline__ int leftmost_start(const u64 (&pA)[MAX_WORDS], const u64 (&pC)[MAX_WORDS],
                                              const u64 (&pG)[MAX_WORDS], const u64 (&pT)[MAX_WORDS],
                                              const uint8_t *win, int L, int end, int d)
{
    u64 Pv[MAX_WORDS], Mv[MAX_WORDS];
    const int nw = (L + 63) / 64, last_bit = (L - 1) & 63;
    reset(Pv, Mv);
    int active = 1; /* words computed, as in last_row */
    while (active < nw && 64 * active - d <= 0)
        ++active;
    int s = active == nw ? L : 64 * active, farthest = 0;
    const int span = min(end + 1, L + d);
    for (int j = 1; j <= span; ++j) {
        if (active < nw && j - 1 >= 64 * active - d) {
            s += (active == nw - 1 ? L : 64 * (active + 1)) - 64 * active;
            ++active;
        }
        const bool full = active == nw;
        s += advance(Pv, Mv, pA, pC, pG, pT, win[end - (j - 1)], active, full ? last_bit : 63, 1);
        if (full && s == d)
            farthest = j;
    }
    return end - farthest + 1;
}

#define START_SLOTS 16 /* ends whose starts leftmost_starts remembers (a power of two) */
#ifndef START_HASH_MASK
#define START_HASH_MASK 0xffffffffffffffffull /* tests set 0: every end then hashes alike, and the byte
                                               * comparison alone must tell the texts apart */
#endif

/* leftmost_start of each of `count` ends (window columns ends[k], costs edits[k]) into starts[k], for a
 * cover that may take hundreds of ends in one window: a tandem repeat's. The reverse pass reads nothing
 * but d and the span of text before the end (win[end - span + 1 .. end], span = min(end + 1, L + d)), so
 * an end whose d and span of text equal an earlier end's has its start at the same distance: in a repeat
 * of period p, ends p apart with the same cost see the same text. Earlier ends are found through a hash
 * of (d, span, text) in START_SLOTS slots and confirmed byte for byte; the others run the pass. The pass
 * costs about L + d columns of the read's words for every end where the window's own pass cost one
 * column an end: in the refinement of the render processes' repeat stretches it was most of verify_wide. */
__device__ __forceinline__ void leftmost_starts(const u64 (&pA)[MAX_WORDS], const u64 (&pC)[MAX_WORDS],
                                                const u64 (&pG)[MAX_WORDS], const u64 (&pT)[MAX_WORDS],
                                                const uint8_t *win, int L, const int *ends, const int *edits,
                                                int count, int *starts)
{
    u64 seen[START_SLOTS];
    int taken[START_SLOTS]; /* the index k of the end a slot holds, -1: none */
    for (int slot = 0; slot < START_SLOTS; ++slot)
        taken[slot] = -1;
    for (int k = 0; k < count; ++k) {
        const int end = ends[k], d = edits[k], span = min(end + 1, L + d);
        const uint8_t *text = win + end - span + 1;
        const u64 h = bytes_hash(text, span, (u64)d << 32 | (u64)span) & START_HASH_MASK; /* common.cuh */
        const int slot = (int)(h >> 60) & (START_SLOTS - 1);
        const int prior = taken[slot];
        if (prior >= 0 && seen[slot] == h && edits[prior] == d && min(ends[prior] + 1, L + d) == span
            && same_bytes(win + ends[prior] - span + 1, text, span)) {
            starts[k] = end - (ends[prior] - starts[prior]);
            continue;
        }
        starts[k] = leftmost_start(pA, pC, pG, pT, win, L, end, d);
        seen[slot] = h;
        taken[slot] = k;
    }
}

/* The cover of a stored last row D, by the level-by-level sweep described above (D is overwritten); the
 * k-th end taken goes to take(k, column, d). Returns how many ends were taken. The sweeps run over the
 * columns from the first to the last within e only (one pass finds them): outside there is nothing to take,
 * and a window that holds one alignment has about 2e + 1 of them, so its e - best + 1 sweeps cost a few
 * dozen steps instead of W each. */
template <typename Take>
__device__ __forceinline__ int take_cover(uint8_t *D, int W, int best, int e, Take take)
{
    int lo = W, hi = -1;
    for (int j = 0; j < W; ++j) {
        if (D[j] <= e) {
            lo = min(lo, j);
            hi = j;
        }
    }
    int count = 0;
    for (int d = best; d <= e; ++d) {
        for (int j = lo; j <= hi; ++j) {
            if (D[j] != d)
                continue;
            take(count++, j, d);
            for (int c = j - e > lo ? j - e : lo; c <= min(j + e, hi); ++c)
                D[c] = 255;
        }
    }
    return count;
}

extern "C" __global__ void verify_windows(
    const uint8_t *__restrict__ genome, const uint8_t *__restrict__ reads,
    const long long *__restrict__ read_start, const int *__restrict__ read_len,
    const int *__restrict__ max_e, const long long *__restrict__ win_start,
    const int *__restrict__ win_len, const int n, const int *__restrict__ win_skip,
    int *__restrict__ best_out, int *__restrict__ n_ends_out,
    int *__restrict__ ends_out, int *__restrict__ starts_out, int *__restrict__ edits_out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
#ifdef GKMAP_HOST
    if (i + AHEAD < n) /* the bases of the window AHEAD on, a random place in the genome */
        for (int at = 0; at < win_len[i + AHEAD]; at += 64)
            PREFETCH(genome + win_start[i + AHEAD] + at);
#endif
    const int L = read_len[i];
    const int W = win_len[i];
    const int e = max_e[i];
    const uint8_t *read = reads + read_start[i];
    const uint8_t *win = genome + win_start[i];
    if (W > MAX_WIN) {  /* not a band's window: verify_wide takes it */
        best_out[i] = 0;
        n_ends_out[i] = MAX_ENDS + 1;
        return;
    }
    uint8_t D[MAX_WIN];
    const int best = last_row(read, L, win, W, win_skip ? win_skip[i] : 0, e, D);
    if (best > e) {
        best_out[i] = -1;
        n_ends_out[i] = 0;
        return;
    }
    best_out[i] = best;

    /* the first MAX_ENDS ends kept in registers (a constant index after unrolling) */
    int ends[MAX_ENDS], dist[MAX_ENDS];
    const int count = take_cover(D, W, best, e, [&](int taken, int column, int d) {
#pragma unroll
        for (int k = 0; k < MAX_ENDS; ++k)
            if (k == taken) {
                ends[k] = column;
                dist[k] = d;
            }
    });
    n_ends_out[i] = count;
    if (count > MAX_ENDS)
        return;

    u64 pA[MAX_WORDS], pC[MAX_WORDS], pG[MAX_WORDS], pT[MAX_WORDS];
    build_peq(read, L, 1, pA, pC, pG, pT);
#pragma unroll
    for (int k = 0; k < MAX_ENDS; ++k) {
        if (k < count) {
            ends_out[k * n + i] = ends[k];
            starts_out[k * n + i] = leftmost_start(pA, pC, pG, pT, win, L, ends[k], dist[k]);
            edits_out[k * n + i] = dist[k];
        }
    }
}

/* The same cover for windows of any width and any number of ends: those verify_windows leaves (a cover of
 * more than MAX_ENDS ends, a window wider than MAX_WIN: tandem repeats, and the whole stretches that locus
 * selection refines, mapper/verify.py). One thread per window; its last row goes to `rows` at
 * row_offset[i] (W bytes) instead of registers, and its ends, in the order taken, to ends/starts/edits at
 * cover_offset[i], which has room for W / (e + 1) + 1 of them: each taken end covers e columns on either
 * side of it, so no two lie within e of each other. */
extern "C" __global__ void verify_wide(
    const uint8_t *__restrict__ genome, const uint8_t *__restrict__ reads,
    const long long *__restrict__ read_start, const int *__restrict__ read_len,
    const int *__restrict__ max_e, const long long *__restrict__ win_start,
    const int *__restrict__ win_len, const int n, const int *__restrict__ win_skip,
    uint8_t *__restrict__ rows, const long long *__restrict__ row_offset, const long long *__restrict__ cover_offset,
    int *__restrict__ best_out, int *__restrict__ n_ends_out,
    int *__restrict__ ends_out, int *__restrict__ starts_out, int *__restrict__ edits_out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const int L = read_len[i];
    const int W = win_len[i];
    const int e = max_e[i];
    const uint8_t *read = reads + read_start[i];
    const uint8_t *win = genome + win_start[i];
    uint8_t *D = rows + row_offset[i];
    const int best = last_row(read, L, win, W, win_skip ? win_skip[i] : 0, e, D);
    if (best > e) {
        best_out[i] = -1;
        n_ends_out[i] = 0;
        return;
    }
    best_out[i] = best;
    int *ends = ends_out + cover_offset[i], *edits = edits_out + cover_offset[i];
    const int count = take_cover(D, W, best, e, [&](int taken, int column, int d) {
        ends[taken] = column;
        edits[taken] = d;
    });
    n_ends_out[i] = count;
    u64 pA[MAX_WORDS], pC[MAX_WORDS], pG[MAX_WORDS], pT[MAX_WORDS];
    build_peq(read, L, 1, pA, pC, pG, pT);
    leftmost_starts(pA, pC, pG, pT, win, L, ends, edits, count, starts_out + cover_offset[i]);
}

/* cover_records: the ends verify_wide took, as mapping records (gather.cu found_mappings' narrow layout), in
 * consecutive places from out_offset[i] (the exclusive sums of n_ends), so that only the taken ends cross
 * the bus, and no host pass turns them into records: the rooms of a part's repeat stretches held ~100 M
 * slots where ~25 M ends were taken, and the host's copying and numpy work on them cost more than all of
 * the part's kernels (1,000 repeat reads at 3.1 Gbp: the verify stage 0.6 -> 1.9 s). End k of window i:
 *   row = win_row[i] (i itself when win_row is null), contig = win_contig[i] (0 when null),
 *   start = win_start[i] + starts[k], end = win_start[i] + ends[k] + 1, edits, settled = win_settled[i] (0)
 * One thread a window.
 * In : n_ends int32 [n]; cover_offset, out_offset int64 [n]; ends, starts, edits int32 [rooms];
 *      win_start int64 [n]; win_row, win_contig, win_settled int32 [n] or null
 * Out: out_row, out_contig int32, out_start, out_end uint32, out_edits, out_settled uint8 [sum of n_ends]
 */
extern "C" __global__ void cover_records(const int *__restrict__ n_ends, const long long *__restrict__ cover_offset,
                                         const long long *__restrict__ out_offset, const int n,
                                         const int *__restrict__ ends, const int *__restrict__ starts,
                                         const int *__restrict__ edits, const long long *__restrict__ win_start,
                                         const int *__restrict__ win_row, const int *__restrict__ win_contig,
                                         const int *__restrict__ win_settled, int *__restrict__ out_row,
                                         int *__restrict__ out_contig, unsigned int *__restrict__ out_start,
                                         unsigned int *__restrict__ out_end, uint8_t *__restrict__ out_edits,
                                         uint8_t *__restrict__ out_settled)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const long long from = cover_offset[i], to = out_offset[i], base = win_start[i];
    const int row = win_row ? win_row[i] : i, contig = win_contig ? win_contig[i] : 0;
    const uint8_t settled = win_settled ? (uint8_t)win_settled[i] : 0;
    for (int k = 0; k < n_ends[i]; ++k) {
        out_row[to + k] = row;
        out_contig[to + k] = contig;
        out_start[to + k] = (unsigned int)(base + starts[from + k]);
        out_end[to + k] = (unsigned int)(base + ends[from + k] + 1);
        out_edits[to + k] = (uint8_t)edits[from + k];
        out_settled[to + k] = settled;
    }
}
