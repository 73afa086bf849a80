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

from mapper.alphabet import CODE_N
from mapper.backends.base import Backend
from mapper.backends.cuda import compile_module
from mapper.seeding import ragged_arange, seed
from mapper.verify import Mappings, verify as host_verify

MAX_ENDS = 8
BLOCK = 128


class CudaBackend(Backend):
    name = "cuda"
    devices = {"seed": "cpu", "verify": "cuda"}  # overrides Backend.devices: seeding is on the host here

    def __init__(self):
        import pycuda.gpuarray as gpuarray
        self._gpuarray = gpuarray
        self._genome = None
        self._genome_of = None
        self.host_redone = 0  # windows with more than MAX_ENDS optimal ends, verified on the host

    def seed(self, rows, index):
        return seed(rows, index)

    def _resident_genome(self, reference):
        """The reference codes in device memory, uploaded once per run (a plain allocation)."""
        if self._genome_of is not reference:
            self._genome = self._gpuarray.to_gpu(np.ascontiguousarray(reference.codes))
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
    """Launch kernels/myers.cu on n windows: genome (device array or host codes), reads (host codes).
    Returns host arrays best [n], n_ends [n], ends [MAX_ENDS, n], starts [MAX_ENDS, n] (window-relative)."""
    import pycuda.gpuarray as gpuarray
    n = len(read_start)
    to_gpu = lambda a, dtype: gpuarray.to_gpu(np.ascontiguousarray(a, dtype=dtype))
    if isinstance(genome, np.ndarray):
        genome = to_gpu(genome, np.uint8)
    best, n_ends = gpuarray.empty(n, np.int32), gpuarray.empty(n, np.int32)
    ends, starts = gpuarray.empty(MAX_ENDS * n, np.int32), gpuarray.empty(MAX_ENDS * n, np.int32)
    words = max(1, -(-int(np.max(read_len)) // 64))
    kernel = compile_module("myers.cu", MAX_WORDS=words, MAX_ENDS=MAX_ENDS, CODE_N=CODE_N).get_function("verify_windows")
    kernel(genome, to_gpu(reads, np.uint8), to_gpu(read_start, np.int64), to_gpu(read_len, np.int32),
           to_gpu(max_e, np.int32), to_gpu(win_start, np.int64), to_gpu(win_len, np.int32), np.int32(n),
           best, n_ends, ends, starts, block=(BLOCK, 1, 1), grid=(-(-n // BLOCK), 1))
    return best.get(), n_ends.get(), ends.get().reshape(MAX_ENDS, n), starts.get().reshape(MAX_ENDS, n)
