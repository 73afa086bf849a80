"""The thread pool of `gkmap kmers`: one worker per host thread (`-t`, mapper.device.host.threads()).

Every part of a count that runs on several host threads takes its workers here: the cpu backend's parsing,
extraction and per-bin sorts (backend.py), the reading threads of a plain file (reading.py), the table's
bin writes and checksums (store.py), the decoding of spilled bins for the GPU's merge (gpu.py). numpy,
the compiled kernels, preadv/pwrite and ISA-L's CRC release the GIL, so the workers run side by side.
"""
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from mapper.device import host

_POOL = None


def set_threads(n):
    """`-t`: host threads for the pool and the compiled kernels (0: every core this process may use)."""
    global _POOL
    host.set_threads(n)
    if _POOL is not None:
        _POOL.shutdown()
        _POOL = None


def pool():
    """The process's thread pool (one worker per host thread)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=host.threads(), thread_name_prefix="gkmap-kmers")
    return _POOL


def in_order(work, items):
    """work(item) for each item, yielded in order, computed by the pool a few items ahead: at most one item
    per worker and one more in flight, so memory stays bounded by what that many results take. `work`
    must not wait for the pool itself."""
    ahead = deque()
    for item in items:
        ahead.append(pool().submit(work, item))
        if len(ahead) > host.threads():  # the pool's workers
            yield ahead.popleft().result()
    while ahead:
        yield ahead.popleft().result()
