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


def test_an_existing_output_is_exchanged_then_removed(tmp_path, monkeypatch):
    """Over an existing file the names are swapped (renameat2 RENAME_EXCHANGE: no ext4 flush inside the
    rename) and the old content removed, with os.replace's outcome: the new bytes under the name, no
    temporary file left, a hard link to the old file keeping the old bytes; where the exchange is not
    available, os.replace does it."""
    if outputs._renameat2() is None:
        import pytest
        pytest.skip("no renameat2 in this C library")
    calls = []
    real = outputs._exchange
    monkeypatch.setattr(outputs, "_exchange", lambda tmp, target: calls.append(real(tmp, target)) or calls[-1])
    target, link = tmp_path / "out.sam", tmp_path / "kept.sam"
    target.write_text("old\n" * 1000)
    os.link(target, link)
    with outputs.atomic_output(str(target)) as out:
        out.write("new\n")
    assert calls == [True]
    assert target.read_text() == "new\n" and link.read_text() == "old\n" * 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.sam", "out.sam"]
    with outputs.atomic_output(str(tmp_path / "fresh.sam")) as out:  # nothing to exchange with
        out.write("first\n")
    assert calls == [True, False] and (tmp_path / "fresh.sam").read_text() == "first\n"
    monkeypatch.setattr(outputs, "_renameat2", lambda: None)  # a system without it
    with outputs.atomic_output(str(target)) as out:
        out.write("again\n")
    assert target.read_text() == "again\n" and calls[-1] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.sam", "kept.sam", "out.sam"]


def test_a_failed_run_leaves_the_old_output(tmp_path):
    target = tmp_path / "out.sam"
    target.write_text("old\n")
    try:
        with outputs.atomic_output(str(target)) as out:
            out.write("half")
            raise RuntimeError("the run failed")
    except RuntimeError:
        pass
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.sam"]


def test_a_target_that_became_a_folder_is_put_back(tmp_path, monkeypatch):
    """A target that was a file when looked at and is a folder when the names are exchanged (changed during
    the run) is exchanged back, untouched, and the output fails with one error: the folder is never
    left under a temporary name, which a later run's clean-up would remove."""
    import pytest
    if outputs._renameat2() is None:
        pytest.skip("no renameat2 in this C library")
    target = tmp_path / "out.sam"
    target.mkdir()
    (target / "keep.txt").write_text("the user's\n")
    monkeypatch.setattr(outputs, "_mode", lambda path: 0o100644)  # what it was when looked at: a file
    with pytest.raises(OSError):
        with outputs.atomic_output(str(target)) as out:
            out.write("new\n")
    assert (target / "keep.txt").read_text() == "the user's\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.sam"]
