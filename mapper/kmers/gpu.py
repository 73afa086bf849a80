"""The cuda backend's sort + run-length encoding (kernels/kmer_sort.cu), launched through mapper.backends.cuda.

`CudaSorter().sort_count(keys, weights)` has the contract of count.sort_count (same output, bit for bit):
In : keys uint64 [C, n] (n < 2^32), weights uint64 [n] or None
Out: distinct keys uint64 [C, u] in lexicographic order, counts uint64 [u]

Steps (the kernel file's header explains each kernel): copy the channels to the device; LSD radix sort of a
uint32 permutation, channel C-1 first, one stable 4-bit pass per digit up to the channel's highest set bit
(measured on the host, so short k-mers and constant high bits cost no passes); gather the channels in
sorted order; flag the run heads, scan the flags, compact the heads, and count (run lengths, or the sums
of the weights). The prefix sum is the tile scan applied recursively to the tile totals.

pycuda is imported only through mapper.backends.cuda, on first use.
"""
import logging
import time

import numpy as np

from mapper.backends import cuda

log = logging.getLogger("gkmap")

SOURCE = "kmer_sort.cu"
ITEMS = 8  # keys per thread in a tile
RADIX_BITS, RADIX = 4, 16
KERNELS = ("iota_u32", "gather_u64", "radix_count", "radix_scatter", "scan_tiles", "scan_add", "run_heads",
           "run_compact", "run_lengths", "run_weights")


def _u32(value):
    return np.uint32(value)


def _at(buffer, offset_bytes):
    """A device pointer `offset_bytes` into `buffer`, as a kernel argument."""
    return np.uintp(int(buffer) + offset_bytes)


class CudaSorter:
    """Compiles the kernels once (timed: `kernels compiled in X s` on the log) and sorts buffers of k-mers."""

    def __init__(self):
        start = time.perf_counter()
        self.kernel = {name: cuda.function(SOURCE, name, BLOCK=cuda.BLOCK, ITEMS=ITEMS) for name in KERNELS}
        self.tile = cuda.BLOCK * ITEMS
        self.compile_seconds = time.perf_counter() - start
        log.info("kmer_sort kernels compiled in %.2f s", self.compile_seconds)

    def _tiles(self, n):
        return -(-n // self.tile)

    def _per_tile(self, name, n, *args):
        """One block per tile of n items."""
        if n:
            self.kernel[name](*args, block=(cuda.BLOCK, 1, 1), grid=(self._tiles(n), 1))

    def _per_item(self, name, n, *args):
        cuda.launch(self.kernel[name], n, *args)

    def _exclusive_scan(self, data, n):
        """Exclusive prefix sum of a uint32 device buffer of n items, in place."""
        tiles = self._tiles(n)
        sums = cuda.empty(4 * tiles)
        self._per_tile("scan_tiles", n, data, _u32(n), sums)
        if tiles > 1:
            self._exclusive_scan(sums, tiles)
            self._per_tile("scan_add", n, data, _u32(n), sums)

    def _permutation(self, channels, bits, n):
        """Device uint32 [n]: the order that sorts the keys (LSD radix over channels C-1 .. 0)."""
        perm, perm_next = cuda.empty(4 * n), cuda.empty(4 * n)
        digits, digits_next = cuda.empty(8 * n), cuda.empty(8 * n)
        counts = cuda.empty(4 * RADIX * self._tiles(n))
        self._per_item("iota_u32", n, perm, _u32(n))
        for c in reversed(range(len(channels))):
            self._per_item("gather_u64", n, channels[c], perm, digits, _u32(n))
            for shift in range(0, bits[c], RADIX_BITS):
                self._per_tile("radix_count", n, digits, _u32(n), _u32(shift), counts)
                self._exclusive_scan(counts, RADIX * self._tiles(n))
                self._per_tile("radix_scatter", n, digits, perm, digits_next, perm_next, _u32(n), _u32(shift),
                               counts)
                digits, digits_next = digits_next, digits
                perm, perm_next = perm_next, perm
        return perm

    def sort_count(self, keys, weights=None):
        """(distinct keys uint64 [C, u] sorted, counts uint64 [u]), as count.sort_count."""
        C, n = keys.shape
        if n == 0:
            return keys.copy(), np.empty(0, dtype=np.uint64)
        if n >= 2 ** 32:
            raise ValueError(f"the cuda sort takes fewer than 2^32 keys at a time, got {n}")
        drv = cuda.driver()
        channels = [cuda.to_device(channel) for channel in keys]
        bits = [int(channel.max()).bit_length() for channel in keys]
        perm = self._permutation(channels, bits, n)

        sorted_keys = cuda.empty(8 * C * n)
        for c in range(C):
            self._per_item("gather_u64", n, channels[c], perm, _at(sorted_keys, 8 * c * n), _u32(n))
        del channels
        flags, run_of = cuda.empty(4 * n), cuda.empty(4 * n)
        self._per_item("run_heads", n, sorted_keys, _u32(C), _u32(n), flags)
        drv.memcpy_dtod(run_of, flags, 4 * n)
        self._exclusive_scan(run_of, n)
        last = np.zeros(2, dtype=np.uint32)
        drv.memcpy_dtoh(last[:1], int(run_of) + 4 * (n - 1))
        drv.memcpy_dtoh(last[1:], int(flags) + 4 * (n - 1))
        runs = int(last.sum())

        distinct, starts, counts = cuda.empty(8 * C * runs), cuda.empty(4 * runs), cuda.empty(8 * runs)
        self._per_item("run_compact", n, sorted_keys, _u32(C), _u32(n), flags, run_of, _u32(runs), distinct, starts)
        if weights is None:
            self._per_item("run_lengths", runs, starts, _u32(runs), _u32(n), counts)
        else:
            drv.memset_d8(counts, 0, 8 * runs)
            self._per_item("run_weights", n, cuda.to_device(weights.astype(np.uint64)), perm, flags, run_of,
                           _u32(n), counts)
        return cuda.from_device(distinct, (C, runs), np.uint64), cuda.from_device(counts, (runs,), np.uint64)
