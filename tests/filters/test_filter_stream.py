"""The streamed cuda paths of the GateKeeper filter give the cpu backend's results exactly:
- pairs packed in host memory through pinned buffers and several streams (`_stream.StreamFilter`);
- a pairs file parsed, encoded, filtered and formatted on the GPU in chunks, by one or several workers (`_text`),
  byte for byte the cpu path's output and, for a bad file, its error message.
Each test runs the pipelines' own code on `HostDevice` (kernels as host C++ through tests/host_cuda.py, CI
included) and, marked `gpu`, on the GPU."""
import contextlib
import io
import threading
import time

import numpy as np
import pytest

import host_cuda
from filter_common import PAIRS_DIR, adversarial, pairs_text
from mapper.alphabet import READ_ASCII
from mapper.device import cuda
from mapper.errors import InputError
from mapper.filters import _text
from mapper.filters._gpu import GpuGateKeeper, pack_nmask, pack_words
from mapper.filters.gatekeeper import CpuGateKeeper, filter_pairs
from mapper.filters.pairs import parse_pairs, read_pairs


class HostDevice:
    """`_stream.Device` on the host: numpy buffers, synchronous copies, kernels run by tests/host_cuda.py (one
    thread at a time: the compiled kernels share their thread index, so launches from several workers queue)."""

    _launch_lock = threading.Lock()
    null = np.int64(0)

    def __init__(self, index=None):
        self.index = index

    @staticmethod
    def function(source, name, **defines):
        return host_cuda.function(source, name, **defines)

    @staticmethod
    def alloc(nbytes):
        return np.full(max(int(nbytes), 1), 0xA5, dtype=np.uint8)  # poisoned: unwritten output shows

    @staticmethod
    def pinned(count, dtype=np.uint8):
        return np.empty(max(int(count), 1), dtype=dtype)

    def free(self, *things):
        pass

    @staticmethod
    def at(buffer, offset):
        return buffer[int(offset):]

    def stream(self):
        return None

    @staticmethod
    def htod(dst, src, stream):
        data = np.ascontiguousarray(src).view(np.uint8).reshape(-1)
        dst[:len(data)] = data

    @staticmethod
    def dtoh(dst, src, stream):
        out = dst.view(np.uint8).reshape(-1)
        out[:] = src[:len(out)]

    def launch(self, kernel, n, *args, stream):
        """Whole blocks, as on the GPU: a kernel without its bound check fails here too."""
        with self._launch_lock:
            host_cuda.launch(kernel, -(-int(n) // cuda.BLOCK) * cuda.BLOCK, *args)

    @staticmethod
    def record(stream):
        return time.perf_counter()

    @staticmethod
    def wait(event):
        pass

    @staticmethod
    def elapsed(start, end):
        return end - start

    def close(self):
        pass

    @staticmethod
    def current():
        return contextlib.nullcontext()


def real_device(index):
    from mapper.filters._stream import Device
    return Device(index)


@pytest.fixture(params=["host", pytest.param("gpu", marks=pytest.mark.gpu)])
def factory(request):
    """How a worker gets its device: the host twin, or the GPU."""
    if request.param == "gpu":
        from mapper.device import cuda
        cuda.driver()
        return real_device
    return HostDevice


def cpu_output(path, e, mode):
    """The cpu path's output bytes, or its InputError message."""
    from mapper.filters.command import _lines
    try:
        result = filter_pairs(read_pairs(path), e, mode=mode, device="cpu")
    except InputError as error:
        return str(error)
    return _lines([result.accept.astype(np.int64), result.estimate])


def text_output(path, e, mode, factory, **kw):
    out = io.BytesIO()
    try:
        result = _text.filter_file(path, e, mode, out, device_factory=factory, keep=True, **kw)
    except InputError as error:
        return str(error), None
    return out.getvalue(), result


def check_text(path, e, mode, factory, **kw):
    want = cpu_output(path, e, mode)
    got, result = text_output(path, e, mode, factory, **kw)
    assert got == want
    if result is not None:
        lines = np.loadtxt(io.BytesIO(want), dtype=np.int64, ndmin=2) if want else np.zeros((0, 2), np.int64)
        assert result.pairs == len(lines) and result.accepted == int(lines[:, 0].sum())
        assert result.undefined == int((lines[:, 1] == -2).sum())
        np.testing.assert_array_equal(result.estimate, lines[:, 1])
        np.testing.assert_array_equal(result.accept, lines[:, 0] == 1)
    return got


# -- pairs packed in host memory ---------------------------------------------------------------------------------
@pytest.fixture
def host_gk(monkeypatch):
    """GpuGateKeeper on the host twin, in batches of 7 pairs: several per stream, streams reused."""
    from mapper.filters import _gpu, _stream
    monkeypatch.setattr(_gpu, "BATCH", 7)
    return GpuGateKeeper(device=HostDevice())


def gate_keepers(request):
    if request.param == "host":
        return request.getfixturevalue("host_gk")
    return GpuGateKeeper()


@pytest.fixture(params=["host", pytest.param("gpu", marks=pytest.mark.gpu)])
def gk(request):
    return gate_keepers(request)


@pytest.mark.parametrize("L,W,e", [(37, 37, 3), (37, 45, 2)])
def test_streamed_host_arrays_equal_cpu(gk, L, W, e):
    """Host-encoded (staged) and already-packed inputs, N masks or none, several batches a stream."""
    rng = np.random.default_rng(L + W + e)
    reads, windows = adversarial(rng, 45, L, W, e)
    ends = "global" if W == L else "infix"
    want_accept, want_estimate = CpuGateKeeper().improved(reads, windows, e, ends)
    accept, estimate = gk.improved(reads, windows, e, ends)
    np.testing.assert_array_equal(accept, want_accept)
    np.testing.assert_array_equal(estimate, want_estimate)
    out = gk.pinned(len(reads), np.uint8), gk.pinned(len(reads), np.int16)
    accept, estimate = gk.improved_packed(pack_words(reads), pack_nmask(reads), pack_words(windows),
                                          pack_nmask(windows), L, W, e, ends, out=out)
    np.testing.assert_array_equal(accept, want_accept)
    np.testing.assert_array_equal(estimate, want_estimate)
    np.testing.assert_array_equal(out[1], want_estimate)
    clean = ~((reads > 3).any(axis=1) | (windows > 3).any(axis=1))
    r, w = reads[clean], windows[clean]
    accept, estimate = gk.improved_packed(pack_words(r), None, pack_words(w), None, L, W, e, ends)
    np.testing.assert_array_equal(accept, want_accept[clean])
    np.testing.assert_array_equal(estimate, want_estimate[clean])


def test_streamed_faithful_equals_cpu(gk):
    rng = np.random.default_rng(3)
    L, e = 37, 3
    reads, segments = adversarial(rng, 45, L, L, e)
    shifted, fixed, undefined = segments & 3, reads & 3, (reads > 3).any(axis=1) | (segments > 3).any(axis=1)
    want_accept, want_estimate = CpuGateKeeper().faithful(shifted, fixed, e, undefined)
    accept, estimate = gk.faithful(shifted, fixed, e, undefined)
    np.testing.assert_array_equal(accept, want_accept)
    np.testing.assert_array_equal(estimate, want_estimate)
    accept, estimate = gk.faithful_packed(pack_words(shifted), pack_words(fixed), undefined.astype(np.uint8), L, e)
    np.testing.assert_array_equal(estimate, want_estimate)
    accept, estimate = gk.faithful_packed(pack_words(shifted[~undefined]), pack_words(fixed[~undefined]), None, L, e)
    np.testing.assert_array_equal(estimate, want_estimate[~undefined])


# -- a pairs file on the GPU -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name,e,mode", [("ERR240727_1_E2", 3, "improved"), ("shigella_ERR6005894_L150", 6, "faithful"),
                                         ("shigella_ERR6005894_L150", 7, "improved")])
def test_shared_sets_as_text(factory, name, e, mode):
    check_text(PAIRS_DIR / f"{name}.pairs.txt", e, mode, factory, chunk=100_000)


def odd_file(rng):
    """Lines of several lengths (equal columns and windows), CRLF and LF, lower case, N and other letters, a
    line longer than a small chunk, and a last line without a newline."""
    lines = []
    for i in range(60):
        L = int(rng.choice([20, 33, 20, 20]))
        W = L + int(rng.choice([0, 0, 3]))
        reads, windows = adversarial(rng, 1, L, W, 2)
        first, second = READ_ASCII[windows[0]].tobytes(), READ_ASCII[reads[0]].tobytes()
        if i % 7 == 3:
            first, second = first.lower(), second[:5] + b"R" + second[6:]
        lines.append(first + b"\t" + second + (b"\r\n" if i % 5 == 2 else b"\n"))
    long = bytes(READ_ASCII[rng.integers(0, 4, 120)])
    lines.insert(17, long + b"\t" + long[3:110] + b"\n")
    return b"".join(lines)[:-1]


@pytest.mark.parametrize("chunk", [1 << 20, 300, 41])
@pytest.mark.parametrize("mode", ["improved", "faithful"])
def test_odd_files_equal_cpu(factory, tmp_path, monkeypatch, chunk, mode):
    """Small chunks: lines across chunk bounds, chunks with no line start, a line longer than a chunk and than the
    room past it (the host buffer grows), length groups within a chunk. Faithful mode needs equal columns: the
    windows are cut to the read's length."""
    monkeypatch.setattr(_text, "EXTEND", 8)
    data = odd_file(np.random.default_rng(5))
    if mode == "faithful":
        lines = [line.rstrip(b"\r").split(b"\t") for line in data.split(b"\n")]
        data = b"\n".join(a[:len(b)] + b"\t" + b for a, b in lines)
    path = tmp_path / "odd.txt"
    path.write_bytes(data)
    check_text(path, 2, mode, factory, chunk=chunk)


def test_two_workers_keep_input_order(factory, tmp_path):
    """Two workers (on one GPU, or two host twins) take chunks as they come; the output stays in input order."""
    path = tmp_path / "odd.txt"
    path.write_bytes(odd_file(np.random.default_rng(6)) * 3)
    check_text(path, 2, "improved", factory, chunk=500, gpus=(0, 0))


BAD = [b"ACGT\tACGT\nACGTACGT\n",
       b"ACGT\tACGT\nACGT\tAC\tGT\n",
       b"ACGT\tACGT\n\tACGT\n",
       b"ACGT\tACGT\nACGT\t\n",
       b"ACGT\tACGT\nACGT\tACGT\n\nACGT\tACGT\n",
       b"ACGT\tACGT\r\nAC GT\tACGT\n",
       b"ACGT\tACGT\nACGT\tAC\rGT\n",
       b"ACGT\tACG7\n",
       b"ACGT\tACGT\nACGT\tACGT\n\n",
       b"\n",
       b"ACGT\tACGT\n" + b"\n" * 50,                                  # more lines than room for good ones
       b"ACGT\tACGT\nAC\xc3\x89T\tACGT\n",
       b"ACGT\tACGT\nACG\tACGT\n",                                   # a window shorter than its read
       b"ACGT\tACGT\nACG\tACGT\n" + b"ACGT\tACGT\n" * 30 + b"ACGT\tA-GT\n",  # a bad letter beats an earlier length
       b"ACGT\tACGT\n" * 20 + b"ACGTT\tACGT\n"]                      # faithful: unequal columns


@pytest.mark.parametrize("text", BAD, ids=range(len(BAD)))
@pytest.mark.parametrize("chunk", [1 << 20, 16])
def test_bad_lines_give_the_cpu_error(factory, tmp_path, text, chunk):
    path = tmp_path / "bad.txt"
    path.write_bytes(text)
    for mode in ("improved", "faithful"):
        want = cpu_output(path, 1, mode)
        got, _ = text_output(path, 1, mode, factory, chunk=chunk)
        assert got == want


def test_empty_file(factory, tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    got, result = text_output(path, 1, "improved", factory)
    assert got == b"" and result.pairs == 0


@pytest.fixture
def cli_on(request, monkeypatch, factory):
    """`gkmap filter --device cuda` on the host twin (resolve_device says cuda, two "GPUs"), or on the GPU."""
    from mapper.filters import command
    if factory is HostDevice:
        import functools
        monkeypatch.setattr(command, "resolve_device", lambda device: "cuda")
        monkeypatch.setattr(command, "_gpu_count", lambda: 2)
        monkeypatch.setattr(_text, "filter_file", functools.partial(_text.filter_file, device_factory=HostDevice))
    return factory


@pytest.mark.parametrize("gpus", ["1", "2"])
def test_command_text_path_equals_cpu(cli_on, gkmap, tmp_path, gpus):
    if gpus == "2" and cli_on is not HostDevice:
        from mapper.filters.command import _gpu_count
        if _gpu_count() < 2:
            pytest.skip("one GPU here: two workers on one GPU are tested through filter_file")
    path = tmp_path / "odd.txt"
    path.write_bytes(odd_file(np.random.default_rng(8)))
    (tmp_path / "cpu").mkdir()
    (tmp_path / "gpu").mkdir()
    code, err = gkmap("filter", path, "-e", 2, "--device", "cpu", "-o", tmp_path / "cpu" / "out.tsv",
                      "--gatekeeper-files")
    assert code == 0, err
    code, err = gkmap("filter", path, "-e", 2, "--device", "cuda", "--gpus", gpus, "-o", tmp_path / "gpu" / "out.tsv",
                      "--gatekeeper-files")
    assert code == 0, err
    assert "parsed on the GPU" in err and "61 pairs" in err and "kernel" in err and "filter" in err
    for name in ("out.tsv", "gateKeeperGPU_1G_filter_output_err2.txt", "gateKeeperGPU_1G_edit_output_err2.txt"):
        assert (tmp_path / "gpu" / name).read_bytes() == (tmp_path / "cpu" / name).read_bytes()


def test_command_text_path_bad_line(cli_on, gkmap, tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_bytes(b"ACGT\tACGT\n" * 30 + b"ACGT\tAC GT\n")
    out = tmp_path / "out.tsv"
    code, err = gkmap("filter", path, "-e", 1, "--device", "cuda", "-o", out)
    assert code == 1 and err.count("\n") == 1 and "line 31" in err and "letter" in err, err
    assert not out.exists() and not list(tmp_path.glob(".out.tsv*"))


def test_gpus_needs_the_text_path(gkmap, tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_bytes(b"ACGT\tACGT\n")
    code, err = gkmap("filter", path, "-e", 1, "--device", "cpu", "--gpus", "2")
    assert code == 2 and "--gpus" in err
    code, err = gkmap("filter", path, "-e", 1, "--gpus", "0")
    assert code == 2 and "--gpus" in err
