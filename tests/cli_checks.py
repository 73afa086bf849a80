"""Checks of what a gkmap run leaves behind, shared by the error, safety, paired-end and cluster tests: the
one-line error message every failure must end with, the state of a folder (so that a failed run is seen to
have changed nothing), and a SAM file less its @PG line (the only line two equal runs may differ in)."""
import hashlib
import os
import stat
from pathlib import Path


def one_line_error(err, *needles):
    """The single `gkmap: error:` line of `err`, asserted to be all there is and to contain every needle."""
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("gkmap: error:"), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def snapshot(root):
    """{relative path: what it is}: kind, and the content's digest or the link's target."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                what = ("link", os.readlink(path))
            elif stat.S_ISREG(mode):
                what = ("file", hashlib.sha1(Path(path).read_bytes()).hexdigest())
            else:
                what = ("folder",) if stat.S_ISDIR(mode) else ("special", stat.S_IFMT(mode))
            found[os.path.relpath(path, root)] = what
    return found


def without_pg(path):
    """The lines of a SAM file but its @PG line, which holds the command line and so differs between runs
    whose records must be equal."""
    return [line for line in path.read_text().splitlines(keepends=True) if not line.startswith("@PG")]
