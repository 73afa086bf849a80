"""Every file a `gkmap map` run writes, opened, headed and written in one place.

A run names its outputs (`SingleEndJob.outputs`, `PairedEndJob.outputs`: {sink name: path or None}); `Sinks`
opens each named one atomically (outputs.atomic_output: a temporary file that replaces the target only when
the run succeeds), writes the SAM header where the format has one, and takes the run's rendered pieces in
input order, `put({sink name: text})`, each file written by a thread of its own (outputs.BackgroundWriter)
so that the thread driving the mapping never waits for a disk. Runners (mapper/runners/) order the pieces;
sinks only write them. A text is a str or a file a render process left (render.SpilledText).

The sinks:
    sam         the records (-o; stdout when None or '-'), with the header: SAM, or BAM (`Format`:
                --output-fmt bam or an -o ending in .bam; coordinate-sorted with --sort; mapper/bam.py)
    unmapped    the unmapped reads as FASTQ/FASTA (--unmapped; gzip-compressed when its name ends in .gz)
    candidates  every candidate before the filter as pair lines (--dump-candidates; gzip likewise)
    oea         paired runs: one-end-anchored mates, SAM with the header (OUT_OEA.sam)
    divet       paired runs: discordant pairs, VariationHunter's DIVET lines (OUT_DIVET.vh)
"""
import contextlib
import os
import sys
from dataclasses import dataclass

from mapper.outputs import BackgroundWriter, atomic_output
from mapper.sam import header

WITH_HEADER = ("sam", "oea")   # the sinks that are SAM files
GZIP_NAMED = ("unmapped", "candidates")  # the sinks written gzip-compressed when their path ends in .gz


def run_header(reference, opts):
    """The SAM header of a run: the reference's @SQ lines, -R's @RG line, @PG and --comment's @CO lines."""
    return header(reference, opts.command_line, opts.read_group_line, opts.comments)


@dataclass
class Format:
    """How the records sink is written: SAM text, or BAM (sorted within `sort_memory` bytes when `sort`)
    compressed by `threads` threads."""
    bam: bool = False
    sort: bool = False
    sort_memory: int = None
    threads: int = 1

    @classmethod
    def of(cls, opts):
        return cls(opts.bam, opts.sort, opts.sort_memory, max(1, min(8, opts.host_workers())))

    def blocks_level(self):
        """The compression level at which render processes may hand over the records as BAM in BGZF blocks
        (an unsorted BAM: appended as they come), else None (SAM text, which a sorted BAM needs too)."""
        if not self.bam or self.sort:
            return None
        from mapper.bam import DEFAULT_LEVEL  # BAM runs only
        return DEFAULT_LEVEL


def _as_bytes(text):
    """A text (str, or a render process's file: render.SpilledText, removed once read) as bytes."""
    return text.encode() if isinstance(text, str) else text.data()


class _TextSink:
    """A text file (SAM, FASTQ, pair lines, DIVET) written by a background thread."""

    def __init__(self, handle, head):
        self.handle = handle
        if head:
            handle.write(head)
        self.writer = BackgroundWriter(handle)

    def file(self):
        self.writer.close()
        self.writer = BackgroundWriter(self.handle)
        return self.handle

    def close(self):
        self.writer.close()

    def abort(self):
        self.writer.close(raise_error=False)


def _bam_write(bam, text):
    """A rendered piece into a BAM writer: BGZF blocks a render process made (render.SpilledText with bgzf)
    appended as they are, SAM text encoded and compressed here."""
    if getattr(text, "bgzf", False):
        bam.write_blocks(text.data())
    else:
        bam.write(_as_bytes(text))


class _EncodingSink:
    """A file whose texts pass through an encoder (gzip, BAM) on the background writer's thread."""

    def __init__(self, encoder, write):
        self.encoder = encoder
        self.writer = BackgroundWriter(encoder, write=write)

    def close(self):
        self.writer.close()
        self.encoder.close()

    def abort(self):
        self.writer.close(raise_error=False)
        self.encoder.abort()


class _Gzip:
    """xopen's threaded gzip writer (isal) over an open file, with the abort the sinks ask of an encoder."""

    def __init__(self, handle, threads):
        from xopen import xopen  # only for such outputs
        self._gz = xopen(handle, "wb", format="gz", threads=threads)
        self.write, self.close = self._gz.write, self._gz.close

    def abort(self):
        with contextlib.suppress(Exception):  # the file is removed: only the first error counts
            self._gz.close()


def _gzip_sink(handle, threads):
    """A text file written gzip-compressed (GZIP_NAMED). Texts go in as bytes: a render process's file is
    read, not sent by the kernel, which would bypass the compressor."""
    return _EncodingSink(_Gzip(handle, threads), lambda gz, text: gz.write(_as_bytes(text)))


def _bam_sink(handle, head, form, folder):
    """BAM from the rendered SAM text (mapper/bam.py), encoded and compressed off the mapping thread."""
    from mapper.bam import BamWriter, SortedBamWriter  # BAM runs only: kept out of every SAM run's start-up
    if form.sort:
        bam = SortedBamWriter(handle, head, form.threads, memory=form.sort_memory, temp_dir=folder)
    else:
        bam = BamWriter(handle, head, form.threads)
    return _EncodingSink(bam, _bam_write)


class Sinks:
    """The open outputs of one run. Use as a context manager: on success every file is complete and in
    place; on an error (or a signal) every file written so far is removed and the targets are untouched."""

    def __init__(self, paths, head, form=None):
        self._paths = {name: path for name, path in paths.items() if path is not None or name == "sam"}
        self._head = head
        self._form = form or Format()
        self._sinks = {}
        self._closed = False
        self._stack = contextlib.ExitStack()

    def _open(self, stack, name, path):
        if name == "sam" and self._form.bam:
            handle = stack.enter_context(atomic_output(path, "wb"))
            folder = os.path.dirname(os.path.abspath(path)) if path not in (None, "-") else None
            return _bam_sink(handle, self._head, self._form, folder)
        if name in GZIP_NAMED and path not in (None, "-") and str(path).endswith(".gz"):
            return _gzip_sink(stack.enter_context(atomic_output(path, "wb")), self._form.threads)
        return _TextSink(stack.enter_context(atomic_output(path)), self._head if name in WITH_HEADER else "")

    def __enter__(self):
        with self._stack as stack:
            for name, path in self._paths.items():
                self._sinks[name] = self._open(stack, name, path)
            self._stack = stack.pop_all()
        return self

    def put(self, texts):
        """Queue one rendered piece: {sink name: text}; names the run does not write are ignored."""
        for name, text in texts.items():
            sink = self._sinks.get(name)
            if sink is not None and text:
                sink.writer.put(text)

    def file(self, name):
        """The open file of text sink `name`, everything queued for it written: for a runner that writes
        parts of it at offsets of its own (mapper/runners/cluster.py's shares). Later `put`s append after it."""
        return self._sinks[name].file()

    def close(self):
        """Finish every file (a BAM's EOF block, a sorted BAM's merge); a write error is raised here."""
        self._closed = True
        for sink in self._sinks.values():
            sink.close()

    def __exit__(self, kind, error, trace):
        try:
            if kind is None and not self._closed:
                self.close()
            elif kind is not None:
                for sink in self._sinks.values():
                    sink.abort()   # after a failure: stop, keep the first error, leave no temporary file
        except BaseException:
            self._stack.__exit__(*sys.exc_info())
            raise
        return self._stack.__exit__(kind, error, trace)

