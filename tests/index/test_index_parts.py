"""A reference whose index does not fit the GPU is mapped in parts of whole contigs (mapper/backends/
index_parts.py) with the output of a one-part run. The part lists are checked against a brute-force cut of
the index; the cuda backend's own code, kernels included (on the CPU through tests/host_cuda.py, and on the
GPU when there is one), must find the same mappings and count the same seeding numbers with a budget that
forces several parts; and the CLI's --gpu-memory is checked for bad values."""
import numpy as np
import pytest

from cli_checks import without_pg
from conftest import READS, SHIGELLA
from mapper.backends import cuda_mapping, index_parts
from mapper.backends.index_parts import IndexPart, part_lists, plan
from mapper.errors import UsageError
from mapper.index import build_index, load_index
from mapper.options import parse_size
from mapper.pipeline import Counters, find_mappings
from mapper.reads import read_batches
from mapper.render import batch_loci
from mapper.seeding import SeedStats


@pytest.fixture
def make_backend(device_layer, monkeypatch):
    """The cuda backend's class, on the host twin or the GPU (conftest.py's `device_layer`)."""
    monkeypatch.setattr(cuda_mapping, "MARGIN", 1)  # parts widen their margins to what the reads need
    return cuda_mapping.CudaBackend


def test_part_lists_equal_a_brute_force_cut(monkeypatch, index_dir):
    index = load_index(SHIGELLA, index_dir(SHIGELLA))
    offsets, positions = np.asarray(index.offsets), np.asarray(index.positions)
    monkeypatch.setattr(index_parts, "BLOCK", 1 << 18)  # many blocks, buckets straddling them
    key = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets.astype(np.int64)))
    for lo, hi in ((0, 1_000_000), (2_500_000, 2_600_000), (4_000_000, len(index.reference.codes)), (5, 5)):
        part = IndexPart(0, 1, lo, hi, lo, hi)
        got_offsets, got_positions = part_lists(offsets, positions, part)
        inside = (positions >= lo) & (positions < hi)
        want_offsets = np.concatenate([[0], np.cumsum(np.bincount(key[inside], minlength=len(offsets) - 1))])
        assert got_offsets.dtype == offsets.dtype
        assert np.array_equal(got_offsets, want_offsets)
        assert np.array_equal(got_positions, positions[inside])


def test_plan_cuts_whole_contigs_within_the_budget(cut_measles, tmp_path):
    reference = build_index(cut_measles[0], 10, tmp_path / "idx").reference
    offsets_bytes, margin = 1000, 50
    budget = 2 * offsets_bytes + 5 * 1500
    parts = plan(reference, budget, offsets_bytes, margin)
    assert len(parts) > 3
    assert [p.first for p in parts] == [0] + [p.end for p in parts[:-1]] and parts[-1].end == len(reference.names)
    total = int(reference.ends[-1])
    for p in parts:
        assert (p.lo, p.hi) == (reference.starts[p.first], reference.ends[p.end - 1])
        assert (p.pos_lo, p.pos_hi) == (max(p.lo - margin, 0), min(p.hi + margin, total))
        assert 2 * offsets_bytes + 5 * p.bases <= budget
    with pytest.raises(UsageError, match="contig c.* alone needs"):
        plan(reference, 2 * offsets_bytes + 100, offsets_bytes, margin)


def map_all(backend, index, reads, n, e, memory=None):
    backend.load(index, memory)
    counters = Counters()
    batch = next(read_batches(reads, n))
    rows, maps = find_mappings(batch, index, backend, None, e, str(reads), counters)
    loci = batch_loci(rows, maps, len(batch), index.reference).loci
    return loci, counters.seeding


@pytest.mark.parametrize("genome", ["cut", "shigella"])
def test_mapping_in_parts_equals_one_part(make_backend, genome, cut_measles, tmp_path, index_dir):
    if genome == "cut":
        index, reads, n, e = build_index(cut_measles[0], 10, tmp_path / "idx"), cut_measles[1], 400, 4
        budget = 2 * index.offsets.nbytes + 5 * 1500      # about 1 kb of contigs a part, and the margins
    else:
        index = load_index(SHIGELLA, index_dir(SHIGELLA))
        reads, n, e = READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz", 300, 6
        budget = 2 * index.offsets.nbytes + 5 * (int(index.reference.lengths[0]) + 10_000)  # contig by contig
    whole, whole_stats = map_all(make_backend(), index, reads, n, e)
    backend = make_backend()
    # these genomes are small beside the offsets arrays, so parts never pay for them: make the whole index
    # "too big" and give a budget that cuts it into parts
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_parts, "device_bytes", lambda index: budget + 1)
        patch.setattr(cuda_mapping, "CONTEXT", 0)  # --gpu-memory less the working budget (a fifth) is `budget`
        parts, parts_stats = map_all(backend, index, reads, n, e, budget + budget // 4)
    assert backend._parts is not None and len(backend._parts) > 1
    assert backend._margin >= 100 + e + index.ws   # widened for the reads
    assert len(whole) > 150
    for f in ("row", "contig", "start", "end", "edits"):
        assert np.array_equal(getattr(parts, f), getattr(whole, f)), f
    assert parts_stats == whole_stats and whole_stats != SeedStats()


@pytest.mark.parametrize("text,size", [("16G", 16 << 30), ("1.5g", 3 << 29), ("512MiB", 512 << 20), ("4096", 4096)])
def test_sizes(text, size):
    assert parse_size(text) == size


def test_bad_gpu_memory_is_a_one_line_error(gkmap):
    from conftest import MEASLES
    reads = READS / "measles_Hm2_HiSeq_R1.fastq.gz"
    for args, message in ((["--gpu-memory", "lots"], "--gpu-memory must be a size"),
                          (["--gpu-memory", "0"], "more than 0 bytes"),
                          (["--gpu-memory", "1G", "--device", "cpu"], "for the cuda backend")):
        code, err = gkmap("map", *args, str(MEASLES), str(reads))
        assert code != 0 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.gpu
def test_gkmap_map_in_parts_writes_the_same_sam(gkmap, monkeypatch, tmp_path, cut_measles):
    """The whole run on the GPU: `gkmap map --gpu-memory` with an index made 'too big' writes the SAM of
    the one-part run (the @PG line aside), filter on, several batches."""
    pytest.importorskip("pycuda")
    fasta, reads = cut_measles
    index = build_index(fasta, 10, tmp_path / "idx")
    budget = 2 * index.offsets.nbytes + 5 * 1500
    sams = []
    for memory in (None, budget):
        out = tmp_path / f"{memory}.sam"
        with pytest.MonkeyPatch.context() as patch:
            if memory:
                patch.setattr(index_parts, "device_bytes", lambda index: budget + 1)
                patch.setattr(cuda_mapping, "MARGIN", 1)  # widened to what the reads need at the first batch
                patch.setattr(cuda_mapping, "CONTEXT", 0)
            extra = ["--gpu-memory", str(memory + memory // 4)] if memory else []
            code, err = gkmap("map", "--quiet", "--device", "cuda", "--filter", "gatekeeper", "-e", "4", "--ws", "10",
                              "--batch-size", "150", "--index", str(tmp_path / "idx"), "-o", str(out), *extra,
                              str(fasta), str(reads))
        assert code == 0, err
        sams.append(without_pg(out))
    assert sams[0] == sams[1] and len(sams[0]) > 400
