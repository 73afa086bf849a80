"""Every file a `gkmap map` run writes, opened, headed and written in one place.

A run names its outputs (`SingleEndJob.outputs`, `PairedEndJob.outputs`: {sink name: path or None}); `Sinks`
opens each named one atomically (outputs.atomic_output: a temporary file that replaces the target only when
the run succeeds), writes the SAM header where the format has one, and takes the run's rendered pieces in
input order, `put({sink name: text})`, each file written by a thread of its own (outputs.BackgroundWriter)
so that the thread driving the mapping never waits for a disk. Runners (mapper/runners/) order the pieces;
sinks only write them. A text is a str or a file a render process left (render.SpilledText).

The sinks:
    sam         the records (-o; stdout when None or '-'), with the header
    unmapped    the unmapped reads as FASTQ/FASTA (--unmapped)
    candidates  every candidate before the filter as pair lines (--dump-candidates)
    oea         paired runs: one-end-anchored mates, SAM with the header (OUT_OEA.sam)
    divet       paired runs: discordant pairs, VariationHunter's DIVET lines (OUT_DIVET.vh)
"""
import contextlib
import sys

from mapper.outputs import BackgroundWriter, atomic_output
from mapper.sam import header

WITH_HEADER = ("sam", "oea")   # the sinks that are SAM files


def run_header(reference, opts):
    """The SAM header of a run: the reference's @SQ lines, -R's @RG line, @PG and --comment's @CO lines."""
    return header(reference, opts.command_line, opts.read_group_line, opts.comments)


class Sinks:
    """The open outputs of one run. Use as a context manager: on success every file is complete and in
    place; on an error (or a signal) every file written so far is removed and the targets are untouched."""

    def __init__(self, paths, head):
        self._paths = {name: path for name, path in paths.items() if path is not None or name == "sam"}
        self._head = head
        self._writers = {}
        self._handles = {}
        self._stack = contextlib.ExitStack()

    def __enter__(self):
        with self._stack as stack:
            for name, path in self._paths.items():
                handle = stack.enter_context(atomic_output(path))
                if name in WITH_HEADER:
                    handle.write(self._head)
                self._handles[name] = handle
                self._writers[name] = BackgroundWriter(handle)
            self._stack = stack.pop_all()
        return self

    def put(self, texts):
        """Queue one rendered piece: {sink name: text}; names the run does not write are ignored."""
        for name, text in texts.items():
            writer = self._writers.get(name)
            if writer is not None and text:
                writer.put(text)

    def file(self, name):
        """The open file of sink `name`, everything queued for it written: for a runner that writes parts of
        it at offsets of its own (mapper/cluster.py's shares). Later `put`s append after what it wrote."""
        self._writers[name].close()
        self._writers[name] = BackgroundWriter(self._handles[name])
        return self._handles[name]

    def close(self):
        """Wait until everything queued is written; a write error is raised here."""
        for writer in self._writers.values():
            writer.close()

    def __exit__(self, kind, error, trace):
        try:
            for writer in self._writers.values():
                writer.close(raise_error=kind is None)   # after a failure: stop, keep the first error
        except BaseException:
            self._stack.__exit__(*sys.exc_info())   # a write failed: no output takes its target's place
            raise
        return self._stack.__exit__(kind, error, trace)
