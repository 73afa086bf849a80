"""The cpu backend: numpy-vectorised seeding and edlib verification."""
from mapper.backends.base import Backend
from mapper.seeding import seed
from mapper.verify import verify


class CpuBackend(Backend):
    name = "cpu"

    def seed(self, rows, index):
        return seed(rows, index)

    def verify(self, rows, cands, reference):
        return verify(rows, cands, reference)
