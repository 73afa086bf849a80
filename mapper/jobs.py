"""What a `gkmap map` run does with its reads, apart from where it runs: single-end or paired-end.

A runner (mapper/runners/: local.py in this process, cluster.py on Dask workers) drives a job through the
same steps whatever the job is:

    outputs(opts)           {sink name: path} of the files the run writes (mapper/sinks.py)
    open()                  the index, made resident where the backend works, and the backend: timed `load`
    inputs(size)            the input items, in order: ReadBatch, or (R1 batch, R2 batch, QNAMEs)
    map(item, counters)     the mapping core on the device (main process, or a worker's task)
    map_pieces(item, counters, dump)  the same, yielded in pieces of whole reads as they are mapped (the run
                            loop's); --dump-candidates' text handed to dump(text) as it is made
    lookahead(mapped)       what `settle` needs of a mapped item, small enough to send to a client
    settle(items)           settings that need the first mapped items (the paired insert-size range);
                            consumes (item, lookahead) pairs only as far as needed, returns those it took
    renderer(tally, n, pool)  what renders the mapped items for the run loop (runners/local.py `drive`):
                            submit(mapped), then ready(block) -> (units, [{sink name: text}]) in order
    renderer_on(host, tally)  the same over render processes the caller keeps (a Dask worker's)
    render(mapped, tally)   {sink name: text}: records of a mapped item (picklable job: runs anywhere)
    tally(counters)         the run's count object (Counters, or PairCounters around them)
    units(mapped), unit     how many reads (pairs) a mapped item holds, and the word for them
    report(tally)           log the run summary

Both jobs render in render processes (render.HostWorkers: single-end batches as files, paired-end batches
through `submit_call`), or inline where processes do not pay; `render` is the same work in the calling
thread (a paired chunk's task on a Dask worker, the API).
"""
import itertools
import logging
from dataclasses import dataclass

from mapper.options import PAIRED
from mapper.paired import (PairCounters, PairSettings, confident_tlens, find_mates, insert_size, read_pairs,
                           render_pairs, side_paths)
from mapper.pipeline import count_batch, find_mapping_pieces, open_mapping
from mapper.reads import prefetch, read_batches, with_codes
from mapper.render import HostWorkers, RecordOptions, render
from mapper.verify import Mappings

log = logging.getLogger("gkmap")


@dataclass
class MappedReads:
    """Reads [a, b) of a single-end batch after the mapping core (all of them, or a piece:
    pipeline.MappingPiece): the batch, its StrandRows and the reads' verified mappings (a list of Mappings
    parts, rows numbered in the batch)."""
    batch: object
    rows: object
    maps: list
    a: int = 0
    b: int = None             # None: the batch's end

    def __post_init__(self):
        if self.b is None:
            self.b = len(self.batch)


class _Job:
    """What both jobs share: the index and backend, opened here or handed over by a Dask worker."""

    def __init__(self, opts):
        self.opts = opts
        self.index = self.backend = self.filter_mode = None

    def open(self):
        """Open the index and backend of this process; the run's Counters (their `load` time set)."""
        if self.opts.index_kind == "neighbourhood":
            # imported for such runs only: its modules are a sixth of `gkmap map`'s start-up imports
            from mapper.neighbourhood.mapping import open_neighbourhood as opener
        else:
            opener = open_mapping
        self.index, self.backend, self.filter_mode, counters = opener(self.opts)
        return counters

    def attach(self, index, backend, filter_mode):
        """Use an index and backend opened elsewhere (a Dask worker's IndexPlugin)."""
        self.index, self.backend, self.filter_mode = index, backend, filter_mode
        return self

    settles = False           # whether `settle` sets something the rendering needs (a Dask client then maps
                              # each chunk and renders it in a second task, once settled)
    needs_lookahead = False   # whether `settle` reads lookaheads (a Dask client then asks the workers)

    def map_pieces(self, item, counters, dump=None):
        """`map`'s result in the pieces the run loop renders one by one (one, unless a job cuts its items);
        the candidates' pair lines (--dump-candidates) handed to `dump` as they are made."""
        yield self.map(item, counters)

    def lookahead(self, mapped):
        return None

    def settle(self, items):
        return []

    def tally(self, counters):
        return counters

    def report(self, tally):
        log.info("%s", tally.summary())
        return tally

    def record_options(self):
        """render()'s options for this run's records."""
        opts = self.opts
        return RecordOptions(opts.best, opts.max_records, bool(opts.unmapped), opts.read_group_id,
                             opts.secondary_seq)

    def render_host(self, workers, batch_size=None, bgzf=None):
        """render.HostWorkers for this run's records: `workers` processes, started with the first batch of
        `batch_size` reads (the run's --batch-size by default; inline before that); with `bgzf` (a
        compression level) they hand over their records as BAM in BGZF blocks (sinks.Format.blocks_level)."""
        opts = self.opts
        return HostWorkers(workers, batch_size or opts.batch_size, self.index.reference, self.record_options(), bgzf)

    def renderer(self, tally, workers, pool=None, bgzf=None):
        """The renderer a runner drives (submit / ready, below), over `workers` render processes of its own
        (`pool` from HostWorkers.spawn if started early); they end with the renderer's `with` block."""
        host = self.render_host(workers, bgzf=bgzf)
        host.adopt(pool)
        return self.renderer_on(host, tally)

    def renderer_on(self, host, tally):
        """The renderer over render processes the caller keeps (a Dask worker's, used by every task)."""
        raise NotImplementedError


class SingleEndJob(_Job):
    unit = " reads"

    @staticmethod
    def units(mapped):
        return mapped.b - mapped.a

    @staticmethod
    def outputs(opts):
        return {"sam": opts.output, "unmapped": opts.unmapped, "candidates": opts.dump_candidates}

    def inputs(self, size=None):
        """The reads in batches, parsed (and 2-bit coded) by a thread ahead of the mapping; close it when done."""
        return prefetch(with_codes(read_batches(self.opts.reads, size or self.opts.batch_size)))

    def map(self, batch, counters):
        """The whole batch mapped (the API), its candidates not dumped."""
        pieces = list(self.map_pieces(batch, counters))
        return MappedReads(batch, pieces[0].rows, [part for piece in pieces for part in piece.maps])

    def map_pieces(self, batch, counters, dump=None):
        """The batch as MappedReads pieces of whole reads, each as soon as it is mapped (the run loop renders
        one while the device maps the next: pipeline.PIECE_READS). With --dump-candidates, `dump` takes the
        candidates' pair lines in pieces of bounded size while they are made (windows.DUMP_BYTES), so that a
        local run never holds a batch's candidates at once (10^8 lines for a batch of repeat reads at genome
        scale); a Dask worker's run loop collects its chunk's for the client, as it does the chunk's SAM."""
        opts = self.opts
        dump = dump if opts.dump_candidates else None
        for piece in find_mapping_pieces(batch, self.index, self.backend, self.filter_mode, opts.e, opts.reads,
                                         counters, dump):
            yield MappedReads(batch, piece.rows, piece.parts, piece.a, piece.b)

    def render(self, mapped, tally):
        """Records of one mapped batch (`map`'s: all its reads), rendered here (a Dask worker without render
        processes, the API)."""
        done = render(mapped.batch, mapped.rows, Mappings.concat(mapped.maps), self.index.reference,
                      *self.record_options())
        count_batch(tally, done)
        return {"sam": done.sam, "unmapped": done.unmapped}

    def renderer_on(self, host, tally):
        return _BatchRenderer(host, tally)


class _Rendering:
    """A renderer over render.HostWorkers (`host`): the processes end with the run's `with` block."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.host.close()
        return False


class _BatchRenderer(_Rendering):
    """HostWorkers as a runner sees a renderer: submit(mapped); ready(block) yields (units, [texts]) in
    input order, the counts added to the tally."""

    def __init__(self, host, tally):
        self.host, self.tally = host, tally

    def submit(self, mapped):
        self.host.submit(mapped.batch, mapped.rows, mapped.maps, mapped.a, mapped.b)

    def ready(self, block=False):
        for batch, parts in self.host.ready(block):
            texts = []
            for part in parts:
                count_batch(self.tally, part)
                texts.append({"sam": part.sam, "unmapped": part.unmapped})
            yield len(batch), texts


class PairedEndJob(_Job):
    unit = " pairs"
    settles = True
    settings = None      # PairSettings, once `settle` knows the TLEN range

    @staticmethod
    def units(mapped):
        return len(mapped.r1)

    @staticmethod
    def outputs(opts):
        oea, divet = side_paths(opts.output)
        return {"sam": opts.output, "oea": oea, "divet": divet}

    def inputs(self, size=None):
        """(R1 batch, R2 batch, QNAMEs) in lockstep, read by a thread ahead of the mapping."""
        return prefetch(read_pairs(self.opts.reads, self.opts.reads2, size or self.opts.batch_size))

    def map(self, item, counters):
        return find_mates(*item, self.index, self.backend, self.filter_mode, self.opts, counters)

    @property
    def needs_lookahead(self):
        return None in (self.opts.min_insert, self.opts.max_insert)

    def lookahead(self, mapped):
        return confident_tlens(mapped, PAIRED[self.opts.paired])

    def settle(self, items):
        """The concordant TLEN range (--min/--max, else estimated from the first pairs: paired.insert_size)."""
        opts = self.opts
        lo, hi, seen = insert_size(items, PAIRED[opts.paired], (opts.min_insert, opts.max_insert))
        self.settings = PairSettings.of(opts, lo, hi)
        return seen

    def tally(self, counters):
        return PairCounters(counters)

    def render(self, mapped, tally):
        texts, counts = render_pairs(self.index.reference, self.settings, mapped)
        tally.merge(counts)
        return texts

    def renderer_on(self, host, tally):
        """The pairs go to the render processes as calls of paired.render_pairs (HostWorkers.submit_call)."""
        return _PairRenderer(host, self, tally)

    def report(self, tally):
        tally.insert = (self.settings.lo, self.settings.hi)
        log.info("%s", tally.mates.summary())
        log.info("%s", tally.summary())
        return tally


class _PairRenderer(_Rendering):
    """Pairs rendered by paired.render_pairs in render processes, behind the runner's submit / ready
    interface; each batch's counts are merged into the tally as it comes back."""

    def __init__(self, host, job, tally):
        self.host, self.job, self.tally = host, job, tally

    def submit(self, mapped):
        n = len(mapped.r1)
        self.host.submit_call(n, n, render_pairs, self.job.settings, mapped)  # settled before the first submit

    def ready(self, block=False):
        for units, [(texts, counts)] in self.host.ready(block):
            self.tally.merge(counts)
            yield units, [texts]


def job_for(opts):
    """The job of a checked MapOptions."""
    return PairedEndJob(opts) if opts.paired else SingleEndJob(opts)


def settled(job, mapped):
    """`mapped` (an iterator of mapped items) with the job settled first: the items `settle` consumed, then
    the rest."""
    mapped = iter(mapped)
    seen = job.settle((item, job.lookahead(item)) for item in mapped)
    return itertools.chain(seen, mapped)
