"""render.HostWorkers: a batch rendered slice by slice in worker processes equals the inline rendering
(SAM text, NH, record count), and a daemonic process (a Dask worker by default), which may not start
processes, renders inline."""
import mmap
import multiprocessing
import os
import signal
import threading

import numpy as np
import pytest

from conftest import MEASLES, MEASLES_PAIR, READS, SHIGELLA
from mapper.backends.cpu import CpuBackend
from mapper.index import load_index
from mapper.pipeline import Counters, find_mappings
from mapper.reads import read_batches
from mapper.render import HostWorkers, RecordOptions, _signals_held, render


@pytest.fixture(scope="module")
def mapped(index_dir):
    index = load_index(SHIGELLA, index_dir(SHIGELLA))
    batch = next(read_batches(READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 1500))
    rows, maps = find_mappings(batch, index, CpuBackend(), None, None, "r1", Counters())
    return index, batch, rows, maps


def test_render_now_in_processes_equals_inline(mapped):
    """The processes map the codes where the main process unpacked them (Reference.codes_path, a memfd)."""
    index, batch, rows, maps = mapped
    assert index.reference.codes_path, "the index's codes should be shared with the render processes"
    want = render(batch, rows, maps, index.reference, False, 2, True)
    with HostWorkers(3, 1, index.reference, RecordOptions(False, 2, True)) as workers:
        got = workers.render_now(batch, rows, maps)
        assert workers._pool is not None
    assert (got.sam, got.unmapped, got.records) == (want.sam, want.unmapped, want.records)
    assert np.array_equal(got.nh, want.nh) and want.records > 500


def test_mappings_in_parts_render_as_joined(mapped, tmp_path):
    """The mapping thread hands verification's parts (narrow dtypes, some empty) to the render processes
    unjoined: the batch file holds each field's parts one after the other (`settled` too, False for a part
    without it), the workers widen them, and the records and the slices' weights are those of the joined
    mappings."""
    from mapper.render import _read_batch, _row_counts, _slice, _write_batch
    from mapper.verify import Mappings
    index, batch, rows, maps = mapped
    cut = [0, 10, 10, len(maps) // 2, len(maps)]
    narrow = lambda m, settled: Mappings(m.row.astype(np.int32), m.contig.astype(np.int32), m.start, m.end,
                                         m.edits.astype(np.int32), settled)
    # the cpu backend's records come settled where a whole stretch was verified; the last part has no flags
    assert maps.settled is not None and maps.settled.any()
    parts = [narrow(maps.take(np.arange(a, b)), maps.settled[a:b] if k < 3 else None)
             for k, (a, b) in enumerate(zip(cut[:-1], cut[1:]))]
    path, layout = _write_batch(str(tmp_path), batch, rows.e[:len(batch)], parts)
    assert layout["row"][1] == np.dtype(np.int32).str and layout["start"][1] == np.dtype(np.int64).str
    _, _, got, numbering = _read_batch(path, layout, batch.first)
    assert numbering == (len(batch), 0)
    for f in ("row", "contig", "start", "end", "edits"):
        assert np.array_equal(getattr(got, f), getattr(maps, f)), f
    assert np.array_equal(got.settled, np.r_[maps.settled[:cut[3]], np.zeros(len(maps) - cut[3], bool)])
    half = len(batch) // 2  # a worker's slice keeps its mappings' flags
    _, _, sub = _slice(batch, rows.e[:len(batch)], got, 0, half)
    mine = (got.row < half) | ((got.row >= len(batch)) & (got.row < len(batch) + half))
    assert len(sub) == mine.sum() and np.array_equal(sub.settled, got.settled[mine])
    n = len(batch)
    assert np.array_equal(_row_counts(parts, n), np.bincount(maps.row, minlength=2 * n))
    want = render(batch, rows, maps, index.reference, False, 2, True)
    with HostWorkers(3, 1, index.reference, RecordOptions(False, 2, True)) as workers:
        got = workers.render_now(batch, rows, parts)
    assert (got.sam, got.unmapped, got.records) == (want.sam, want.unmapped, want.records)


def test_batch_file_survives_short_writes(mapped, tmp_path, monkeypatch):
    """A batch file goes out in one writev where the kernel takes it all; where it takes a few bytes at a
    time (a full disk's last blocks, a signal), the rest follows and the file reads back the same."""
    import os
    from pathlib import Path
    from mapper.render import _read_batch, _write_batch
    index, batch, rows, maps = mapped
    e = rows.e[:len(batch)]
    whole = _write_batch(str(tmp_path), batch, e, maps)
    writev = os.writev
    monkeypatch.setattr(os, "writev", lambda fd, buffers: writev(fd, [bytes(buffers[0])[:7]]))
    short = _write_batch(str(tmp_path), batch, e, maps)
    assert Path(whole[0]).read_bytes() == Path(short[0]).read_bytes() and whole[1] == short[1]
    got, got_e, got_maps, _ = _read_batch(*short, batch.first)
    assert list(got.names[0:len(batch)]) == list(batch.names) and np.array_equal(got.seq, batch.seq)
    assert np.array_equal(got_e, e) and np.array_equal(got_maps.end, maps.end)


def test_daemonic_process_renders_inline(mapped, monkeypatch):
    index, batch, rows, maps = mapped
    monkeypatch.setattr(type(multiprocessing.current_process()), "daemon", property(lambda self: True))
    with HostWorkers(3, 1, index.reference, RecordOptions(False, None, False)) as workers:
        got = workers.render_now(batch, rows, maps)
        assert workers._pool is None
    assert got.sam == render(batch, rows, maps, index.reference, False, None, False).sam


def test_processes_spawned_before_the_index_render_short_batches_too(mapped):
    """A pool started early (`spawn`, before the reference is known) is adopted and used even for a batch
    shorter than batch_size; each job names the reference files, which the workers load on first use."""
    index, batch, rows, maps = mapped
    want = render(batch, rows, maps, index.reference, False, None, True)
    pool = HostWorkers.spawn(2)
    with HostWorkers(2, 10 ** 6, index.reference, RecordOptions(False, None, True)) as workers:
        workers.adopt(pool)
        got = workers.render_now(batch, rows, maps)
    assert (got.sam, got.unmapped, got.records) == (want.sam, want.unmapped, want.records)



def test_render_processes_run_nicer_than_the_main_process():
    """The render processes yield the cores to the main process, whose mapping thread drives the GPU
    (render.RENDER_NICE), whoever started them."""
    from mapper.render import RENDER_NICE
    pool = HostWorkers.spawn(2)
    try:
        assert {pool.submit(os.nice, 0).result() for _ in range(4)} == {min(os.nice(0) + RENDER_NICE, 19)}
    finally:
        pool.shutdown()

def test_processes_map_the_shared_codes_or_a_written_file(mapped, tmp_path, monkeypatch):
    """The render processes' reference: the contig table only, when the main process's codes are shared
    (Reference.codes_path: the index's codes, unpacked into a memfd); codes.npy beside it for codes of
    its own (a reference read from FASTA). Either way the same SAM, and no file left after."""
    import os
    import mapper.render as render_module
    from mapper.reference import Reference
    index, batch, rows, maps = mapped
    monkeypatch.setattr(render_module, "_temp_folders", lambda: (str(tmp_path), str(tmp_path)))
    ref = index.reference
    private = Reference(ref.names, ref.starts, ref.lengths, np.array(ref.codes))
    want = render(batch, rows, maps, ref, False, None, True)
    for reference, files in ((ref, ["contigs.npz"]), (private, ["codes.npy", "contigs.npz"])):
        with HostWorkers(2, 1, reference, RecordOptions(False, None, True)) as workers:
            got = workers.render_now(batch, rows, maps)
            assert sorted(os.listdir(workers._tmp.name)) == files
        assert (got.sam, got.unmapped, got.records) == (want.sam, want.unmapped, want.records)
    assert os.listdir(tmp_path) == []


def test_short_batch_with_many_mappings_renders_in_processes(mapped, monkeypatch):
    """A batch shorter than batch_size but with more mappings than INLINE_MAPPINGS (a few repeat reads at
    genome scale) starts the render processes instead of rendering in the main process; same bytes."""
    import mapper.render as render_module
    index, batch, rows, maps = mapped
    monkeypatch.setattr(render_module, "INLINE_MAPPINGS", len(maps.row) - 1)
    want = render(batch, rows, maps, index.reference, False, None, True)
    with HostWorkers(3, 10 ** 6, index.reference, RecordOptions(False, None, True)) as workers:
        got = workers.render_now(batch, rows, maps)
        assert workers._pool is not None
    assert (got.sam, got.unmapped, got.records) == (want.sam, want.unmapped, want.records)


def test_slices_carry_equal_mappings_not_equal_reads():
    """Worker jobs are cut by reads plus mappings: three repeat reads holding most of a batch's mappings
    get jobs of their own, and the jobs cover the batch once, in order."""
    from mapper.render import _slice_bounds
    n = 1000
    rows = np.concatenate([np.full(30_000, 10), np.full(30_000, n + 500), np.full(30_000, 990), np.arange(2 * n)])
    bounds = _slice_bounds(n, 4, np.bincount(rows, minlength=2 * n))
    assert bounds[0][0] == 0 and bounds[-1][1] == n and all(b == c for (_, b), (c, _) in zip(bounds, bounds[1:]))
    weight = lambda a, b: (b - a) + int(np.isin(rows % n, np.arange(a, b)).sum())
    assert max(weight(a, b) for a, b in bounds) < 2 * (n + len(rows)) / 4
    assert sum(a <= r < b for a, b in bounds for r in (10, 500, 990)) == 3 and len(bounds) == 4
    assert _slice_bounds(50_000, 2, np.zeros(100_000, np.int64)) == [(0, 10_000), (10_000, 20_000), (20_000, 30_000),
                                                      (30_000, 40_000), (40_000, 50_000)]


def test_big_parts_are_counted_from_a_sample():
    """A part of more than COUNT_EXACT mappings weighs the slices by every COUNT_STRIDE-th mapping: the
    heavy rows' counts stay within a few per cent, the light rows' add up to about theirs, and the pieces'
    counts (reads [a, b)) are the batch's rows a..b-1 and n+a..n+b-1."""
    from mapper.render import COUNT_EXACT, _row_counts
    from mapper.verify import Mappings
    rng = np.random.default_rng(5)
    n = 1000
    big = max(COUNT_EXACT, 1 << 20)
    rows = np.concatenate([np.full(big, 7), np.full(big // 2, n + 900), rng.integers(0, 2 * n, big)]).astype(np.int32)
    rng.shuffle(rows)
    part = Mappings(rows, *(np.zeros(len(rows), np.int32) for _ in range(4)))
    exact = np.bincount(rows, minlength=2 * n)
    got = _row_counts([part], n)
    assert not np.array_equal(got, exact)  # sampled
    assert all(abs(got[r] - exact[r]) < 0.03 * exact[r] for r in (7, n + 900))
    assert abs(int(got.sum()) - len(rows)) < 0.01 * len(rows)
    assert np.array_equal(_row_counts([part], n, 100, 300), np.concatenate([got[100:300], got[n + 100:n + 300]]))
    small = Mappings(*(a[:1000] for a in (part.row, part.contig, part.start, part.end, part.edits)))
    assert np.array_equal(_row_counts([small], n), np.bincount(small.row, minlength=2 * n))


def test_map_with_early_processes_equals_inline(tmp_path, monkeypatch, index_dir):
    """gkmap map on a 'big' input (render processes spawned while the index opens) writes the SAM of an
    inline run, byte for byte after the @PG line."""
    from mapper.options import MapOptions
    from mapper.runners import local, map_reads
    reads = READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz"
    sams = {}
    for early in (False, True):
        monkeypatch.setattr(local, "_early_processes", lambda opts, early=early: early)
        out = tmp_path / f"{early}.sam"
        map_reads(MapOptions(str(SHIGELLA), str(reads), device="cpu", index_dir=str(index_dir(SHIGELLA)),
                             output=str(out), batch_size=3000, threads=1 + 2 * early, quiet=True))
        sams[early] = [line for line in out.read_text().splitlines() if not line.startswith("@PG")]
    assert sams[True] == sams[False] and len(sams[True]) > 20000


def test_render_processes_start_early_for_many_reads_or_a_genome(tmp_path):
    """The rule of local._early_processes: a reads file of several batches, or a genome-sized reference."""
    from mapper.options import MapOptions
    from mapper.runners import local
    reads, small, genome = tmp_path / "r.fq", tmp_path / "small.fa", tmp_path / "genome.fa"
    reads.write_bytes(b"@r\nACGT\n+\nIIII\n" * 100)
    small.write_bytes(b">c\nACGT\n")
    with open(genome, "wb") as handle:
        handle.truncate(local.GENOME_FILE)  # sparse: its size, not its bytes
    rule = lambda ref, reads_path=reads, batch=100_000: local._early_processes(
        MapOptions(str(ref), str(reads_path), batch_size=batch))
    assert not rule(small) and rule(genome)
    assert rule(small, batch=10)  # 100 reads of ~20 bytes: more than one batch of 10
    assert not rule(small, reads_path="-") and rule(genome, reads_path="-")


def test_paired_end_pairs_in_render_processes_equal_inline(tmp_path, index_dir):
    """Read pairs rendered by render processes (HostWorkers.submit_call of paired.render_pairs: several
    batches, 3 processes) write the outputs and counts of pairs rendered inline, byte for byte after @PG."""
    from mapper.options import MapOptions
    from mapper.runners import map_reads
    outputs, summaries = [], []
    for threads, batch in ((1, 100_000), (3, 200)):
        out = tmp_path / f"t{threads}" / "o.sam"
        out.parent.mkdir()
        tally = map_reads(MapOptions(str(MEASLES), str(MEASLES_PAIR[0]), reads2=str(MEASLES_PAIR[1]), paired="pe",
                                     device="cpu", index_dir=str(index_dir(MEASLES)), output=str(out), quiet=True,
                                     threads=threads, batch_size=batch))
        outputs.append([[line for line in (out.parent / name).read_text().splitlines() if not line.startswith("@PG")]
                        for name in ("o.sam", "o_OEA.sam", "o_DIVET.vh")])
        summaries.append((tally.summary(), tally.mates.records, tally.mates.loci))
    assert outputs[0] == outputs[1] and len(outputs[0][0]) > 2000
    assert summaries[0] == summaries[1]


def test_a_signal_during_submit_is_handled_after_it():
    """A signal taken by another thread while the pool's books are open is held, then handled: the body
    runs to its end and the run's handler raises after it."""
    seen = []

    def handler(signum, frame):
        raise KeyboardInterrupt(signum)

    go = threading.Event()

    def take():  # a thread started before the block: its signal mask lets SIGTERM in
        go.wait()
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    taker = threading.Thread(target=take)
    taker.start()
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with _signals_held():
                go.set()
                taker.join()
                for _ in range(1000):  # instructions at which Python would run a handler
                    seen.append(len(seen))
                seen.append("end")
        assert seen[-1] == "end"
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)


_FAULTS_SCRIPT = """
import resource, sys
import numpy as np
from mapper import render
if sys.argv[1] == "keep":
    render.keep_freed_memory()
def job():
    arrays = [np.ones((1 + k % 3) << 20, dtype=np.uint8) for k in range(30)]
    del arrays
job()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
job()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not hasattr(__import__("ctypes").CDLL(None), "mallopt"), reason="no mallopt in this C library")
def test_render_processes_reuse_freed_memory():
    """A render process (keep_freed_memory, its initializer's) gets a job's arrays from the memory the job
    before freed, without a page fault per page: 60 MB in arrays of 1-3 MB (numpy asks for huge pages only
    from 4 MB on) cost about 15,000 faults a job by default."""
    import subprocess
    import sys
    faults = {mode: int(subprocess.run([sys.executable, "-c", _FAULTS_SCRIPT, mode], capture_output=True,
                                       text=True, check=True).stdout)
              for mode in ("keep", "default")}
    assert faults["keep"] < 1000 < 10_000 < faults["default"], faults


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no memfd on this system")
@pytest.mark.parametrize("advice", ["populate-read", "unknown"])
def test_render_processes_map_the_codes_populated(monkeypatch, advice):
    """A render process maps the main process's codes (a memfd) with its pages populated chunk by chunk from
    a place of its own (madvise), or, where the kernel knows no such advice, with MAP_POPULATE: either way
    it reads the codes the main process wrote, whatever the size (chunks and a last partial one)."""
    import mapper.render as render_module
    from mapper.reference import shared_bytes
    if advice == "unknown":
        monkeypatch.setattr(render_module, "_MADV_POPULATE_READ", 9999)  # EINVAL, as before Linux 5.14
    monkeypatch.setattr(render_module, "POPULATE_CHUNK", 1 << 16)
    codes, path = shared_bytes(5 * (1 << 16) + 4321)
    if path is None:
        pytest.skip("no memfd reachable through /proc here")
    codes[:] = np.random.default_rng(5).integers(0, 5, len(codes), dtype=np.uint8)
    for size in (len(codes), 1 << 16, 100):
        mapped = render_module._map_resident(path, size)
        assert np.array_equal(mapped, codes[:size])
        probe = mmap.mmap(-1, 3 << 16)
        assert render_module._populate(probe, 3 << 16) == (advice != "unknown")


def test_spilled_texts_are_written_over_once_out(tmp_path):
    """A render process writes its next text over a file whose text is out (render.SPARE: the main process
    releases it there), cut to the new text's size, instead of a fresh file each time; a text whose folder
    has no spares folder gets a file of its own, removed once out."""
    import io

    from mapper.outputs import emit
    from mapper.render import SPARE, _spill
    os.mkdir(tmp_path / SPARE)
    first = _spill("A" * 10_000, str(tmp_path), ".sam")
    inode = os.stat(first.path).st_ino
    out = io.TextIOWrapper(io.BufferedWriter(io.FileIO(tmp_path / "out.sam", "w")))
    emit(out, first)
    assert not os.path.exists(first.path) and len(os.listdir(tmp_path / SPARE)) == 1
    second = _spill(np.frombuffer(b"B" * 300, dtype=np.uint8), str(tmp_path), ".sam")
    assert os.stat(second.path).st_ino == inode and os.listdir(tmp_path / SPARE) == []
    assert second.size == 300 and os.path.getsize(second.path) == 300
    third = _spill("C" * 50, str(tmp_path), ".fq")  # no spare left: a new file
    assert os.stat(third.path).st_ino != inode
    assert second.data() == b"B" * 300 and third.text() == "C" * 50
    last = _spill("D" * 7, str(tmp_path), ".sam")  # over one of the two spares
    assert os.path.getsize(last.path) == 7 and len(os.listdir(tmp_path / SPARE)) == 1
    emit(out, last)
    out.close()
    assert (tmp_path / "out.sam").read_text() == "A" * 10_000 + "D" * 7
    assert sorted(os.listdir(tmp_path)) == ["out.sam", SPARE] and len(os.listdir(tmp_path / SPARE)) == 2
    alone = tmp_path / "alone"
    alone.mkdir()
    text = _spill("E", str(alone), ".sam")
    assert text.recycle == "" and text.data() == b"E" and os.listdir(alone) == []


def test_trace_render_script_summarises_a_traced_run(tmp_path):
    """scripts/trace_render.py runs `gkmap map` with its hook in every process (the render processes too)
    and prints the main thread's stages and waits, the render jobs and each phase of a job; the traced
    run writes the SAM an untraced one writes."""
    import re
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    reads = READS / "measles_Hm2_HiSeq_R1.fastq.gz"
    common = ["--batch-size", "300", "-t", "2", "--quiet", str(MEASLES), str(reads)]
    traced = subprocess.run([sys.executable, str(root / "scripts" / "trace_render.py"), "--keep", str(tmp_path / "trace"),
                             "--", "-o", str(tmp_path / "traced.sam"), *common],
                            capture_output=True, text=True, check=True, cwd=tmp_path)
    subprocess.run([sys.executable, "-m", "mapper", "map", "-o", str(tmp_path / "plain.sam"), *common],
                   check=True, cwd=root)
    body = lambda name: [line for line in (tmp_path / name).read_text().splitlines() if not line.startswith("@PG")]
    assert body("traced.sam") == body("plain.sam")
    out = traced.stdout
    main_thread = re.search(r"main thread: (.*)", out).group(1)  # its stages, the longest first
    assert re.search(r"\bseed \d", main_thread) and re.search(r"\bverify \d", main_thread)
    assert "pieces handed on" in out
    jobs, processes = map(int, re.search(r"render jobs: (\d+) in (\d+) processes", out).groups())
    assert jobs >= 2 and 1 <= processes <= 2 and "_worker_reference  first job:" in out
    # one file for the main process, one for each render process that ran a job
    assert len(list((tmp_path / "trace").glob("*.tsv"))) == 1 + processes


def test_a_released_text_touches_only_its_own_file(tmp_path):
    """Releasing a text moves or removes its own file and nothing else: with its run's spare folder gone (the
    run ending), the file is removed and the files beside it, the folder's own included, stay."""
    import shutil

    from mapper.render import SPARE, _spill
    os.mkdir(tmp_path / SPARE)
    (tmp_path / "user.sam").write_text("not gkmap's")
    text = _spill("A" * 100, str(tmp_path), ".sam")
    shutil.rmtree(tmp_path / SPARE)
    text.release()
    assert sorted(os.listdir(tmp_path)) == ["user.sam"] and (tmp_path / "user.sam").read_text() == "not gkmap's"


def test_trace_render_script_keeps_its_trace_only_in_a_new_folder(tmp_path):
    """--keep names a new or empty folder: a folder holding files is refused before anything runs."""
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[2] / "scripts" / "trace_render.py"
    (tmp_path / "1234.tsv").write_text("a user's table\n")
    run = subprocess.run([sys.executable, str(script), "--keep", str(tmp_path), "--", str(MEASLES), "reads.fq"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "new or empty folder" in run.stderr
    assert os.listdir(tmp_path) == ["1234.tsv"] and (tmp_path / "1234.tsv").read_text() == "a user's table\n"
