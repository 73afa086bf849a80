"""`gkmap map --index-kind neighbourhood`: the mapping pipeline (pipeline.py) with neighbourhood seeding.

Only the seeding stage changes: `NeighbourhoodBackend` wraps the chosen backend (cpu or cuda), seeds with the
neighbourhood index (numpy on cpu, kernels/phf.cu on cuda) and hands the filter and the verification to the
wrapped backend, so the candidates go through the same GateKeeper filter, the same verification (edlib, or
kernels/myers.cu on cuda: the paper's "extend" step, returning edlib's exact answer), the same locus
selection, CIGAR/MD and SAM writer as the k-mer path: the same SAM format and the same contract (every
reported mapping has edit distance <= e). jobs.py picks `open_neighbourhood` instead of the
pipeline's `open_mapping` for this index kind; everything after the opening is shared.
"""
import time

from mapper.backends import get_backend
from mapper.backends.base import Backend
from mapper.neighbourhood import seeding
from mapper.neighbourhood.index import open_index
from mapper.pipeline import Counters, filter_setting
from mapper.verify import Mappings

VERIFY_CHUNK = 1 << 26  # candidate windows per verification call


class NeighbourhoodBackend(Backend):
    """Neighbourhood seeding in front of another backend's filter and verification."""

    def __init__(self, inner, step=1, nb_errors=1, lookup="phf"):
        self.inner, self.step, self.nb_errors, self.lookup = inner, step, nb_errors, lookup
        self.name = inner.name
        self._device_seeder = None
        if inner.name == "cuda":
            from mapper.neighbourhood.gpu import DeviceSeeder  # pycuda only when cuda was chosen
            self._device_seeder = DeviceSeeder()

    @property
    def devices(self):
        return self.inner.devices

    def seed(self, rows, index):
        if self._device_seeder is not None:
            return self._device_seeder.seed(rows, index, self.step, self.nb_errors, self.lookup)
        return seeding.seed(rows, index, self.step, self.nb_errors, self.lookup)

    def filter(self, mode, rows, cands, reference):
        return self.inner.filter(mode, rows, cands, reference)

    def filtered(self, mode, rows, cands, reference):
        return self.inner.filtered(mode, rows, cands, reference)

    def verify(self, rows, cands, reference):
        """The wrapped backend's verification, VERIFY_CHUNK windows at a time: with --nb-errors 2 a batch can
        give billions of windows, more than one device launch or buffer holds."""
        if len(cands) <= VERIFY_CHUNK:
            return self.inner.verify(rows, cands, reference)
        parts = [self.inner.verify(rows, cands.subset(slice(begin, begin + VERIFY_CHUNK)), reference)
                 for begin in range(0, len(cands), VERIFY_CHUNK)]
        return Mappings.concat(parts)


def open_neighbourhood(opts):
    """(index, backend, filter mode, Counters) of a neighbourhood run (pipeline.open_mapping's counterpart)."""
    t = time.perf_counter()
    index = open_index(opts.reference, opts.seed_len, opts.nb_len, opts.spaced, opts.index_dir)
    backend = NeighbourhoodBackend(get_backend(opts.device, opts.threads, opts.memory), opts.step, opts.nb_errors,
                                   opts.lookup)
    filter_mode, stages = filter_setting(opts.filter, backend)
    counters = Counters(stages=f"neighbourhood index, {opts.lookup} look-ups; {stages}")
    counters.times["load"] = time.perf_counter() - t
    return index, backend, filter_mode, counters
