"""The mapper's k-mer index built on the GPU (`gkmap index --device cuda`): the arrays of
mapper/index.py's build_arrays, bit for bit, from the reference codes (kernels/kmer_index.cu for the
per-position steps; the prefix sum and the LSD radix sort are the k-mer counter's, mapper/kmers/gpu.py).

Device memory is bounded by the codes (a byte a base) plus a budget (`budget`, default BUILD_BUDGET), not by
the genome: one sort of every (key, position) word of a 3.1 Gbp genome took 59.5 GiB. The keys are cut into
ranges of at most a budget's worth of k-mers (from a histogram of coarse key buckets) and each range is
gathered from the whole genome a segment of starts at a time, sorted, and copied out into its slice of the
host's positions array (kernels/kmer_index.cu says how). A range's k-mers cost 20 bytes on the device (the
word, the sort's second buffer, the position), a segment's starts 8 (flags and ranks).
"""
import numpy as np

from mapper.device import layer as cuda
from mapper.errors import UsageError

BUILD_BUDGET = 8 << 30   # device bytes for a range's words and positions, besides the codes (at most): a
                         # 3.1 Gbp build then peaks below 1.5x its index's 12.2 GiB (12 GiB gave 19.2 GiB)
SEGMENT = 1 << 28        # starts flagged at a time (2 GiB of flags and ranks)
COARSE_BITS = 16         # the histogram's buckets: the top 16 bits of a key


def build_arrays(reference, ws, kernels=None, budget=None, segment=SEGMENT):
    """(offsets, positions) of the index of `reference` for k-mer size ws, built on the GPU. `kernels` is
    the k-mer counter's CudaKernels (scan, radix sort); tests pass a stand-in, and small `budget` and
    `segment` to take the many-range path on small genomes. The budget is BUILD_BUDGET, or what the device
    has free beside the codes and a segment's flags when that is less."""
    if kernels is None:
        from mapper.kmers.gpu import CudaKernels
        kernels = CudaKernels()
    codes = reference.codes
    if len(codes) >= 2**32:
        raise UsageError("references of 2**32 bases or more are not supported by this index format")
    n = max(len(codes) - ws + 1, 0)
    fn = lambda name: cuda.function("kmer_index.cu", name, WS=ws)
    keys = 4**ws
    offsets = cuda.empty(4 * (keys + 1))
    d_codes = cuda.upload(codes) if n else None
    ends = cuda.to_device(reference.ends.astype(np.int64))
    contigs = np.int32(len(reference.ends))
    shift = max(2 * ws - COARSE_BITS, 0)
    counts = np.zeros(keys >> shift, dtype=np.uint64)
    if n:
        d_counts = cuda.to_device(counts)
        cuda.launch(fn("index_histogram"), n, d_codes, np.int64(n), ends, contigs, np.int32(shift), d_counts)
        counts = cuda.from_device(d_counts, counts.shape, np.uint64)
    positions = np.empty(int(counts.sum()), dtype=np.uint32)
    if budget is None:
        budget = max(min(BUILD_BUDGET, cuda.free_memory() - 8 * min(segment, n) - (1 << 29)), 20 << 20)
    cap = max(budget // 20, 1)
    words = alt = out = None
    base = size = 0
    for first, last in _ranges(counts, cap):
        k0, k1 = first << shift, (keys + 1 if last == len(counts) else last << shift)
        m = int(counts[first:last].sum())
        if not m:
            cuda.launch(fn("index_fill"), k1 - k0, np.int64(k0), np.int64(k1), np.int64(base), offsets)
            continue
        if words is None or m > size:
            size = max(m, min(cap, len(positions)))
            words, alt, out = None, None, None  # freed before the bigger ones are made
            words, alt, out = cuda.empty(8 * size), cuda.empty(8 * size), cuda.empty(4 * size)
        filled = 0
        for s0 in range(0, n, segment):
            s1 = min(s0 + segment, n)
            flags = cuda.scratch(4 * (s1 - s0))
            cuda.launch(fn("index_flags"), s1 - s0, d_codes, np.int64(s0), np.int64(s1), ends, contigs,
                        np.int64(k0), np.int64(k1), flags)
            rank, kept = kernels.compaction(flags, s1 - s0)
            cuda.launch(fn("index_pack"), s1 - s0, d_codes, np.int64(s0), np.int64(s1), flags, rank,
                        _plus(words, 8 * filled))
            filled += kept
            del flags, rank
        ranged = kernels.sort_keys(words, m, 32 + 2 * ws, low=32, alt=alt)
        cuda.launch(fn("index_split"), m, ranged, np.int64(m), np.int64(base), np.int64(k0), np.int64(k1), out,
                    offsets)
        cuda.copy_out(positions[base:base + m], out)
        base += m
    return cuda.from_device(offsets, (keys + 1,), np.uint32), positions


def _ranges(counts, cap):
    """[first, last) coarse buckets of each key range: consecutive buckets while their k-mers fit `cap`
    (a single bucket above it is a range of its own); one range when there are no buckets to cut."""
    ranges, first, held = [], 0, 0
    for b, c in enumerate(counts.tolist()):
        if held and held + c > cap:
            ranges.append((first, b))
            first, held = b, 0
        held += c
    ranges.append((first, len(counts)))
    return ranges


def _plus(buffer, nbytes):
    """A kernel pointer nbytes into a device buffer (the layers' `shifted` by a negative amount)."""
    return cuda.shifted(buffer, -nbytes)
