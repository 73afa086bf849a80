"""mapper.device.cuda.cubin: kernels are compiled by nvcc once and then read from the on-disk cache
(nvcc is on every machine that builds gkmap, GPU or not); a change of source or defines compiles anew, and
a compile error, or a missing compiler, names the compiler and the kernel source."""
import shutil
import subprocess
import sys

import pytest

from mapper.device import cuda
from mapper.errors import ToolchainError

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
DEFINES = tuple(sorted(cuda.code_defines().items()))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cuda.cubin.cache_clear()
    yield tmp_path / "gkmap" / "kernels"
    cuda.cubin.cache_clear()


def test_compiled_once_then_read_from_disk(cache, monkeypatch):
    binary = cuda.cubin("gather.cu", DEFINES, "sm_90")
    assert binary[:4] == b"\x7fELF"
    assert [p.read_bytes()[:-32] for p in cache.glob("gather-*.cubin")] == [binary]  # + its SHA-256
    cuda.cubin.cache_clear()

    def no_compiler(*args, **kwargs):
        raise AssertionError("compiled again")
    monkeypatch.setattr(subprocess, "run", no_compiler)
    assert cuda.cubin("gather.cu", DEFINES, "sm_90") == binary


def test_a_damaged_entry_is_built_again(cache):
    binary = cuda.cubin("gather.cu", DEFINES, "sm_90")
    (entry,) = cache.glob("gather-*.cubin")
    damaged = bytearray(entry.read_bytes())
    damaged[100] ^= 0xFF
    entry.write_bytes(bytes(damaged))
    cuda.cubin.cache_clear()
    assert cuda.cubin("gather.cu", DEFINES, "sm_90") == binary
    assert entry.read_bytes()[:-32] == binary


def test_other_defines_compile_anew(cache):
    cuda.cubin("gather.cu", DEFINES, "sm_90")
    cuda.cubin("gather.cu", DEFINES + (("UNUSED_FLAG", 1),), "sm_90")
    assert len(list(cache.glob("gather-*.cubin"))) == 2


def test_compile_error_names_the_source(cache):
    """A failed compile is a ToolchainError (cli.main prints it as one line) naming the compiler, the kernel
    source and the compiler's first error line."""
    broken = tuple(sorted({**dict(DEFINES), "CODE_A": "("}.items()))
    with pytest.raises(ToolchainError, match=r"^nvcc could not compile kernels/gather\.cu: .*error") as raised:
        cuda.cubin("gather.cu", broken, "sm_90")
    assert "\n" not in str(raised.value)
    assert not list(cache.glob("*.cubin"))


def test_a_missing_compiler_is_named(cache, tmp_path):
    """A compiler that is missing, cannot be run, or succeeds without writing its output: one line each."""
    def absent(out):
        return ["/nonexistent/nvcc", "-o", out]
    with pytest.raises(ToolchainError, match=r"^nvcc not found: it compiles kernels/gather\.cu$"):
        cuda.cached_build("gather.cu", DEFINES, ("absent",), ".bin", absent)
    locked = tmp_path / "g++"
    locked.write_text("#!/bin/sh\n")  # not executable
    with pytest.raises(ToolchainError, match=r"^g\+\+ could not be run for kernels/gather\.cu: Permission denied$"):
        cuda.cached_build("gather.cu", DEFINES, ("locked",), ".bin", lambda out: [str(locked), "-o", out])
    with pytest.raises(ToolchainError, match=r"wrote nothing for kernels/gather\.cu$"):
        cuda.cached_build("gather.cu", DEFINES, ("silent",), ".bin", lambda out: [sys.executable, "-c", "pass"])


def test_the_first_error_line_is_the_cause():
    """The message quotes the compiler's first error line; a link failure's cause (ld's line) before the
    driver's closing summary."""
    assert cuda._first_error("k.cu: In function 'f':\nk.cu:3:1: error: expected ';'\nk.cu:4:1: error: x\n") == \
        "k.cu:3:1: error: expected ';'"
    assert cuda._first_error("/usr/bin/ld: cannot find -lgomp: No such file or directory\n"
                             "collect2: error: ld returned 1 exit status\n") == \
        "/usr/bin/ld: cannot find -lgomp: No such file or directory"
    assert cuda._first_error("") == "no message"


def test_compile_seconds_leave_the_stage_that_compiled(cache):
    """A stage that met a cache miss reports its own seconds, and the compiling under `compile` (a fresh
    machine's first run would otherwise charge several seconds of nvcc to, say, the filter stage)."""
    from mapper.pipeline import Counters

    def slow_build(out):  # a stand-in compiler that takes 0.3 s
        return [sys.executable, "-c", f"import time; time.sleep(0.3); open({out!r}, 'wb').write(b'bin')"]
    counters = Counters()
    with counters.timed("filter"):
        assert cuda.cached_build("gather.cu", (("TEST", 1),), ("slow",), ".bin", slow_build) == b"bin"
    compiled = counters.times["compile"]
    assert compiled >= 0.3 and 0 <= counters.times["filter"] < 0.3
    with counters.timed("verify"):  # a cache hit compiles nothing
        assert cuda.cached_build("gather.cu", (("TEST", 1),), ("slow",), ".bin", slow_build) == b"bin"
    assert counters.times["compile"] == compiled
