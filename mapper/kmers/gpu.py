"""The cuda backend of `gkmap kmers count`: parsing, k-mer building, sort + RLE and table encoding on the GPU.

The host reads the input and writes the table; everything per base or per k-mer runs in kernels/kmer_*.cu,
launched through the device seam (mapper.device.layer: the GPU's mapper/device/cuda.py, which imports pycuda
on first use, or a layer that tests inject with mapper.device.using):

    FASTA text --(kmer_extract.cu: fasta_bytes, fasta_lines, keep_flags/scan/keep_compact)--> codes
    codes      --(pack_words, kmer_flags/scan/kmer_keys)--> keys appended to the device buffer
    buffer     --(kmer_sort.cu: LSD radix sort, run_heads/scan/run_compact, run_lengths)--> a run
    run        --(kmer_codec.cu: bin_starts, s8b_words/scan/s8b_pack, vlq_sizes/scan/vlq_write)--> bytes

`CudaBackend` has the contract of backend.CpuBackend (add / reduce / keep / merge / encode), so counter.py
does not know where it runs, and its tables are byte-identical to the cpu backend's; it also reads the
input into its pinned buffers (block_buffer) and merges what does not fit its buffer a range of bins at a
time on the device (merge_pieces: runs held on the device and runs spilled to disk alike).
`CudaKernels.sort_count(keys, weights)` is count.sort_count on the GPU for host arrays: the tests' way
to the sort + RLE that reduce() runs.

Device buffers come from the process's pool (mapper.device.cuda.scratch): a block's dozen temporaries would
otherwise be a cuMemAlloc and a cuMemFree each, and a free waits for the device.

Keys on the device are channel-major with a stride (channel c of key i at keys[c * stride + i]). Item
counts are uint32: one sort takes fewer than 2^32 keys. Host syncs: one small read per block (how many
bytes and k-mers it kept) and per run (how many distinct k-mers, the bin totals).
"""
import logging
import queue
import time

import numpy as np

from mapper.device import layer as cuda
from mapper.device.cuda import CONTEXT
from mapper.errors import UsageError
from mapper.kmers.binning import bin_bits, shift_of
from mapper.kmers.fasta import CODE_ODD, CODE_SKIP, general_codes
from mapper.kmers import layout as table_layout
from mapper.kmers.layout import STAGES, encode_table
from mapper.kmers.workers import pool

log = logging.getLogger("gkmap")

ITEMS = 8  # items per thread of a tile (kmer_sort.cu)
RADIX_BITS = 8
# How a --gpu-memory bound is shared (CudaBackend.device_budget):
PARSE_BYTES = 16      # device bytes per byte of the input block being parsed (the host stand-in of the tests
                      # measured 11 for FASTA and 14 for FASTQ, canonical: text, line and keep flags, scans)
POOL_ROUNDING = 1.0625  # the memory pool's blocks are sizes with five significant bits (PyCUDA's bins, asked
                        # of the pool on the H100: 1 MiB -> 1.0625 MiB, 1.5 GiB -> 1.536 GiB): at most a
                        # sixteenth more than asked for
MIN_BUFFERS = 1 << 26  # below this the count would be little more than spills
SOURCES = ("kmer_sort.cu", "kmer_extract.cu", "kmer_codec.cu")


def _u32(value):
    return np.uint32(value)


def _at(buffer, offset_bytes):
    """A device pointer `offset_bytes` into `buffer`, as a kernel argument (int() of it for the driver's
    copies, which take no numpy scalar)."""
    return np.uintp(int(buffer) + int(offset_bytes))


class CudaKernels:
    """The compiled kernels (timed: `kmer kernels compiled in X s` on the log) and the primitives built on
    them: radix sort, run-length encoding, and the device layer's prefix sums."""

    def __init__(self):
        start = time.perf_counter()
        defines = dict(BLOCK=cuda.BLOCK, ITEMS=ITEMS, CODE_SKIP=CODE_SKIP, CODE_ODD=CODE_ODD)
        self.fn = {}
        for source in SOURCES:
            text = (cuda.KERNEL_DIR / source).read_text()
            for name in _kernel_names(text):
                self.fn[name] = cuda.function(source, name, **defines)
        self.drv = cuda.driver()
        self.tile = cuda.BLOCK * ITEMS
        self.staging, self.staged = [None] * STAGES, 0  # page-locked host buffers, the last one used (read_staged)
        self.compile_seconds = time.perf_counter() - start
        log.info("kmer kernels compiled in %.2f s", self.compile_seconds)

    # ---- launches -------------------------------------------------------------------------------------

    def per_item(self, name, n, *args):
        cuda.launch(self.fn[name], n, *args)

    def per_tile(self, name, n, *args):
        if n:
            self.fn[name](*args, block=(cuda.BLOCK, 1, 1), grid=(-(-n // self.tile), 1))

    def read(self, pointer, count, dtype):
        """count items of dtype at a device pointer, as a host array (a sync point)."""
        out = np.empty(count, dtype=dtype)
        if count:
            self.drv.memcpy_dtoh(out, int(pointer))
        return out

    def read_staged(self, pointer, nbytes):
        """nbytes at a device pointer copied into the next of the STAGES page-locked buffers kept for copies
        back, in turn (each grown when too small; a sync point): a uint8 view, valid until STAGES more
        copies were made (layout.EncodedTable.reuse)."""
        slot = self.staged = (self.staged + 1) % STAGES
        buffer = self.staging[slot]
        if buffer is None or len(buffer) < nbytes:
            self.staging[slot] = None  # the old one goes first
            # a group's size at least (groups are at most GROUP_BYTES but for one larger bin): a pinned
            # allocation costs ~9 ms, and growing to each larger group took 13 of them for a 1 Gbp count
            buffer = self.staging[slot] = cuda.pagelocked(max(nbytes, table_layout.GROUP_BYTES))
        if nbytes:
            self.drv.memcpy_dtoh(buffer[:nbytes], int(pointer))
        return buffer[:nbytes]

    @staticmethod
    def scan(data, n, wide=False):
        """Exclusive prefix sum, in place, of n uint32 (uint64 if wide) items at device pointer `data`."""
        cuda.exclusive_scan(data, n, wide)

    @staticmethod
    def empty(nbytes):
        return cuda.scratch(nbytes)

    @staticmethod
    def to_device(array):
        return cuda.scratch_copy(array)

    @staticmethod
    def at(buffer, offset_bytes):
        return _at(buffer, offset_bytes)

    def total(self, values, n):
        """The sum of n uint64 at device pointer `values` (a sync point)."""
        total = cuda.scratch_copy(np.zeros(1, dtype=np.uint64))
        self.per_item("sum_u64", n, values, _u32(n), total)
        return int(self.read(total, 1, np.uint64)[0])

    def compaction(self, flags, n):
        """(out_at device uint32 [n] = exclusive scan of the 0/1 flags, number of ones)."""
        out_at = cuda.scratch(4 * n)
        self.drv.memcpy_dtod(int(out_at), int(flags), 4 * n)
        self.scan(out_at, n)
        last_at, last_flag = self.read(_at(out_at, 4 * (n - 1)), 1, np.uint32), self.read(_at(flags, 4 * (n - 1)), 1, np.uint32)
        return out_at, int(last_at[0]) + int(last_flag[0])

    # ---- sort + RLE -----------------------------------------------------------------------------------

    def _radix_passes(self, keys, keys_alt, n, bits, values=None, values_alt=None, low=0):
        """Stable LSD passes over bits [low, bits) of n uint64 keys (and uint32 values riding along), 8 bits
        a pass, ping-ponging between the buffers; returns (keys, keys_alt, values, values_alt), the result
        first."""
        tiles = -(-n // self.tile)
        counts = cuda.scratch(4 * (1 << RADIX_BITS) * tiles)
        for shift in range(low, bits, RADIX_BITS):
            self.per_tile("radix_histogram", n, keys, _u32(n), _u32(shift), counts)
            self.scan(counts, (1 << RADIX_BITS) * tiles)
            if values is None:
                self.per_tile("radix_scatter_keys", n, keys, keys_alt, _u32(n), _u32(shift), counts)
            else:
                self.per_tile("radix_scatter_pairs", n, keys, values, keys_alt, values_alt, _u32(n), _u32(shift),
                              counts)
                values, values_alt = values_alt, values
            keys, keys_alt = keys_alt, keys
        return keys, keys_alt, values, values_alt

    def sort_keys(self, keys, n, bits, low=0, alt=None):
        """The n uint64 keys at device buffer `keys` sorted by bits [low, bits) (stable LSD), with `alt` (or a
        new buffer) as the second buffer; returns the one that holds them sorted. The mapper's GPU index
        build sorts its (key, position) words by the key bits alone: the positions come in order."""
        return self._radix_passes(keys, cuda.scratch(8 * n) if alt is None else alt, n, bits, low=low)[0]

    def sort_rle(self, channels, stride, n, bits, weights=None):
        """Sort + RLE of n keys on the device: channel c at channels + 8 c stride (the buffer is used as
        scratch), significant bits bits[c], weights a device uint64 [n] or None.
        Returns (distinct keys [C, runs] with stride runs, counts uint64 [runs], runs)."""
        C = len(bits)
        perm = None
        if C == 1 and weights is None:  # the keys themselves, no permutation
            sorted_keys, sorted_stride = self.sort_keys(channels, n, bits[0]), 0  # one channel: no stride
        else:  # a permutation, sorted by channel C-1 first (each channel gathered in the current order)
            perm, perm_alt = cuda.scratch(4 * n), cuda.scratch(4 * n)
            digits, digits_alt = cuda.scratch(8 * n), cuda.scratch(8 * n)
            self.per_item("iota_u32", n, perm, _u32(n))
            for c in reversed(range(C)):
                self.per_item("gather_u64", n, _at(channels, 8 * c * stride), perm, digits, _u32(n))
                digits, digits_alt, perm, perm_alt = self._radix_passes(digits, digits_alt, n, bits[c], perm, perm_alt)
            del digits, digits_alt, perm_alt
            sorted_keys, sorted_stride = cuda.scratch(8 * C * n), n
            for c in range(C):
                self.per_item("gather_u64", n, _at(channels, 8 * c * stride), perm, _at(sorted_keys, 8 * c * n), _u32(n))
        flags = cuda.scratch(4 * n)
        self.per_item("run_heads", n, sorted_keys, _u32(sorted_stride), _u32(C), _u32(n), flags)
        run_of, runs = self.compaction(flags, n)
        distinct, starts, counts = cuda.scratch(8 * C * runs), cuda.scratch(4 * runs), cuda.scratch(8 * runs)
        self.per_item("run_compact", n, sorted_keys, _u32(sorted_stride), _u32(C), _u32(n), flags, run_of, _u32(runs),
                      distinct, starts)
        if weights is None:
            self.per_item("run_lengths", runs, starts, _u32(runs), _u32(n), counts)
        else:
            self.drv.memset_d8(int(counts), 0, 8 * runs)
            self.per_item("run_weights", n, weights, perm, flags, run_of, _u32(n), counts)
        return distinct, counts, runs

    def sort_count(self, keys, weights=None):
        """count.sort_count on the GPU: (distinct keys uint64 [C, u] sorted, counts uint64 [u]) of host arrays."""
        C, n = keys.shape
        if n == 0:
            return keys.copy(), np.empty(0, dtype=np.uint64)
        if n >= 2 ** 32 - 1:
            raise ValueError(f"the cuda sort takes fewer than 2^32 - 1 keys at a time, got {n}")
        bits = [int(channel.max()).bit_length() for channel in keys]
        device_keys = cuda.scratch_copy(np.ascontiguousarray(keys, dtype=np.uint64))
        device_weights = None if weights is None else cuda.scratch_copy(np.asarray(weights, dtype=np.uint64))
        distinct, counts, runs = self.sort_rle(device_keys, n, n, bits, device_weights)
        return self.read(distinct, C * runs, np.uint64).reshape(C, runs), self.read(counts, runs, np.uint64)


def _kernel_names(source_text):
    """The names of the `extern "C" __global__` functions of a kernel source."""
    names = []
    for line in source_text.splitlines():
        if line.startswith('extern "C" __global__ void '):
            names.append(line.split("void ", 1)[1].split("(", 1)[0])
    return names


class DeviceRun:
    """A sorted, counted run held on the device: keys [C, runs] (stride runs), counts uint64 [runs]."""

    def __init__(self, keys, counts, runs, channels):
        self.keys, self.counts, self.runs, self.channels = keys, counts, runs, channels

    def __len__(self):
        return self.runs


class CudaBackend:
    """Phase 1 on the device: a buffer of keys (C channels x `capacity` slots, grown if one block needs
    more), with optional weights when a small run was kept in it (counter.py)."""

    name = "cuda"

    @staticmethod
    def device_budget(gpu_memory, max_block):
        """The bytes of k-mer buffers, held runs and their work (the counter's budget) that keep the whole
        count within `gpu_memory` bytes of the device (--gpu-memory; None: 80 % of the memory free now),
        when input blocks are at most `max_block` bytes: the CUDA context and the kernels' code (CONTEXT),
        a block's parsing (PARSE_BYTES a byte of a block of at most gpu_memory / 64), and the pool's
        rounding (POOL_ROUNDING) come off first. The pool is bounded to all but the context, so what it
        keeps for reuse stays within the bound too. Without a bound of its own the count spilled on a GPU
        what would fit it (1 Gbp of reads at 3 GB of buffers: 12 runs spilled, 22.95 s on an 80 GB H100,
        against 1.5-1.9 s in one run at 24 GB)."""
        total = int(0.8 * cuda.free_memory()) if gpu_memory is None else int(gpu_memory)
        parse = PARSE_BYTES * min(max_block, total // 64)
        buffers = int((total - CONTEXT - parse) / POOL_ROUNDING)
        if buffers < MIN_BUFFERS:
            least = CONTEXT + PARSE_BYTES * min(max_block, MIN_BUFFERS) + POOL_ROUNDING * MIN_BUFFERS
            raise UsageError(f"--gpu-memory {total / 2 ** 30:.2f} GB leaves no room for k-mer buffers: "
                             f"give at least {least / 2 ** 30:.1f} GB")
        cuda.limit_pool(total - CONTEXT)
        return buffers

    @staticmethod
    def bytes_per_kmer(channels):
        """Device bytes per buffered k-mer at the peak of sort_rle, which a weighted sort reaches (a kept or
        merged run's counts in the buffer): the buffer's slot (slot_bytes) and the sort's work (work_bytes).
        24 C + 24 left out the weights, the gathered keys and the run's starts: the device's peak went to
        16.9 GB at --memory 6 (1 Gbp of reads, runs spilled and merged)."""
        return CudaBackend.slot_bytes(channels) + CudaBackend.work_bytes(channels)

    @staticmethod
    def slot_bytes(channels):
        """A k-mer with its count: a slot of the buffer (key and weight, allocated for the whole count), a
        k-mer of a run, or of a spilled bin decoded on the host (8 C + 8)."""
        return 8 * channels + 8

    @staticmethod
    def work_bytes(channels):
        """sort_rle's device bytes per buffered k-mer beyond its slot: the permutation and its second
        buffer (8), the digits and theirs (16), the keys gathered in order (8 C), run heads and their scan
        (8), and the run, at most one distinct k-mer per k-mer (8 C keys, a 4-byte start, an 8-byte count)."""
        return 16 * channels + 44

    @staticmethod
    def encode_bytes(channels):
        """Device bytes per k-mer of a run while it is encoded, beyond the run: layout._encode's 26 C + 8,
        and under --min-count the kept copy (8 C + 8) with its flags and their scan (8)."""
        return 34 * channels + 24

    @property
    def fixed_bytes(self):
        """The buffer's device bytes, allocated once (its weights when a run is first kept in it)."""
        return self.slot_bytes(self.C) * self.stride

    def __init__(self, layout, canonical, capacity, kernels=None):
        self.k = layout.k
        self.layout, self.canonical = layout, canonical
        self.kernels = kernels or CudaKernels()
        self.C = layout.channels
        self.bits = [2 * layout.bases(c) for c in range(self.C)]
        self.stride = max(int(capacity), 1)
        self.keys = cuda.scratch(8 * self.C * self.stride)
        self.weights = None   # device uint64 [stride] when the first `weighted` keys carry counts
        self.weighted = 0
        self.n = 0            # keys in the buffer
        self.occurrences = 0  # k-mers extracted so far
        self.tail_codes = cuda.scratch(max(self.k - 1, 1))  # the last k - 1 codes of the previous block
        self.tail_length = 0
        self.pinned = {}  # address -> page-locked buffer that input blocks are read into (pin_blocks)
        self.free = None  # those not in use (block_buffer, release)

    @property
    def buffered(self):
        return self.n

    def settle(self):
        return self.n

    # ---- phase 1: blocks -> keys ----------------------------------------------------------------------

    read_ahead = 1  # blocks the counter's reading thread may be ahead of add()

    def pin_blocks(self, block_bytes):
        """Allocate the page-locked host buffers that input blocks of about `block_bytes` are read into
        (block_buffer), here, in the thread that holds the CUDA context: the reading thread that fills them
        has none. Room for a block's carried partial record comes on top."""
        self.free = queue.SimpleQueue()
        for _ in range(self.read_ahead + 2):
            buffer = cuda.pagelocked(block_bytes + block_bytes // 8 + (1 << 16))
            self.pinned[buffer.ctypes.data] = buffer
            self.free.put(buffer)

    def block_buffer(self, size):
        """A free page-locked buffer for the next input block (reading.blocks' `allocate`, called by the
        counter's reading thread): uploads from it need no staging by the driver (52 GB/s on the H100
        machine, against 2.3 GB/s from a fresh pageable buffer). read_ahead + 2 of them: one whose block
        add() uploads, read_ahead queued, one being read; a buffer is free again once `release`d (by the
        counter after add(), by the reader when it let it go without a block). Where none is free, or the
        block is longer than the buffers, the block gets pageable memory of its own: never a wait, and
        never a buffer still in use."""
        try:
            buffer = self.free.get_nowait()
        except queue.Empty:
            return np.empty(size, dtype=np.uint8)
        if len(buffer) < size:
            self.free.put(buffer)
            return np.empty(size, dtype=np.uint8)
        return buffer

    def release(self, data):
        """`data` (a block's bytes, or a buffer from block_buffer) is done with: the pinned buffer it starts
        is free again (other memory is left to the garbage collector)."""
        if len(data):
            buffer = self.pinned.get(np.frombuffer(data, dtype=np.uint8).ctypes.data)
            if buffer is not None:
                self.free.put(buffer)

    def _codes_of_text(self, block, out):
        """Parse a FASTA text block on the device into `out` (device uint8); returns the number of codes."""
        kn = self.kernels
        text = np.frombuffer(block.data, dtype=np.uint8)
        n = len(text)
        device_text, codes = cuda.scratch_copy(text), cuda.scratch(n)
        kn.per_item("fasta_bytes", n, device_text, _u32(n), codes)
        kn.per_item("fasta_lines", n, device_text, _u32(n), codes)
        odd = cuda.scratch_copy(np.zeros(1, dtype=np.uint32))
        return self._compact(block, codes, n, out, odd, lambda: block.codes(general_codes))

    def _codes_of_fastq(self, block, out):
        """Parse a FASTQ text block on the device into `out`; returns the number of codes. A block that is
        not plain FASTQ (fastq.py) is parsed on the host, by fastq.py or dnaio."""
        kn = self.kernels
        text = np.frombuffer(block.data, dtype=np.uint8)
        n = len(text)
        if not n or text[-1] != ord("\n"):  # a file's last record without its newline: rare, on the host
            return self._host_codes(block.codes(), out)
        device_text, flags = cuda.scratch_copy(text), cuda.scratch(4 * n)
        kn.per_item("newline_flags", n, device_text, _u32(n), flags)
        line_of, lines = kn.compaction(flags, n)
        if lines % 4:
            return self._host_codes(block.codes(), out)
        codes, ends = cuda.scratch(n), cuda.scratch(4 * lines)
        odd = cuda.scratch_copy(np.zeros(1, dtype=np.uint32))
        kn.per_item("fastq_bytes", n, device_text, _u32(n), line_of, codes, ends, odd)
        kn.per_item("fastq_records", lines // 4, ends, _u32(lines // 4), odd)
        del line_of, ends, device_text
        return self._compact(block, codes, n, out, odd, block.codes)

    def _compact(self, block, codes, n, out, odd, host_parse):
        """The kept codes (not SKIP) of a parsed block into `out`, or the host's parse (`host_parse()`)
        where the kernels marked the block odd; returns the number of codes."""
        kn = self.kernels
        flags = cuda.scratch(4 * n)
        kn.per_item("keep_flags", n, codes, _u32(n), flags)
        out_at, kept = kn.compaction(flags, n)
        kn.per_item("keep_compact", n, codes, _u32(n), out_at, out, odd)
        if kn.read(odd, 1, np.uint32)[0]:  # white space, a comment line, non-ASCII...: the host's exact path
            return self._host_codes(host_parse(), out)
        return kept

    def _host_codes(self, codes, out):
        if len(codes):
            self.kernels.drv.memcpy_htod(int(out), np.ascontiguousarray(codes))
        return len(codes)

    def add(self, block):
        """Append the k-mers of a reading.Block to the buffer."""
        drv = self.kernels.drv
        head = self.tail_length if block.carry else 0
        codes = cuda.scratch(head + len(block.data))
        if head:
            drv.memcpy_dtod(int(codes), int(self.tail_codes), head)
        if block.is_text:
            m = self._codes_of_text(block, _at(codes, head))
        elif block.is_fastq:
            m = self._codes_of_fastq(block, _at(codes, head))
        else:
            m = len(block.data)
            if m:
                drv.memcpy_htod(int(codes) + head, np.ascontiguousarray(block.data))
        m += head
        self.tail_length = min(self.k - 1, m)
        if self.tail_length:
            drv.memcpy_dtod(int(self.tail_codes), int(codes) + m - self.tail_length, self.tail_length)
        self._extract(codes, m)

    def _extract(self, codes, m):
        kn, k = self.kernels, self.k
        windows = m - k + 1
        if windows <= 0:
            return
        words = -(-m // 32) + 1
        packed, bad = cuda.scratch(8 * words), cuda.scratch(4 * words)
        kn.per_item("pack_words", words, codes, _u32(m), _u32(words), _u32(0), packed, bad)
        packed_rc = np.uintp(0)
        if self.canonical:
            packed_rc, bad_rc = cuda.scratch(8 * words), cuda.scratch(4 * words)
            kn.per_item("pack_words", words, codes, _u32(m), _u32(words), _u32(1), packed_rc, bad_rc)
        flags = cuda.scratch(4 * windows)
        kn.per_item("kmer_flags", windows, bad, _u32(windows), _u32(k), flags)
        out_at, found = kn.compaction(flags, windows)
        self._reserve(self.n + found)
        kn.per_item("kmer_keys", windows, packed, packed_rc, _u32(m), _u32(k), _u32(self.C), flags, out_at,
                    _u32(windows), _at(self.keys, 8 * self.n), _u32(self.stride))
        self.n += found
        self.occurrences += found

    def _reserve(self, n):
        """Grow the buffer (a block longer than the budget foresaw: one very long line)."""
        if n <= self.stride:
            return
        stride = max(n, 2 * self.stride)
        keys = cuda.scratch(8 * self.C * stride)
        for c in range(self.C):
            self.kernels.drv.memcpy_dtod(int(_at(keys, 8 * c * stride)), int(_at(self.keys, 8 * c * self.stride)),
                                         8 * self.n)
        if self.weights is not None:
            weights = cuda.scratch(8 * stride)
            self.kernels.drv.memcpy_dtod(int(weights), int(self.weights), 8 * self.n)
            self.weights = weights
        self.keys, self.stride = keys, stride

    # ---- runs -----------------------------------------------------------------------------------------

    def reduce(self):
        """Sort + RLE of the buffer into a DeviceRun; the buffer is emptied."""
        n = self.n
        if n == 0:
            return DeviceRun(cuda.scratch(8), cuda.scratch(8), 0, self.C)
        if n >= 2 ** 32 - 1:
            raise ValueError(f"the cuda sort takes fewer than 2^32 - 1 keys at a time, got {n}")
        cuda.trim_pool(0)  # what the blocks or the last piece's encoding left in the pool, before the sort's own
        weights = None
        if self.weighted:
            self.kernels.per_item("fill_u64", n - self.weighted, _at(self.weights, 8 * self.weighted), np.uint64(1),
                                  _u32(n - self.weighted))
            weights = self.weights
        distinct, counts, runs = self.kernels.sort_rle(self.keys, self.stride, n, self.bits, weights)
        self.n = self.weighted = 0
        # and the sort's scratch (buffers the size of the keys) goes back to the device rather than wait in
        # the pool: a pool that keeps every size it was asked for grew to the whole GPU (80.9 GB) on 10 Gbp of
        # reads with --memory 48, as the buffer shrinks from run to run
        cuda.trim_pool(0)
        return DeviceRun(distinct, counts, runs, self.C)

    def keep(self, run):
        """Put a run back at the start of the buffer, its counts as weights."""
        self._load([(run, 0, run.runs)])

    def _load(self, slices, host_parts=()):
        """Slices (run, first, end) of device runs and host parts (keys uint64 [C, m], counts uint64 [m])
        one after the other at the start of the (empty) buffer, their counts as weights."""
        drv = self.kernels.drv
        total = sum(end - first for _, first, end in slices) + sum(len(counts) for _, counts in host_parts)
        self._reserve(total)
        if self.weights is None:
            self.weights = cuda.scratch(8 * self.stride)
        at = 0
        for run, first, end in slices:
            if end == first:
                continue
            for c in range(self.C):
                drv.memcpy_dtod(int(_at(self.keys, 8 * (c * self.stride + at))),
                                int(_at(run.keys, 8 * (c * run.runs + first))), 8 * (end - first))
            drv.memcpy_dtod(int(_at(self.weights, 8 * at)), int(_at(run.counts, 8 * first)), 8 * (end - first))
            at += end - first
        for keys, counts in host_parts:
            if not len(counts):
                continue
            for c in range(self.C):
                drv.memcpy_htod(int(_at(self.keys, 8 * (c * self.stride + at))), np.ascontiguousarray(keys[c]))
            drv.memcpy_htod(int(_at(self.weights, 8 * at)), np.ascontiguousarray(counts))
            at += len(counts)
        self.n = self.weighted = total

    def merge(self, runs, limit):
        """Runs held on the device merged by one weighted sort + RLE in the buffer, when their k-mers are at
        most `limit` (what the budget gives the sort once the runs are let go); else None (counter.py then
        asks for merge_pieces)."""
        if sum(run.runs for run in runs) > min(limit, self.stride):
            return None
        self._load([(run, 0, run.runs) for run in runs])
        runs.clear()  # their device memory goes before the sort takes its own
        return self.reduce()

    def _bin_bounds(self, run):
        """int64 [bins + 1]: where each bin starts in a DeviceRun (kmer_codec.cu's bin_starts)."""
        bins = 2 ** bin_bits(self.k)
        starts = cuda.scratch(4 * (bins + 1))
        self.kernels.per_item("bin_starts", run.runs + 1, run.keys, _u32(run.runs), _u32(shift_of(self.k)),
                              _u32(bins), starts)
        return self.kernels.read(starts, bins + 1, np.uint32).astype(np.int64)

    def merge_pieces(self, runs, min_count, room, tables=(), host_bytes=None):
        """The table of runs held on the device that do not fit the buffer together, and of the runs
        spilled to `tables` (store.KmerTable), as EncodedTables of ranges of bins (store.write_table's
        pieces): each range's slices of all runs, as many k-mers as `room` device bytes of work take (or
        one bin), are merged by one weighted sort + RLE in the buffer and encoded, a range after the other,
        on the device. The runs are sorted, so a bin is a slice of each (bin_starts finds them on the
        device, a table's bin table says them); a k-mer's bin is the same in every run, so the ranges'
        merges are the whole merge. The spilled bins are read and decoded on the host by the thread pool
        (KmerTable.read_bin: the compiled key decoder, numpy's for the counts) and uploaded: `host_bytes`
        (--memory) bounds the decoded bins of a range."""
        limit = max(room // self.work_bytes(self.C), 1)
        if tables and host_bytes is not None:
            limit = min(limit, max(host_bytes // self.slot_bytes(self.C), 1))
        bounds = [self._bin_bounds(run) for run in runs]  # per run, then per table: where each bin starts in it
        for table in tables:
            bounds.append(np.concatenate(([0], np.cumsum([entry[1] for entry in table.entries]))))
        for first, last in _bin_ranges(sum(np.diff(b) for b in bounds), limit):
            spilled = [(table, b) for table in tables for b in range(first, last) if table.entries[b][1]]
            self._load([(run, int(b[first]), int(b[last])) for run, b in zip(runs, bounds)],
                       list(pool().map(lambda item: item[0].read_bin(item[1]), spilled)))
            merged = self.reduce()
            yield from self.encode_pieces(merged, min_count, room - self.slot_bytes(self.C) * merged.runs)
            del merged  # before the next range is loaded and sorted

    # ---- run -> table bytes ---------------------------------------------------------------------------

    def _filter(self, run, first, last, min_count):
        """The k-mers first..last of a DeviceRun seen at least min_count times, as a DeviceRun of their own."""
        kn, n = self.kernels, last - first
        keys, counts = _at(run.keys, 8 * first), _at(run.counts, 8 * first)
        flags = cuda.scratch(4 * n)
        kn.per_item("count_keep", n, counts, _u32(n), np.uint64(min_count), flags)
        out_at, kept = kn.compaction(flags, n)
        kept_keys, kept_counts = cuda.scratch(8 * self.C * kept), cuda.scratch(8 * kept)
        kn.per_item("keep_pairs", n, keys, _u32(run.runs), _u32(self.C), counts, _u32(n), flags, out_at, kept_keys,
                    _u32(kept), kept_counts)
        return DeviceRun(kept_keys, kept_counts, kept, self.C)

    def _encode_slice(self, run, first, last, min_count):
        """EncodedTable of the k-mers first..last (whole bins) of a DeviceRun, encoded where they lie."""
        if min_count > 1 and last > first:
            kept = self._filter(run, first, last, min_count)
            return encode_table(self.kernels, kept.keys, kept.counts, kept.runs, self.C, self.k)
        return encode_table(self.kernels, _at(run.keys, 8 * first), _at(run.counts, 8 * first), last - first, self.C,
                            self.k, stride=run.runs)

    def encode(self, run, min_count=1):
        """The table's bins (EncodedTable) of a DeviceRun, laid out and encoded on the device."""
        return self._encode_slice(run, 0, run.runs, min_count)

    def encode_pieces(self, run, min_count, room):
        """The run's table as store.write_table's pieces, each encoded within `room` device bytes of work
        (encode_bytes a k-mer): the whole run in one piece, or ranges of its bins (at least one bin a piece),
        encoded one after the other in place, so that encoding a run as large as the budget allowed does
        not take a second budget's worth of device memory."""
        if run.runs * self.encode_bytes(self.C) <= room:
            yield self.encode(run, min_count)
            return
        bounds = self._bin_bounds(run)
        for first, last in _bin_ranges(np.diff(bounds), max(room // self.encode_bytes(self.C), 1)):
            yield self._encode_slice(run, int(bounds[first]), int(bounds[last]), min_count)


def _bin_ranges(sizes, limit):
    """(first, last) ranges of consecutive bins, in order, each of at most `limit` items (`sizes`: items per
    bin) or of one bin that alone holds more; bins without items are skipped where a range ends."""
    ends = np.cumsum(sizes)
    first = 0
    while first < len(sizes):
        before = int(ends[first - 1]) if first else 0
        last = max(int(np.searchsorted(ends, before + limit, side="right")), first + 1)
        if ends[last - 1] > before:
            yield first, last
        first = last
