"""render.HostWorkers: a batch rendered slice by slice in worker processes equals the inline rendering
(SAM text, NH, record count), and a daemonic process (a Dask worker by default), which may not start
processes, renders inline."""
import multiprocessing

import numpy as np
import pytest

from conftest import READS, SHIGELLA
from mapper.backends.cpu import CpuBackend
from mapper.index import load_index
from mapper.pipeline import Counters, find_mappings
from mapper.reads import read_batches
from mapper.render import HostWorkers, render


@pytest.fixture(scope="module")
def mapped(index_dir):
    index = load_index(SHIGELLA, index_dir(SHIGELLA))
    batch = next(read_batches(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 1500))
    rows, maps = find_mappings(batch, index, CpuBackend(), None, None, "r1", Counters())
    return index, batch, rows, maps


def test_render_now_in_processes_equals_inline(mapped):
    index, batch, rows, maps = mapped
    want = render(batch, rows, maps, index.reference, False, 2, True)
    with HostWorkers(3, 1, index.reference, False, 2, True) as workers:
        got = workers.render_now(batch, rows, maps)
        assert workers._pool is not None
    assert (got.sam, got.unmapped, got.records) == (want.sam, want.unmapped, want.records)
    assert np.array_equal(got.nh, want.nh) and want.records > 500


def test_daemonic_process_renders_inline(mapped, monkeypatch):
    index, batch, rows, maps = mapped
    monkeypatch.setattr(type(multiprocessing.current_process()), "daemon", property(lambda self: True))
    with HostWorkers(3, 1, index.reference, False, None, False) as workers:
        got = workers.render_now(batch, rows, maps)
        assert workers._pool is None
    assert got.sam == render(batch, rows, maps, index.reference, False, None, False).sam
