"""The interface every backend implements, and the choice between them.

A backend takes and returns arrays (dataclasses of numpy arrays from seeding.py and verify.py); it never
sees files, options or the CLI. `cpu` (numpy + edlib) is always there; `cuda` (PyCUDA + kernels/*.cu) is
imported only when asked for, so `import mapper` works on a machine without a GPU.
"""
import abc
import importlib.util

from mapper.device import cuda_available
from mapper.errors import UsageError


class Backend(abc.ABC):
    name = "?"

    @property
    def devices(self):
        """Where each stage runs ({"seed": "cpu", "verify": "cuda"}, ...): printed in the run summary."""
        return {"seed": self.name, "verify": self.name}

    def load(self, index, memory=None):
        """Make the index resident where the backend works, once per run, before the first batch (the cuda
        backend uploads it, within `memory` bytes of device memory if given; the cpu backend maps it from
        disk as it goes)."""

    def index_parts(self, index, rows):
        """Iterate once per part of the index the stages must run against for `rows` (one part, the whole
        index, unless the cuda backend maps a reference too big for its device in parts)."""
        yield index

    def row_groups(self, rows, index):
        """`rows` as the groups the stages run on one after the other (seeding.hit_groups), so that a batch's
        working memory stays within the backend's budget; one group unless a backend bounds it."""
        return [rows]

    @abc.abstractmethod
    def seed(self, rows, index):
        """StrandRows, KmerIndex -> (seeding.Candidates, seeding.SeedStats)."""

    @abc.abstractmethod
    def filter(self, mode, rows, cands, reference):
        """bool [len(cands)]: the candidate windows the GateKeeper filter in `mode` ('improved', 'faithful';
        None: keep all) lets through, on the inputs mapper/filters/windows.py defines."""

    def filtered(self, mode, rows, cands, reference):
        """(the candidates `filter` lets through, how many it rejected): the filter stage as the pipeline runs
        it. A backend may decide and compact in one step where the candidates are (cuda)."""
        if mode is None or not len(cands):
            return cands, 0
        keep = self.filter(mode, rows, cands, reference)
        rejected = int((~keep).sum())
        return (cands.subset(keep) if rejected else cands), rejected

    @abc.abstractmethod
    def verify(self, rows, cands, reference):
        """StrandRows, Candidates, Reference -> verify.Mappings (all best ends per window, <= e edits)."""


def get_backend(device, threads=None):
    """'cpu', 'cuda' or 'auto' (cuda when a GPU and the cuda mapping backend are there, else cpu); `threads`:
    the cpu backend's mapping threads (None: every core the process may use)."""
    from mapper.backends.cpu import cpu_backend
    if device == "cpu":
        return cpu_backend(threads)
    if device in ("cuda", "auto"):
        if device == "cuda" and not cuda_available():
            raise UsageError("--device cuda: no CUDA GPU or no pycuda here (install gkmap[gpu]); use --device cpu")
        if importlib.util.find_spec("mapper.backends.cuda_mapping") is not None and cuda_available():
            from mapper.backends.cuda_mapping import CudaBackend
            return CudaBackend()
        if device == "cuda":
            raise UsageError("--device cuda: the cuda mapping backend is not part of this version yet; use --device cpu")
        return cpu_backend(threads)
    raise UsageError(f"--device must be auto, cpu or cuda, not {device!r}")
