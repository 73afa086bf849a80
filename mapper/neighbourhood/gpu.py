"""The neighbourhood index on the GPU (kernels/phf.cu): look-ups and seed-and-filter over the resident index.

`ResidentIndex` uploads the index's arrays once; `lookup` runs the nb_lookup kernel (one thread per query, every
degenerated neighbourhood: the paper's Figure 8 kernel); `DeviceSeeder.seed` is the cuda twin of
seeding.seed: the same Candidates, in the same order, and the same SeedStats (tests/neighbourhood/test_neighbourhood_gpu.py).

Seed-and-filter, per batch: sf_walk (a block per strand row, a thread per pattern) counts each row's hits;
rows are cut into chunks whose hits fit CAPACITY keys; per chunk sf_walk again writes the candidate keys into
per-row segments, sf_dedup sorts and de-duplicates each segment on the device, sf_gather packs the distinct
keys, and only those come back to the host. The device is reached through mapper.device's layer (`cuda`
below, the GPU's unless a test makes tests/host_cuda.py current with mapper.device.using; those tests also
replace `launch_rows` by a row loop).
"""
import numpy as np

from mapper.device import layer as cuda
from mapper.backends.cuda_mapping import _chunks  # rows cut into chunks of bounded hits, as the k-mer seeder does
from mapper.neighbourhood.gpu_build import defines
from mapper.neighbourhood.seeding import substitution_masks
from mapper.seeding import Candidates, SeedStats

CAPACITY = 1 << 27      # candidate keys (8 bytes) per seed-and-filter chunk
ROW_THREADS = 32        # threads of a row's block: a warp takes a read's patterns
DIAG_BIAS = 1 << 20     # kernels/phf.cu: key = contig << 40 | (diagonal + DIAG_BIAS)
NULL = 0  # a null pointer argument (sf_walk's count pass has no output segments)


def launch_rows(kernel, first_row, n, *args):
    """Launch `kernel` with one block of ROW_THREADS per row first_row .. first_row + n - 1 (row_base last)."""
    if n:
        kernel(*args, first_row, block=(ROW_THREADS, 1, 1), grid=(int(n), 1))


class ResidentIndex:
    """The index's eight arrays (kernels/phf.cu's INDEX_PARAMS order) and contig starts in device memory."""

    def __init__(self, index):
        self.index = index
        phf = index.phf
        self.arrays = [cuda.to_device(np.asarray(a, dtype=t)) for a, t in (
            (index.nboff, np.int64), (index.nbkeys, np.uint32), (index.posoff, np.int64),
            (index.positions, np.uint32), (phf.seed_j, np.uint32), (phf.voff, np.int64), (phf.g, np.uint8),
            (phf.vslot, np.int32))]
        self.contig_starts = cuda.to_device(index.reference.starts.astype(np.int64))

    def lookup(self, method, block, key, nb_errors=0, repeat=1):
        """nb_lookup on every query: (slot of the exact key or -1, positions found over every neighbourhood
        within Hamming nb_errors, kernel seconds of the last of `repeat` launches)."""
        n = len(block)
        masks = substitution_masks(self.index.ln, nb_errors)
        kernel = cuda.function("phf.cu", "nb_lookup", **defines(self.index, method))
        args = [cuda.to_device(np.asarray(block, dtype=np.int64)), cuda.to_device(np.asarray(key, dtype=np.uint32)),
                n, cuda.to_device(masks), len(masks), *self.arrays]
        slot0, hits = cuda.empty(8 * n), cuda.empty(8 * n)
        for _ in range(repeat):
            with cuda.Timer() as timer:
                cuda.launch(kernel, n, *args, slot0, hits)
        return cuda.from_device(slot0, (n,), np.int64), cuda.from_device(hits, (n,), np.int64), timer.seconds


class DeviceSeeder:
    """seeding.seed on the GPU; keeps the last index resident between batches."""

    def __init__(self):
        self._resident = None

    def _index(self, index):
        if self._resident is None or self._resident.index is not index:
            self._resident = ResidentIndex(index)
        return self._resident

    def walk(self, rows, index, step, nb_errors, method):
        """(kernel, the arguments sf_walk takes before its outputs, number of masks) for this batch."""
        resident = self._index(index)
        masks = substitution_masks(index.ln, nb_errors)
        args = [cuda.to_device(rows.codes), cuda.to_device(rows.start.astype(np.int64)),
                cuda.to_device(rows.length.astype(np.int64)), cuda.to_device(rows.active.astype(np.uint8)),
                len(rows.start), step, cuda.to_device(masks), len(masks),
                *resident.arrays, resident.contig_starts, len(index.reference.starts)]
        return cuda.function("phf.cu", "sf_walk", **defines(index, method)), args, len(masks)

    @staticmethod
    def count(kernel, args, n_rows):
        """sf_walk's count pass: (patterns looked up, hits) per row, host int64 arrays."""
        looked, hits = cuda.to_device(np.zeros(n_rows, np.uint64)), cuda.to_device(np.zeros(n_rows, np.uint64))
        launch_rows(kernel, 0, n_rows, *args, NULL, NULL, NULL, looked, hits)
        return (cuda.from_device(looked, (n_rows,), np.uint64).astype(np.int64),
                cuda.from_device(hits, (n_rows,), np.uint64).astype(np.int64))

    @staticmethod
    def emit(kernel, args, hits, begin, end):
        """sf_walk's emit pass over rows begin..end-1: (device keys, device segment starts [n_rows])."""
        seg = np.zeros(len(hits), dtype=np.int64)
        seg[begin:end] = np.cumsum(hits[begin:end]) - hits[begin:end]
        d_seg, keys = cuda.to_device(seg), cuda.empty(8 * int(hits[begin:end].sum()))
        launch_rows(kernel, begin, end - begin, *args, d_seg, cuda.to_device(np.zeros(len(hits), np.uint64)), keys,
                    NULL, NULL)
        return keys, d_seg

    def seed(self, rows, index, step=1, nb_errors=1, method="phf"):
        kernel, args, n_masks = self.walk(rows, index, step, nb_errors, method)
        n_rows = len(rows.start)
        looked, hits = self.count(kernel, args, n_rows)
        stats = SeedStats(kmers=int(looked.sum()), hits=int(hits.sum()))
        stats.seeds = stats.kmers * n_masks
        after = lambda name: cuda.function("phf.cu", name, **defines(index, method))
        parts = []
        for begin, end in _chunks(hits, CAPACITY):
            keys, d_seg = self.emit(kernel, args, hits, begin, end)
            d_unique = cuda.to_device(np.zeros(n_rows, np.int64))
            launch_rows(after("sf_dedup"), begin, end - begin, keys, d_seg, cuda.to_device(hits), n_rows,
                        d_unique)
            unique = cuda.from_device(d_unique, (n_rows,), np.int64)
            out_off = np.cumsum(unique) - unique
            n_out = int(unique.sum())
            out = cuda.empty(8 * n_out)
            launch_rows(after("sf_gather"), begin, end - begin, keys, d_seg, d_unique, cuda.to_device(out_off),
                        n_rows, out)
            packed = cuda.from_device(out, (n_out,), np.uint64)
            parts.append((np.repeat(np.arange(n_rows), unique), (packed >> np.uint64(40)).astype(np.int64),
                          (packed & np.uint64((1 << 40) - 1)).astype(np.int64) - DIAG_BIAS))
        if not parts:
            return Candidates(), stats
        row, contig, diag = (np.concatenate(c) for c in zip(*parts))
        stats.diagonals = stats.adjacent = stats.bands = len(row)
        return Candidates(row, contig, diag, diag.copy()), stats
