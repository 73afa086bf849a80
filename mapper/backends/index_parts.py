"""Index parts: how the cuda backend maps against a reference whose k-mer index does not fit the GPU.

mrFAST cuts a large reference into chunks and maps every read against each chunk in turn; the cuda backend
does the same with parts of whole contigs when the index (positions and bucket offsets) and the reference
codes need more device memory than gkmap may use (`--gpu-memory`, default: what the GPU has free less a
reserve for the batches). Every batch then runs seeding, filter and verification once per part, the part's
arrays uploaded into the same device buffers, and the batch's mappings are gathered over the parts before
loci are chosen. The SAM is the one-part run's, byte for byte, because:
- k-mer selection ranks bucket sizes of the whole genome: the whole index's offsets stay resident
  (4**ws + 1 words), only positions are cut;
- a part holds, per bucket, the positions of its contigs plus a margin of `margin` bases on either side:
  the adjacency filter of a diagonal near a contig end looks for k-mers up to a read length + e away, which
  may lie in a neighbouring contig. Margin hits take part in ordering a row's hits but never become
  candidates (kernels/seed.cu seed_place), and each core position belongs to exactly one part;
- a candidate window never leaves its contig, so the part's own bases are all that filter and verifier read.
Each part's uploads cost time per batch: a larger `--batch-size` spreads them over more reads.
"""
import threading
from dataclasses import dataclass

import numpy as np

from mapper.cores import on_cores
from mapper.errors import UsageError

POSITION_BYTES = 4  # uint32 positions
BLOCK = 1 << 25     # positions cut at a time when a part's lists are cut out (int32 counts within a block)
THREADS = 8         # blocks cut at once (each holds about 10 bytes a position of temporaries)


@dataclass(frozen=True)
class IndexPart:
    """Contigs [first, end) of the reference: core positions [lo, hi), with margins [pos_lo, pos_hi)."""
    first: int
    end: int
    lo: int
    hi: int
    pos_lo: int
    pos_hi: int

    @property
    def bases(self):
        return self.pos_hi - self.pos_lo


def size_text(n):
    """Bytes as GiB, or MiB below one GiB."""
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def device_bytes(index):
    """Device memory of the whole index resident in one piece: offsets, positions and reference codes."""
    return index.offsets.nbytes + index.positions.nbytes + index.reference.size


def plan(reference, budget, offsets_bytes, margin):
    """The parts of `reference` (contig table: starts, lengths) for a device budget of `budget` bytes, of which
    two offsets arrays (the whole index's and the part's, `offsets_bytes` each) are spoken for. A part's
    cost is bounded by POSITION_BYTES + 1 per base of its span with margins (there are never more positions
    than bases). Contigs are taken in order while the part fits; a contig too big alone is a UsageError."""
    per_part = budget - 2 * offsets_bytes
    starts, ends = reference.starts.astype(np.int64), (reference.starts + reference.lengths).astype(np.int64)
    total = int(ends[-1]) if len(ends) else 0
    span = lambda lo, hi: min(hi + margin, total) - max(lo - margin, 0)
    parts, first = [], 0
    while first < len(starts):
        end = first + 1
        if span(starts[first], ends[first]) * (POSITION_BYTES + 1) > per_part:
            need = span(starts[first], ends[first]) * (POSITION_BYTES + 1) + 2 * offsets_bytes
            raise UsageError(f"contig {reference.names[first]} alone needs {size_text(need)} of device memory for its "
                             f"part of the index; {size_text(budget)} may be used (--gpu-memory)")
        while end < len(starts) and span(starts[first], ends[end]) * (POSITION_BYTES + 1) <= per_part:
            end += 1
        lo, hi = int(starts[first]), int(ends[end - 1])
        parts.append(IndexPart(first, end, lo, hi, max(lo - margin, 0), min(hi + margin, total)))
        first = end
    return parts


def part_lists(offsets, positions, part):
    """(offsets, positions) of one part: every bucket's positions within [part.pos_lo, part.pos_hi), in the
    index's order, and the bucket bounds into them (same dtype as `offsets`). The positions are cut in
    blocks on a few threads (numpy releases the GIL; one thread took about 30 s per part of a human-size
    index), so the host holds no more than a few blocks' temporaries beside the result."""
    offsets = np.asarray(offsets)
    n_positions = len(positions)
    local = np.empty(len(offsets), dtype=offsets.dtype)
    blocks = [(b0, min(b0 + BLOCK, n_positions)) for b0 in range(0, n_positions, BLOCK)]
    cut = on_cores(lambda block: _cut_block(offsets, positions, part, *block), blocks, most=THREADS)
    running = 0
    for i0, i1, before, kept in cut:  # `before` counts within a block (int32); `running` passes 2^31 in a big part
        local[i0:i1] = before
        local[i0:i1] += offsets.dtype.type(running)
        running += len(kept)
    local[np.searchsorted(offsets, offsets.dtype.type(n_positions), side="left"):] = running  # buckets at the end
    return local, (np.concatenate([kept for *_, kept in cut]) if cut else np.zeros(0, dtype=np.uint32))


_thread = threading.local()


def _counts(n):
    """This thread's int32 buffer of n counts, kept for its next block (fresh pages cost more than the
    cumulative sum written into them)."""
    buffer = getattr(_thread, "counts", None)
    if buffer is None or len(buffer) < n:
        buffer = _thread.counts = np.empty(n, dtype=np.int32)
    return buffer[:n]


def _cut_block(offsets, positions, part, b0, b1):
    """One block [b0, b1) of the positions: (first and end bucket starting in it, the part's positions before
    each of those buckets' starts within the block, the part's positions of the block)."""
    block = np.asarray(positions[b0:b1])
    inside = block >= part.pos_lo
    inside &= block < part.pos_hi
    before = _counts(b1 - b0 + 1)  # kept positions before each of the block's
    before[0] = 0
    np.cumsum(inside, dtype=np.int32, out=before[1:])
    # buckets starting in this block (bounds of the offsets' own dtype: no converted copy of them)
    i0, i1 = np.searchsorted(offsets, np.array([b0, b1], dtype=offsets.dtype), side="left")
    return i0, i1, before[offsets[i0:i1].astype(np.int64) - b0], block[inside]
