"""outputs.BackgroundWriter: texts (str, or files copied with sendfile) reach the output whole and in order,
the copied files are deleted, and a write error is raised in the caller's thread."""
import io

import pytest

from mapper.outputs import BackgroundWriter, atomic_output
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
