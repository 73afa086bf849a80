"""Output files written atomically: data goes to a temporary file beside the target, which replaces the
target only when everything was written. A failed or interrupted run leaves no partial file behind.
`BackgroundWriter` writes texts to such a file in order from a thread of its own, so that the thread driving
the GPU does not wait for the disk."""
import contextlib
import os
import queue
import sys
import tempfile
import threading

from mapper.errors import InputError


@contextlib.contextmanager
def atomic_output(path, mode="w"):
    """Yield a file object for `path` ('-' or None: stdout, written as it comes)."""
    if path in (None, "-"):
        yield sys.stdout if "b" not in mode else sys.stdout.buffer
        return
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as e:
        raise InputError(path, f"cannot write the output here ({e.strerror})") from None
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def emit(handle, text):
    """Write a text to an open text file: a str, or a file's worth (render.SpilledText: .path and .size),
    which the kernel copies (os.sendfile) and which is deleted after."""
    if isinstance(text, str):
        handle.write(text)
        return
    handle.flush()
    with open(text.path, "rb") as source:
        try:
            sent = 0
            while sent < text.size:
                sent += os.sendfile(handle.fileno(), source.fileno(), sent, text.size - sent)
        except OSError:  # an output sendfile cannot write to (rare): copy through user space
            source.seek(sent)
            handle.buffer.write(source.read())
            handle.buffer.flush()
    os.unlink(text.path)


class BackgroundWriter:
    """`put(text)` queues a text (see `emit`) for `handle`; a thread writes them in order. A write error is
    raised in the caller, at its next put or at close; close waits for everything queued."""

    _DONE = object()

    def __init__(self, handle, depth=64):
        self._handle = handle
        self._queue = queue.Queue(maxsize=depth)
        self._error = None
        self._thread = threading.Thread(target=self._run, name="gkmap-writer", daemon=True)
        self._thread.start()

    def _run(self):
        while (text := self._queue.get()) is not self._DONE:
            if self._error is None:
                try:
                    emit(self._handle, text)
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
