"""sam.unmapped_records (--unmapped): the reads it writes parse back, with dnaio, as the very reads of the
input (names, bases, qualities, in order), for FASTQ and FASTA input, empty reads and any subset."""
import io

import dnaio
import numpy as np
import pytest

from conftest import READS
from mapper.reads import ReadBatch, read_batches
from mapper.sam import unmapped_records


def _parsed(text, fastq):
    with dnaio.open(io.BytesIO(text.encode("ascii")), fileformat="fastq" if fastq else "fasta") as reader:
        return [(r.name, r.sequence, r.qualities) for r in reader]


def _expected(batch, reads):
    seq = batch.seq.tobytes().decode("ascii")
    qual = None if batch.qual is None else batch.qual.tobytes().decode("ascii")
    spans = [(int(batch.starts[r]), int(batch.starts[r + 1])) for r in reads]
    return [(batch.names[r], seq[a:b], None if qual is None else qual[a:b]) for r, (a, b) in zip(reads, spans)]


@pytest.fixture(scope="module")
def real_batch():
    return next(read_batches(READS / "ecoli_MG1655_first1kb_GAII_R1.fq.gz", 3000))


@pytest.mark.parametrize("fastq", [True, False])
def test_real_reads_round_trip(real_batch, fastq):
    """Every other read of a real batch (varied lengths: the E. coli GAII reads are trimmed), as FASTQ and,
    without the qualities, as FASTA."""
    batch = real_batch if fastq else ReadBatch(real_batch.names, real_batch.seq, None, real_batch.starts)
    assert len(np.unique(np.diff(batch.starts))) > 1, "the batch should hold reads of several lengths"
    reads = np.arange(0, len(batch), 2)
    text = unmapped_records(batch, reads)
    assert _parsed(text, fastq) == _expected(batch, reads.tolist())
    assert text.count("\n") == len(reads) * (4 if fastq else 2)


@pytest.mark.parametrize("fastq", [True, False])
def test_empty_reads_and_edges(fastq):
    """Empty reads give empty lines; the first and last read of the batch; none at all gives ''."""
    lengths = np.array([0, 5, 0, 1, 3, 0])
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    seq = np.frombuffer(b"ACGTNAGATC", dtype=np.uint8)
    qual = np.frombuffer(b"IIII#!~5+?", dtype=np.uint8) if fastq else None
    batch = ReadBatch([f"r{i}" for i in range(len(lengths))], seq, qual, starts)
    reads = np.array([0, 1, 2, 3, 4, 5])
    text = unmapped_records(batch, reads)
    if fastq:
        assert text.startswith("@r0\n\n+\n\n@r1\nACGTN\n+\nIIII#\n") and text.endswith("@r5\n\n+\n\n")
    else:
        assert text.startswith(">r0\n\n>r1\nACGTN\n") and text.endswith(">r5\n\n")
    assert _parsed(text, fastq) == _expected(batch, reads.tolist())
    assert unmapped_records(batch, np.array([4])) == ("@r4\nGAT\n+\n~5+\n" if fastq else ">r4\nGAT\n")
    assert unmapped_records(batch, np.array([], dtype=np.int64)) == ""


def test_one_base_read_with_quality_star():
    """A read of one base whose quality is '*' (Phred 9) keeps it: an empty line would be no FASTQ."""
    batch = ReadBatch(["r"], np.frombuffer(b"A", dtype=np.uint8), np.frombuffer(b"*", dtype=np.uint8),
                      np.array([0, 1], dtype=np.int64))
    assert unmapped_records(batch, np.array([0])) == "@r\nA\n+\n*\n"


def test_one_long_read_costs_its_own_length():
    """20,000 reads of 100 bases and one of 50,000: the tables of the unmapped records and of the SAM's
    SEQ/QUAL fields hold each read at most about twice (reads.py: one long read among short ones costs its
    own length); padded to the longest they took 5 GB and 8 GB."""
    import tracemalloc

    from mapper.sam import read_fields
    rng = np.random.default_rng(2)
    lengths = np.r_[np.full(20_000, 100), 50_000]
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    seq = rng.choice(np.frombuffer(b"ACGT", dtype=np.uint8), int(starts[-1]))
    qual = rng.integers(33, 75, int(starts[-1])).astype(np.uint8)
    batch = ReadBatch([f"r{i}" for i in range(len(lengths))], seq, qual, starts)
    reads = np.arange(len(lengths))
    tracemalloc.start()
    try:
        text = unmapped_records(batch, reads)
        fields = read_fields(batch, np.ones((2, len(lengths)), dtype=bool))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 << 20, f"{peak >> 20} MB"
    assert _parsed(text, True) == _expected(batch, reads.tolist())
    assert len(fields[0, -1]) == len("\t*\t0\t0\t") + 2 * 50_000 + 1
