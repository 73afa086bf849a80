"""The neighbourhood index built on the GPU (`gkmap index --index-kind neighbourhood --device cuda`): the same
arrays as index.build_arrays on the cpu, bit for bit (tests/neighbourhood/test_neighbourhood_gpu.py), from kernels/phf.cu's
pb_* kernels.

1. pb_count / pb_scatter (a thread per reference position): every indexed pattern's word nb << 32 | position
   goes to its seed's bucket (bucket offsets: prefix sums of the counts, on the host: 4**ls numbers).
2. pb_sort (a block per bucket, bitonic): the bucket in (neighbourhood, position) order, which is the cpu's
   order of one sort of (seed, neighbourhood, position) words. It needs no 64-bit packing of the seed, so the
   cpu's argsort fallback has no GPU counterpart to match.
3. pb_runs / pb_emit (a thread per bucket): the distinct neighbourhoods (nbkeys, nboff from the counts),
   posoff and positions.
4. pb_peel (a thread per bucket): hashing.build_phf's perfect hash of the block (the same synchronous peeling
   rounds, the same J re-draws, the same g), pb_pack its 2-bit g.
On the host stay the FASTA parsing (read_fasta), prefix sums over the 4**ls buckets and the arrays' download.
`cuda` is mapper.device's layer: the GPU's, or tests/host_cuda.py where the host-emulation tests make it current
(mapper.device.using; they replace `sort_buckets`, the one kernel using __syncthreads, by numpy).
"""
import numpy as np

from mapper.device import layer as cuda
from mapper.neighbourhood.hashing import MAX_ATTEMPTS, Phf, third_sizes

LOOKUP_CODES = {"phf": 0, "binary": 1, "list": 2}


def defines(index, method, mask=None, ln=None):
    """The JIT constants of kernels/phf.cu for this index (or, building one, this mask and ln) and method."""
    mask, ln = (index.mask, index.ln) if index is not None else (mask, ln)
    seed_bits = sum(1 << k for k, c in enumerate(mask) if c == "#")
    return dict(LOOKUP=LOOKUP_CODES[method], MASK_LEN=len(mask), SEED_BITS=f"{seed_bits}u", NB_LEN=ln)

SORT_THREADS = 256   # threads of a bucket's sorting block
GRID_CAP = 1 << 20   # buckets per pb_sort launch (4**12 buckets take 16)


def sort_buckets(kernel, words, d_boff, n_buckets):
    """pb_sort (`kernel` gives the compiled kernels by name) over every bucket, a block each, in launches of at
    most GRID_CAP blocks."""
    sort = kernel("pb_sort")
    for base in range(0, n_buckets, GRID_CAP):
        sort(words, d_boff, n_buckets, base, block=(SORT_THREADS, 1, 1),
               grid=(min(GRID_CAP, n_buckets - base), 1))


def offsets(counts):
    """int64 [len + 1] prefix sums starting at 0."""
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def build_arrays(reference, mask, ln):
    """(nboff, nbkeys, posoff, positions, phf): index.build_arrays's result, computed on the GPU."""
    kernel = lambda name: cuda.function("phf.cu", name, **defines(None, "phf", mask, ln))
    codes = reference.codes
    width, n_buckets = len(mask) + ln, 4 ** mask.count("#")
    n = max(len(codes) - width + 1, 0)
    walk = [cuda.to_device(np.asarray(codes, dtype=np.uint8)), n,
            cuda.to_device(reference.starts.astype(np.int64)), cuda.to_device(reference.ends.astype(np.int64)),
            len(reference.starts)]
    count = cuda.to_device(np.zeros(n_buckets, dtype=np.uint64))
    cuda.launch(kernel("pb_count"), n, *walk, count)
    boff = offsets(cuda.from_device(count, (n_buckets,), np.uint64).astype(np.int64))
    n_words = int(boff[-1])
    d_boff, words = cuda.to_device(boff), cuda.empty(8 * n_words)
    cuda.launch(kernel("pb_scatter"), n, *walk, d_boff, cuda.to_device(np.zeros(n_buckets, dtype=np.uint64)), words)
    del walk, count
    sort_buckets(kernel, words, d_boff, n_buckets)

    d_m = cuda.empty(8 * n_buckets)
    cuda.launch(kernel("pb_runs"), n_buckets, words, d_boff, n_buckets, d_m)
    m = cuda.from_device(d_m, (n_buckets,), np.int64)
    nboff = offsets(m)
    n_slots = int(nboff[-1])
    d_nboff = cuda.to_device(nboff)
    nbkeys, posoff, positions = cuda.empty(4 * n_slots), cuda.empty(8 * n_slots), cuda.empty(4 * n_words)
    cuda.launch(kernel("pb_emit"), n_buckets, words, d_boff, d_nboff, n_buckets, nbkeys, posoff, positions)
    del words

    voff = offsets(3 * third_sizes(m))
    n_vertices = int(voff[-1])
    vslot, g1 = cuda.to_device(np.full(n_vertices, -1, dtype=np.int32)), cuda.to_device(np.zeros(n_vertices, np.uint8))
    seed_j, failed = cuda.empty(4 * n_buckets), cuda.to_device(np.zeros(1, dtype=np.uint64))
    scratch = [cuda.empty(4 * n_vertices) for _ in range(3)] + [cuda.empty(4 * n_slots), cuda.empty(n_slots)]
    cuda.launch(kernel("pb_peel"), n_buckets, nbkeys, d_nboff, cuda.to_device(voff), n_buckets,
                MAX_ATTEMPTS, *scratch, g1, vslot, seed_j, failed)
    del scratch
    n_failed = int(cuda.from_device(failed, (1,), np.uint64)[0])
    if n_failed:
        raise RuntimeError(f"no acyclic hypergraph for {n_failed} neighbourhood blocks in {MAX_ATTEMPTS} tries")
    n_bytes = -(-n_vertices // 4)
    g = cuda.empty(n_bytes)
    cuda.launch(kernel("pb_pack"), n_bytes, g1, n_vertices, g)
    phf = Phf(cuda.from_device(seed_j, (n_buckets,), np.uint32), voff, cuda.from_device(g, (n_bytes,), np.uint8),
              cuda.from_device(vslot, (n_vertices,), np.int32))
    posoff = np.append(cuda.from_device(posoff, (n_slots,), np.int64), np.int64(n_words))
    return (nboff, cuda.from_device(nbkeys, (n_slots,), np.uint32), posoff,
            cuda.from_device(positions, (n_words,), np.uint32), phf)
