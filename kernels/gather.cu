/* gather.cu: data movement between stages on the GPU. gather_ascii: rows of ASCII letters gathered from a
 * resident code array, for kernels that read ASCII rows
 * (gatekeeper.cu's encoder) without a round trip through the host.
 *
 * One thread per output letter: row i = tid / width, column j = tid % width; consecutive threads write
 * consecutive bytes. Letter = "ACGTN"[codes[start[i] + j]] when lo[i] <= start[i] + j < hi[i], else 'N'
 * (outside the contig or the window: N never matches, which keeps a filter sound).
 * In : codes uint8 [*] (0..3, CODE_N), start/lo/hi int64 [n]
 * Out: out uint8 [n * width], row-major
 */
#include "common.cuh"

extern "C" __global__ void gather_ascii(const uint8_t *__restrict__ codes, const long long *__restrict__ start,
                                        const long long *__restrict__ lo, const long long *__restrict__ hi,
                                        const int width, const long long total, uint8_t *__restrict__ out)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total)
        return;
    const long long i = t / width;
    const long long p = start[i] + t % width;
    const uint8_t code = p >= lo[i] && p < hi[i] ? codes[p] : CODE_N;
    out[t] = code == CODE_A ? 'A' : code == CODE_C ? 'C' : code == CODE_G ? 'G' : code == CODE_T ? 'T' : 'N';
}

/* keep_candidates: the candidates a filter kept, compacted in their order (a stable compaction: the seeded order
 * of each row's windows survives, which candidate_stretches needs to join them). `at` is the exclusive scan of
 * the filter's n + 1 keep flags (gatekeeper.cu gatekeeper_candidates), so candidate i is kept when
 * at[i + 1] > at[i], and goes to slot at[i]; the host reads the count, at[n], first and sizes the output by it.
 * In : cand_row/cand_contig int32, cand_lo/cand_hi int64 [n]; at uint32 [n + 1]
 * Out: out_row/out_contig int32, out_lo/out_hi int64 [at[n]] */
extern "C" __global__ void keep_candidates(const int *__restrict__ cand_row, const int *__restrict__ cand_contig,
                                           const long long *__restrict__ cand_lo,
                                           const long long *__restrict__ cand_hi, const long long n,
                                           const unsigned int *__restrict__ at, int *__restrict__ out_row,
                                           int *__restrict__ out_contig, long long *__restrict__ out_lo,
                                           long long *__restrict__ out_hi)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || at[i + 1] == at[i])
        return;
    const unsigned int slot = at[i];
    out_row[slot] = cand_row[i];
    out_contig[slot] = cand_contig[i];
    out_lo[slot] = cand_lo[i];
    out_hi[slot] = cand_hi[i];
}

/* candidate_stretches: the verification windows of a part's candidates (mapper/seeding.py Candidates.windows),
 * computed where the candidates already are, joined into stretches, so that the verifier takes each
 * stretch's cover once (mapper/verify.py select_loci's rule) instead of the cover of every window, which
 * locus selection then had to recompute wherever picks of nearby windows lay within 3e (tandem repeats:
 * a read that aligns every e + 1 bases along a poly-A tract has hundreds of overlapping windows there).
 *
 * The window of candidate i of row r on contig c:
 *   win_start = max(lo - e, contig_start[c]),  win_end = min(hi + L + e, contig_end[c])
 * Window i opens a stretch unless the part is `ordered` (seed.cu's bands: each row's windows consecutive,
 * by contig and position, a row never split between parts of one seeding launch) and window i - 1 is of
 * the same row and contig and ends at most 3e before window i starts. The thread of an opening window
 * walks to the window before the next opening one and writes the stretch (from its window's start to the
 * furthest end of its windows) with the per-stretch read fields the verifier takes, at a slot of its own:
 * the next of `count` (atomicAdd: the stretches of an ordered part in any order; no two of them share an
 * end, so found_mappings has no duplicates to leave out), or i itself in an unordered part (every window
 * its own stretch, in place: found_mappings then leaves out the duplicate ends of neighbouring windows).
 *
 * Why a stretch's cover is locus selection's answer there: every alignment within e lies inside its seed's
 * window, so inside one stretch, and ends of two stretches lie more than 3e apart. That holds when the
 * stretch holds every window of its row near it: settled = 1 when the part is ordered and the stretch is
 * neither its first nor its last (the only ones a cut between two parts can split). Locus selection leaves
 * settled records as they are and refines the rest as before.
 * In : cand_row, cand_contig int32, cand_lo, cand_hi int64 [n]; row_start int64, row_len, row_e int32 [R];
 *      contig_start, contig_end int64 [C]
 * Out: count uint64 [1] (stretches, ordered parts); per stretch: out_row, out_contig int32, read_start int64,
 *      read_len, max_e int32, win_start int64, win_len, settled int32 [n at most]
 */
struct Window {
    long long start, end;
};

__device__ __forceinline__ Window window_of(const long long i, const int *__restrict__ cand_row,
                                            const int *__restrict__ cand_contig, const long long *__restrict__ cand_lo,
                                            const long long *__restrict__ cand_hi, const int *__restrict__ row_len,
                                            const int *__restrict__ row_e, const long long *__restrict__ contig_start,
                                            const long long *__restrict__ contig_end)
{
    const int r = cand_row[i], c = cand_contig[i], e = row_e[r];
    const long long a = cand_lo[i] - e, b = cand_hi[i] + row_len[r] + e;
    return {a > contig_start[c] ? a : contig_start[c], b < contig_end[c] ? b : contig_end[c]};
}

extern "C" __global__ void candidate_stretches(
    const int *__restrict__ cand_row, const int *__restrict__ cand_contig, const long long *__restrict__ cand_lo,
    const long long *__restrict__ cand_hi, const long long n, const long long *__restrict__ row_start,
    const int *__restrict__ row_len, const int *__restrict__ row_e, const long long *__restrict__ contig_start,
    const long long *__restrict__ contig_end, const int ordered, unsigned long long *__restrict__ count,
    int *__restrict__ out_row, int *__restrict__ out_contig, long long *__restrict__ read_start,
    int *__restrict__ read_len, int *__restrict__ max_e, long long *__restrict__ win_start,
    int *__restrict__ win_len, int *__restrict__ settled)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
#define WINDOW(k) window_of(k, cand_row, cand_contig, cand_lo, cand_hi, row_len, row_e, contig_start, contig_end)
    const int r = cand_row[i], c = cand_contig[i], e = row_e[r];
    const Window own = WINDOW(i);
    if (ordered && i > 0 && cand_row[i - 1] == r && cand_contig[i - 1] == c && own.start <= WINDOW(i - 1).end + 3LL * e)
        return; /* inside the stretch of a window before it */
    long long end = own.end, before = own.end, j = i + 1; /* before: window j - 1's end */
    for (Window next; ordered && j < n && cand_row[j] == r && cand_contig[j] == c; ++j) {
        next = WINDOW(j);
        if (next.start > before + 3LL * e)
            break;
        end = end > next.end ? end : next.end;
        before = next.end;
    }
#undef WINDOW
    const long long slot = ordered ? (long long)atomicAdd(count, 1ULL) : i;
    out_row[slot] = r;
    out_contig[slot] = c;
    read_start[slot] = row_start[r];
    read_len[slot] = row_len[r];
    max_e[slot] = e;
    win_start[slot] = own.start;
    win_len[slot] = (int)(end - own.start);
    settled[slot] = ordered && i > 0 && j < n;
}

/* take_i32 / take_i64: out[k * n + i] = src[k * n_src + index[i]] for k < planes, one thread per output
 * element: compacts the few verified windows (and their word-major end/start planes) before they go to
 * the host, instead of copying every candidate's result back. */
extern "C" __global__ void take_i32(const int *__restrict__ src, const long long n_src,
                                    const long long *__restrict__ index, const long long n, const int planes,
                                    int *__restrict__ out)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * planes)
        return;
    const long long k = t / n, i = t % n;
    out[t] = src[k * n_src + index[i]];
}

extern "C" __global__ void take_i64(const long long *__restrict__ src, const long long n_src,
                                    const long long *__restrict__ index, const long long n, const int planes,
                                    long long *__restrict__ out)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * planes)
        return;
    const long long k = t / n, i = t % n;
    out[t] = src[k * n_src + index[i]];
}

/* filter_spans: what the GateKeeper filter compares for each candidate (mapper/filters/windows.py, the
 * definitions both backends share), computed on the device from the candidates and rows:
 *   read rows : the read on its strand, [read_start, read_start + L)
 *   improved  : the verification window, start = lo = max(lo - e, contig start), hi = min(hi + L + e,
 *               contig end) (the gather pads it with N to L + 3e)
 *   faithful  : the L reference bases at the band's first diagonal, start = lo, shown within
 *               [contig start, min(start + L, contig end))
 * In : cand_row/cand_contig int32, cand_lo/cand_hi int64 [n]; row_start int64, row_len/row_e int32 [R];
 *      contig_start/contig_end int64 [C]; faithful: 0 improved, 1 faithful
 * Out: read_start, read_end, ref_start, ref_lo, ref_hi int64 [n]
 */
extern "C" __global__ void filter_spans(
    const int *__restrict__ cand_row, const int *__restrict__ cand_contig, const long long *__restrict__ cand_lo,
    const long long *__restrict__ cand_hi, const long long n, const long long *__restrict__ row_start,
    const int *__restrict__ row_len, const int *__restrict__ row_e, const long long *__restrict__ contig_start,
    const long long *__restrict__ contig_end, const int faithful, long long *__restrict__ read_start,
    long long *__restrict__ read_end, long long *__restrict__ ref_start, long long *__restrict__ ref_lo,
    long long *__restrict__ ref_hi)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const int r = cand_row[i], c = cand_contig[i];
    const int L = row_len[r], e = row_e[r];
    read_start[i] = row_start[r];
    read_end[i] = row_start[r] + L;
    if (faithful) {
        const long long s = cand_lo[i];
        ref_start[i] = s;
        ref_lo[i] = contig_start[c];
        ref_hi[i] = s + L < contig_end[c] ? s + L : contig_end[c];
    } else {
        const long long a = cand_lo[i] - e > contig_start[c] ? cand_lo[i] - e : contig_start[c];
        ref_start[i] = a;
        ref_lo[i] = a;
        ref_hi[i] = cand_hi[i] + L + e < contig_end[c] ? cand_hi[i] + L + e : contig_end[c];
    }
}

/* strand_codes: a batch's strand rows (mapper/seeding.py StrandRows.codes) built on the GPU from the forward
 * codes alone, so only half of them cross the bus: out = forward, then its reverse complement.
 * One thread per forward base t: out[t] = fwd[t]; out[2T - 1 - t] = complement(fwd[t]) (N stays N).
 * In : fwd uint8 [T] (0..3, CODE_N)
 * Out: out uint8 [2T]
 */
extern "C" __global__ void strand_codes(const uint8_t *__restrict__ fwd, const long long total,
                                        uint8_t *__restrict__ out)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total)
        return;
    const uint8_t code = fwd[t];
    out[t] = code;
    out[2 * total - 1 - t] = code == CODE_A ? CODE_T : code == CODE_C ? CODE_G : code == CODE_G ? CODE_C
                           : code == CODE_T ? CODE_A : CODE_N;
}

/* found_mappings: the verifier's per-window answers (myers.cu verify_windows) turned into mapping records
 * on the GPU, so that only the windows within e cross the bus. Window t is found when best[t] >= 0; its
 * n_ends[t] taken ends become records (row, contig, start = win_start + starts[k][t], end = win_start +
 * ends[k][t] + 1, edits = edits[k][t]), unless there are more than max_ends of them: then the window is listed
 * in `overflow` and redone on the host. An end that a neighbouring window of the part (t - 1 or t + 1: the
 * same row and contig) also took, with fewer edits, or as many from a start as far left or further, is left
 * out (on a full tie the earlier window keeps it): overlapping windows of one locus (adjacent bands) take
 * the same ends, and locus selection (mapper/verify.py select_loci) keeps of equal ends only the fewest
 * edits and, among those, the leftmost start, which the best of a run of such duplicates holds; at genome
 * scale half the records were such duplicates. One thread per window reserves its slots with one atomicAdd, so
 * the records' order varies between runs; the loci chosen from them (mapper/verify.py select_loci, which
 * sorts them) do not. Launched twice: with out_row == NULL it only counts (counts[0] records, counts[1]
 * overflowing windows); then, counts zeroed, it writes into buffers of those sizes. The records are
 * as narrow as their values allow (positions below 2^32: every index format's bound; edits <= e < 256):
 * 18 bytes a record instead of 28, and a genome-scale batch brings 10^8 of them to the host. Each record
 * also carries its stretch's `settled` (candidate_stretches): whether locus selection may keep it as it is.
 * In : best, n_ends int32 [n]; ends, starts, edits int32 [max_ends][n]; cand_row, cand_contig int32 [n];
 *      win_start int64 [n]; settled int32 [n]
 * Out: counts uint64 [2]; out_row, out_contig int32, out_start, out_end uint32, out_edits, out_settled uint8
 *      [counts[0]]; overflow int64 [counts[1]] (window indices)
 */
/* Whether end k of window t (end, start absolute; d edits) is also an end of window u, its neighbour in the
 * part, that beats it: the same row and contig, the same end, and (fewer edits, then a start further left,
 * then the earlier window). See found_mappings. */
__device__ __forceinline__ int beaten_by(const long long u, const long long t, const long long n, const int max_ends,
                                         const int *__restrict__ best, const int *__restrict__ n_ends,
                                         const int *__restrict__ ends, const int *__restrict__ starts,
                                         const int *__restrict__ edits, const int *__restrict__ cand_row,
                                         const int *__restrict__ cand_contig, const long long *__restrict__ win_start,
                                         const long long end, const long long start, const int d)
{
    if (u < 0 || u >= n || best[u] < 0 || n_ends[u] > max_ends || cand_row[u] != cand_row[t]
        || cand_contig[u] != cand_contig[t])
        return 0;
    for (int j = 0; j < n_ends[u]; j++) {
        if (win_start[u] + ends[j * n + u] != end)
            continue;
        const int d_u = edits[j * n + u];
        const long long start_u = win_start[u] + starts[j * n + u];
        return d_u < d || (d_u == d && (start_u < start || (start_u == start && u < t)));
    }
    return 0;
}

extern "C" __global__ void found_mappings(
    const int *__restrict__ best, const int *__restrict__ n_ends, const int *__restrict__ ends,
    const int *__restrict__ starts, const int *__restrict__ edits, const long long n, const int max_ends,
    const int *__restrict__ cand_row,
    const int *__restrict__ cand_contig, const long long *__restrict__ win_start, const int *__restrict__ settled,
    unsigned long long *__restrict__ counts, int *__restrict__ out_row, int *__restrict__ out_contig,
    unsigned int *__restrict__ out_start, unsigned int *__restrict__ out_end, uint8_t *__restrict__ out_edits,
    uint8_t *__restrict__ out_settled, long long *__restrict__ overflow)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n || best[t] < 0)
        return;
    const int m = n_ends[t];
    if (m > max_ends) {
        const unsigned long long slot = atomicAdd(&counts[1], 1ULL);
        if (out_row)
            overflow[slot] = t;
        return;
    }
    unsigned int keep = 0; /* bit k: end k is not beaten by a neighbour's */
    for (int k = 0; k < m; k++) {
        const long long end = win_start[t] + ends[k * n + t], start = win_start[t] + starts[k * n + t];
        const int d = edits[k * n + t];
        if (!beaten_by(t - 1, t, n, max_ends, best, n_ends, ends, starts, edits, cand_row, cand_contig, win_start,
                       end, start, d)
            && !beaten_by(t + 1, t, n, max_ends, best, n_ends, ends, starts, edits, cand_row, cand_contig, win_start,
                          end, start, d))
            keep |= 1u << k;
    }
    if (!keep)
        return;
    const unsigned long long slot = atomicAdd(&counts[0], (unsigned long long)__popc(keep));
    if (!out_row)
        return;
    for (int k = 0, j = 0; k < m; k++) {
        if (!(keep >> k & 1u))
            continue;
        out_row[slot + j] = cand_row[t];
        out_contig[slot + j] = cand_contig[t];
        out_start[slot + j] = (unsigned int)(win_start[t] + starts[k * n + t]);
        out_end[slot + j] = (unsigned int)(win_start[t] + ends[k * n + t] + 1);
        out_edits[slot + j] = (uint8_t)edits[k * n + t];
        out_settled[slot + j] = (uint8_t)settled[t];
        ++j;
    }
}
