"""The block parser (mapper/read_blocks.py) against dnaio (read_batches(fast=False)): the same ReadBatch
contents, batch by batch, or the same error after the same batches (for a non-ASCII byte, possibly after
more). Inputs where the two could differ: real read files, headers with comments, case and IUPAC letters,
mixed and empty lengths, CRLF, no final newline, FASTA, batch sizes 1 / 7 / larger than the file, chunks
much smaller than a record, every malformed input we know of (those must reach dnaio, and give its error),
and random small files, valid or damaged, with a fixed seed."""
import gzip
import shutil
import threading
import time

import numpy as np
import pytest

import mapper.read_blocks
import mapper.reads
from conftest import READS
from mapper.errors import InputError
from mapper.reads import read_batches

REAL = ["measles_Hm2_HiSeq_R1.fastq.gz", "ecoli_MG1655_first1kb_GAII_R1.fq.gz",
        "shigella_dysenteriae_ERR6005894_R1.fastq.gz", "honeybee_virus_SRR059298_GAII_subset.fastq.gz"]
SEQ = "ACGTTGCAAGGCTTAACCGGTTAAGCTAGCTAGGATCCAGTACGTAGCTAGC"


def outcome(path, batch_size, fast):
    """What a reading gives: each batch's contents (dtypes included), then the error, if any."""
    got = []
    try:
        for b in read_batches(path, batch_size, fast=fast):
            qual = None if b.qual is None else (b.qual.dtype.str, b.qual.tobytes())
            got.append((b.first, b.names, b.seq.dtype.str, b.seq.tobytes(), qual, b.starts.dtype.str,
                        b.starts.tolist()))
    except InputError as error:
        got.append(("error", str(error)))
    return got


def fell_back(*args, **kwargs):
    raise AssertionError("fell back to dnaio")


def same(path, batch_size, blocks_only=False):
    """Assert both readings agree; `blocks_only`: with the block parser alone (no fallback to dnaio).
    One difference is allowed: dnaio checks for non-ASCII bytes in every 128 kB it reads ahead, so it
    may fail before batches the block parser returns (the same error follows them)."""
    reference = outcome(path, batch_size, fast=False)
    with pytest.MonkeyPatch.context() as patch:
        if blocks_only:
            patch.setattr(mapper.reads, "_dnaio_batches", fell_back)
        got = outcome(path, batch_size, fast=True)
    if reference[-1][0] == "error" and "Non-ASCII" in reference[-1][1]:
        assert got[-1] == reference[-1] and got[:len(reference) - 1] == reference[:-1]
    else:
        assert got == reference
    return reference


def write(tmp_path, text, name="reads.fq", compress=False):
    path = tmp_path / (name + (".gz" if compress else ""))
    data = text.encode() if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def fastq(records, plus="+", eol="\n"):
    return "".join(f"@{name}{eol}{seq}{eol}{plus.replace('NAME', name)}{eol}{'I' * len(seq)}{eol}"
                   for name, seq in records)


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("compressed", [True, False])
def test_real_files(tmp_path, name, compressed):
    path = READS / name
    if not compressed:
        path = tmp_path / name.removesuffix(".gz")
        with gzip.open(READS / name, "rb") as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
    batch_sizes = {"measles": [1, 7, 1000, 10**6], "ecoli": [1, 7, 1000, 10**6], "shigella": [7, 4096, 10**6],
                   "honeybee": [333, 10**6]}[name.split("_")[0]]
    for batch_size in batch_sizes:
        reference = same(path, batch_size, blocks_only=True)
        assert "error" not in {b[0] for b in reference} and sum(len(b[1]) for b in reference) > 1000


def test_na12878(na12878_fastq):
    """samtools fastq output (names with /1 and /2, 151 bp)."""
    same(na12878_fastq, 333, blocks_only=True)


@pytest.mark.parametrize("chunk", [5, 64, 1000])
def test_chunks_smaller_than_records(tmp_path, monkeypatch, chunk):
    """Records, names and batches cut across reads of the stream; the buffer moved and grown."""
    with gzip.open(READS / "measles_Hm2_HiSeq_R1.fastq.gz", "rb") as f:
        path = write(tmp_path, b"".join(f.readlines()[:4 * 40]))
    monkeypatch.setattr(mapper.read_blocks, "CHUNK", chunk)
    for batch_size in [1, 7, 300]:
        same(path, batch_size, blocks_only=True)


def variants():
    """Valid FASTQ the block parser must read itself, exactly as dnaio does."""
    mixed = [("r1", SEQ), ("r2", SEQ[:7]), ("r3", ""), ("r4", SEQ * 3), ("r5", "A"), ("r6", "")]
    yield "comments", fastq([("r1 1:N:0:ACGT", SEQ), ("r2\tx=1 y", SEQ), ("r3  two  blanks ", SEQ)])
    yield "names of mixed lengths", fastq([(f"read{10**i}", SEQ) for i in range(12)])
    yield "lower case, N and IUPAC", fastq([("a", SEQ.lower()), ("b", "ACGTNNRYKMSWBDHVN.acgtn"), ("c", "nNnN")])
    yield "mixed and empty lengths", fastq(mixed)
    yield "one long read among short ones", fastq([("s1", SEQ[:20]), ("long", SEQ * 200), ("s2", SEQ[:30])])
    yield "one long name", fastq([("x" * 254, SEQ), ("y", SEQ), ("z" * 3, SEQ)])  # SAM's longest
    yield "no final newline", fastq([("r1", SEQ), ("r2", SEQ[:9])]).removesuffix("\n")
    yield "CRLF", fastq([("r1 c", SEQ), ("r2", SEQ[:5]), ("r3", "")], eol="\r\n")
    yield "CRLF, no final newline", fastq([("r1", SEQ), ("r2", SEQ[:5])], eol="\r\n").removesuffix("\n")
    yield "repeated headers", fastq([("r1 c d", SEQ), ("r2", SEQ[:5])], plus="+NAME")
    yield "repeated headers, CRLF", fastq([("r1 c", SEQ), ("r2", SEQ)], plus="+NAME", eol="\r\n")
    yield "repeated headers, one long", fastq([("r1", SEQ), ("x" * 254, SEQ), ("r3 c", SEQ)], plus="+NAME")
    yield "'@' and '+' starting qualities", "@r1\nACGT\n+\n@III\n@r2\nAC\n+\n+I\n"
    yield "blanks ending names", "@r\x1cb c\nACGT\n+\nIIII\n@s\x0bt\nAC\n+\nII\n@u\x1fv\nA\n+\nI\n"


@pytest.mark.parametrize("text", [text for _, text in variants()], ids=[name for name, _ in variants()])
@pytest.mark.parametrize("compress", [False, True])
def test_fastq_variants(tmp_path, text, compress):
    path = write(tmp_path, text, compress=compress)
    for batch_size in [1, 2, 7, 1000]:
        same(path, batch_size, blocks_only=True)


def fasta_variants():
    yield "one line each", "".join(f">r{i} desc\n{SEQ[:i * 7]}\n" for i in range(8))
    yield "many lines each", ">r1\nACGT\nACGTAC\nA\n>r2 x\nGG\n>r3\n>r4\nacgtn\nNNRY\n"
    yield "blank lines", ">r1\n\nACGT\n\n\nTT\n>r2\n\n>r3\nA\n\n"
    yield "CRLF", ">r1 a\r\nACGT\r\nAC\r\n>r2\r\n\r\nGG\r\n"
    yield "no final newline", ">r1\nACGT\n>r2\nAC"
    yield "header only at the end", ">r1\nACGT\n>r2"
    yield "one long record", f">r1\n{SEQ * 300}\n>r2\nAC\n>r3\n" + (SEQ + "\n") * 50


@pytest.mark.parametrize("text", [text for _, text in fasta_variants()], ids=[name for name, _ in fasta_variants()])
@pytest.mark.parametrize("name", ["reads.fa", "reads.fasta.gz", "reads.txt"])
def test_fasta_variants(tmp_path, text, name):
    path = write(tmp_path, text, name=name.removesuffix(".gz"), compress=name.endswith(".gz"))
    for batch_size in [1, 2, 3, 1000]:
        same(path, batch_size, blocks_only=True)


GOOD = fastq([(f"g{i}", SEQ[:20 + i]) for i in range(5)])


def dnaio_reads():
    """Inputs the block parser leaves to dnaio: malformed FASTQ (dnaio's error, after the batches before
    it), and what is valid for dnaio but not checked here (FASTA comments, blanks in a FASTA line...)."""
    yield "empty file", ""
    yield "only a newline", "\n"
    yield "not a reads file", "this is not a read file\n"
    for cut in range(1, 8):
        yield f"truncated record, cut {cut}", GOOD + "@t1 c\nACGT\n+\nIIII\n"[:[2, 5, 7, 9, 12, 14, 17][cut - 1]]
    yield "trailing empty line", GOOD + "\n"
    yield "header without '@'", GOOD + "r6\nACGT\n+\nIIII\n"
    yield "empty header line", GOOD + "\nACGT\n+\nIIII\n"
    yield "no '+' line", GOOD + "@r6\nACGT\n-\nIIII\n"
    yield "empty '+' line", GOOD + "@r6\nACGT\n\nIIII\n"
    yield "'+' line naming another read", GOOD + "@r6\nACGT\n+r7\nIIII\n"
    yield "'+' line, a longer name", GOOD + "@r6\nACGT\n+r6x\nIIII\n"
    yield "'+' line, a long name differing", fastq([(f"g{i}", SEQ) for i in range(5)], plus="+NAME") + \
        f"@{'x' * 3000}a\nACGT\n+{'x' * 3000}b\nIIII\n"
    yield "qualities too short", GOOD + "@r6\nACGT\n+\nIII\n"
    yield "qualities too long", GOOD + "@r6\nACGT\n+\nIIIII\n"
    yield "empty name", GOOD + "@\nACGT\n+\nIIII\n"
    yield "blank name", GOOD + "@  \nACGT\n+\nIIII\n"
    yield "blank before the name", GOOD + "@ r6 c\nACGT\n+\nIIII\n"
    yield "CRLF, empty name", GOOD + "@\r\nACGT\r\n+\r\nIIII\r\n"
    yield "non-ASCII sequence", GOOD + "@r6\nAC\u00e9T\n+\nIIII\n"
    yield "non-ASCII name", GOOD + "@r\u00e96\nACGT\n+\nIIII\n"
    yield "byte-order mark", "\ufeff" + GOOD
    yield "FASTA in a .fq", ">r1\nACGT\n"
    # valid for dnaio, but not what SAM can hold (issue 19): refused by reads.check_batch
    yield "a '\\r' inside lines", "@r1\rx\nAC\rGT\n+\nII\rII\n@r2\r\r\nACGT\r\r\n+\nIIIII\r\n"
    yield "control bytes in names", GOOD + "@r\x01a\x1cb c\nACGT\n+\nIIII\n"
    yield "blanks and controls in sequences", GOOD + "@r1\nAC GT\tN\x01\n+\nIIIIIIII\n"
    yield "'-' in a sequence", GOOD + "@r1\nAC-T\n+\nIIII\n"
    yield "a name of 255 bytes", GOOD + f"@{'x' * 255}\nACGT\n+\nIIII\n"
    yield "'@' in a name", GOOD + "@@CO\nACGT\n+\nIIII\n"
    yield "a space in qualities", GOOD + "@r1\nACGT\n+\nI II\n"


def test_unknown_format(tmp_path):
    """A file whose name and first byte say neither FASTQ nor FASTA: a one-line error (was a traceback)."""
    path = write(tmp_path, "xyz\nACGT\n", name="reads.txt")
    assert same(path, 10) == [("error", f"{path}: not a FASTQ or FASTA file (no such file name extension, "
                                         "and it starts with neither '@' nor '>')")]


def dnaio_fasta():
    yield "comment lines", ">r1\nACGT\n#comment\nGG\n>r2\nA\n"
    yield "comments before the first header", "#c\n>r1\nACGT\n"
    yield "text before the first header", "\n\nx\n>r1\nACGT\n"
    yield "lone CR", ">r1\rACGT\n>r2\nAC\rGT\n"
    yield "blanks in a sequence line", ">r1\nAC GT \n  TT\n>r2\n\tA\n"
    yield "empty name", ">r1\nACGT\n>\nAC\n"
    yield "blank name", ">r1\nACGT\n> r2\nAC\n"
    yield "non-ASCII", ">r1\nACGT\n>r2\nA\u00e9\n"
    yield "FASTQ in a .fa", "@r1\nACGT\n+\nIIII\n"


def test_fasta_across_batches(tmp_path, monkeypatch):
    """Both readings cut FASTA into batches right (dnaio's did not: each batch lost the next read)."""
    path = write(tmp_path, ">r1 x\nAC\nGT\n>r2\nac\n>r3\n\n>r4\nN\n", name="reads.fa")
    expected = [(["r1", "r2"], b"ACGTAC", [0, 4, 6]), (["r3", "r4"], b"N", [0, 0, 1])]
    monkeypatch.setattr(mapper.read_blocks, "CHUNK", 3)
    for fast in (True, False):
        got = [(b.names, b.seq.tobytes(), b.starts.tolist()) for b in read_batches(path, 2, fast=fast)]
        assert got == expected


@pytest.mark.parametrize("text", [t for _, t in dnaio_reads()], ids=[n for n, _ in dnaio_reads()])
@pytest.mark.parametrize("compress", [False, True])
def test_fastq_left_to_dnaio(tmp_path, monkeypatch, text, compress):
    path = write(tmp_path, text, compress=compress)
    for chunk in [mapper.read_blocks.CHUNK, 5]:  # one chunk; many, all read ahead when the parser gives up
        monkeypatch.setattr(mapper.read_blocks, "CHUNK", chunk)
        for batch_size in [1, 2, 1000]:
            same(path, batch_size)


@pytest.mark.parametrize("text", [t for _, t in dnaio_fasta()], ids=[n for n, _ in dnaio_fasta()])
def test_fasta_left_to_dnaio(tmp_path, text):
    path = write(tmp_path, text, name="reads.fa")
    for batch_size in [1, 2, 1000]:
        same(path, batch_size)


def random_reads(rng):
    """A small reads file: FASTQ or FASTA records (names with blanks or control bytes, empty and mixed
    lengths, repeated '+' lines, CRLF), now and then a malformed one (an empty name, a wrong '+' line, a
    quality too many or too few), maybe a few bytes replaced, removed or inserted (line ends, blanks, '@',
    '>', '#', non-ASCII...), maybe no final newline; and a file name (rarely of the other format)."""
    fastq, eol = rng.random() < 0.7, rng.choice(["\n", "\n", "\r\n"])
    text = ""
    for _ in range(rng.integers(1, 13)):
        name = rng.choice(["r%d" % rng.integers(10**5), "r x", "r\tc", "r\x1cq", "a" * rng.integers(1, 60), "", " r"],
                          p=[0.4, 0.2, 0.1, 0.1, 0.18, 0.01, 0.01])
        seq = "".join(rng.choice(list("ACGTNacgtRY"), rng.choice([0, 1, 5, 30, 100])))
        if fastq:
            qual = "I" * (len(seq) + rng.choice([0, 1, -1], p=[0.98, 0.01, 0.01]))
            plus = rng.choice(["+", "+" + name, "+x"], p=[0.6, 0.39, 0.01])
            text += f"@{name}{eol}{seq}{eol}{plus}{eol}{qual}{eol}"
        else:
            width = rng.choice([7, 60, 1000])
            text += f">{name}{eol}" + "".join(seq[i:i + width] + eol for i in range(0, len(seq), width))
    text = list(text)
    for _ in range(rng.choice([0, 1, 2], p=[0.6, 0.3, 0.1])):
        at, change = rng.integers(len(text)), rng.random()
        atom = rng.choice(list("ACgtN \t\r\x01\x1c#@>+I\u00e9\n") + [""])
        if change < 0.4:
            text[at] = atom
        elif change < 0.7:
            del text[at]
        else:
            text.insert(at, atom)
    text = "".join(text)
    names = [["r.fa", "r.txt"], ["r.fq", "r.fastq", "r.txt"]]
    return text.rstrip("\n") if rng.random() < 0.2 else text, rng.choice(names[fastq ^ (rng.random() < 0.05)])


@pytest.mark.parametrize("seed", range(4))
def test_random_reads(tmp_path, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    for case in range(20):
        text, name = random_reads(rng)
        path = write(tmp_path, text, name=f"{case}{name}", compress=rng.random() < 0.3)
        monkeypatch.setattr(mapper.read_blocks, "CHUNK", rng.choice([3, 17, 1 << 22]))
        for batch_size in [1, 3, 100]:
            same(path, batch_size)


def test_errors_name_file_line_record(tmp_path):
    """The fallback keeps the error the user sees: file, line and record of the bad read."""
    path = write(tmp_path, GOOD * 3 + "@r6\nACGT\n+\nIII\n", compress=True)
    got = outcome(path, 4, fast=True)
    assert [len(b[1]) for b in got[:-1]] == [4, 4, 4]
    assert got[-1] == ("error", f"{path} line 64 (record 16): Length of sequence and qualities differ")


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_damaged_gzip(tmp_path, damage):
    data = gzip.compress((GOOD * 2000).encode())
    data = data[:len(data) // 2] if damage == "truncated" else data[:200] + b"\xff" * 50 + data[250:]
    path = tmp_path / "reads.fq.gz"
    path.write_bytes(data)

    def ending(fast):
        try:
            for _ in read_batches(path, 100, fast=fast):
                pass
        except Exception as error:  # InputError, or whatever dnaio lets through: the same either way
            return type(error), str(error)
    assert ending(True) == ending(False) is not None


def test_stopping_early_stops_the_chunk_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(mapper.read_blocks, "CHUNK", 256)
    path = write(tmp_path, GOOD * 200)
    batches = read_batches(path, 3)
    assert len(next(batches)) == 3
    batches.close()
    assert not any(t.name == "gkmap-reader" for t in threading.enumerate())


def test_prefetch_stops_after_the_last_item():
    """A consumer that stops once the reader has read everything and waits with a full queue (the chunk
    reader, when the block parser gives up near the end of a file) stops it: no wait for ever."""
    items = mapper.reads.prefetch(iter(range(3)), depth=2)
    assert next(items) == 0
    time.sleep(0.3)  # the reader has queued 1 and 2, and waits for room for its end mark
    closing = threading.Thread(target=items.close, daemon=True)
    closing.start()
    closing.join(10)
    assert not closing.is_alive()


def test_gather_paths():
    """Equal lengths (rows), mixed (rows and a mask), one long among short ones (an index array)."""
    rng = np.random.default_rng(11)
    data = rng.integers(0, 256, 20_000, dtype=np.uint8)
    for lengths in ([50] * 30, list(rng.integers(0, 80, 30)), [3] * 29 + [5000], [0] * 5):
        lengths = np.array(lengths, dtype=np.int64)
        starts = np.sort(rng.choice(len(data) - 5000, len(lengths), replace=False))
        expected = b"".join(data[s:s + n].tobytes() for s, n in zip(starts, lengths))
        assert mapper.read_blocks.gather(data, starts, lengths).tobytes() == expected
