"""What the Dask tests (test_cluster.py, test_cluster_paired.py) share besides the cluster fixtures in
conftest.py: the fault injections they run on one worker before a run, and the reading of the run's summary
of chunks per worker. The workers cannot import this module (it is not installed), so cloudpickle ships its
functions by value."""
import re
import sys

import cloudpickle

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def chunks_per_worker(err):
    """({worker name: chunks it mapped}, chunks retried) from a Dask run's stderr."""
    found = re.search(r"chunks per worker: ([^;]+); retried chunks: (\d+)", err)
    assert found, err
    per_worker = {name: int(n) for name, n in (item.rsplit(" ", 1) for item in found.group(1).split(", "))}
    return per_worker, int(found.group(2))


def kill_worker_on_first_call(name):
    """Fault injection, run on one worker: the first call of mapper.runners.cluster's `name` there kills
    the process."""
    import os
    import mapper.runners.cluster
    setattr(mapper.runners.cluster, name, lambda *args, **kwargs: os._exit(1))


def raise_on_first_call(name):
    """Fault injection, run on one worker: the first call of mapper.runners.cluster's `name` there raises."""
    import mapper.runners.cluster
    original = getattr(mapper.runners.cluster, name)

    def fail(*args, **kwargs):
        setattr(mapper.runners.cluster, name, original)
        raise RuntimeError("injected fault")
    setattr(mapper.runners.cluster, name, fail)
