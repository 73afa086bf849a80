"""The host's cores this process may run on (its CPU affinity: a batch job's share, not the whole machine)."""
import os


def usable_cores():
    """Cores of this process's CPU affinity (os.cpu_count() where the platform has none), at least 1."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
