"""The cpu backend: numpy-vectorised seeding and filter, edlib verification."""
import numpy as np

from mapper.backends.base import Backend
from mapper.filters import windows
from mapper.filters.gatekeeper import make_filter
from mapper.seeding import seed
from mapper.verify import verify


class CpuBackend(Backend):
    name = "cpu"

    def seed(self, rows, index):
        return seed(rows, index)

    def filter(self, mode, rows, cands, reference):
        keep = np.ones(len(cands), dtype=bool)
        if mode is None:
            return keep
        filt = make_filter(mode, "cpu")
        for members, L, e in windows.groups(rows, cands):
            read_start = rows.start[cands.row[members]]
            reads = windows.host_rows(rows.codes, read_start, read_start, read_start + L, L)
            ref = windows.host_rows(reference.codes, *windows.spans(mode, rows, cands, reference, members, L, e))
            keep[members] = filt(reads, ref, e)[0]
        return keep

    def verify(self, rows, cands, reference):
        return verify(rows, cands, reference)
