"""The cpu backend: the cuda backend's own code and kernels, run on the host.

`CpuBackend` is the cuda mapping backend (mapper/backends/cuda_mapping.py) with the host device layer
(mapper/device/host.py) active: kernels/*.cu compiled as C++ with OpenMP, "device" buffers in host memory.
So seeding, the GateKeeper filter and verification are compiled and multi-threaded, and the SAM is the
cuda backend's byte for byte because it is the same code. Without a C++ compiler, `NumpyBackend` does the
same work with numpy (seeding.py, verify.py: several times slower) and gkmap says so on stderr.
"""
import functools
import logging

import numpy as np

from mapper.device import host
from mapper.backends.base import Backend
from mapper.backends.cuda_mapping import CudaBackend
from mapper.device import using
from mapper.filters import windows
from mapper.filters.gatekeeper import make_filter
from mapper.seeding import hit_groups, seed
from mapper.verify import verify

log = logging.getLogger("gkmap")
HIT_BUDGET = 1 << 22  # seed hits the numpy seeder expands at once (~1 KB each through the adjacency filter)


def _on_host(method):
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with using(host):
            return method(self, *args, **kwargs)
    return run


class CpuBackend(CudaBackend):
    name = "cpu"

    def __init__(self, threads=None, memory=None):
        super().__init__(work=memory)  # the batches' working budget (--memory)
        host.set_threads(threads)  # the kernels' OpenMP threads (-t), for this process

    start = _on_host(CudaBackend.start)
    load = _on_host(CudaBackend.load)
    row_groups = _on_host(CudaBackend.row_groups)
    seed = _on_host(CudaBackend.seed)
    filter = _on_host(CudaBackend.filter)
    filtered = _on_host(CudaBackend.filtered)
    verify = _on_host(CudaBackend.verify)
    verify_parts = _on_host(CudaBackend.verify_parts)


class NumpyBackend(Backend):
    """The cpu backend where no C++ compiler is installed: numpy seeding and filter, numpy Myers."""
    name = "cpu"

    def row_groups(self, rows, index):
        return hit_groups(rows, index, HIT_BUDGET)

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


def cpu_backend(threads=None, memory=None):
    """CpuBackend where kernels can be built (a C++ compiler), else NumpyBackend, said once on stderr."""
    if host.available():
        return CpuBackend(threads, memory)
    log.warning("no C++ compiler (g++): the cpu backend runs on numpy, several times slower")
    return NumpyBackend()
