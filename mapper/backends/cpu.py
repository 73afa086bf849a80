"""The cpu backend: numpy-vectorised seeding and filter; verification by kernels/myers.cu compiled for the
host (mapper/backends/host.py: the GPU's kernel on every core), or by its numpy twin without a compiler."""
import numpy as np

from mapper.backends import host
from mapper.backends.base import Backend
from mapper.filters import windows
from mapper.filters.gatekeeper import make_filter
from mapper.seeding import seed
from mapper.verify import MAX_ENDS, Mappings, kernel_defines, kernel_mappings, verify

VERIFY_CHUNK = 1 << 20  # windows per kernel call: bounds the answer planes (about 100 bytes a window)


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
        lib = host.library("myers.cu", **kernel_defines(rows.length.max(initial=1)))
        if lib is None or not len(cands):
            return verify(rows, cands, reference)
        return Mappings.concat([self._verify_host(lib, rows, cands.subset(slice(a, a + VERIFY_CHUNK)), reference)
                                for a in range(0, len(cands), VERIFY_CHUNK)])

    @staticmethod
    def _verify_host(lib, rows, cands, reference):
        n = len(cands)
        wstart, wend = cands.windows(rows, reference)
        best, n_ends = np.empty(n, np.int32), np.empty(n, np.int32)
        ends, starts, edits = (np.empty((MAX_ENDS, n), np.int32) for _ in range(3))
        i32 = lambda a: np.ascontiguousarray(a, dtype=np.int32)
        host.call(lib.verify_windows_host, host.threads(), np.ascontiguousarray(reference.codes), rows.codes,
                  np.ascontiguousarray(rows.start[cands.row]), i32(rows.length[cands.row]), i32(rows.e[cands.row]),
                  np.ascontiguousarray(wstart), i32(wend - wstart), n, best, n_ends, ends, starts, edits)
        maps, over = kernel_mappings(cands.row, cands.contig, wstart, best, n_ends, ends, starts, edits)
        return Mappings.concat([maps, verify(rows, cands.subset(over), reference)]) if len(over) else maps
