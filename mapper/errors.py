"""The errors gkmap raises on purpose, each turned into a one-line message and an exit code by `cli.main`.

Raise them where the problem is found, with everything a user needs to fix it (the file, the line, the
flag); never print and exit from deep inside a stage.
"""


class GkmapError(Exception):
    """Base class: a problem the user can fix. `exit_code` is what `gkmap` exits with."""

    exit_code = 1


class UsageError(GkmapError):
    """A bad flag or a bad combination of flags (exit 2, like argparse)."""

    exit_code = 2


class InputError(GkmapError):
    """A missing, unreadable or malformed input file. Say which file and, when known, which line."""

    def __init__(self, path, message, line=None, record=None):
        where = str(path)
        if line is not None:
            where += f" line {line}"
        if record is not None:
            where += f" (record {record})"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.record = record


class IndexFormatError(GkmapError):
    """An index folder that is missing pieces, of another format version, or built from another reference."""


class ToolchainError(GkmapError):
    """A compiler gkmap builds its kernels with (nvcc for the GPU, g++ for the host) is missing or failed on
    a kernel: an installation problem, reported in one line with the compiler's first error."""
