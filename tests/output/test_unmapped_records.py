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
