"""The cuda backend of the mapper: seeding (kernels/seed.cu) and verification (kernels/myers.cu) on the
GPU, with the reference and the k-mer index resident in device memory for the whole run.

Stage placement is reported in the run summary, so a silent cpu fallback cannot hide; the GateKeeper
filter runs on the GPU through mapper/filters. The seeding kernels reproduce the numpy seeder's
candidates and counts exactly (tests/test_cuda_mapping.py compares them). The verification kernel returns, per window, the best distance, every optimal end and its leftmost start: exactly
edlib's answer (mapper/verify.py's contract), so the SAM equals the cpu backend's byte for byte. A window
with more than MAX_ENDS optimal ends (long tandem repeats) is redone on the host with edlib.

pycuda is imported here and in mapper/backends/cuda.py only, and only when the cuda backend is asked for.
"""
import numpy as np

from mapper.backends import cuda
from mapper.backends.base import Backend
from mapper.filters import windows
from mapper.seeding import Candidates, SeedStats, ragged_arange
from mapper.verify import Mappings, verify as host_verify

MAX_ENDS = 8
BAND_CAPACITY = 1 << 25  # hits (band slots) per seeding launch; rows are launched in chunks that fit


class CudaBackend(Backend):
    name = "cuda"

    def __init__(self):
        self._genome = None
        self._genome_of = None
        self._index = None
        self._index_of = None
        self._rows = None
        self._rows_of = None

    def _resident_index(self, index):
        """(offsets, positions, contig starts) in device memory, uploaded once per run."""
        if self._index_of is not index:
            self._index = (cuda.to_device(index.offsets), cuda.to_device(index.positions),
                           cuda.to_device(index.reference.starts.astype(np.int64)))
            self._index_of = index
        return self._index

    def seed(self, rows, index):
        """kernels/seed.cu on every strand row; returns the numpy seeder's (Candidates, SeedStats)."""
        offsets, positions, contig_starts = self._resident_index(index)
        n_contigs = len(index.reference.starts)
        defines = dict(WS=index.ws, MAX_SEL=int(rows.e.max()) + 1,
                       OFFSET_T="unsigned int" if index.offsets.dtype == np.uint32 else "unsigned long long")
        kernel = lambda name: cuda.function("seed.cu", name, **defines)
        n_rows = len(rows.start)
        nk = np.where(rows.active, rows.length // index.ws, 0).astype(np.int32)
        kfirst = np.cumsum(nk, dtype=np.int64) - nk
        n_kmers = int(nk.sum())
        d_nk, d_kfirst, d_e = cuda.to_device(nk), cuda.to_device(kfirst), cuda.to_device(rows.e.astype(np.int32))
        key, size, flags = cuda.empty(4 * n_kmers), cuda.empty(8 * n_kmers), cuda.empty(n_kmers)
        row_hits = cuda.empty(8 * n_rows)
        cuda.launch(kernel("seed_select"), n_rows, self._rows_on_device(rows), cuda.to_device(rows.start.astype(np.int64)),
                    d_nk, d_kfirst, d_e, np.int32(n_rows), offsets, key, size, flags, row_hits)
        hits = cuda.from_device(row_hits, (n_rows,), np.int64)
        stats = SeedStats(kmers=n_kmers, hits=int(hits.sum()),
                          seeds=int((cuda.from_device(flags, (n_kmers,), np.uint8) & 2).astype(bool).sum()))
        parts = []
        for begin, end in _chunks(hits, BAND_CAPACITY):
            count = end - begin
            slot = np.cumsum(hits[begin:end]) - hits[begin:end]
            capacity = int(hits[begin:end].sum())
            d_slot = cuda.to_device(slot)
            band_contig, band_lo, band_hi = cuda.empty(4 * capacity), cuda.empty(8 * capacity), cuda.empty(8 * capacity)
            n_diag, n_adj, n_band = cuda.empty(4 * count), cuda.empty(4 * count), cuda.empty(4 * count)
            cuda.launch(kernel("seed_candidates"), count, key, flags, d_nk, d_kfirst, d_e, d_slot, np.int32(begin),
                        np.int32(count), offsets, positions, contig_starts, np.int32(n_contigs),
                        band_contig, band_lo, band_hi, n_diag, n_adj, n_band)
            bands = cuda.from_device(n_band, (count,), np.int32).astype(np.int64)
            stats.diagonals += int(cuda.from_device(n_diag, (count,), np.int32).sum())
            stats.adjacent += int(cuda.from_device(n_adj, (count,), np.int32).sum())
            total = int(bands.sum())
            out = [cuda.empty(4 * total), cuda.empty(4 * total), cuda.empty(8 * total), cuda.empty(8 * total)]
            cuda.launch(kernel("seed_compact"), count, d_slot, cuda.to_device(np.cumsum(bands) - bands),
                        cuda.to_device(bands.astype(np.int32)), np.int32(begin), np.int32(count),
                        band_contig, band_lo, band_hi, *out)
            parts.append([cuda.from_device(buf, (total,), dtype).astype(np.int64)
                          for buf, dtype in zip(out, (np.int32, np.int32, np.int64, np.int64))])
        cands = Candidates(*(np.concatenate([p[i] for p in parts]) for i in range(4))) if parts else Candidates()
        stats.bands = len(cands)
        return cands, stats

    def _resident_genome(self, reference):
        """The reference codes in device memory, uploaded once per run (a plain allocation)."""
        if self._genome_of is not reference:
            self._genome = cuda.to_device(reference.codes)
            self._genome_of = reference
        return self._genome

    def filter(self, mode, rows, cands, reference):
        """GateKeeper on the GPU: reads and windows gathered there (kernels/gather.cu) from the resident genome
        and this batch's rows, encoded and filtered there; only the decisions come back."""
        keep = np.ones(len(cands), dtype=bool)
        if mode is None:
            return keep
        from mapper.filters._gpu import GpuGateKeeper
        gk = GpuGateKeeper()
        genome, reads = self._resident_genome(reference), self._rows_on_device(rows)
        for members, L, e in windows.groups(rows, cands):
            n = len(members)
            read_start = rows.start[cands.row[members]]
            read_rows = _gather(reads, read_start, read_start, read_start + L, L)
            ref_rows = _gather(genome, *windows.spans(mode, rows, cands, reference, members, L, e))
            if mode == "improved":
                keep[members] = gk.improved_device(read_rows, ref_rows, n, L, L + 3 * e, e)[0]
            else:
                keep[members] = gk.faithful_device(ref_rows, read_rows, n, L, e)[0]
        return keep

    def _rows_on_device(self, rows):
        """This batch's strand-row codes in device memory (one upload per batch, shared by the stages)."""
        if self._rows_of is not rows:
            self._rows = cuda.to_device(rows.codes)
            self._rows_of = rows
        return self._rows

    def verify(self, rows, cands, reference):
        n = len(cands)
        if n == 0:
            return host_verify(rows, cands, reference)
        wstart, wend = cands.windows(rows, reference)
        best, n_ends, ends, starts = verify_windows(
            self._resident_genome(reference), self._rows_on_device(rows), rows.start[cands.row], rows.length[cands.row],
            rows.e[cands.row], wstart, wend - wstart)
        overflow = n_ends > MAX_ENDS
        found = np.flatnonzero((best >= 0) & ~overflow)
        owner, k = ragged_arange(n_ends[found])
        window = found[owner]
        gpu = Mappings(cands.row[window], cands.contig[window], wstart[window] + starts[k, window],
                       wstart[window] + ends[k, window] + 1, best[window].astype(np.int64))
        if not overflow.any():
            return gpu
        host = host_verify(rows, cands.subset(overflow), reference)
        return Mappings(*(np.concatenate([getattr(gpu, f), getattr(host, f)])
                          for f in ("row", "contig", "start", "end", "edits")))


def _chunks(hits, capacity):
    """(begin, end) row ranges whose hits sum to at most `capacity` (a single larger row gets its own)."""
    total = np.cumsum(hits)
    begin, n = 0, len(hits)
    while begin < n:
        base = total[begin - 1] if begin else 0
        end = max(int(np.searchsorted(total, base + capacity, side="right")), begin + 1)
        yield begin, end
        begin = end


def _gather(codes, start, lo, hi, width):
    """Device ASCII rows [n, width] of a device code array (kernels/gather.cu; N outside [lo, hi))."""
    n = len(start)
    out = cuda.empty(n * width)
    cuda.launch(cuda.function("gather.cu", "gather_ascii"), n * width, codes,
                *(cuda.to_device(np.asarray(a, dtype=np.int64)) for a in (start, lo, hi)),
                np.int32(width), np.int64(n * width), out)
    return out


def verify_windows(genome, reads, read_start, read_len, max_e, win_start, win_len):
    """Launch kernels/myers.cu on n windows. `genome` is a device buffer or host codes, `reads` host codes.
    Returns host arrays best [n], n_ends [n], ends [MAX_ENDS, n], starts [MAX_ENDS, n] (window-relative)."""
    n = len(read_start)
    if isinstance(genome, np.ndarray):
        genome = cuda.to_device(genome.astype(np.uint8, copy=False))
    if isinstance(reads, np.ndarray):
        reads = cuda.to_device(reads.astype(np.uint8, copy=False))
    words = max(1, -(-int(np.max(read_len)) // 64))
    kernel = cuda.function("myers.cu", "verify_windows", MAX_WORDS=words, MAX_ENDS=MAX_ENDS)
    best, n_ends = cuda.empty(4 * n), cuda.empty(4 * n)
    ends, starts = cuda.empty(4 * MAX_ENDS * n), cuda.empty(4 * MAX_ENDS * n)
    cuda.launch(kernel, n, genome, reads,
                cuda.to_device(read_start.astype(np.int64)), cuda.to_device(read_len.astype(np.int32)),
                cuda.to_device(max_e.astype(np.int32)), cuda.to_device(win_start.astype(np.int64)),
                cuda.to_device(win_len.astype(np.int32)), np.int32(n), best, n_ends, ends, starts)
    return (cuda.from_device(best, (n,), np.int32), cuda.from_device(n_ends, (n,), np.int32),
            cuda.from_device(ends, (MAX_ENDS, n), np.int32), cuda.from_device(starts, (MAX_ENDS, n), np.int32))
