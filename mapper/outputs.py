"""Output files, written so that a failed or interrupted run never destroys or half-writes anything.

Rules (README "Errors and safety"):
- An output goes to a temporary file beside its target, which replaces the target only when everything was
  written (`atomic_path`, `atomic_output`). A symbolic link's target is written (the link stays a link); an
  existing device node, FIFO or socket (`-o /dev/null`, a named pipe) is written through directly, since
  replacing it would destroy it. The file gets the mode the umask gives (mkstemp alone makes it 0600).
- An output that is an input, lies inside the index folder or is another output is refused before any work
  starts (`check_outputs`).
- Every temporary item gkmap creates is named with `temp_prefix` (its creator's PID and host), so that a
  later run can remove what a killed run (SIGKILL, power loss) left, and only that (`remove_stale`).

`BackgroundWriter` writes texts to such a file in order from a thread of its own, so that the thread driving
the GPU does not wait for the disk."""
import contextlib
import functools
import os
import queue
import re
import shutil
import socket
import stat
import sys
import tempfile
import threading

from mapper.errors import InputError, UsageError

_HOST = socket.gethostname()
COPY_CHUNK = 1 << 22  # bytes a copy through user space moves at a time (emit)


def temp_prefix(prefix):
    """`prefix` + "PID@HOST-": the start of the name of a temporary item this process creates (a file
    from mkstemp, a folder from mkdtemp), which tells a later run whose it was (`remove_stale`)."""
    return f"{prefix}{os.getpid()}@{_HOST}-"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale(folder, prefix, suffix=""):
    """Remove the items of `folder` named `temp_prefix(prefix)`...`suffix` by a process of this host that
    is no longer alive: what a killed run left. Items of live processes, of other hosts (a shared
    folder) and of any other name are left alone; an item that cannot be removed is left too."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)@" + re.escape(_HOST) + "-.*" + re.escape(suffix), re.S)
    with contextlib.suppress(OSError), os.scandir(folder or ".") as entries:
        stale = [e for e in entries if (m := pattern.fullmatch(e.name)) and not _alive(int(m.group(1)))]
    for entry in stale:
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


def umask():
    """The process's umask, read from /proc where it can be (setting it to read it back is not thread-safe)."""
    with contextlib.suppress(OSError, StopIteration, ValueError, IndexError):
        with open("/proc/self/status") as status:
            return int(next(line for line in status if line.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode(path):
    """st_mode of what `path` names (links followed), None when it does not exist or cannot be seen."""
    try:
        return os.stat(path).st_mode
    except OSError:
        return None


@contextlib.contextmanager
def atomic_path(path):
    """Yield the path to write `path`'s new content to: a temporary file beside the target, which replaces
    it when the block succeeds and is removed when it fails; or the target itself when that is a device
    node, FIFO or socket (written through). The target of a symbolic link is what gets replaced."""
    target = os.path.realpath(path)
    mode = _mode(target)
    if mode is not None and stat.S_ISDIR(mode):
        raise InputError(path, "is a folder, not a file")
    if mode is not None and not stat.S_ISREG(mode):
        yield target
        return
    folder, name = os.path.split(target)
    remove_stale(folder, f".{name}.", ".tmp")
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=temp_prefix(f".{name}."), suffix=".tmp")
    except OSError as e:
        raise InputError(path, f"cannot write the output here ({e.strerror})") from None
    try:
        os.fchmod(fd, 0o666 & ~umask())
        os.close(fd)
        yield tmp
        exchanged = _exchange(tmp, target)
        if not exchanged:
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if exchanged:  # tmp now names the old content
        with contextlib.suppress(OSError):
            os.unlink(tmp)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


@functools.lru_cache(maxsize=1)
def _renameat2():
    """libc's renameat2 (Linux, glibc >= 2.28), or None."""
    import ctypes
    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return call


def _exchange(tmp, target):
    """Swap the names of the finished temporary file and the existing target, atomically (the target
    always names a whole file, the old one or the new one); False where the system or the file system
    cannot (os.replace then does the job). Why not os.replace: ext4 (auto_da_alloc) writes a file that is
    renamed over another out to disk inside the rename, its guard for programs that rewrite a file in
    place: 0.52 s in the rename of the 689 MB SAM of 1 M chr20 reads over the previous run's on the H200
    machine, 0.42-0.47 s for 700 MB on the development machine, where the exchange takes 0.1 ms and
    removing the old file after it 0.14 s."""
    now = _mode(target)
    if now is None or not stat.S_ISREG(now):
        return False
    call = _renameat2()
    if call is None:
        return False
    swap = lambda: call(_AT_FDCWD, os.fsencode(tmp), _AT_FDCWD, os.fsencode(target), _RENAME_EXCHANGE) == 0
    if not swap():
        return False
    if not stat.S_ISREG(os.lstat(tmp).st_mode):  # the target changed since it was looked at (a folder or a
        swap()                                  # link now): put it back, never remove what is not ours
        return False
    return True


def no_truncate(path, flags):
    """An `opener` for open() that leaves out O_TRUNC. atomic_path's temporary file is new and empty, and
    truncating it again (mode "w" does) makes ext4 and XFS flush the whole file to disk when it is closed
    (their guard for programs that rewrite a file in place): 0.64 s in the close of a 1 GB k-mer table on
    the H100 machine, 0.24-0.31 s for 512 MB on the development machine. A device node or FIFO written
    through ignores O_TRUNC anyway."""
    return os.open(path, flags & ~os.O_TRUNC, 0o666)


@contextlib.contextmanager
def atomic_output(path, mode="w"):
    """Yield a file object for `path`, written by `atomic_path`'s rules ('-' or None: stdout, written as
    it comes)."""
    if path in (None, "-"):
        yield sys.stdout if "b" not in mode else sys.stdout.buffer
        return
    with atomic_path(path) as tmp, open(tmp, mode, opener=no_truncate) as handle:
        yield handle


def _identity(path):
    """What a path names: (device, inode) of an existing file (hard links and symbolic links compare
    equal), else its resolved path."""
    try:
        st = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return st.st_dev, st.st_ino


def _special(path):
    """An existing device node, FIFO or socket: written through, several outputs may share it (/dev/null)."""
    mode = _mode(path)
    return mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def check_outputs(outputs, inputs=(), folders=()):
    """Refuse (UsageError, before any work) an output that would destroy an input or another output.
    `outputs` maps a flag to its path (None and '-', stdout, are skipped); `inputs` are files read,
    `folders` folders read (the index: every file in them is an input). Paths are compared by what they
    resolve to, so a symbolic or hard link to an input is that input."""
    inputs = {_identity(p): p for p in inputs if p not in (None, "-")}
    folders = [os.path.realpath(f) for f in folders if f]
    seen = {}
    for flag, path in outputs.items():
        if path in (None, "-") or _special(path):
            continue
        key = _identity(path)
        if key in inputs:
            raise UsageError(f"{flag} {path} is the input {inputs[key]}: it would be overwritten; "
                             f"write the output elsewhere")
        real = os.path.realpath(path)
        for folder in folders:
            if os.path.commonpath([real, folder]) == folder:
                raise UsageError(f"{flag} {path} is inside the index folder {folder}; write the output elsewhere")
        if key in seen:
            raise UsageError(f"{flag} {path} is also {seen[key]}: one output would overwrite the other")
        seen[key] = flag


def emit(handle, text):
    """Write a text to an open text file: a str, or a file's worth (render.SpilledText: .path and .size),
    which is released after (.release(): removed, or kept for the render processes to write over). Into a
    regular file the kernel copies it (os.sendfile); into anything else (a pipe: `| samtools sort`) it goes
    through user space, since sendfile lends a pipe the file's pages rather than copying them, and a render
    process writing its next text over the recycled file would change the bytes still waiting there."""
    if isinstance(text, str):
        handle.write(text)
        return
    handle.flush()
    with open(text.path, "rb") as source:
        if stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            sent = 0
            try:
                while sent < text.size:
                    sent += os.sendfile(handle.fileno(), source.fileno(), sent, text.size - sent)
            except OSError:  # a file system sendfile cannot write to (rare): the rest through user space
                _copy(source, handle.buffer, sent, text.size)
        else:
            _copy(source, handle.buffer, 0, text.size)
        handle.buffer.flush()
    text.release()


def _copy(source, out, begin, end):
    """Bytes [begin, end) of an open file into a binary stream, COPY_CHUNK at a time."""
    source.seek(begin)
    while begin < end:
        chunk = source.read(min(COPY_CHUNK, end - begin))
        if not chunk:
            raise OSError(f"{source.name} ended {end - begin} bytes early")
        out.write(chunk)
        begin += len(chunk)


class BackgroundWriter:
    """`put(text)` queues a text (see `emit`) for `handle`; a thread writes them in order (with `write`,
    `emit` by default). A write error is
    raised in the caller, at its next put or at close; close waits for everything queued."""

    _DONE = object()

    def __init__(self, handle, depth=64, write=emit):
        self._handle, self._write = handle, write
        self._queue = queue.Queue(maxsize=depth)
        self._error = None
        self._thread = threading.Thread(target=self._run, name="gkmap-writer", daemon=True)
        self._thread.start()

    def _run(self):
        while (text := self._queue.get()) is not self._DONE:
            if self._error is None:
                try:
                    self._write(self._handle, text)
                except BaseException as error:  # handed to the caller's thread
                    self._error = error

    def _check(self):
        if self._error is not None:
            raise self._error

    def put(self, text):
        self._check()
        self._queue.put(text)

    def close(self, raise_error=True):
        """Wait until every queued text is written; raise_error=False when the run already failed."""
        if self._thread.is_alive():
            self._queue.put(self._DONE)
            self._thread.join()
        if raise_error:
            self._check()
