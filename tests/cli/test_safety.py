"""Issue 19's data-safety and fault rules (README "Errors and safety"): gkmap removes or replaces only what
it created, refuses an output that is an input or another output, writes through device nodes and symbolic
links, honours the umask, builds an index of a reference shorter than a k-mer, and ends on SIGTERM, SIGHUP
and SIGINT like on Ctrl-C (exit 128 + signal, one line, no partial output, no process or temporary file
left), while what a SIGKILL leaves is removed by the next run.

The table runs gkmap in-process in a folder of its own and checks, for every case, the exit code, the
one-line message, and that nothing in the folder changed but the files the case may write (so no input
changed and no temporary file was left). The fault tests run `python -m mapper map` as a subprocess in a
session of its own, so that every process it starts can be found in /proc.
"""
import contextlib
import fnmatch
import gzip
import itertools
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_checks import one_line_error, snapshot
from conftest import MEASLES, ROOT
from mapper.cli import main
from mapper.reference import read_fasta
from mapper.simulate import simulate, write_fastq

HOST = socket.gethostname()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A plain copy of the measles genome, reads simulated from it (a few for the table, 200,000 for the
    fault tests: a few seconds of mapping), and an index of it outside every case's folder."""
    folder = tmp_path_factory.mktemp("safety-data")
    (folder / "ref.fa").write_bytes(gzip.decompress(MEASLES.read_bytes()))
    reference = read_fasta(folder / "ref.fa", folder / "ref.fai")
    with open(folder / "reads.fq", "w") as out:
        write_fastq(simulate(reference, 50, 100), out)
    with open(folder / "many.fq", "w") as out:
        for _ in range(20):
            write_fastq(simulate(reference, 10_000, 100), out)
    assert main(["index", "--quiet", "--ws", "10", "--index", str(folder / "idx"), str(folder / "ref.fa")]) == 0
    return folder


# -- case setups: files beside ref.fa and reads.fq in the case's folder -----------------------------------

def user_folder(folder):
    (folder / "precious").mkdir()
    (folder / "precious" / "thesis.txt").write_text("years of work\n")


def empty_folder(folder):
    (folder / "empty").mkdir()


def stale_index(folder):
    """An index of another reference (gkmap's: may be rebuilt) with a file of the user's in it (kept)."""
    (folder / "other.fa").write_text(">x\n" + "ACGTTGCA" * 8 + "\n")
    assert main(["index", "--quiet", "--ws", "10", "--index", str(folder / "stale"), str(folder / "other.fa")]) == 0
    (folder / "stale" / "notes.txt").write_text("mine\n")


def link_to_reads(folder):
    (folder / "link.fq").symlink_to("reads.fq")


def hard_link_to_reads(folder):
    os.link(folder / "reads.fq", folder / "hard.fq")


def dangling_link_to_out(folder):
    (folder / "o2.sam").symlink_to("out.sam")


def oea_named_input(folder):
    shutil.copy(folder / "reads.fq", folder / "out_OEA.sam")


def sub_folder(folder):
    (folder / "sub").mkdir()


def link_to_sub_target(folder):
    (folder / "sub").mkdir()
    (folder / "out.sam").symlink_to("sub/target.sam")


def tiny_reference(folder):
    """Two 5-base contigs: shorter in total than the k-mer size (12)."""
    (folder / "tiny.fa").write_text(">a\nACGTA\n>b\nGGCTA\n")


def tiny_index(folder):
    tiny_reference(folder)
    assert main(["index", "--quiet", "--index", str(folder / "tidx"), str(folder / "tiny.fa")]) == 0


def pairs_file(folder):
    (folder / "pairs.txt").write_text("ACGTACGTAC\tACGTACGTAC\n")


@dataclass
class Case:
    id: str
    argv: list          # "{idx}": the shared index, "{cwd}": the case's folder
    code: int
    message: str = ""   # a fragment of the one-line error ("": the run succeeds)
    setup: object = None
    writes: tuple = ()  # patterns (fnmatch) of the paths the run may create or change
    cwd: str = "."


MAP = ["map", "ref.fa", "reads.fq", "--index", "{idx}"]
INDEX_FILES = ("*/meta.json", "*/*.npy", "*/ref.fai")

CASES = [
    # 1. an index folder is gkmap's only when it is new, empty, or an index of gkmap's own
    Case("index-into-user-folder", ["index", "ref.fa", "--index", "precious"], 2, "holds no gkmap index",
         user_folder),
    Case("map-into-user-folder", ["map", "ref.fa", "reads.fq", "--index", "precious", "-o", "out.sam"], 2,
         "holds no gkmap index", user_folder),
    Case("index-dot", ["index", "ref.fa", "--index", "."], 2, "holds no gkmap index"),
    Case("index-pwd", ["index", "ref.fa", "--index", "{cwd}"], 2, "holds no gkmap index"),
    Case("index-dot-empty", ["index", "../ref.fa", "--index", ".", "--ws", "10"], 0, "", empty_folder,
         ("empty", "empty/*"), cwd="empty"),
    Case("index-into-empty-folder", ["index", "ref.fa", "--index", "empty", "--ws", "10"], 0, "", empty_folder,
         ("empty", "empty/*")),
    Case("index-new-folder", ["index", "ref.fa", "--index", "new/idx", "--ws", "10"], 0, "", None,
         ("new", "new/idx", "new/idx/*")),
    Case("index-over-stale-index", ["index", "ref.fa", "--index", "stale", "--ws", "10"], 0, "", stale_index,
         ("stale",) + INDEX_FILES),
    Case("index-is-a-file", ["index", "ref.fa", "--index", "reads.fq"], 2, "exists and is not a folder"),
    # outputs never overwrite an input or each other
    Case("o-is-reference", MAP + ["-o", "ref.fa"], 2, "-o ref.fa is the input"),
    Case("o-is-reads", MAP + ["-o", "reads.fq"], 2, "-o reads.fq is the input"),
    Case("o-links-to-reads", MAP + ["-o", "link.fq"], 2, "is the input", link_to_reads),
    Case("o-hard-link-to-reads", MAP + ["-o", "hard.fq"], 2, "is the input", hard_link_to_reads),
    Case("o-in-default-index", ["map", "ref.fa", "reads.fq", "-o", "ref.fa.gkx/out.sam"], 2,
         "inside the index folder"),
    Case("o-in-given-index", MAP + ["-o", "{idx}/out.sam"], 2, "inside the index folder"),
    Case("unmapped-is-o", MAP + ["-o", "out.sam", "--unmapped", "out.sam"], 2, "--unmapped out.sam is also -o"),
    Case("unmapped-links-to-o", MAP + ["-o", "out.sam", "--unmapped", "o2.sam"], 2, "is also -o",
         dangling_link_to_out),
    Case("dump-is-unmapped", MAP + ["-o", "out.sam", "--unmapped", "u.fq", "--dump-candidates", "u.fq"], 2,
         "is also --unmapped"),
    Case("unmapped-is-reads", MAP + ["-o", "out.sam", "--unmapped", "reads.fq"], 2, "is the input"),
    Case("paired-oea-is-input", ["map", "--pe", "ref.fa", "out_OEA.sam", "reads.fq", "--index", "{idx}",
                                 "-o", "out.sam"], 2, "OEA SAM out_OEA.sam is the input", oea_named_input),
    Case("o-is-a-folder", MAP + ["-o", "sub"], 1, "is a folder", sub_folder),
    Case("kmers-o-is-input", ["kmers", "count", "-k", "5", "-o", "reads.fq", "reads.fq"], 2, "is the input"),
    Case("filter-o-is-input", ["filter", "-e", "1", "-o", "pairs.txt", "pairs.txt"], 2, "is the input",
         pairs_file),
    # written where they should be
    Case("o-and-unmapped-dev-null", MAP + ["-o", "/dev/null", "--unmapped", "/dev/null"], 0),
    Case("o-symbolic-link", MAP + ["-o", "out.sam"], 0, "", link_to_sub_target, ("sub/target.sam",)),
    Case("map-with-outputs", MAP + ["-o", "out.sam", "--unmapped", "u.fq"], 0, "", None, ("out.sam", "u.fq")),
    # 7. a reference shorter than a k-mer: an empty index, every read unmapped
    Case("tiny-reference-index", ["index", "tiny.fa", "--index", "tidx"], 0, "", tiny_reference,
         ("tidx", "tidx/*")),
    Case("tiny-reference-map", ["map", "tiny.fa", "reads.fq", "--index", "tidx", "-o", "out.sam"], 0, "",
         tiny_index, ("out.sam",)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, data, tmp_path, monkeypatch, capsys):
    for name in ("ref.fa", "reads.fq"):
        shutil.copy(data / name, tmp_path / name)
    if case.setup:
        case.setup(tmp_path)
    monkeypatch.chdir(tmp_path / case.cwd)
    argv = [a.format(idx=data / "idx", cwd=tmp_path) for a in case.argv]
    before, index_before = snapshot(tmp_path), snapshot(data / "idx")

    code = main(argv + ["--quiet"])

    err = capsys.readouterr().err
    assert code == case.code, err
    if case.message:
        one_line_error(err, case.message)
    else:
        assert err == ""
    after = snapshot(tmp_path)
    touched = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    unexpected = [p for p in touched if not any(fnmatch.fnmatch(p, w) for w in case.writes)]
    assert not unexpected, f"changed or left behind: {unexpected}"
    assert snapshot(data / "idx") == index_before
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_tiny_reference_maps_every_read_unmapped(data, tmp_path):
    tiny_index(tmp_path)
    assert main(["map", "--quiet", "--index", str(tmp_path / "tidx"), "-o", str(tmp_path / "out.sam"),
                 str(tmp_path / "tiny.fa"), str(data / "reads.fq")]) == 0
    records = [l.split("\t") for l in (tmp_path / "out.sam").read_text().splitlines() if not l.startswith("@")]
    assert len(records) == 50 and all(r[1] == "4" for r in records)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_outputs_and_index_honour_the_umask(data, tmp_path, mask):
    old = os.umask(mask)
    try:
        assert main(["map", "--quiet", "--ws", "10", "-o", str(tmp_path / "out.sam"), "--unmapped",
                     str(tmp_path / "u.fq"), str(data / "ref.fa"), str(data / "reads.fq"),
                     "--index", str(tmp_path / "idx")]) == 0
    finally:
        os.umask(old)
    for name, full in (("out.sam", 0o666), ("u.fq", 0o666), ("idx", 0o777), ("idx/meta.json", 0o666)):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == full & ~mask, name


def test_output_written_through_a_fifo(data, tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    assert main(["map", "--quiet", "--index", str(data / "idx"), "-o", str(fifo), str(data / "ref.fa"),
                 str(data / "reads.fq")]) == 0
    reader.join(10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert received and received[0].startswith("@HD")
    assert sorted(os.listdir(tmp_path)) == ["out.fifo"]


def _dead_pid():
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_stale_temporary_items_of_dead_processes_are_removed(data, tmp_path):
    """What a killed run left beside its output and its index is removed by the next run; what a live
    process is writing, and anything not named like gkmap's temporary items, stays."""
    dead = _dead_pid()
    stale = [f".out.sam.{dead}@{HOST}-k2j4.tmp", f".idx.tmp-{dead}@{HOST}-x7"]
    kept = [f".out.sam.{os.getpid()}@{HOST}-live.tmp", f".out.sam.{dead}@another-host-x.tmp",
            ".out.sam.notes.tmp", f"out.sam.{dead}@{HOST}-k2j4.tmp"]
    (tmp_path / stale[1]).mkdir()
    (tmp_path / stale[1] / "positions.npy").write_bytes(b"partial")
    for name in [stale[0]] + kept:
        (tmp_path / name).write_text("x")
    assert main(["map", "--quiet", "--ws", "10", "--index", str(tmp_path / "idx"), "-o", str(tmp_path / "out.sam"),
                 str(data / "ref.fa"), str(data / "reads.fq")]) == 0
    assert sorted(os.listdir(tmp_path)) == sorted(kept + ["idx", "out.sam"])


def test_stale_kmer_runs_of_a_killed_count_are_removed(data, tmp_path, monkeypatch):
    """A killed `gkmap kmers count` leaves its spilled runs in a PID@HOST folder; the next count that
    spills removes it (and leaves a live process's folder alone)."""
    from mapper.kmers.counter import count_kmers
    monkeypatch.setattr("mapper.kmers.counter.MIN_CAPACITY", 1 << 9)  # small blocks, a small buffer: runs spill
    monkeypatch.setattr("mapper.kmers.counter.MAX_BLOCK_BYTES", 2048)
    dead = _dead_pid()
    stale, live = tmp_path / f"gkmap-kmers-{dead}@{HOST}-ab12", tmp_path / f"gkmap-kmers-{os.getpid()}@{HOST}-cd34"
    for folder in (stale, live):
        folder.mkdir()
        (folder / "run00000.gkmers").write_bytes(b"partial")
    stats = count_kmers([data / "reads.fq"], tmp_path / "k.table", 15, memory_bytes=1 << 16, tmp_parent=tmp_path)
    assert stats.runs_spilled > 0  # the count spilled, so it looked for stale runs
    assert not stale.exists() and live.exists()


# -- faults: signals during `gkmap map` --------------------------------------------------------------------

def _session(sid):
    """Live (not zombie) processes of session `sid`, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, _ppid, _pgrp, session = text[text.rindex(")") + 2:].split()[:4]
        if int(session) == sid and state != "Z":  # a zombie has ended: only its reaping is left
            found.append(int(entry))
    return found


def _wait_until(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _temporary_items(pid):
    """The run's items in the temporary folders (named with its PID, outputs.temp_prefix)."""
    tag = f"{pid}@{HOST}-"
    return [f"{root}/{name}" for root in {"/tmp", "/dev/shm", os.environ.get("TMPDIR", "/tmp")}
            if os.path.isdir(root) for name in os.listdir(root) if name.startswith("gkmap-") and tag in name]


def _semaphores(pid):
    """Inodes of the POSIX semaphores (multiprocessing's, /dev/shm/sem.*) the process has mapped: by inode,
    as the mapping may carry the name glibc created the semaphore under before linking it to its own."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return set()
    return {int(line.split()[4]) for line in maps if "/dev/shm/sem." in line}


def _semaphores_left(inodes):
    left = set()
    for name in os.listdir("/dev/shm"):
        with contextlib.suppress(OSError):
            if name.startswith("sem.") and os.stat(f"/dev/shm/{name}").st_ino in inodes:
                left.add(name)
    return left


def _default_signals():
    """In the child: a session of its own, and the three signals at their defaults (a shell that started
    the tests in the background may have left SIGINT ignored, which gkmap would respect)."""
    os.setsid()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _start_map(data, out, threads, reads="many.fq"):
    argv = [sys.executable, "-m", "mapper", "map", "--quiet", "-t", str(threads), "--batch-size", "20000",
            "--index", str(data / "idx"), "-o", str(out / "out.sam"), str(data / "ref.fa"), str(data / reads)]
    return subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True, preexec_fn=_default_signals,
                            env=dict(os.environ, PYTHONFAULTHANDLER="1"))


def _ended(process, seconds=60):
    """The stderr of `process` once it ends; one still running after `seconds` is made to show where each
    of its threads waits (SIGABRT: Python's fault handler prints their tracebacks), and the test fails
    with that."""
    try:
        return process.communicate(timeout=seconds)[1]
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        pytest.fail(f"still running {seconds} s later; its threads:\n{process.communicate()[1]}")


def _started(process, out, threads):
    """Wait until the run writes its output (index loaded, mapping under way) and, with -t > 1, has its
    render processes."""
    def ready():
        return (any(n.startswith(".out.sam.") for n in os.listdir(out))
                and (threads == 1 or len(_session(process.pid)) > threads))
    assert _wait_until(ready, 30) and process.poll() is None, "the run did not start mapping"


@pytest.mark.parametrize("threads,signum", [(1, signal.SIGTERM), (1, signal.SIGHUP), (1, signal.SIGINT),
                                            (4, signal.SIGTERM), (4, signal.SIGHUP), (4, signal.SIGINT)],
                         ids=lambda v: getattr(v, "name", f"t{v}"))
def test_signal_ends_the_run_cleanly(data, tmp_path, threads, signum):
    """SIGTERM/SIGHUP to gkmap's process (what `timeout` and a batch system send), SIGINT to its whole
    process group (a Ctrl-C: the render workers get it too, and must stay silent)."""
    process = _start_map(data, tmp_path, threads)
    _started(process, tmp_path, threads)
    time.sleep(random.Random(f"{threads}{signum}").uniform(0, 0.5))  # a moment of the run, reproducible
    semaphores = _semaphores(process.pid)
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    err = _ended(process)

    assert process.returncode == 128 + signum, err
    word = "interrupted" if signum == signal.SIGINT else "terminated"
    one_line_error(err, f"{word} by {signal.Signals(signum).name}")
    assert _wait_until(lambda: not _session(process.pid), 10), "processes left behind"
    assert os.listdir(tmp_path) == [], "partial output left behind"
    assert _temporary_items(process.pid) == []
    assert semaphores or threads == 1
    assert _wait_until(lambda: not _semaphores_left(semaphores), 10), "semaphores left behind"



# `gkmap map` as the console script runs it (main, then cli._leave), listing the process's children (their
# command lines, from /proc) between the two: what main leaves running is what the exit would abandon
_MAIN_THEN_CHILDREN = """
import os, sys
from mapper.cli import _leave, main
code = main(sys.argv[1:])
for entry in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{entry}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid():
            with open(f"/proc/{entry}/cmdline", "rb") as line:
                sys.stderr.write(f"CHILD {entry} {fields[0]} {line.read()!r}\\n")
    except OSError:
        pass
_leave(code)
"""


def test_a_finished_run_leaves_nothing_behind(data, tmp_path):
    """The console script leaves without the interpreter's teardown (cli._leave): by the time `main` returns,
    the output must be whole and in place, the render processes ended and reaped and the temporary items
    removed, none of it left to exit handlers. The only child still there may be multiprocessing's resource
    tracker, which ends as its pipe closes. 40,000 reads in 4 batches, so that render processes take part."""
    (tmp_path / "out").mkdir()
    with open(data / "many.fq") as reads, open(tmp_path / "some.fq", "w") as some:
        some.writelines(itertools.islice(reads, 4 * 40_000))
    argv = [sys.executable, "-c", _MAIN_THEN_CHILDREN, "map", "--quiet", "-t", "3", "--batch-size", "10000",
            "--index", str(data / "idx"), "-o", str(tmp_path / "out" / "out.sam"), str(data / "ref.fa"),
            str(tmp_path / "some.fq")]
    process = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True, preexec_fn=_default_signals)
    err = _ended(process)
    assert process.returncode == 0, err
    children = [line for line in err.splitlines() if line.startswith("CHILD ")]
    assert all("resource_tracker" in line for line in children), children
    assert _wait_until(lambda: not _session(process.pid), 5), "processes outlived the run"
    assert os.listdir(tmp_path / "out") == ["out.sam"]
    assert _temporary_items(process.pid) == []
    lines = (tmp_path / "out" / "out.sam").read_text().splitlines()
    primary = [line for line in lines if not line.startswith("@") and not int(line.split("\t")[1]) & 0x900]
    assert len(primary) == 40_000 and len(lines[-1].split("\t")) >= 11

# the index loads in a thread while the backend starts (pipeline._open_index_and_backend): a child whose
# load or backend start is made to hang, so that Ctrl-C comes while the main thread waits on it
_HANGING = """
import sys, time
import mapper.pipeline as pipeline
from mapper.errors import IndexFormatError
def load_for(*args):
    if sys.argv[1] == "load":
        sys.stderr.write("WAITING\\n"); sys.stderr.flush()
        time.sleep(60)
    time.sleep(0.1)
    raise IndexFormatError("idx: damaged index (made so by the test)")
real = pipeline.get_backend
def get_backend(*args):
    backend = real(*args)
    if sys.argv[1] == "start":
        sys.stderr.write("WAITING\\n"); sys.stderr.flush()
        time.sleep(60)
    return backend
pipeline.load_for, pipeline.get_backend = load_for, get_backend
from mapper.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("hang", ["load", "start"])
def test_ctrl_c_while_the_index_loads_beside_the_backend(data, tmp_path, hang):
    """Ctrl-C ends the run at once whether the main thread waits on the index's thread (`load`) or is
    starting the backend while the index fails to load (`start`): exit 130, not the index's error, and
    neither the thread nor anything else is waited for."""
    argv = [sys.executable, "-c", _HANGING, hang, "map", "--quiet", "--device", "cpu", "--index",
            str(data / "idx"), "-o", str(tmp_path / "out.sam"), str(data / "ref.fa"), str(data / "reads.fq")]
    process = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True, preexec_fn=_default_signals)
    assert process.stderr.readline() == "WAITING\n"
    time.sleep(0.3)
    began = time.perf_counter()
    os.killpg(process.pid, signal.SIGINT)
    err = _ended(process, 20)
    assert process.returncode == 130, err
    assert time.perf_counter() - began < 5
    one_line_error(err, "interrupted by SIGINT")
    assert os.listdir(tmp_path) == []


def test_sigkill_leftovers_do_not_disturb_the_next_run(data, tmp_path):
    process = _start_map(data, tmp_path, 4)
    _started(process, tmp_path, 4)
    assert _wait_until(lambda: len(_temporary_items(process.pid)) == 2, 30), "the render processes did not start"
    process.kill()
    _ended(process)
    assert _wait_until(lambda: not _session(process.pid), 10), "render processes outlived a killed run"
    leftovers = _temporary_items(process.pid) + [str(tmp_path / n) for n in os.listdir(tmp_path)]
    assert len(leftovers) == 3  # the reference and job folders, the hidden partial output

    again = _start_map(data, tmp_path, 2, reads="reads.fq")
    err = _ended(again)
    assert again.returncode == 0, err
    assert not any(os.path.exists(p) for p in leftovers)
    assert os.listdir(tmp_path) == ["out.sam"]


# -- item 8: a local Dask cluster answers on loopback only ---------------------------------------------------

def _listening(pids):
    """(ip, port) of the TCP sockets that processes `pids` listen on, from /proc (IPv4 and IPv6)."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                    address, port = fields[1].split(":")
                    found.append((address, int(port, 16)))
    return found


def test_local_cluster_listens_on_loopback_only():
    """--local-cluster / --gpus: the scheduler, its dashboard and the workers listen on 127.0.0.1 alone
    (the dashboard was on every interface, unauthenticated)."""
    from distributed import Client
    from mapper.runners.cluster import local_cluster
    cluster = local_cluster([{}, {}], "w")
    try:
        with Client(cluster) as client:
            pids = [os.getpid(), *client.run(os.getpid).values()]
            listening = _listening(pids)
            assert client.dashboard_link.startswith("http://127.0.0.1:")
    finally:
        cluster.close()
    loopback = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
    dashboard = int(client.dashboard_link.split(":")[2].split("/")[0])
    assert dashboard in {port for _, port in listening}
    assert listening and all(address in loopback for address, _ in listening), listening
