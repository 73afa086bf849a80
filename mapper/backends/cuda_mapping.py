"""The cuda backend of the mapper: verification on the GPU (kernels/myers.cu), the reference resident
in device memory for the whole run.

Stage placement (reported in the run summary, so a silent cpu fallback cannot hide): seeding runs on the
host (numpy, mapper/seeding.py) in this version; the GateKeeper filter and verification run on the GPU.
The kernel returns, per window, the best distance, every optimal end and its leftmost start: exactly
edlib's answer (mapper/verify.py's contract), so the SAM equals the cpu backend's byte for byte. A window
with more than MAX_ENDS optimal ends (long tandem repeats) is redone on the host with edlib.

pycuda is imported here and in mapper/backends/cuda.py only, and only when the cuda backend is asked for.
"""
import numpy as np

from mapper.backends import cuda
from mapper.backends.base import Backend
from mapper.seeding import ragged_arange, seed
from mapper.verify import Mappings, verify as host_verify

MAX_ENDS = 8


class CudaBackend(Backend):
    name = "cuda"
    devices = {"seed": "cpu", "verify": "cuda"}  # overrides Backend.devices: seeding is on the host here

    def __init__(self):
        self._genome = None
        self._genome_of = None
        self.host_redone = 0  # windows with more than MAX_ENDS optimal ends, verified on the host

    def seed(self, rows, index):
        return seed(rows, index)

    def _resident_genome(self, reference):
        """The reference codes in device memory, uploaded once per run (a plain allocation)."""
        if self._genome_of is not reference:
            self._genome = cuda.to_device(reference.codes)
            self._genome_of = reference
        return self._genome

    def verify(self, rows, cands, reference):
        n = len(cands)
        if n == 0:
            return host_verify(rows, cands, reference)
        wstart, wend = cands.windows(rows, reference)
        best, n_ends, ends, starts = verify_windows(
            self._resident_genome(reference), rows.codes, rows.start[cands.row], rows.length[cands.row],
            rows.e[cands.row], wstart, wend - wstart)
        overflow = n_ends > MAX_ENDS
        self.host_redone += int(overflow.sum())
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


def verify_windows(genome, reads, read_start, read_len, max_e, win_start, win_len):
    """Launch kernels/myers.cu on n windows. `genome` is a device buffer or host codes, `reads` host codes.
    Returns host arrays best [n], n_ends [n], ends [MAX_ENDS, n], starts [MAX_ENDS, n] (window-relative)."""
    n = len(read_start)
    if isinstance(genome, np.ndarray):
        genome = cuda.to_device(genome.astype(np.uint8, copy=False))
    words = max(1, -(-int(np.max(read_len)) // 64))
    kernel = cuda.function("myers.cu", "verify_windows", MAX_WORDS=words, MAX_ENDS=MAX_ENDS)
    best, n_ends = cuda.empty(4 * n), cuda.empty(4 * n)
    ends, starts = cuda.empty(4 * MAX_ENDS * n), cuda.empty(4 * MAX_ENDS * n)
    cuda.launch(kernel, n, genome, cuda.to_device(reads.astype(np.uint8, copy=False)),
                cuda.to_device(read_start.astype(np.int64)), cuda.to_device(read_len.astype(np.int32)),
                cuda.to_device(max_e.astype(np.int32)), cuda.to_device(win_start.astype(np.int64)),
                cuda.to_device(win_len.astype(np.int32)), np.int32(n), best, n_ends, ends, starts)
    return (cuda.from_device(best, (n,), np.int32), cuda.from_device(n_ends, (n,), np.int32),
            cuda.from_device(ends, (MAX_ENDS, n), np.int32), cuda.from_device(starts, (MAX_ENDS, n), np.int32))
