"""The cuda backend of the GateKeeper filter: the kernels of kernels/gatekeeper.cu behind the interface of
`gatekeeper.CpuGateKeeper` (same arguments, same results).

Ways in, as in the paper:
- host-encoded (`improved`, `faithful`): numpy packs the codes into word-major 2-bit words and N masks
  (kernels/common.cuh) into pinned staging arrays, streamed to the GPU (`_stream.StreamFilter`: the packing of
  batch i+1 overlaps the copies and the kernel of batch i);
- already packed (`improved_packed`, `faithful_packed`): word-major arrays in host memory, streamed as they are;
- device-encoded (`improved_ascii`, `faithful_ascii`): the ASCII rows are copied and `encode_rows` packs them there.
Pairs go through in batches of BATCH; `kernel_seconds` adds up the filter kernels' event times.
The pairs-file path that does everything on the GPU, parsing included, is `_text.py`.
"""
import numpy as np

from mapper.alphabet import pack_2bit
from mapper.device import layer as cuda
from mapper.filters import _bitvec
from mapper.filters._stream import Device, StreamFilter

BATCH = 1 << 22
SOURCE = "gatekeeper.cu"
ENCODER, FAITHFUL, IMPROVED = 1, 2, 3  # GK_KERNEL values


def filter_kernel(function, mode, L, W, e, ends="global"):
    """The filter kernel for reads of L and windows (faithful: shifted strings) of W bases, from `function`
    (mapper.device.cuda.function or a `Device`'s). Improved mode: `ends` "global" (W == L, the whole read
    against the whole window) or "infix" (the read anywhere in the window)."""
    if mode == "faithful":
        return function(SOURCE, "gatekeeper_faithful", **faithful_defines(L, e))
    if ends == "global" and W != L:
        raise ValueError(f"global ends need equal lengths, not {L} and {W}")
    return function(SOURCE, "gatekeeper_improved", **improved_defines(L, e, W, ends))


def faithful_defines(L, e):
    """Compile-time constants of the faithful kernels: pairs of L bases."""
    return dict(GK_KERNEL=FAITHFUL, READ_LEN=L, MAX_E=e)


def improved_defines(L, e, W=None, ends="infix"):
    """Compile-time constants of the improved kernels: reads of L, windows of W bases (the mapper's: L + 3e)."""
    return dict(GK_KERNEL=IMPROVED, READ_LEN=L, WIN_LEN=L + 3 * e if W is None else W, MAX_E=e,
                GLOBAL_ENDS=int(ends == "global"))


def pack_words(codes):
    """codes uint8 [n, m] (4 = N, packed as A) -> 2-bit words uint32 [ceil(m/16), n], word-major."""
    n, m = codes.shape
    nwords = -(-m // 16)
    padded = np.zeros((n, 16 * nwords), dtype=np.uint8)
    padded[:, :m] = codes & 3
    return np.ascontiguousarray(pack_2bit(padded.reshape(-1)).reshape(n, nwords).T)


def pack_nmask(codes):
    """codes uint8 [n, m] -> N-mask words uint32 [ceil(m/32), n], word-major, base k at bit 31 - k%32."""
    return _bitvec.pack_rows(codes > 3, -(-codes.shape[1] // 32), np.uint32, msb_first=True)


class GpuGateKeeper:
    """device: a `_stream.Device` (default: this thread's context, made on first use)."""

    name = "cuda"

    def __init__(self, device=None):
        self._kernel_seconds = 0.0
        self._device, self._stream = device, None

    @property
    def kernel_seconds(self):
        return self._kernel_seconds + (self._stream.kernel_seconds if self._stream else 0.0)

    def _streamed(self):
        if self._stream is None:
            self._stream = StreamFilter(self._device or Device(), batch=BATCH)
        return self._stream

    # -- host-encoded ----------------------------------------------------------------------------------------
    def improved(self, reads, windows, e, ends):
        stream = self._streamed()
        kernel = filter_kernel(stream.dev.function, "improved", reads.shape[1], windows.shape[1], e, ends)
        return stream.run(kernel, lambda lo, hi: [pack_words(reads[lo:hi]), pack_nmask(reads[lo:hi]),
                                                  pack_words(windows[lo:hi]), pack_nmask(windows[lo:hi])],
                          len(reads), stage=True)

    def faithful(self, shifted, fixed, e, undefined):
        stream = self._streamed()
        kernel = filter_kernel(stream.dev.function, "faithful", shifted.shape[1], shifted.shape[1], e)
        flags = undefined.astype(np.uint8)
        return stream.run(kernel, lambda lo, hi: [pack_words(shifted[lo:hi]), pack_words(fixed[lo:hi]),
                                                  flags[lo:hi], None], len(shifted), stage=True)

    # -- already packed, in host memory (pinned for full speed: `pinned`) -----------------------------------
    def pinned(self, count, dtype):
        """A pinned host array of `count` items: inputs the packed paths copy at the bus's full speed."""
        return self._streamed().dev.pinned(count, dtype)

    def improved_packed(self, read2, readn, win2, winn, L, W, e, ends, out=None):
        """Word-major 2-bit words uint32 [ceil(L/16), n] and N masks uint32 [ceil(L/32), n] (None: no N) of the
        reads, the same for the windows of W bases; ends as in `improved`. out: (uint8 [n], int16 [n]) arrays
        for the results (`pinned` ones: nothing is copied on the host)."""
        stream = self._streamed()
        arrays = [read2, readn, win2, winn]
        return stream.run(filter_kernel(stream.dev.function, "improved", L, W, e, ends),
                          lambda lo, hi: [None if a is None else a[..., lo:hi] for a in arrays], read2.shape[1],
                          out=out)

    def faithful_packed(self, shifted2, fixed2, undefined, L, e, out=None):
        """Word-major 2-bit words of the shifted and the fixed strings, undefined flags uint8 [n] (None: none)."""
        stream = self._streamed()
        arrays = [shifted2, fixed2, undefined, None]
        return stream.run(filter_kernel(stream.dev.function, "faithful", L, L, e),
                          lambda lo, hi: [None if a is None else a[..., lo:hi] for a in arrays], shifted2.shape[1],
                          out=out)

    # -- device-encoded --------------------------------------------------------------------------------------
    def improved_ascii(self, reads, windows, e, ends):
        def run(s):
            read2, readn, _ = self._encode(reads[s], lower_is_n=False)
            win2, winn, _ = self._encode(windows[s], lower_is_n=False)
            return self._improved([read2, readn, win2, winn], len(reads[s]), reads.shape[1], windows.shape[1], e, ends)
        return self._batches(len(reads), run)

    def faithful_ascii(self, shifted, fixed, e):
        def run(s):
            shifted2, _, undefined1 = self._encode(shifted[s], lower_is_n=True)
            fixed2, _, undefined2 = self._encode(fixed[s], lower_is_n=True)
            return self._faithful([shifted2, fixed2, undefined1, undefined2], len(shifted[s]), shifted.shape[1], e)
        return self._batches(len(shifted), run)

    # -- rows already in device memory (the mapper's cuda backend gathers them from the resident genome) -----
    def improved_device(self, reads, windows, n, L, W, e):
        """Device ASCII rows, row-major: reads [n, L], windows [n, W] (read anywhere in the window)."""
        read2, readn, _ = self._encode_device(reads, n, L, lower_is_n=False)
        win2, winn, _ = self._encode_device(windows, n, W, lower_is_n=False)
        return self._improved([read2, readn, win2, winn], n, L, W, e, "infix")

    def faithful_device(self, segments, reads, n, L, e):
        """Device ASCII rows [n, L]: the segments are the shifted strings (column 1), the reads column 2."""
        seg2, _, undefined1 = self._encode_device(segments, n, L, lower_is_n=True)
        read2, _, undefined2 = self._encode_device(reads, n, L, lower_is_n=True)
        return self._faithful([seg2, read2, undefined1, undefined2], n, L, e)

    # -- plumbing --------------------------------------------------------------------------------------------
    def _batches(self, n, run):
        accept = np.zeros(n, dtype=bool)
        estimate = np.zeros(n, dtype=np.int16)
        for lo in range(0, n, BATCH):
            s = slice(lo, min(n, lo + BATCH))
            accept[s], estimate[s] = run(s)
        return accept, estimate

    def _encode(self, ascii_rows, lower_is_n):
        """ASCII uint8 [n, m] -> device 2-bit words, N masks and per-row any-N flags (encode_rows)."""
        n, m = ascii_rows.shape
        return self._encode_device(cuda.to_device(ascii_rows), n, m, lower_is_n)

    def _encode_device(self, ascii_rows, n, m, lower_is_n):
        """The same for n rows of m letters already in device memory, row-major."""
        words2, nmask, any_n = cuda.empty(4 * n * -(-m // 16)), cuda.empty(4 * n * -(-m // 32)), cuda.empty(n)
        cuda.launch(cuda.function(SOURCE, "encode_rows", GK_KERNEL=ENCODER), n, ascii_rows,
                    np.int32(m), np.int32(m), np.int32(n), np.int32(lower_is_n), words2, nmask, any_n)
        return words2, nmask, any_n

    def _run(self, kernel, inputs, n):
        accept, estimate = cuda.empty(n), cuda.empty(2 * n)
        with cuda.Timer() as t:
            cuda.launch(kernel, n, *inputs, np.int32(n), accept, estimate)
        self._kernel_seconds += t.seconds
        return cuda.from_device(accept, (n,), np.uint8).astype(bool), cuda.from_device(estimate, (n,), np.int16)

    def _improved(self, inputs, n, L, W, e, ends):
        return self._run(filter_kernel(cuda.function, "improved", L, W, e, ends), inputs, n)

    def _faithful(self, inputs, n, L, e):
        return self._run(filter_kernel(cuda.function, "faithful", L, L, e), inputs, n)
