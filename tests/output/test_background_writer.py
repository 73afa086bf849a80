"""outputs.BackgroundWriter: texts (str, or files copied with sendfile) reach the output whole and in order,
the copied files are deleted, and a write error is raised in the caller's thread."""
import io

import pytest

from mapper.outputs import BackgroundWriter, atomic_output, emit
from mapper.render import SpilledText


def spilled(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text.encode())
    return SpilledText(str(path), len(text))


def test_texts_in_order(tmp_path):
    parts = [f"line {i}\n" * (i + 1) for i in range(40)]
    out = tmp_path / "out.sam"
    with atomic_output(out) as handle:
        handle.write("@HD\n")
        writer = BackgroundWriter(handle, depth=3)
        for i, text in enumerate(parts):
            writer.put(spilled(tmp_path, f"{i}.part", text) if i % 2 else text)
        writer.close()
    assert out.read_text() == "@HD\n" + "".join(parts)
    assert not list(tmp_path.glob("*.part"))


class Broken(io.StringIO):
    def write(self, text):
        raise OSError(28, "No space left on device")


def test_write_error_reaches_the_caller():
    writer = BackgroundWriter(Broken())
    writer.put("x\n")
    with pytest.raises(OSError, match="No space left"):
        writer.close()


def test_closing_a_failed_run_does_not_hide_its_error():
    writer = BackgroundWriter(Broken())
    writer.put("x\n")
    writer.close(raise_error=False)


def test_a_recycled_file_written_over_leaves_a_pipe_unchanged(tmp_path):
    """A spilled text emitted into a pipe is what the pipe's reader gets even when the file is recycled and
    written over before the reader comes (render processes reuse spare files). sendfile into a pipe lends
    it the file's pages instead of copying them, so a later write into the file would change the bytes
    still waiting in the pipe: the text goes into pipes through user space."""
    import os
    spare = tmp_path / "spare"
    spare.mkdir()
    first = "A" * 40_000
    path = tmp_path / "0.part"
    path.write_text(first)
    read_end, write_end = os.pipe()  # 64 KiB of room: the text fits, unread
    with os.fdopen(write_end, "w") as handle:
        emit(handle, SpilledText(str(path), len(first), recycle=str(spare)))
        recycled = spare / "0.part"
        assert recycled.exists() and not path.exists()
        with open(recycled, "r+b") as f:  # a render process's next text, over the spare's pages
            f.write(b"B" * len(first))
    with os.fdopen(read_end) as reader:
        assert reader.read() == first
