/* gather.cu: rows of ASCII letters gathered from a resident code array, for kernels that read ASCII rows
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
