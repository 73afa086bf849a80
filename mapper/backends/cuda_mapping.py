"""The cuda backend of the mapper: seeding (kernels/seed.cu) and verification (kernels/myers.cu) on the
GPU, with the reference and the k-mer index resident in device memory for the whole run.

Stage placement is reported in the run summary, so a silent cpu fallback cannot hide; the GateKeeper
filter runs on the GPU through mapper/filters. The seeding kernels reproduce the numpy seeder's
candidates and counts exactly (tests/device/test_cuda_mapping.py compares them). The verifier joins each
row's nearby windows into stretches (gather.cu candidate_stretches) and returns each stretch's cover (the ends
taken, each with its distance and leftmost start: mapper/verify.py's contract), which is locus selection's
answer there already, so the render processes refine only what the cut between two parts may have split;
the SAM equals the cpu backend's byte for byte. A stretch wider than a band's window, or whose cover has more
than MAX_ENDS ends (tandem repeats), is redone by verify_wide (mapper/verify.py wide_records).

It reaches its device only through mapper/device (`layer`), whose GPU layer imports pycuda on first use.
"""
import functools
import logging
import types
from typing import NamedTuple

import numpy as np

from mapper import device
from mapper.backends import index_parts
from mapper.backends.base import Backend
from mapper.device import layer as cuda
from mapper.device.cuda import CONTEXT
from mapper.errors import UsageError
from mapper.filters import windows
from mapper.filters._gpu import faithful_defines, improved_defines
from mapper.seeding import Candidates, RowGroup, SeedStats, ragged_arange, read_groups
from mapper.verify import MAX_ENDS, Mappings, RecordBuffer, column_chunks, kernel_defines, verify as host_verify, \
    wide_records

COLUMNS = (np.int32, np.int32, np.int64, np.int64)  # device candidates: row, contig, lo, hi
COLUMN_BYTES = 24  # a device candidate's bytes
BAND_CAPACITY = 1 << 25  # hits (band slots) per seeding launch, and windows per verification part, at most
PLACE_CHUNK = 4  # consecutive hit slots a thread of seed.cu seed_place places (the later ones gallop on)
SEGMENT = 1024  # slots of a row in which seed_segments looks for one place to cut it for chaining
ROW_BLOCK = 16  # rows a host thread takes at a time in seed_place_rows: a repeat read's row costs thousands of
                # others', so the usual blocks of 256 rows left threads idle beside the block that held it
RESERVE = 4 << 30  # without --gpu-memory: the device memory a batch's buffers keep to (the working budget)
# Without --gpu-memory the pool may hold up to 2 x RESERVE (the freed buffers of earlier launches, kept for
# reuse) where the device has room for it beside the index: trimming it to RESERVE at every row group made
# the next launches allocate again (500,000 reads against a 3.1 Gbp proxy, one H200: 17.4-18.3 s against
# 15.3 s never trimmed, where the device's peak rose from 20.4 to 29.7 GiB; buffers of few distinct
# sizes, _room, keep it smaller).
# With --gpu-memory M the whole run stays within M: CONTEXT for the CUDA context and the kernels' code, a
# working budget W = M / WORK_SHARE for a batch's buffers (at most RESERVE), the rest for the index and the
# reference (in parts when they need more). W bounds the buffers through the sizes they are cut to:
# a seeding launch's slots (SLOT_BYTES a slot while the chunk is placed and chained) and the verification
# of one part of the candidates (VERIFY_BYTES a window; a part gathers the bands of consecutive launches,
# _Parts) take a quarter of W each, and the candidates a row group keeps until it is verified (24 bytes a
# window, fewer windows than seed hits) half of W: the batch is seeded and verified in groups of reads
# whose seed hits fit (seeding.hit_groups), whatever they hit. The batch's rows and its seed selection
# (17 bytes a k-mer: ~27 MB for 100,000 reads of 100 bp) are held beside W while its groups are seeded:
# they grow with the batch size, not with what the reads hit.
WORK_SHARE = 5
SLOT_BYTES = 64     # seed.cu's per-slot arrays (diagonals 13, bands 20) and the band output 24, rounded up
VERIFY_BYTES = 176  # gather.cu stretches 40, myers.cu outputs 8 + 12 a kept end (MAX_ENDS), found mappings 18
WIDE_COLUMNS = 1 << 25  # columns of the stretches one verify_wide launch takes at most (their last rows' bytes)
# A verify_wide launch's bytes a column at most (e = 0: its last row 1, rooms for ends 12 and records 18 a column,
# the stretch's own fields a few more): with a working budget the launch takes the quarter that seeding used
# (a row group is seeded before it is verified), so a repeat read's stretches are verified in smaller launches.
WIDE_COLUMN_BYTES = 32
MARGIN = 4096  # bases of the neighbouring contigs an index part holds on either side (index_parts.py)
WHOLE = (0, 1 << 62)  # the core range of the one-part index: every position
FUSED = {"improved": ("gatekeeper_candidates", improved_defines),  # filter mode -> fused kernel, its -D
         "faithful": ("gatekeeper_faithful_candidates", faithful_defines)}

log = logging.getLogger("gkmap")


class CudaBackend(Backend):
    name = "cuda"

    def __init__(self, work=None):
        self._genome = None
        self._genome_of = None
        self._index = None
        self._index_of = None
        self._rows = None
        self._rows_of = None
        self._parts = None    # index_parts.IndexPart list when the index is mapped in parts, else None
        self._margin = MARGIN
        self._lists = {}      # part -> its host (offsets, positions), cut out once
        self._part_buffers = None
        self._active = None   # (part, its device offsets, positions, genome pointer) during index_parts
        self._given = work    # the budget the caller set (--memory), None: load decides
        self._work = work     # bytes a batch's buffers may take (--memory, or --gpu-memory's share), None: no bound
        self._trim_at = None  # pool bytes beyond which the buffers freed by earlier row groups go back (None: _work)
        self._selected = None  # the batch's selection that row_groups made (types.SimpleNamespace: batch,
                               # part, index, sel, left = groups still to seed)

    def _resident_index(self, index):
        """(offsets, positions, contig starts, contig ends) in device memory, uploaded once per run."""
        if self._index_of is not index:
            ref = index.reference
            self._index = (cuda.upload(index.offsets), cuda.upload(index.positions),
                           cuda.to_device(ref.starts.astype(np.int64)), cuda.to_device(ref.ends.astype(np.int64)))
            self._index_of = index
        return self._index

    def start(self):
        """The device layer started (a GPU's CUDA context made: about 0.1 s, mostly in the driver, which
        PyCUDA calls without the interpreter's lock, so the index opens meanwhile; see Backend.start)."""
        cuda.start()

    def load(self, index, memory=None):
        """The index and the reference codes to device memory (and the CUDA context made) before the first
        batch; in parts (index_parts.py) when they need more than they may take: with `memory` (--gpu-memory),
        what the run's working budget leaves of it (see CONTEXT), else the free device memory less RESERVE."""
        self._selected = None
        if not cuda.HOST_MEMORY:  # the host's codes, which the render processes read, unpacked beside the uploads
            index.reference.unpack_behind()
        if memory is None:
            free = cuda.free_memory()
            budget = free - RESERVE
            # decided at every load (a backend may load another index): the caller's budget, else the
            # RESERVE the index leaves a batch's buffers (the pool, uncut, grew to 27 GiB beside a 3.1 Gbp
            # index: peak GPU 41.8 GiB), the pool kept up to twice that where the device has room for it
            self._work = self._trim_at = self._given
            if self._given is None:
                self._work = RESERVE
                room = free - index_parts.device_bytes(index) >= 2 * RESERVE
                self._trim_at = 2 * RESERVE if room else RESERVE
        else:
            self._work = self._trim_at = min(memory // WORK_SHARE, RESERVE)
            budget = memory - self._work - CONTEXT
            if budget <= 0:
                raise UsageError(f"--gpu-memory {index_parts.size_text(memory)} is too small: a run needs "
                                 f"{index_parts.size_text(CONTEXT)} for the CUDA context and a working budget")
        need = index_parts.device_bytes(index)
        if need <= budget:
            self._resident_index(index)
            self._resident_genome(index.reference)
            return
        self._plan(index, budget, self._margin)
        offsets = cuda.upload(index.offsets)
        ref = index.reference
        self._index = (offsets, None, cuda.to_device(ref.starts.astype(np.int64)), cuda.to_device(ref.ends.astype(np.int64)))
        self._index_of = index
        log.info("the index and reference need %s of device memory and %s may be used (--gpu-memory): the "
                 "reference is mapped in %d parts of whole contigs, each uploaded for every batch (a larger "
                 "--batch-size spreads the uploads over more reads)", index_parts.size_text(need),
                 index_parts.size_text(budget), len(self._parts))

    def _plan(self, index, budget, margin):
        self._parts = index_parts.plan(index.reference, budget, index.offsets.nbytes, margin)
        self._budget, self._margin, self._lists = budget, margin, {}
        largest = max(part.bases for part in self._parts)
        self._part_buffers = (cuda.empty(index.offsets.nbytes), cuda.empty(index_parts.POSITION_BYTES * largest),
                              cuda.empty(largest))

    @property
    def whole_index(self):
        return self._parts is None

    def index_parts(self, index, rows):
        """Each part of the index made current in turn, its lists and bases uploaded (see load); once, with
        nothing to do, when the whole index is resident."""
        if self._parts is None:
            yield index
            return
        reach = int(rows.length.max()) + int(rows.e.max()) + index.ws
        if reach > self._margin:  # reads longer than the margins cover: wider margins, parts cut again
            self._plan(index, self._budget, 2 * reach)
        offsets_buf, positions_buf, genome_buf = self._part_buffers
        try:
            for part in self._parts:
                if part not in self._lists:
                    self._lists[part] = index_parts.part_lists(index.offsets, index.positions, part)
                offsets, positions = self._lists[part]
                cuda.copy_into(offsets_buf, offsets)
                cuda.copy_into(positions_buf, positions)
                cuda.copy_into(genome_buf, index.reference.codes[part.pos_lo:part.pos_hi])
                self._active = (part, offsets_buf, positions_buf, cuda.shifted(genome_buf, part.pos_lo))
                yield part
        finally:
            self._active = None

    def row_groups(self, rows, index):
        """One group, or with a working budget (--gpu-memory, --memory) groups of reads whose seed hits'
        candidates fit half of it (see CONTEXT), the hits counted by seed_select where the seeding runs. The
        batch's selection is kept for `seed` to take each group's rows from (_group_selection)."""
        if self._work is None:
            return [RowGroup(0, rows.n_reads, rows)]
        self._selected = None  # the previous batch's, before this one is made
        sel = self._select(rows, index, *self._current_lists(index)[:2])
        groups = read_groups(rows, sel.hits, max(1, self._work // 2 // COLUMN_BYTES))
        self._selected = types.SimpleNamespace(batch=rows, part=self._part, index=index, sel=sel, left=len(groups))
        return groups

    def _capacity(self):
        """(slots a seeding launch takes, windows a verification part holds): a quarter of the working
        budget each (see WORK_SHARE), at most BAND_CAPACITY; the slots also at most the layer's SEED_SLOTS a
        thread where it sets one (the host)."""
        slots = BAND_CAPACITY if cuda.SEED_SLOTS is None else min(BAND_CAPACITY, cuda.SEED_SLOTS * cuda.threads())
        if self._work is None:
            return slots, BAND_CAPACITY
        quarter = self._work // 4
        return max(1, min(slots, quarter // SLOT_BYTES)), max(1, min(BAND_CAPACITY, quarter // VERIFY_BYTES))

    @property
    def _part(self):
        """The index part current during index_parts, else None."""
        return self._active[0] if self._active is not None else None

    def _current_lists(self, index):
        """(the index's offsets, the current part's offsets, its positions, its core range, whether it is the
        first part): the whole index's unless a part is current (index_parts)."""
        offsets, positions, _, _ = self._resident_index(index)
        if self._active is None:
            return offsets, offsets, positions, WHOLE, True
        part, list_offsets, positions, _ = self._active
        return offsets, list_offsets, positions, (part.lo, part.hi), part == self._parts[0]

    @staticmethod
    def _kernel(index):
        """name -> a seed.cu kernel compiled for this index."""
        defines = dict(WS=index.ws, SEED_LANES=cuda.WARP, PLACE_CHUNK=PLACE_CHUNK,
                       OFFSET_T="unsigned int" if index.offsets.dtype == np.uint32 else "unsigned long long")
        return lambda name: cuda.function("seed.cu", name, **defines)

    def _select(self, rows, index, offsets, list_offsets):
        """seed.cu seed_select on the active rows: their k-mers, the chosen seeds and each row's hits."""
        n_rows = len(rows.start)
        nk = np.where(rows.active, rows.length // index.ws, 0).astype(np.int32)
        kfirst = np.cumsum(nk, dtype=np.int64) - nk
        n_kmers = int(nk.sum())
        dev = self._rows_on_device(rows)
        d_nk, d_kfirst = cuda.scratch_copy(nk), cuda.scratch_copy(kfirst)
        key, size, flags = cuda.scratch(4 * n_kmers), cuda.scratch(8 * n_kmers), cuda.scratch(n_kmers)
        kmer_row, kmer_hit = cuda.scratch(4 * n_kmers), cuda.scratch(8 * n_kmers)
        row_hits, row_seeds = cuda.scratch(8 * n_rows), cuda.scratch(4 * n_rows)
        cuda.launch(self._kernel(index)("seed_select"), n_rows, dev.codes, dev.start, d_nk, d_kfirst, dev.e, n_rows,
                    offsets, list_offsets, key, size, flags, kmer_row, kmer_hit, row_hits, row_seeds)
        # `size` (the chosen lists' sizes) is seed_select's own: freed here, in stream order with the launch
        return types.SimpleNamespace(
            nk=nk, kfirst=kfirst, n_kmers=n_kmers, dev=dev, d_nk=d_nk, d_kfirst=d_kfirst, key=key,
            flags=flags, kmer_row=kmer_row, kmer_hit=kmer_hit, hits=cuda.from_device(row_hits, (n_rows,), np.int64),
            row_seeds=cuda.from_device(row_seeds, (n_rows,), np.int32), spans=rows.spans)

    def _group_selection(self, rows, index):
        """The selection of a row group of the batch that row_groups cut (the same reads, fewer of them
        active), else None: a row's k-mers, seeds and hits are its own whatever else is active, so the
        groups take their rows' part of the batch's selection instead of selecting again, which cost the
        mapping thread an upload, a launch and two downloads over all the batch's rows for each of ~30
        groups a batch at genome scale. A group's part is its rows' spans (StrandRows.spans): the rows of
        other groups keep their k-mers and hits in the selection, and no launch may hold one. The batch's
        selection (17 bytes a k-mer on the device) is let go with its last group's seeding."""
        kept, self._selected = self._selected, None
        if kept is None or kept.part is not self._part or kept.index is not index:
            return None
        batch, sel = kept.batch, kept.sel
        if any(getattr(batch, f) is not getattr(rows, f) for f in ("forward", "start", "length", "e")) \
                or (rows.active is not batch.active and rows.reads is None):
            return None  # not a group of that batch: its selection goes
        kept.left -= 1
        if kept.left > 0:
            self._selected = kept  # kept for the batch's next group
        if rows.active is batch.active:
            return sel
        group = types.SimpleNamespace(**vars(sel))
        group.spans = rows.spans
        group.n_kmers = _span_sum(sel.nk, group.spans)
        return group

    def seed(self, rows, index):
        """kernels/seed.cu on every strand row: the numpy seeder's candidates and counts, left on the GPU
        (DeviceCandidates) for the verifier; they reach the host only when a host stage asks for them."""
        offsets, list_offsets, positions, core, first_part = self._current_lists(index)
        _, _, contig_starts, contig_ends = self._resident_index(index)
        genome = self._resident_genome(index.reference)
        part = self._part
        held = (0, index.reference.size) if part is None else (part.pos_lo, part.pos_hi)
        n_contigs = len(index.reference.starts)
        kernel = self._kernel(index)
        sel = self._group_selection(rows, index) or self._select(rows, index, offsets, list_offsets)
        nk, kfirst, dev, d_nk, d_kfirst, hits = sel.nk, sel.kfirst, sel.dev, sel.d_nk, sel.d_kfirst, sel.hits
        key, flags, kmer_row, kmer_hit = sel.key, sel.flags, sel.kmer_row, sel.kmer_hit
        # the counts of a run in parts add up to the one-part run's: k-mers and seeds once, hits per core
        spans = sel.spans
        group_hits = _span_sum(hits, spans)
        stats = SeedStats(kmers=sel.n_kmers if first_part else 0, hits=group_hits,
                          seeds=_span_sum(sel.row_seeds, spans) if first_part else 0)
        if self._work is not None:
            # what earlier groups left in the pool beyond the budget goes back
            cuda.trim_pool(self._work if self._trim_at is None else self._trim_at)
        launch_slots, part_windows = self._capacity()
        parts = _Parts(part_windows, group_hits)
        queued = None  # the launch before this one, whose bands are compacted once its sums are back
        for launch in _launches(hits, launch_slots, spans):
            begin, end, capacity, d_slot, block_row, block_index, n, _ = launch
            rows_args = (begin, end - begin)
            room = _room(capacity, launch_slots)
            diag_contig, diag_value, diag_flags = cuda.scratch(4 * room), cuda.scratch(8 * room), cuda.scratch(room)
            lists, placed = (list_offsets, positions, core[0], core[1], contig_starts), (diag_contig, diag_value,
                                                                                       diag_flags)
            if cuda.SEED_BY_ROW:  # the host: merge each row's lists (seed.cu seed_place_rows), ROW_BLOCK rows
                cuda.launch(kernel("seed_place_rows"), end - begin, key, flags, d_nk, d_kfirst, dev.e, d_slot,
                            *rows_args, *lists, n_contigs, *placed, block=ROW_BLOCK)
            else:  # the GPU: a thread per PLACE_CHUNK hits, placed by look-ups in each other chosen list
                k_begin, k_end = int(kfirst[begin]), int(kfirst[end - 1] + nk[end - 1])
                cuda.launch(kernel("seed_place"), -(-capacity // PLACE_CHUNK), key, flags, kmer_row, kmer_hit, d_nk,
                            d_kfirst, dev.e, d_slot, begin, k_begin, k_end - k_begin, capacity, *lists, contig_ends,
                            n_contigs, genome, *held, *placed)
            # chained in segments (seed_segments: a cut per block of SEGMENT slots, or none), a warp a block
            # (common.cuh LANES); the bands' offsets and the launch's sums on the device
            seg_at, counts, dense = cuda.scratch(8 * n), cuda.scratch(16 * n), cuda.scratch(8 * n)
            bands = cuda.scratch(4 * room), cuda.scratch(8 * room), cuda.scratch(8 * room)  # contig, lo, hi
            cuda.launch(kernel("seed_segments"), n * cuda.WARP, dev.e, d_slot, begin, block_row, block_index, n,
                        SEGMENT, *placed, seg_at)
            cuda.launch(kernel("seed_bands"), n * cuda.WARP, dev.e, begin, d_slot, block_row, seg_at, n, *placed,
                        *bands, counts)
            del placed, diag_contig, diag_value, diag_flags  # back to the pool, for the next launch's
            totals = cuda.scratch(4 * 8)
            cuda.launch(kernel("seed_scan"), cuda.WARP, counts, n, dense, totals)
            this = _Queued(cuda.fetch_later(totals, (4,), np.int64), launch, seg_at, dense, counts, bands)
            if queued is not None:
                _compact(kernel, queued, parts, stats)
            queued = this
        if queued is not None:
            _compact(kernel, queued, parts, stats)
        cands = DeviceCandidates(parts.done(), ordered=True)
        stats.bands = len(cands)
        return cands, stats

    def _resident_genome(self, reference):
        """The reference codes in device memory, uploaded once per run (a plain allocation); while an index
        part is current, a pointer to its bases that global positions index."""
        if self._active is not None:
            return self._active[3]
        if self._genome_of is not reference:
            self._genome = _device_codes(reference)
            self._genome_of = reference
        return self._genome

    def filter(self, mode, rows, cands, reference):
        """GateKeeper on the GPU: reads and reference rows gathered there (kernels/gather.cu) from the resident
        genome and this batch's rows, encoded and filtered there; only the decisions come back. When every
        seeded read has one length and one e (the usual batch) the candidates are used where they are; a
        batch mixing them is filtered group by group from the host's copy of the candidates."""
        keep = np.ones(len(cands), dtype=bool)
        if mode is None or not len(cands):
            return keep
        from mapper.filters._gpu import GpuGateKeeper
        gk = GpuGateKeeper()
        genome, dev = self._resident_genome(reference), self._rows_on_device(rows)
        length, e = rows.length[rows.active], rows.e[rows.active]
        if _one_group(length, e):
            return self._filter_in_place(gk, mode, int(length[0]), int(e[0]), cands, genome, dev, reference)
        for members, L, e in windows.groups(rows, cands):
            n = len(members)
            read_start = rows.start[cands.row[members]]
            read_rows = _gather_host(dev.codes, read_start, read_start, read_start + L, L)
            ref_rows = _gather_host(genome, *windows.spans(mode, rows, cands, reference, members, L, e))
            keep[members] = _decide(gk, mode, read_rows, ref_rows, n, L, e)
        return keep

    def filtered(self, mode, rows, cands, reference):
        """The filter of a one-(L, e) batch fused with its reads' and windows' gathering on the GPU
        (gatekeeper.cu gatekeeper_candidates, gatekeeper_faithful_candidates: no rows gathered, no decisions
        sent back), its survivors compacted there in their order (an exclusive scan of the decisions, then
        gather.cu keep_candidates), so that the verifier still joins each row's windows into stretches; a
        batch mixing lengths or e decides with `filter` and compacts with DeviceCandidates.subset."""
        length, e = rows.length[rows.active], rows.e[rows.active]
        if mode not in FUSED or not len(cands) or not _one_group(length, e):
            return super().filtered(mode, rows, cands, reference)
        if not isinstance(cands, DeviceCandidates):
            cands = DeviceCandidates.upload(cands)
        L, e = int(length[0]), int(e[0])
        name, defines = FUSED[mode]
        kernel = cuda.function("gatekeeper.cu", name, **defines(L, e))
        genome, dev = self._resident_genome(reference), self._rows_on_device(rows)
        _, _, contig_starts, contig_ends = self._resident_index_of_reference(reference)
        parts = []
        for n, *columns in _pieces(cands.parts, self._capacity()[1]):
            at = cuda.scratch(4 * (n + 1))
            cuda.launch(kernel, n, *columns, n, dev.codes, dev.start, genome, contig_starts, contig_ends, at)
            cuda.exclusive_scan(at, n + 1)
            count = int(cuda.item(at, n, np.uint32))  # the survivors' buffers are sized by it (4-7 % of n)
            if count:
                out = [cuda.scratch(np.dtype(t).itemsize * count) for t in COLUMNS]
                cuda.launch(cuda.function("gather.cu", "keep_candidates"), n, *columns, n, at, *out)
                parts.append((count, *out))
        survivors = DeviceCandidates(parts, ordered=cands.ordered)
        return survivors, len(cands) - len(survivors)

    def _filter_in_place(self, gk, mode, L, e, cands, genome, dev, reference):
        """The filter of one (L, e) batch on candidates in device memory (uploaded first if they are not)."""
        if not isinstance(cands, DeviceCandidates):
            cands = DeviceCandidates.upload(cands)
        _, _, contig_starts, contig_ends = self._resident_index_of_reference(reference)
        width = L if mode == "faithful" else L + 3 * e
        keep = []
        for n, row, contig, lo, hi in _pieces(cands.parts, self._capacity()[1]):
            spans = [cuda.scratch(8 * n) for _ in range(5)]
            cuda.launch(cuda.function("gather.cu", "filter_spans"), n, row, contig, lo, hi, n, dev.start,
                        dev.length, dev.e, contig_starts, contig_ends, mode == "faithful", *spans)
            read_start, read_end, ref_start, ref_lo, ref_hi = spans
            read_rows = _gather(dev.codes, read_start, read_start, read_end, L, n)
            ref_rows = _gather(genome, ref_start, ref_lo, ref_hi, width, n)
            keep.append(_decide(gk, mode, read_rows, ref_rows, n, L, e))
        return np.concatenate(keep)

    def _rows_on_device(self, rows):
        """This batch's strand rows in device memory (one upload per batch, shared by the stages and by the
        batch's row groups, which differ from it only in `active`; the reverse strand is built there).
        Uploading them again for each group cost ~30 synchronous copies of a batch of ordinary reads at
        genome scale."""
        kept = self._rows_of
        if kept is None or any(getattr(kept, f) is not getattr(rows, f) for f in ("forward", "start", "length", "e")):
            total = len(rows.forward)
            codes = cuda.scratch(2 * total)
            cuda.launch(cuda.function("gather.cu", "strand_codes"), total, cuda.scratch_copy(rows.forward),
                        total, codes)
            self._rows = DeviceRows(codes, cuda.scratch_copy(rows.start.astype(np.int64)),
                                    cuda.scratch_copy(rows.length.astype(np.int32)), cuda.scratch_copy(rows.e.astype(np.int32)))
            self._rows_of = rows
        return self._rows

    def verify(self, rows, cands, reference):
        """kernels/myers.cu on every window. Candidates still on the GPU are verified there, and only the
        windows within e come back; host candidates (e.g. filtered group by group) are uploaded first."""
        return Mappings.concat(self.verify_parts(rows, cands, reference))

    def verify_parts(self, rows, cands, reference):
        """`verify`'s mappings as Mappings in the device's dtypes (FOUND_DTYPES; Mappings.concat widens):
        one per verification part, and one more for a part's windows redone on the host."""
        if not isinstance(cands, DeviceCandidates):
            cands = DeviceCandidates.upload(cands)
        genome, dev = self._resident_genome(reference), self._rows_on_device(rows)
        _, _, contig_starts, contig_ends = self._resident_index_of_reference(reference)
        found = [maps for part in _pieces(cands.parts, self._capacity()[1])
                 for maps in self._verify_part(rows, part, cands.ordered, genome, dev, contig_starts, contig_ends)]
        return found or [host_verify(rows, cands.host, reference)]

    def _resident_index_of_reference(self, reference):
        """The contig table on the device: the run's index when it holds this reference, else uploaded."""
        if self._index_of is not None and self._index_of.reference is reference:
            return self._index
        return (None, None, cuda.to_device(reference.starts.astype(np.int64)),
                cuda.to_device(reference.ends.astype(np.int64)))

    def _verify_part(self, rows, part, ordered, genome, dev, contig_starts, contig_ends):
        """The mappings of one candidate part, its windows verified as stretches (gather.cu candidate_stretches;
        `ordered`: the part holds seed.cu's bands as seeded): the GPU's records, and those of the stretches
        wider than MAX_WIN or with more than MAX_ENDS ends, redone by verify_wide (_wide_parts), as further
        Mappings in the same dtypes (joining them widened and copied the whole part in the mapping thread;
        repeat reads overflow in every part). The stretches are compacted before they are verified: a thread
        a stretch, not a thread a window of which most would idle beside their stretch's first."""
        n, row, contig, lo, hi = part
        gather = lambda name: cuda.function("gather.cu", name)
        room = _room(n, self._capacity()[1])
        stretch = types.SimpleNamespace(row=cuda.scratch(4 * room), contig=cuda.scratch(4 * room),
                                        read_start=cuda.scratch(8 * room), read_len=cuda.scratch(4 * room),
                                        max_e=cuda.scratch(4 * room), start=cuda.scratch(8 * room),
                                        width=cuda.scratch(4 * room), settled=cuda.scratch(4 * room))
        count = cuda.scratch(8)
        cuda.memset(count, 0, 8)
        cuda.launch(gather("candidate_stretches"), n, row, contig, lo, hi, n, dev.start, dev.length, dev.e,
                    contig_starts, contig_ends, int(ordered), count, stretch.row, stretch.contig, stretch.read_start,
                    stretch.read_len, stretch.max_e, stretch.start, stretch.width, stretch.settled)
        n = int(cuda.from_device(count, (1,), np.uint64)[0]) if ordered else n
        best, n_ends, ends, starts, edits = _verify_device(genome, dev.codes, stretch.read_start, stretch.read_len,
                                                           stretch.max_e, stretch.start, stretch.width, n,
                                                           int(rows.length.max()), room)
        # verified stretches -> mapping records on the device (gather.cu found_mappings): count, then write
        found = gather("found_mappings")
        counts = cuda.scratch(16)
        cuda.memset(counts, 0, 16)
        common = (best, n_ends, ends, starts, edits, n, MAX_ENDS, stretch.row, stretch.contig, stretch.start,
                  stretch.settled, counts)
        cuda.launch(found, n, *common, *(0,) * 7)
        n_maps, n_over = (int(c) for c in cuda.from_device(counts, (2,), np.uint64))
        out = RecordBuffer(cuda, n_maps)
        over = cuda.scratch(8 * n_over)
        cuda.memset(counts, 0, 16)
        cuda.launch(found, n, *common, *out.columns, over)
        maps = Mappings(*out.fetch())
        if not n_over:
            return [maps]
        columns = WIDE_COLUMNS if self._work is None else min(WIDE_COLUMNS, self._work // 4 // WIDE_COLUMN_BYTES)
        return [maps, *_wide_parts(stretch, n, over, n_over, genome, dev, int(rows.length.max()), columns)]


def _wide_parts(stretch, n, over, n_over, genome, dev, longest, columns):
    """The records of a part's stretches that verify_windows left (`over`: their device indices among the part's
    n stretches) by verify_wide, a Mappings in FOUND_DTYPES per chunk of at most `columns` columns (a wider
    stretch alone: its width is the genome's repeat, not the reads'): gathered, verified and turned into
    records on the device."""
    width, e = (_take(buf, n, over, count=n_over).astype(np.int64) for buf in (stretch.width, stretch.max_e))
    parts = []
    for a, b in column_chunks(width, columns):
        at = cuda.shifted(over, -8 * a)
        take = lambda buf, dtype=np.int32: _take_device(buf, n, at, dtype=dtype, count=int(b - a))
        windows = (take(stretch.read_start, np.int64), take(stretch.read_len), take(stretch.max_e),
                   take(stretch.start, np.int64), take(stretch.width), 0)
        labels = take(stretch.row), take(stretch.contig), take(stretch.settled)
        parts.append(Mappings(*wide_records(cuda, genome, dev.codes, windows, width[a:b], e[a:b], longest, labels)))
    return parts


UNPACK_WORDS = 1 << 24  # 2-bit words (64 MB, 256 M bases) per piece of a reference unpacked on the device


def _device_codes(reference):
    """The reference codes in a plain device allocation. A reference still packed (an index's, its host codes
    not unpacked yet) goes up as its 2-bit words and N mask, a fifth of the codes' bytes, in pieces of
    UNPACK_WORDS words that kernels/reference.cu unpacks on the device, so the GPU need not wait for the
    host's own codes: those, which the render processes read, are unpacked by a thread (load's
    Reference.unpack_behind) beside the uploads and the first batches, not before them; on the H200 host's
    16 cores that unpacking was 0.68 s of a 3.1 Gbp index's 1.7-1.8 s load. A layer whose buffers are host
    memory (the cpu backend's) takes the host's codes as they are."""
    packed = reference.packed
    if packed is None or cuda.HOST_MEMORY:
        return cuda.upload(reference.codes)
    words, mask = packed
    n_words = len(words)
    codes = cuda.empty(16 * n_words)  # 16 codes a word: up to 15 past the genome's end, never read
    step = max(min(UNPACK_WORDS, n_words), 1)
    word_buf, mask_buf = cuda.empty(4 * step), cuda.empty(2 * step)
    unpack = cuda.function("reference.cu", "unpack_2bit")
    for first in range(0, n_words, step):
        last = min(first + step, n_words)
        piece_mask = mask[2 * first:2 * last]
        cuda.copy_into(word_buf, np.asarray(words[first:last], dtype=np.uint32))
        cuda.copy_into(mask_buf, piece_mask)
        cuda.launch(unpack, last - first, word_buf, last - first, mask_buf, len(piece_mask),
                    cuda.shifted(codes, -16 * first))
    return codes


class DeviceRows:
    """A batch's strand rows on the device: codes uint8, start int64, length int32, e int32."""

    def __init__(self, codes, start, length, e):
        self.codes, self.start, self.length, self.e = codes, start, length, e


class DeviceCandidates:
    """Candidates left in device memory by the seeding kernels, as parts (n, row int32, contig int32, lo int64,
    hi int64), each the bands of one or more consecutive seeding launches (_Parts), in row order.
    `ordered`: as seed() left them, each row's bands consecutive, by contig and position, so that the
    verifier may join them into stretches (gather.cu candidate_stretches); a filter's survivors keep it
    (their compaction is stable), an upload of host candidates does not claim it. A host stage reading
    .row/.contig/.lo/.hi (or any other Candidates attribute) gets the host copy, fetched once."""

    def __init__(self, parts, ordered=False):
        self.parts, self.ordered = parts, ordered
        self.layer = device.current()  # where the buffers live, for host stages reading them later

    @classmethod
    def upload(cls, cands):
        if not len(cands):
            return cls([])
        columns = (cands.row, cands.contig, cands.lo, cands.hi)
        return cls([(len(cands), *(cuda.scratch_copy(c.astype(t)) for c, t in zip(columns, COLUMNS)))])

    def __len__(self):
        return sum(part[0] for part in self.parts)

    def subset(self, mask):
        """The candidates where the host bool mask is set, compacted on the device."""
        with device.using(self.layer):
            return self._subset(mask)

    def _subset(self, mask):
        parts, begin = [], 0
        for n, *bufs in self.parts:
            kept = np.flatnonzero(mask[begin:begin + n])
            begin += n
            if len(kept):
                parts.append((len(kept), *(_take_device(buf, n, kept, 1, dtype) for buf, dtype in zip(bufs, COLUMNS))))
        return DeviceCandidates(parts, ordered=self.ordered)

    @functools.cached_property
    def host(self):
        if not self.parts:
            return Candidates()
        with device.using(self.layer):
            return self._fetch()

    def _fetch(self):
        columns = [[cuda.from_device(buf, (n,), dtype).astype(np.int64)
                    for buf, dtype in zip(bufs, COLUMNS)]
                   for n, *bufs in self.parts]
        return Candidates(*(np.concatenate([c[i] for c in columns]) for i in range(4)))

    def __getattr__(self, name):
        return getattr(self.host, name)


class _Parts:
    """The candidates of a seed() call as DeviceCandidates parts of up to `windows` candidates each: the bands
    of consecutive seeding launches are compacted one after the other into a part's buffers, so that the
    filter and the verifier run a few large launches instead of one per seeding launch (a 3.1 Gbp genome's
    200,000 reads were seeded in 883 launches of ~300,000 windows: 883 verification parts at ~1.3 ms of
    host work and synchronisation each, where the kernels took 0.5 s in all). A part is sized for what the
    rows still to come can add (their hits bound their bands), so a small batch allocates little; a
    launch with more bands than `windows` gets a part of its own, cut again where it is verified."""

    def __init__(self, windows, hits):
        self.windows, self.parts = windows, []
        self.left = hits  # hits of the launches still to come: a bound on their bands
        self.bufs, self.used, self.size = None, 0, 0  # the part being filled: its buffers, bands in, capacity

    def room(self, n, slots):
        """Device pointers (row, contig, lo, hi) where a launch's `n` bands go (none for none); `slots`: its
        hits. Every launch comes here, in order, so that the hits still to come are known."""
        self.left -= slots
        if not n:
            return []
        if self.used + n > self.size:
            self._close()
            self.size = _room(max(n, min(self.windows, n + self.left)), self.windows)
            self.bufs = [cuda.scratch(np.dtype(t).itemsize * self.size) for t in COLUMNS]
        at, self.used = self.used, self.used + n
        return [cuda.shifted(buf, -at * np.dtype(t).itemsize) for buf, t in zip(self.bufs, COLUMNS)]

    def _close(self):
        if self.used:
            self.parts.append((self.used, *self.bufs))
        self.bufs, self.used, self.size = None, 0, 0

    def done(self):
        self._close()
        return self.parts


class _Launch(NamedTuple):
    """One seeding launch (_launches): rows [begin, end) and their `slots` hits."""
    begin: int
    end: int
    slots: int
    slot: object         # device int64: each row's first hit slot, then the total
    block_row: object    # device int32: the row of each SEGMENT-slot block (seed.cu seed_segments) ...
    block_index: object  # ... and its number in the row
    blocks: int
    held: tuple          # the device arrays that slot, block_row and block_index point into


class _Queued(NamedTuple):
    """A seeding launch whose bands wait for its sums to come back (CudaBackend.seed)."""
    sums: object        # the layer's fetch_later of seed_scan's totals: bands, diagonals, adjacent, margin
    launch: _Launch
    seg_at: object      # device arrays of seed_segments, seed_bands and seed_scan that seed_compact reads
    dense: object
    counts: object
    bands: tuple        # (contig, lo, hi) of each block's bands, from its cut on


def _compact(kernel, queued, parts, stats):
    """A seeding launch's bands to their places in the candidate parts (seed.cu seed_compact), and its sums
    to `stats`. The host waits here for the launch's sums only: the next launch is already queued behind
    it, so the GPU seeds on while the host reads the sums and sets up the launch after; waiting for each
    launch's sums before queueing the next left the GPU idle for that host work (py-spy: a fifth of the
    mapping thread at 3.1 Gbp). 500,000 proxy reads, one H200: seeding stage 3.88 / 3.89 s -> 3.70 / 3.67 s,
    the same SAM."""
    total, diagonals, adjacent, margin = (int(x) for x in queued.sums.get())
    stats.hits -= margin
    stats.diagonals += diagonals
    stats.adjacent += adjacent
    launch = queued.launch
    room = parts.room(total, launch.slots)
    if total:
        cuda.launch(kernel("seed_compact"), launch.blocks * cuda.WARP, queued.seg_at, queued.dense, queued.counts,
                    launch.block_row, launch.begin, launch.blocks, *queued.bands, *room)


def _pieces(parts, most):
    """The candidate parts as (n, row, contig, lo, hi) pieces of at most `most` candidates (pointers into the
    parts' buffers): a part that one seeding launch filled beyond a verification part's size is cut here."""
    for n, *bufs in parts:
        if n <= most:
            yield (n, *bufs)
            continue
        for begin in range(0, n, most):
            yield (min(most, n - begin), *(cuda.shifted(buf, -begin * np.dtype(t).itemsize)
                                           for buf, t in zip(bufs, COLUMNS)))


def _span_sum(values, spans):
    """The sum of `values` over the row ranges `spans`."""
    return sum(int(values[lo:hi].sum()) for lo, hi in spans)


def _one_group(length, e):
    """Whether the seeded rows share one read length and one e (min == max: no sort, unlike np.unique)."""
    return len(length) > 0 and length.min() == length.max() and e.min() == e.max()


def _launches(hits, capacity, spans):
    """The seeding launches (_Launch) of the rows in `spans` ([lo, hi) row ranges) with these hits: one for
    each row range of at most `capacity` hits that has any (_chunks), none across spans. Why all at once:
    each upload from pageable memory waits for the kernels queued before it, so the launches' arrays go up
    in two copies before the first launch."""
    plan, slots, blocks = [], [], []
    for begin, end in _ranges(hits, capacity, spans):
        slot = np.concatenate([[0], np.cumsum(hits[begin:end])])
        block_row, block_index = ragged_arange(-(-np.diff(slot) // SEGMENT))
        plan.append((begin, end, int(slot[-1]), len(block_row)))
        slots.append(slot)
        blocks.append(np.concatenate([block_row, block_index]).astype(np.int32))
    if not plan:
        return []
    held = cuda.scratch_copy(np.concatenate(slots)), cuda.scratch_copy(np.concatenate(blocks))
    d_slots, d_blocks = held
    launches, slot_at, block_at = [], 0, 0
    for (begin, end, n_slots, n), slot in zip(plan, slots):
        launches.append(_Launch(begin, end, n_slots, cuda.shifted(d_slots, -8 * slot_at),
                                cuda.shifted(d_blocks, -4 * block_at), cuda.shifted(d_blocks, -4 * (block_at + n)),
                                n, held))
        slot_at, block_at = slot_at + len(slot), block_at + 2 * n
    return launches


def _room(n, most):
    """Items to allocate a buffer for n: n rounded up to a power of two, but not beyond `most` (the largest a
    launch or part takes) unless n is larger. Launches of varying sizes then ask the pool for a few sizes,
    which it reuses, instead of a new size (a new block, held once freed) for each launch."""
    return max(n, min(1 << max(int(n) - 1, 0).bit_length(), most))


GAP = 1024  # rows without hits that end a seeding launch's row range (_chunks)


def _ranges(hits, capacity, spans):
    """The _chunks of the rows in each of `spans` ([lo, hi) row ranges), as batch rows: none holds a row
    outside the spans (another row group's, whose k-mers the selection still holds) or crosses two."""
    for lo, hi in spans:
        for begin, end in _chunks(hits[lo:hi], capacity):
            yield lo + begin, lo + end


def _chunks(hits, capacity):
    """(begin, end) row ranges whose hits sum to at most `capacity` (a single larger row gets its own), each
    from a row with hits to a row with hits, none across more than GAP rows without hits."""
    rows = np.flatnonzero(hits)
    if not len(rows):
        return
    total = np.cumsum(hits[rows])
    stops = np.append(np.flatnonzero(np.diff(rows) > GAP) + 1, len(rows))  # where each run of rows ends
    i = 0
    while i < len(rows):
        base = total[i - 1] if i else 0
        stop = int(stops[np.searchsorted(stops, i, side="right")])
        j = min(max(int(np.searchsorted(total, base + capacity, side="right")), i + 1), stop)
        yield int(rows[i]), int(rows[j - 1]) + 1
        i = j


def _gather(codes, start, lo, hi, width, n):
    """Device ASCII rows [n, width] of a device code array (kernels/gather.cu; N outside [lo, hi));
    start/lo/hi are device int64 buffers of n items."""
    out = cuda.scratch(n * width)
    cuda.launch(cuda.function("gather.cu", "gather_ascii"), n * width, codes, start, lo, hi,
                width, n * width, out)
    return out


def _gather_host(codes, start, lo, hi, width):
    """_gather with start/lo/hi given as host arrays."""
    up = lambda a: cuda.scratch_copy(np.asarray(a, dtype=np.int64))
    return _gather(codes, up(start), up(lo), up(hi), width, len(start))


def _decide(gk, mode, read_rows, ref_rows, n, L, e):
    """bool [n]: GateKeeper's accept of each (read row, reference row) pair, device ASCII rows."""
    if mode == "improved":
        return gk.improved_device(read_rows, ref_rows, n, L, L + 3 * e, e)[0]
    return gk.faithful_device(ref_rows, read_rows, n, L, e)[0]


def _take_device(buffer, n_src, index, planes=1, dtype=np.int32, count=None):
    """Device buffer of buffer[k * n_src + index[i]] for k < planes (gather.cu take_i32 / take_i64); `index`:
    a host array, or a device int64 buffer of `count` indices."""
    n = len(index) if count is None else int(count)
    if count is None:
        index = cuda.scratch_copy(index.astype(np.int64))
    out = cuda.scratch(np.dtype(dtype).itemsize * n * planes)
    name = "take_i64" if np.dtype(dtype).itemsize == 8 else "take_i32"
    cuda.launch(cuda.function("gather.cu", name), n * planes, buffer, n_src, index, n, planes, out)
    return out


def _take(buffer, n_src, index, planes=1, dtype=np.int32, count=None):
    """Host copy of the selected elements (only they cross the bus)."""
    n = len(index) if count is None else int(count)
    return cuda.from_device(_take_device(buffer, n_src, index, planes, dtype, count), (planes * n,), dtype)


def _verify_device(genome, reads, read_start, read_len, max_e, win_start, win_len, n, longest, room=None):
    """kernels/myers.cu on n windows given as device arrays; returns the device outputs
    (best, n_ends, ends [MAX_ENDS, n], starts [MAX_ENDS, n], edits [MAX_ENDS, n]), in buffers allocated for
    `room` >= n windows (default n)."""
    kernel = cuda.function("myers.cu", "verify_windows", **{**kernel_defines(longest), "MAX_ENDS": MAX_ENDS})
    room = n if room is None else room
    best, n_ends = cuda.scratch(4 * room), cuda.scratch(4 * room)
    ends, starts, edits = (cuda.scratch(4 * MAX_ENDS * room) for _ in range(3))
    cuda.launch(kernel, n, genome, reads, read_start, read_len, max_e, win_start, win_len, n, 0,
                best, n_ends, ends, starts, edits)
    return best, n_ends, ends, starts, edits


def verify_windows(genome, reads, read_start, read_len, max_e, win_start, win_len):
    """kernels/myers.cu on n windows given as host arrays (tests and the paper's verification timing).
    Returns host arrays best [n], n_ends [n], ends, starts, edits [MAX_ENDS, n] (window-relative)."""
    n = len(read_start)
    up = lambda a, dtype: cuda.scratch_copy(np.asarray(a).astype(dtype, copy=False))
    out = _verify_device(up(genome, np.uint8), up(reads, np.uint8), up(read_start, np.int64),
                         up(read_len, np.int32), up(max_e, np.int32), up(win_start, np.int64), up(win_len, np.int32),
                         n, np.max(read_len))
    shapes = ((n,), (n,), (MAX_ENDS, n), (MAX_ENDS, n), (MAX_ENDS, n))
    return tuple(cuda.from_device(buf, shape, np.int32) for buf, shape in zip(out, shapes))
