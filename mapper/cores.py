"""The host's cores this process may run on (its CPU affinity: a batch job's share, not the whole machine)."""
import os
from concurrent.futures import ThreadPoolExecutor


def usable_cores():
    """Cores of this process's CPU affinity (os.cpu_count() where the platform has none), at least 1."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def on_cores(work, items, most=None):
    """[work(item) for item in items], in order, on up to every usable core (at most `most` threads; inline
    for one item): for numpy and hashlib work, which runs without the GIL. The first exception is raised
    once the running items end; the items not yet begun are dropped."""
    items = list(items)
    threads = min(len(items), usable_cores(), most or len(items))
    if threads <= 1:
        return [work(item) for item in items]
    pool = ThreadPoolExecutor(threads)
    try:
        return list(pool.map(work, items))
    finally:
        pool.shutdown(cancel_futures=True)
