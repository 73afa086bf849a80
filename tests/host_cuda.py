"""A stand-in for mapper.device.cuda in tests: the host device layer (mapper/device/host.py, the
kernels compiled as C++ with OpenMP), with freshly allocated buffers poisoned so that an output a kernel
failed to write shows. Tests hand it to the cuda backend's modules in place of the GPU layer; on a GPU the
same tests run against the real device (tests marked `gpu`)."""
import numpy as np

from mapper.device.host import (SHIM, Timer, copy_into, copy_out, exclusive_scan, fetch_later,  # noqa: F401
                                  free_memory, from_device, function, item, launch, limit_pool, memset, shifted,
                                  to_device, upload)


WARP = 1  # lane kernels need a warp's lanes in lockstep; the host runs an item's as one (LANES)
SEED_BY_ROW = False  # and the GPU's seeding kernels (the cpu backend's are tested through mapper.device.host)
SEED_SLOTS = None  # launches as large as the GPU's
HOST_MEMORY = False  # a device of its own: what is uploaded is copied, the reference unpacked there


def empty(nbytes):
    return np.full(max(int(nbytes), 1), 0xA5, dtype=np.uint8)  # poisoned: unwritten output shows


scratch, scratch_copy = empty, to_device


def trim_pool(limit):
    """The host has no pool to trim, but the GPU's compares `limit` with its bytes: it must be a number."""
    assert isinstance(limit, int), limit
