"""The mapper's k-mer index built on the GPU (`gkmap index --device cuda`): the arrays of
mapper/index.py's build_arrays, bit for bit, from the reference codes (kernels/kmer_index.cu for the
per-position steps; the prefix sum and the LSD radix sort are the k-mer counter's, mapper/kmers/gpu.py).

Device memory at the peak is about 17 bytes a reference base (codes, two 64-bit word buffers for the sort,
the scan's 32-bit ranks freed before the sort), so a 3.1 Gbp genome takes about 55 GB.
"""
import numpy as np

from mapper.device import layer as cuda
from mapper.errors import UsageError


def build_arrays(reference, ws, kernels=None):
    """(offsets, positions) of the index of `reference` for k-mer size ws, built on the GPU. `kernels` is
    the k-mer counter's CudaKernels (scan, radix sort); tests pass a stand-in."""
    if kernels is None:
        from mapper.kmers.gpu import CudaKernels
        kernels = CudaKernels()
    codes = reference.codes
    if len(codes) >= 2**32:
        raise UsageError("references of 2**32 bases or more are not supported by this index format")
    n = max(len(codes) - ws + 1, 0)
    fn = lambda name: cuda.function("kmer_index.cu", name, WS=ws, OFFSET_T="unsigned int")
    offsets = cuda.empty(4 * (4**ws + 1))
    m = 0
    if n:
        d_codes = cuda.to_device(codes)
        flags = cuda.empty(4 * n)
        cuda.launch(fn("index_flags"), n, d_codes, np.int64(n), cuda.to_device(reference.ends.astype(np.int64)),
                    np.int32(len(reference.ends)), flags)
        rank, m = kernels.compaction(flags, n)
    if not m:
        cuda.launch(fn("index_empty"), 4**ws + 1, np.int64(4**ws), offsets)
        return cuda.from_device(offsets, (4**ws + 1,), np.uint32), np.zeros(0, dtype=np.uint32)
    words = cuda.empty(8 * m)
    cuda.launch(fn("index_pack"), n, d_codes, np.int64(n), flags, rank, words)
    del flags, rank, d_codes  # freed before the sort doubles the words
    words = kernels.sort_keys(words, m, 32 + 2 * ws)
    positions = cuda.empty(4 * m)
    cuda.launch(fn("index_split"), m, words, np.int64(m), positions, offsets)
    del words
    return cuda.from_device(offsets, (4**ws + 1,), np.uint32), cuda.from_device(positions, (m,), np.uint32)
