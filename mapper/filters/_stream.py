"""Pinned host memory, CUDA streams and one context per worker thread, and the streamed filter of pairs that are
already packed in host memory.

`Device` is what one thread uses of one GPU (PyCUDA): kernels compiled for its context, device buffers, pinned
host arrays, streams, events. Pinned (page-locked) memory is what lets a copy run asynchronously, at the bus's
speed, while the SMs work on something else. tests/filters/test_filter_stream.py has a host twin (same methods, numpy
buffers, kernels run by tests/host_cuda.py) that runs the pipelines built on it in CI.

`StreamFilter.run` filters n pairs given as arrays in host memory, word-major (CONVENTIONS.md):
    2-D uint32 [words, n]   2-bit words or N masks of one column (word j of every pair contiguous)
    1-D [n]                 one value per pair (the faithful filter's undefined flags)
    None                    a null pointer: no N in that column (fewer bytes to copy)
in batches of `batch` pairs over `nslots` streams, each with its own device buffers, so that the copies of batch
i+1, the kernel of batch i and the copy back of batch i-1 overlap (one copy engine each way, the SMs between
them). Decisions and estimates land in pinned arrays; the host waits once, at the end.
"""
import contextlib

import numpy as np

from mapper.device import cuda

BATCH = 1 << 22
NSLOTS = 3
ALIGN = 256  # bytes between the starts of buffers carved out of one allocation


def aligned(nbytes):
    return -(-int(nbytes) // ALIGN) * ALIGN


class Device:
    """One GPU for one thread. Device(None) uses the thread's current context (pycuda.autoinit's, with the kernel
    cache of mapper.device.cuda); Device(i) pushes GPU i's primary context on this thread until `close()`,
    which frees what this object allocated. Two Device(0) in two threads share the GPU (and its context) but
    have their own buffers and streams."""

    def __init__(self, index=None):
        self.drv = cuda.driver()
        self._context = None
        if index is not None:
            self._context = self.drv.Device(index).retain_primary_context()
            self._context.push()
        self._current = self.drv.Context.get_current()
        self._modules = {}
        self._owned = []
        self.null = np.uintp(0)

    @contextlib.contextmanager
    def current(self):
        """This device's context, current in the calling thread for the block: for helper threads (a reader that
        allocates pinned memory)."""
        self._current.push()
        try:
            yield
        finally:
            self.drv.Context.pop()

    def function(self, source, name, **defines):
        if self._context is None:
            return cuda.function(source, name, **defines)
        key = (source, tuple(sorted({**cuda.code_defines(), **defines}.items())))
        if key not in self._modules:  # this context needs its own module, from the process's binary
            arch = "sm_%d%d" % self.drv.Context.get_device().compute_capability()
            self._modules[key] = self.drv.module_from_buffer(cuda.cubin(*key, arch))
        return self._modules[key].get_function(name)

    def alloc(self, nbytes):
        buffer = self.drv.mem_alloc(max(int(nbytes), 1))
        self._owned.append(buffer)
        return buffer

    def pinned(self, count, dtype=np.uint8):
        array = self.drv.pagelocked_empty(max(int(count), 1), dtype, mem_flags=self.drv.host_alloc_flags.PORTABLE)
        self._owned.append(array.base)
        return array

    def free(self, *things):
        """Give back buffers from `alloc` (device) or `pinned` (host array) before `close`."""
        for thing in things:
            memory = thing
            while isinstance(memory, np.ndarray):  # a view of a pinned array: its allocation
                memory = memory.base
            self._owned.remove(memory)
            memory.free()

    @staticmethod
    def at(buffer, offset):
        """A pointer `offset` bytes into a device buffer, for kernel arguments and copies."""
        return np.uintp(int(buffer) + int(offset))

    def stream(self):
        return self.drv.Stream()

    def htod(self, dst, src, stream):
        self.drv.memcpy_htod_async(int(dst), src, stream)

    def dtoh(self, dst, src, stream):
        self.drv.memcpy_dtoh_async(dst, int(src), stream)

    @staticmethod
    def launch(kernel, n, *args, stream):
        """`kernel(*args)` with one thread per item of n on `stream` (kernels check their bound)."""
        if n:
            kernel(*args, block=(cuda.BLOCK, 1, 1), grid=(-(-int(n) // cuda.BLOCK), 1), stream=stream)

    def record(self, stream):
        event = self.drv.Event()
        event.record(stream)
        return event

    @staticmethod
    def wait(event):
        event.synchronize()

    @staticmethod
    def elapsed(start, end):
        return end.time_since(start) / 1000.0

    def close(self):
        for memory in reversed(self._owned):
            memory.free()
        self._owned, self._modules = [], {}
        if self._context is not None:
            self._context.pop()
            self._context = None


class Slot:
    """One stream with its device arena (inputs, then decisions and estimates) and, for staged inputs, pinned
    arrays the host packs into (reused once the stream has copied them: event `copied`)."""

    def __init__(self, dev):
        self.dev, self.stream = dev, dev.stream()
        self.arena, self.arena_bytes, self.staging, self.copied = None, 0, [], None

    def room(self, nbytes):
        if nbytes > self.arena_bytes:
            if self.arena is not None:
                self.dev.wait(self.dev.record(self.stream))
                self.dev.free(self.arena)
            self.arena, self.arena_bytes = self.dev.alloc(nbytes), nbytes
        return self.arena

    def stage(self, arrays, batch):
        """Copies of `arrays` in this slot's pinned staging arrays (made again when a shape or type changes)."""
        if self.copied is not None:
            self.dev.wait(self.copied)
        self.staging += [None] * (len(arrays) - len(self.staging))
        out = []
        for k, a in enumerate(arrays):
            if a is None:
                out.append(None)
                continue
            shape, old = a.shape[:-1] + (batch,), self.staging[k]
            if old is None or old.shape != shape or old.dtype != a.dtype:
                if old is not None:
                    self.dev.free(old)
                self.staging[k] = self.dev.pinned(int(np.prod(shape)), a.dtype).reshape(shape)
            view = self.staging[k][..., :a.shape[-1]]
            np.copyto(view, a)
            out.append(view)
        return out


class StreamFilter:
    """A filter kernel over pairs in host memory, streamed (module docstring). Buffers are kept between runs."""

    def __init__(self, dev, batch=BATCH, nslots=NSLOTS):
        self.dev, self.batch = dev, batch
        self.slots = [Slot(dev) for _ in range(nslots)]
        self.accept = self.estimate = None
        self.kernel_seconds = 0.0

    def _results(self, n):
        if self.accept is None or len(self.accept) < n:
            if self.accept is not None:
                self.dev.free(self.accept, self.estimate)
            self.accept, self.estimate = self.dev.pinned(n, np.uint8), self.dev.pinned(n, np.int16)

    def run(self, kernel, source, n, stage=False, out=None):
        """Decisions (bool [n]) and estimates (int16 [n]) of `kernel(*inputs, n, accept, estimate)`.
        source(lo, hi) gives the inputs of pairs [lo, hi) (module docstring); with `stage` they are first copied
        into pinned staging arrays (inputs that the host has just made); without, they are copied to the GPU from
        where they are (pinned arrays: the fast way; pageable ones work, slower). out: (uint8 [n], int16 [n])
        arrays to fill and return (pinned: no copy on the host at all), else new arrays."""
        dev = self.dev
        if out is None:
            self._results(n)
            accept_to, estimate_to = self.accept, self.estimate
        else:
            accept_to, estimate_to = out
        timed = []
        for b, lo in enumerate(range(0, n, self.batch)):
            hi = min(n, lo + self.batch)
            nb, slot = hi - lo, self.slots[b % len(self.slots)]
            arrays = source(lo, hi)
            if stage:
                arrays = slot.stage(arrays, self.batch)
            sizes = [0 if a is None else aligned(a.nbytes) for a in arrays]
            arena = slot.room(sum(sizes) + aligned(nb) + aligned(2 * nb))
            args, offset = [], 0
            for a, size in zip(arrays, sizes):
                if a is None:
                    args.append(dev.null)
                    continue
                rows = a.reshape(-1, nb)  # word j of the batch lands at j * nb (word-major for nb pairs)
                for j in range(len(rows)):
                    dev.htod(dev.at(arena, offset + j * rows[j].nbytes), rows[j], slot.stream)
                args.append(dev.at(arena, offset))
                offset += size
            slot.copied = dev.record(slot.stream)
            accept, estimate = dev.at(arena, offset), dev.at(arena, offset + aligned(nb))
            dev.launch(kernel, nb, *args, np.int32(nb), accept, estimate, stream=slot.stream)
            timed.append((slot.copied, dev.record(slot.stream)))
            dev.dtoh(accept_to[lo:hi], accept, slot.stream)
            dev.dtoh(estimate_to[lo:hi], estimate, slot.stream)
        for slot in self.slots:
            dev.wait(dev.record(slot.stream))
        self.kernel_seconds += sum(dev.elapsed(start, end) for start, end in timed)
        if out is not None:
            return accept_to[:n].view(bool), estimate_to[:n]
        return self.accept[:n].astype(bool), self.estimate[:n].copy()
