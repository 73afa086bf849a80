/* gatekeeper.cu: the GateKeeper pre-alignment filter, one thread per pair, and the ASCII encoder of the
 * device-encoded path. The numpy twins are mapper/filters/_faithful.py and _improved.py; the cuda backend must
 * give exactly their decisions and estimates (tests/test_filter_*.py run both).
 *
 * Paper: Bingöl et al., GateKeeper-GPU, IEEE TC 73(5), 2024; the project's spec ../shared/spec/gatekeeper-gpu.md.
 *
 * In (word-major, common.cuh): 2-bit words uint32[nwords2 * n] and, for the improved filter, N masks
 *     uint32[nwordsN * n], for the faithful filter undefined flags uint8[n]; n pairs, every thread checks tid < n.
 *     **A null N-mask or flag pointer means none** (pairs known to hold only A, C, G, T: fewer bytes to copy).
 * Out: accept uint8[n] (1/0), estimate int16[n]: faithful 0..E on accept, -1 rejected, -2 undefined (a non-ACGT
 *      letter, passed); improved the banded edit distance 0..E on accept, -1 rejected.
 * JIT constants (-D, mapper/backends/cuda.py): READ_LEN, MAX_E, and for the improved filter WIN_LEN and
 *      GLOBAL_ENDS (1: whole read against whole window, WIN_LEN == READ_LEN; 0: read anywhere in the window).
 *      GK_KERNEL picks what one compilation holds (1 encoder, 2 faithful, 3 improved; default: all, for
 *      `make ptx`), so that each (L, E) compiles only the kernel it runs.
 *      Every loop below runs over compile-time bounds and is unrolled, so all per-pair arrays live in registers.
 */
#include "common.cuh"

#ifndef READ_LEN
#define READ_LEN 100
#endif
#ifndef MAX_E
#define MAX_E 5
#endif
#ifndef WIN_LEN
#define WIN_LEN READ_LEN
#endif
#ifndef GLOBAL_ENDS
#define GLOBAL_ENDS 1
#endif
#ifndef GK_KERNEL
#define GK_KERNEL 0
#endif

#if GK_KERNEL != 1
constexpr int L = READ_LEN;
constexpr int E = MAX_E;
#endif

__host__ __device__ constexpr int imin(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int imax(int a, int b) { return a > b ? a : b; }

#if GK_KERNEL == 0 || GK_KERNEL == 1
/* ---------------------------------------------------------------------------------------------------------
 * Encoders (device-encoded paths). One thread per row of `len` ASCII letters. encode_row writes row i's 2-bit
 * words and N-mask words (layouts of common.cuh, word-major for n rows) and any_n[i] = 1 when the row holds a
 * letter other than A, C, G, T (lower case counts as that letter unless lower_is_n: the published filter treats
 * lower case as undefined).
 */
__device__ __forceinline__ void encode_row(const uint8_t *row, int len, int n, int i, int lower_is_n,
                                           uint32_t *words2, uint32_t *nmask, uint8_t *any_n)
{
    const int nwords2 = (len + 15) / 16;
    uint32_t nword = 0, seen_n = 0;
    for (int j = 0; j < nwords2; j++) {
        uint32_t word = 0, nbits = 0;
#pragma unroll
        for (int b = 0; b < 16; b++) {
            const int k = 16 * j + b;
            const uint32_t code = k < len ? encode_base(row[k], lower_is_n) : CODE_A;
            word |= (code & 3u) << (30 - 2 * b);
            nbits = (nbits << 1) | (uint32_t)(k < len && code == CODE_N);
        }
        words2[(size_t)j * n + i] = word;
        seen_n |= nbits;
        if (j % 2 == 0) {
            nword = nbits << 16;
        } else {
            nmask[(size_t)(j / 2) * n + i] = nword | nbits;
        }
    }
    if (nwords2 % 2)
        nmask[(size_t)(nwords2 / 2) * n + i] = nword;
    any_n[i] = seen_n != 0;
}

/* Rows of a host array as it is: row i starts at ascii + i * stride (no padding copy). */
extern "C" __global__ void encode_rows(const uint8_t *ascii, int stride, int len, int n, int lower_is_n,
                                       uint32_t *words2, uint32_t *nmask, uint8_t *any_n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        encode_row(ascii + (size_t)i * stride, len, n, i, lower_is_n, words2, nmask, any_n);
}

/* One column of the lines of a pairs-file chunk (kernels/pairs_text.cu found them): line `line` ends at
 * ends[line] ('\n'), its tab is at tabs[line]; column 0 starts the line, column 1 follows the tab. Row r of the
 * output is line rows[r], or line r when rows is null (every line of the chunk has this length). */
extern "C" __global__ void encode_lines(const uint8_t *text, const uint32_t *ends, const uint32_t *tabs,
                                        const uint32_t *rows, int n, int column, int len, int lower_is_n,
                                        uint32_t *words2, uint32_t *nmask, uint8_t *any_n)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n)
        return;
    const uint32_t line = rows ? rows[r] : (uint32_t)r;
    const uint32_t start = column ? tabs[line] + 1 : line ? ends[line - 1] + 1 : 0;
    encode_row(text + start, len, n, r, lower_is_n, words2, nmask, any_n);
}
#endif

#if GK_KERNEL == 0 || GK_KERNEL == 2
/* ---------------------------------------------------------------------------------------------------------
 * Faithful mode: the published GateKeeper-GPU (spec sections 1-7), bit for bit.
 * Planes: the high and the low code bit of each base, 32 bases a word, base k at bit 31-k%32 of word k/32 (the
 * published 1-bit layout). XOR-and-fold of 2-bit words is (hi ^ hi') | (lo ^ lo'), and shifting the read by i bases
 * shifts both planes by i bits, so the masks are built directly in the folded layout.
 */
constexpr int FW2 = (L + 15) / 16;  // 2-bit words (spec: W)
constexpr int FA = (FW2 + 1) / 2;   // 1-bit words (spec: A)

/* Planes x moved towards higher base index by s (towards the end), A shifted in: word w takes its bits from
 * words w - s/32 and w - s/32 - 1 of the multi-word string. */
__device__ __forceinline__ uint32_t toward_end(const uint32_t (&x)[FA], int s, int w)
{
    const int q = s / 32, r = s % 32;
    const uint32_t a = w - q >= 0 ? x[w - q] : 0u;
    const uint32_t b = w - q - 1 >= 0 ? x[w - q - 1] : 0u;
    return r ? (a >> r) | (b << (32 - r)) : a;
}

/* Planes x moved towards lower base index by s, the zero padding (A) shifted in at the end. */
__device__ __forceinline__ uint32_t toward_start(const uint32_t (&x)[FA], int s, int w)
{
    const int q = s / 32, r = s % 32;
    const uint32_t a = w + q < FA ? x[w + q] : 0u;
    const uint32_t b = w + q + 1 < FA ? x[w + q + 1] : 0u;
    return r ? (a << r) | (b >> (32 - r)) : a;
}

/* Published amend (spec section 5), as whole-word expressions equal to its sequential loops:
 * - in-word: the 4-bit LUT slid from bit 0 to bit 28 (0101->0111, 1001->1111, 1011->1111, 1101->1111) fills every
 *   run of one or two 0s with a 1 on both sides, except a single 0 at bit 30 when bits 26..28 are all 0: the last
 *   window (bit 28) sees bit 28 only after the earlier windows, which set it when bit 26 or 27 is 1;
 * - the three cross-word rules (a) p2 & t31 -> p1 p0; (b) p1 & t30 -> t31 p0; (c) p0 & t29 -> t31 t30, in that
 *   order, on the amended words p = word w-1 and t = word w. They read bits 2..0 of p and 31..29 of t and write
 *   bits 1..0 of p and 31..30 of t, so no boundary reads what another writes: all are done from one snapshot. */
__device__ __forceinline__ void amend(uint32_t (&m)[FA])
{
#pragma unroll
    for (int w = 0; w < FA; w++) {
        const uint32_t x = m[w], inv = ~x;
        uint32_t single = inv & (x << 1) & (x >> 1);
        const uint32_t seen28 = ((x >> 26) | (x >> 27) | (x >> 28)) & 1u;
        single &= ~((seen28 ^ 1u) << 30);
        const uint32_t pair = inv & (inv >> 1) & (x << 1) & (x >> 2);
        m[w] = x | single | pair | (pair << 1);
    }
    uint32_t add_p[FA], add_t[FA];
#pragma unroll
    for (int w = 1; w < FA; w++) {
        const uint32_t p = m[w - 1], t = m[w];
        const uint32_t a = (p >> 2) & (t >> 31) & 1u;
        const uint32_t p1 = ((p >> 1) & 1u) | a;
        uint32_t p0 = (p & 1u) | a;
        const uint32_t b = p1 & (t >> 30) & 1u;
        p0 |= b;
        const uint32_t c = p0 & (t >> 29) & 1u;
        add_p[w - 1] = (p1 << 1) | p0;
        add_t[w] = ((b | c) << 31) | (c << 30);
    }
#pragma unroll
    for (int w = 1; w < FA; w++) {
        m[w - 1] |= add_p[w - 1];
        m[w] |= add_t[w];
    }
}

/* Published count (spec section 7) of an aligned nibble, 2 bits per nibble value: 0000 -> 0;
 * 0101 0110 1001 1010 1011 1101 -> 2; any other -> 1. */
__host__ __device__ constexpr uint32_t nibble_table()
{
    uint32_t t = 0;
    for (int v = 1; v < 16; v++) {
        const bool two = v == 0x5 || v == 0x6 || v == 0x9 || v == 0xA || v == 0xB || v == 0xD;
        t |= (two ? 2u : 1u) << (2 * v);
    }
    return t;
}

/* The published decision on one pair's planes (sh/sl: the column-1 string, which is shifted; fh/fl: the other):
 * Hamming early exit (popcount of the unshifted mask), else the 2E shifted masks (the column-1 string moved by
 * 1..E bases either way, A shifted in; a right shift drops what leaves the 2-bit words), each amended and
 * end-fixed, ANDed with the amended Hamming mask, then counted nibble by nibble. Returns the estimate (0..E,
 * accepted) or -1 (rejected). */
__device__ __forceinline__ int faithful_estimate(const uint32_t (&sh)[FA], const uint32_t (&sl)[FA],
                                                 const uint32_t (&fh)[FA], const uint32_t (&fl)[FA])
{
    uint32_t acc[FA];
    int hamming = 0;
#pragma unroll
    for (int w = 0; w < FA; w++) {
        acc[w] = (sh[w] ^ fh[w]) | (sl[w] ^ fl[w]);
        hamming += __popc(acc[w]);
    }
    if (hamming <= E || E == 0)
        return hamming <= E ? hamming : -1;
    amend(acc);
#pragma unroll
    for (int s = 1; s <= E; s++) {
        uint32_t del[FA], ins[FA];
#pragma unroll
        for (int w = 0; w < FA; w++) {
            del[w] = (toward_end(sh, s, w) ^ fh[w]) | (toward_end(sl, s, w) ^ fl[w]);
            ins[w] = (toward_start(sh, s, w) ^ fh[w]) | (toward_start(sl, s, w) ^ fl[w]);
        }
        if (FW2 % 2)
            del[FA - 1] &= 0xFFFF0000u;  // with W odd the planes hold 16 positions past the 2-bit words
        amend(del);
        amend(ins);
        del[0] |= 0x80000000u >> (s - 1);
        ins[FA - 1] |= 1u << (s - 1);
#pragma unroll
        for (int w = 0; w < FA; w++)
            acc[w] &= del[w] & ins[w];
    }
    constexpr uint32_t table = nibble_table();
    int count = 0;
#pragma unroll
    for (int w = 0; w < FA; w++)
#pragma unroll
        for (int k = 0; k < 8; k++)
            count += (table >> (2 * ((acc[w] >> (4 * k)) & 0xFu))) & 3u;
    return count <= E ? count : -1;
}

/* gatekeeper_faithful: the published filter on encoded pairs; a pair with an undefined (non-ACGT) letter, or
 * of at most 16 bases, is accepted with estimate -2, as the published program does. */
extern "C" __global__ void gatekeeper_faithful(const uint32_t *shifted2, const uint32_t *fixed2,
                                               const uint8_t *undefined1, const uint8_t *undefined2, int n,
                                               uint8_t *accept, int16_t *estimate)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    if (L <= 16 || (undefined1 && undefined1[i]) || (undefined2 && undefined2[i])) {
        accept[i] = 1;
        estimate[i] = -2;
        return;
    }
    uint32_t sh[FA], sl[FA], fh[FA], fl[FA];
#pragma unroll
    for (int w = 0; w < FA; w++) {
        sh[w] = plane_word(shifted2, FW2, w, n, i, 1);
        sl[w] = plane_word(shifted2, FW2, w, n, i, 0);
        fh[w] = plane_word(fixed2, FW2, w, n, i, 1);
        fl[w] = plane_word(fixed2, FW2, w, n, i, 0);
    }
    const int found = faithful_estimate(sh, sl, fh, fl);
    accept[i] = found >= 0;
    estimate[i] = found;
}

/* The published planes (base k at bit 31 - k%32 of word k/32, zero past L) of L bases of a code array from
 * `start`, bases outside [lo, hi) read as N; returns whether any base is N (the pair is then undefined). */
__device__ __forceinline__ int faithful_planes(const uint8_t *codes, long long start, long long lo, long long hi,
                                               uint32_t (&h)[FA], uint32_t (&l)[FA])
{
    int any_n = 0;
#pragma unroll
    for (int w = 0; w < FA; w++) {
        uint32_t hw = 0, lw = 0;
        for (int b = 0; b < 32 && 32 * w + b < L; b++) {
            const long long p = start + 32 * w + b;
            const uint32_t c = p >= lo && p < hi ? codes[p] : CODE_N;
            any_n |= c == CODE_N;
            hw |= ((c >> 1) & 1u) << (31 - b);
            lw |= (c & 1u) << (31 - b);
        }
        h[w] = hw;
        l[w] = lw;
    }
    return any_n;
}

/* gatekeeper_faithful_candidates: the published filter on the mapper's seeding candidates where they are (the
 * cuda backend), fused as gatekeeper_candidates is for the improved one: the read row [row_start, + L) and the
 * reference segment of mapper/filters/windows.py (L bases from the band's first diagonal, shown within
 * [contig start, min(start + L, contig end))) are read from the resident code arrays, the segment shifted, and
 * each candidate's decision written as gatekeeper_candidates writes it. Arguments as gatekeeper_candidates. */
extern "C" __global__ void gatekeeper_faithful_candidates(
    const int *__restrict__ cand_row, const int *__restrict__ cand_contig, const long long *__restrict__ cand_lo,
    const long long *__restrict__ cand_hi, const long long n, const uint8_t *__restrict__ row_codes,
    const long long *__restrict__ row_start, const uint8_t *__restrict__ genome,
    const long long *__restrict__ contig_start, const long long *__restrict__ contig_end,
    unsigned int *__restrict__ keep)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const int r = cand_row[i], c = cand_contig[i];
    const long long read = row_start[r], segment = cand_lo[i];
    const long long shown = segment + L < contig_end[c] ? segment + L : contig_end[c];
    uint32_t sh[FA], sl[FA], fh[FA], fl[FA];
    const int undefined = faithful_planes(genome, segment, contig_start[c], shown, sh, sl)
                        | faithful_planes(row_codes, read, read, read + L, fh, fl);
    keep[i] = L <= 16 || undefined || faithful_estimate(sh, sl, fh, fl) >= 0;
    if (i == 0)
        keep[n] = 0;
}
#endif

#if GK_KERNEL == 0 || GK_KERNEL == 3
/* ---------------------------------------------------------------------------------------------------------
 * Improved mode: GateKeeper's match masks over the real window, counted by an exact walk (the banded edit
 * distance). Column k of the read at bit k%32 of word k/32 (least significant first, so that carries run along
 * the read); F_d[p] = 1 when read[p] == window[p + d] and neither is N. R_k[d] = the columns p such that read[0, p)
 * aligns ending on diagonal d with k edits:
 *     R_0[d] = extend_d({0}) on the start diagonals,
 *     R_k[d] = extend_d((R_{k-1}[d] | R_{k-1}[d+1]) << 1 | R_{k-1}[d-1] | R_{k-1}[d])
 *              (substitution and insertion take one column, a deletion none),
 *     extend_d(S) = S | (((F_d & S) + F_d) ^ F_d)   (a start bit inside a run of matches carries to its end).
 * The estimate is the least k that reaches column L on an end diagonal. Level k keeps only the diagonals that can
 * be reached from a start and can still reach an end within E edits. Two shortcuts give the same result sooner:
 * with equal lengths, up to 2 mismatches on diagonal 0 are the distance itself (one edit between equal-length
 * strings is a substitution); and stage 1 (below) rejects most unrelated pairs before the walk.
 * Stage 1 first: the read is cut into P = min(2(E+1), L, 64) pieces [jL/P, (j+1)L/P); each edit touches at most one
 * piece and an untouched piece matches exactly on one diagonal, so more than E pieces matching on no diagonal
 * means a reject without the walk (the walk would reject too: both stages give the same result as the walk alone).
 */
constexpr int WL = WIN_LEN;
constexpr int NW = (L + 1 + 31) / 32;                          // column words, bit L included (the end state)
constexpr int DMIN = GLOBAL_ENDS ? -(E / 2) : -E;
constexpr int DMAX = GLOBAL_ENDS ? E / 2 : WL - L + E;
constexpr int ND = DMAX - DMIN + 1;
constexpr int PAD = -DMIN;                                     // window position j sits at plane bit j + PAD
constexpr int NT = (DMAX + PAD) / 32 + NW + 1;                 // window plane words, room for every diagonal
constexpr int START_HI = GLOBAL_ENDS ? 0 : WL - L + E;         // start diagonals 0..START_HI
constexpr int END_LO = GLOBAL_ENDS ? 0 : -E;                   // end diagonals END_LO..END_HI
constexpr int END_HI = GLOBAL_ENDS ? 0 : WL - L;
constexpr int NPIECES = imin(imin(2 * (E + 1), L), 64);  // one bit each in a 64-bit word

__host__ __device__ constexpr int band_lo(int k) { return GLOBAL_ENDS ? -imin(k, E - k) : -k; }
__host__ __device__ constexpr int band_hi(int k) { return GLOBAL_ENDS ? imin(k, E - k) : WL - L + E - k; }
__host__ __device__ constexpr int piece_bound(int j) { return j * L / NPIECES; }

/* Bits [a, b) of a multi-word bit vector, restricted to word w. */
__device__ __forceinline__ uint32_t span(int a, int b, int w)
{
    const int lo = imax(a - 32 * w, 0), hi = imin(b - 32 * w, 32);
    return hi <= lo ? 0u : hi - lo == 32 ? 0xFFFFFFFFu : ((1u << (hi - lo)) - 1u) << lo;
}

/* Word w of the window planes read from bit s on (the window aligned to diagonal s - PAD). */
__device__ __forceinline__ uint32_t window_word(const uint32_t (&t)[NT], int s, int w)
{
    const int q = s / 32, r = s % 32;
    const uint32_t a = q + w < NT ? t[q + w] : 0u;
    const uint32_t b = q + w + 1 < NT ? t[q + w + 1] : 0u;
    return r ? (a >> r) | (b << (32 - r)) : a;
}

/* Least-significant-first plane words of a sequence of `len` bases: high code bit, low code bit, not-N. */
template <int NWORDS>
__device__ __forceinline__ void lsb_planes(const uint32_t *words2, const uint32_t *nmask, int len, int n, int i,
                                           uint32_t (&hi)[NWORDS], uint32_t (&lo)[NWORDS], uint32_t (&ok)[NWORDS])
{
    const int nwords2 = (len + 15) / 16;
#pragma unroll
    for (int w = 0; w < NWORDS; w++) {
        const bool there = 32 * w < len;
        hi[w] = there ? __brev(plane_word(words2, nwords2, w, n, i, 1)) : 0u;
        lo[w] = there ? __brev(plane_word(words2, nwords2, w, n, i, 0)) : 0u;
        const uint32_t nbits = nmask ? nmask[(size_t)w * n + i] : 0u;
        ok[w] = there ? ~__brev(nbits) & span(0, len, w) : 0u;
    }
}

constexpr int NWIN = (WL + 31) / 32;  // window plane words before the PAD shift

/* The improved estimate of one pair from its least-significant-first planes (read: NW words, window: NWIN):
 * 0..E, or -1 (rejected). */
__device__ __forceinline__ int improved_estimate(const uint32_t (&rh)[NW], const uint32_t (&rl)[NW],
                                                 const uint32_t (&rv)[NW], const uint32_t (&h0)[NWIN],
                                                 const uint32_t (&l0)[NWIN], const uint32_t (&v0)[NWIN])
{
    // window planes moved up by PAD bits so that diagonal d reads them from bit d + PAD >= 0
    uint32_t th[NT], tl[NT], tv[NT];
#pragma unroll
    for (int w = 0; w < NT; w++) {
        const int q = w - PAD / 32, r = PAD % 32;
        const bool a = q >= 0 && q < NWIN, b = r && q - 1 >= 0 && q - 1 < NWIN;
        th[w] = (a ? h0[q] << r : 0u) | (b ? h0[q - 1] >> (32 - r) : 0u);
        tl[w] = (a ? l0[q] << r : 0u) | (b ? l0[q - 1] >> (32 - r) : 0u);
        tv[w] = (a ? v0[q] << r : 0u) | (b ? v0[q - 1] >> (32 - r) : 0u);
    }
#define MATCH(d, w) (~((rh[w] ^ window_word(th, (d) + PAD, w)) | (rl[w] ^ window_word(tl, (d) + PAD, w))) & \
                     rv[w] & window_word(tv, (d) + PAD, w))

    if (GLOBAL_ENDS) {  // equal lengths: up to 2 mismatches on diagonal 0 are the distance (1 edit = 1 substitution)
        int mismatches = 0;
#pragma unroll
        for (int w = 0; w < NW; w++)
            mismatches += __popc(~MATCH(0, w) & span(0, L, w));
        if (mismatches <= imin(2, E))
            return mismatches;
    }

    // stage 1: pieces that match exactly on no diagonal. The pieces' masks are made once, before the
    // diagonals: the GPU folds them into constants either way, the host (which does not unroll) would
    // otherwise work each one out again for every diagonal, most of the filter's time there.
    uint32_t piece[NPIECES][NW];
#pragma unroll
    for (int j = 0; j < NPIECES; j++)
#pragma unroll
        for (int w = 0; w < NW; w++)
            piece[j][w] = span(piece_bound(j), piece_bound(j + 1), w);
    unsigned long long matched = 0;
#pragma unroll
    for (int d = DMIN; d <= DMAX; d++) {
        uint32_t f[NW];
#pragma unroll
        for (int w = 0; w < NW; w++)
            f[w] = MATCH(d, w);
#pragma unroll
        for (int j = 0; j < NPIECES; j++) {
            uint32_t missing = 0;  // the piece's columns that do not match on d
#pragma unroll
            for (int w = 0; w < NW; w++)
                missing |= piece[j][w] & ~f[w];
            matched |= (unsigned long long)(missing == 0) << j;
        }
    }
    if (NPIECES - __popcll(matched) > E)
        return -1;

    // stage 2: the walk, diagonals in ascending order, each level updated in place
    uint32_t R[ND][NW];
#pragma unroll
    for (int x = 0; x < ND; x++)
#pragma unroll
        for (int w = 0; w < NW; w++)
            R[x][w] = (w == 0 && x + DMIN >= 0 && x + DMIN <= START_HI) ? 1u : 0u;
    int found = -1;
#pragma unroll
    for (int k = 0; k <= E; k++) {
        uint32_t below[NW];  // R_{k-1}[d - 1]
#pragma unroll
        for (int w = 0; w < NW; w++)
            below[w] = 0;
        bool reached = false;
#pragma unroll
        for (int d = DMIN; d <= DMAX; d++) {
            const int x = d - DMIN;
            uint32_t old[NW];
#pragma unroll
            for (int w = 0; w < NW; w++)
                old[w] = R[x][w];
            if (d >= band_lo(k) && d <= band_hi(k)) {
                uint32_t seeds[NW], carry = 0;
#pragma unroll
                for (int w = 0; w < NW; w++) {
                    if (k == 0) {
                        seeds[w] = old[w];
                    } else {
                        const uint32_t up = old[w] | (x + 1 < ND ? R[x + 1][w] : 0u);
                        const uint32_t up_prev = w ? old[w - 1] | (x + 1 < ND ? R[x + 1][w - 1] : 0u) : 0u;
                        seeds[w] = old[w] | below[w] | (up << 1) | (up_prev >> 31);
                    }
                }
#pragma unroll
                for (int w = 0; w < NW; w++) {
                    const uint32_t f = MATCH(d, w);
                    const unsigned long long sum = (unsigned long long)(f & seeds[w]) + f + carry;
                    carry = (uint32_t)(sum >> 32);
                    R[x][w] = seeds[w] | ((uint32_t)sum ^ f);
                }
                if (d >= END_LO && d <= END_HI)
                    reached = reached || ((R[x][L / 32] >> (L % 32)) & 1u);
            } else {
#pragma unroll
                for (int w = 0; w < NW; w++)
                    R[x][w] = 0;
            }
#pragma unroll
            for (int w = 0; w < NW; w++)
                below[w] = old[w];
        }
        if (reached) {
            found = k;
            break;
        }
    }
#undef MATCH
    return found;
}

extern "C" __global__ void gatekeeper_improved(const uint32_t *read2, const uint32_t *readn, const uint32_t *win2,
                                               const uint32_t *winn, int n, uint8_t *accept, int16_t *estimate)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint32_t rh[NW], rl[NW], rv[NW], h0[NWIN], l0[NWIN], v0[NWIN];
    lsb_planes<NW>(read2, readn, L, n, i, rh, rl, rv);
    lsb_planes<NWIN>(win2, winn, WL, n, i, h0, l0, v0);
    const int found = improved_estimate(rh, rl, rv, h0, l0, v0);
    accept[i] = found >= 0;
    estimate[i] = found;
}

/* Least-significant-first planes of `len` bases of a code array (mapper/alphabet.py codes, CODE_N = 4) from
 * `start`, bases outside [lo, hi) read as N: what lsb_planes gives for the same bases packed and masked. */
template <int NWORDS>
__device__ __forceinline__ void code_planes(const uint8_t *codes, long long start, long long lo, long long hi,
                                            int len, uint32_t (&h)[NWORDS], uint32_t (&l)[NWORDS],
                                            uint32_t (&ok)[NWORDS])
{
#pragma unroll
    for (int w = 0; w < NWORDS; w++) {
        uint32_t hw = 0, lw = 0, vw = 0;
        for (int b = 0; b < 32 && 32 * w + b < len; b++) {
            const long long p = start + 32 * w + b;
            const uint32_t c = p >= lo && p < hi ? codes[p] : CODE_N;
            const uint32_t base = c < 4 ? c : 0u;
            hw |= ((base >> 1) & 1u) << b;
            lw |= (base & 1u) << b;
            vw |= (uint32_t)(c < 4) << b;
        }
        h[w] = hw;
        l[w] = lw;
        ok[w] = vw;
    }
}

/* gatekeeper_candidates: the improved filter of the mapper's seeding candidates where they are (the cuda
 * backend), fused: the read and its verification window are read from the resident code arrays (the spans of
 * mapper/filters/windows.py: read row [row_start, + L); window [max(lo - e, contig start), min(hi + L + e,
 * contig end)) padded with N to WIN_LEN = L + 3e), filtered, and the decision written: keep[i] = 1 for a
 * candidate that may hold an alignment within e, and keep[n] = 0, so that an exclusive scan of the n + 1 flags
 * gives each survivor its place and the count (gather.cu keep_candidates compacts them in their order: the
 * verifier joins a row's windows into stretches only when they come as seeded).
 * In : cand_row/cand_contig int32, cand_lo/cand_hi int64 [n]; row_codes uint8, row_start int64 [R];
 *      genome uint8; contig_start/contig_end int64 [C]
 * Out: keep uint32 [n + 1] */
extern "C" __global__ void gatekeeper_candidates(
    const int *__restrict__ cand_row, const int *__restrict__ cand_contig, const long long *__restrict__ cand_lo,
    const long long *__restrict__ cand_hi, const long long n, const uint8_t *__restrict__ row_codes,
    const long long *__restrict__ row_start, const uint8_t *__restrict__ genome,
    const long long *__restrict__ contig_start, const long long *__restrict__ contig_end,
    unsigned int *__restrict__ keep)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const int r = cand_row[i], c = cand_contig[i];
    const long long read = row_start[r];
    const long long win_lo = cand_lo[i] - E > contig_start[c] ? cand_lo[i] - E : contig_start[c];
    const long long win_hi = cand_hi[i] + L + E < contig_end[c] ? cand_hi[i] + L + E : contig_end[c];
    uint32_t rh[NW], rl[NW], rv[NW], h0[NWIN], l0[NWIN], v0[NWIN];
    code_planes<NW>(row_codes, read, read, read + L, L, rh, rl, rv);
    code_planes<NWIN>(genome, win_lo, win_lo, win_hi, WL, h0, l0, v0);
    keep[i] = improved_estimate(rh, rl, rv, h0, l0, v0) >= 0;
    if (i == 0)
        keep[n] = 0;
}
#endif
