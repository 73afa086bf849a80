"""The interface every backend implements (backends/__init__.py chooses between them).

A backend takes and returns arrays (dataclasses of numpy arrays from seeding.py and verify.py); it never
sees files, options or the CLI. `cpu` is always there; `cuda` (PyCUDA + kernels/*.cu) is imported only
when asked for, so `import mapper` works on a machine without a GPU.
"""
import abc

from mapper.seeding import RowGroup


class Backend(abc.ABC):
    name = "?"

    @property
    def devices(self):
        """Where each stage runs ({"seed": "cpu", "verify": "cuda"}, ...): printed in the run summary."""
        return {"seed": self.name, "verify": self.name}

    def start(self):
        """Make the device ready (the cuda backend: its CUDA context) ahead of `load`: open_mapping calls it
        while the index opens in another thread. Nothing to do where there is no device."""

    def load(self, index, memory=None):
        """Make the index resident where the backend works, once per run, before the first batch (the cuda
        backend uploads it, within `memory` bytes of device memory if given; the cpu backend maps it from
        disk as it goes)."""

    def index_parts(self, index, rows):
        """Iterate once per part of the index the stages must run against for `rows` (one part, the whole
        index, unless the cuda backend maps a reference too big for its device in parts)."""
        yield index

    def row_groups(self, rows, index):
        """`rows` as the seeding.RowGroups the stages run on one after the other (seeding.hit_groups), so
        that a batch's working memory stays within the backend's budget; one group unless a backend bounds it."""
        return [RowGroup(0, rows.n_reads, rows)]

    @property
    def whole_index(self):
        """Whether `index_parts` yields once (the index resident): then a row group's mappings are complete
        when it is verified, and the pipeline hands them on before the next group is seeded."""
        return True

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

    def verify_parts(self, rows, cands, reference):
        """`verify`'s mappings as a list of Mappings, for a caller that need not join them (the render
        processes' batch file takes a batch's parts as they are: at genome scale a batch holds 10^8
        mappings, and each join is a copy in the mapping thread)."""
        return [self.verify(rows, cands, reference)]
