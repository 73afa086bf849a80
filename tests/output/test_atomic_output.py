"""Outputs are written to a new temporary file that replaces the target: opened without O_TRUNC (truncating
the empty temporary file makes ext4 and XFS flush it to disk on close), and still a whole replacement of a
longer file that was there."""
import os

import numpy as np

from mapper import outputs
from mapper.kmers.counter import count_kmers
from mapper.kmers.store import KmerTable


def _spy_open(monkeypatch):
    """Record the flags of every os.open call (open() with an opener goes through it; mkstemp's own
    O_EXCL creation is left out by the tests)."""
    flags = []
    real = os.open

    def spy(path, flag, *args, **kwargs):
        flags.append((os.fspath(path), flag))
        return real(path, flag, *args, **kwargs)
    monkeypatch.setattr(os, "open", spy)
    return flags


def test_atomic_output_does_not_truncate_its_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "out.sam"
    target.write_text("old content, longer than the new one\n" * 100)
    flags = _spy_open(monkeypatch)
    with outputs.atomic_output(str(target)) as out:
        out.write("new\n")
    opened = [flag for path, flag in flags if ".out.sam." in path and not flag & os.O_EXCL]
    assert opened and not any(flag & os.O_TRUNC for flag in opened)
    assert target.read_text() == "new\n"
    with outputs.atomic_output(os.devnull, "wb") as out:  # written through
        out.write(b"x")


def test_kmer_table_written_without_truncation(tmp_path, monkeypatch):
    reads = tmp_path / "r.fa"
    rng = np.random.default_rng(3)
    reads.write_text(">r\n" + "".join(rng.choice(list("ACGT"), 5000)) + "\n")
    out = tmp_path / "t.kmers"
    out.write_bytes(b"\xff" * 1_000_000)  # an older, longer table
    flags = _spy_open(monkeypatch)
    count_kmers([reads], out, 21, canonical=True)
    opened = [flag for path, flag in flags if ".t.kmers." in path and not flag & os.O_EXCL]
    assert opened and not any(flag & os.O_TRUNC for flag in opened)
    with KmerTable(out) as table:
        assert table.total == 5000 - 21 + 1
    assert out.stat().st_size < 1_000_000
