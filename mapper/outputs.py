"""Output files written atomically: data goes to a temporary file beside the target, which replaces the
target only when everything was written. A failed or interrupted run leaves no partial file behind."""
import contextlib
import os
import sys
import tempfile

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
