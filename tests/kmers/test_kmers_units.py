"""The vectorised pieces of `gkmap kmers` against slow, obviously correct twins, on random inputs with a
fixed seed: k-mer extraction and canonical form, sort + RLE, VLQ, Simple-8b, key deltas, dump lines."""
import os
from collections import Counter

import numpy as np
import pytest

from mapper.alphabet import ENCODE
from mapper.kmers import codec
from mapper.kmers.count import sort_count
from mapper.kmers.encode import KmerLayout, extract, keys_from_strings, keys_to_codes
from mapper.kmers.text import dump_lines, numpy_lines

RC = str.maketrans("ACGT", "TGCA")


def slow_kmers(text, k, canonical):
    """Every k-mer of ACGT letters only, by slicing strings (either case counts, anything else breaks)."""
    text = text.upper()
    found = []
    for p in range(len(text) - k + 1):
        kmer = text[p:p + k]
        if set(kmer) <= set("ACGT"):
            found.append(min(kmer, kmer.translate(RC)[::-1]) if canonical else kmer)
    return found


def as_strings(keys, layout):
    return ["".join("ACGT"[c] for c in row) for row in keys_to_codes(keys, layout)]


@pytest.mark.parametrize("k", [1, 3, 31, 32, 33, 64, 65, 96, 97, 256])
@pytest.mark.parametrize("canonical", [False, True])
def test_extract_matches_string_slicing(k, canonical):
    rng = np.random.default_rng(k)
    text = "".join(rng.choice(list("ACGTACGTACGTacgtNR"), 3000))
    layout = KmerLayout(k)
    keys = extract(ENCODE[np.frombuffer(text.encode(), dtype=np.uint8)], layout, canonical)
    assert as_strings(keys, layout) == slow_kmers(text, k, canonical)
    assert (keys_from_strings(as_strings(keys, layout), layout) == keys).all()


@pytest.mark.parametrize("channels", [1, 2, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_sort_count_matches_counter(channels, weighted):
    rng = np.random.default_rng(channels)
    keys = rng.integers(0, 6, (channels, 5000)).astype(np.uint64) << np.uint64(61)
    keys |= rng.integers(0, 3, (channels, 5000)).astype(np.uint64)  # few distinct keys, many repeats
    weights = rng.integers(1, 1000, 5000).astype(np.uint64) if weighted else None
    expected = Counter()
    for i, key in enumerate(map(tuple, keys.T.tolist())):
        expected[key] += 1 if weights is None else int(weights[i])
    distinct, counts = sort_count(keys, weights)
    assert list(map(tuple, distinct.T.tolist())) == sorted(expected)
    assert counts.tolist() == [expected[key] for key in sorted(expected)]


def slow_vlq(values):
    out = bytearray()
    for v in values:
        while True:
            out.append((v & 0x7F) | (0x80 if v >= 0x80 else 0))
            v >>= 7
            if not v:
                break
    return bytes(out)


def random_uint64(rng, n):
    """Values of every bit length, 0 and 2^64 - 1 included."""
    values = rng.integers(0, 2 ** 64 - 1, n, dtype=np.uint64, endpoint=True)
    values >>= rng.integers(0, 64, n).astype(np.uint64)
    return np.concatenate([values, np.array([0, 2 ** 64 - 1, 127, 128], dtype=np.uint64)])


def test_vlq_matches_byte_by_byte_encoder():
    values = random_uint64(np.random.default_rng(1), 3000)
    data = codec.vlq_encode(values)
    assert data.tobytes() == slow_vlq(values.tolist())
    assert (codec.vlq_decode(data, len(values)) == values).all()
    with pytest.raises(codec.CodecError):
        codec.vlq_decode(data[:-1], len(values))


def slow_simple8b(values):
    """The greedy Simple-8b packer: each word takes as many values as the widest selector that fits."""
    words, i = [], 0
    while i < len(values):
        for s in range(16):
            n, bits = int(codec.S8B_N[s]), int(codec.S8B_BITS[s])
            chunk = values[i:i + n]
            if len(chunk) == n and all(v < (1 << bits) for v in chunk) or s == 15:
                words.append(s << 60 | sum(v << (j * bits) for j, v in enumerate(chunk)))
                i += len(chunk)
                break
    return np.array(words, dtype=np.uint64)


@pytest.mark.parametrize("n", [0, 1, 59, 60, 61, 250, 4000])
def test_simple8b_round_trips_and_reads_a_greedy_packer(n):
    rng = np.random.default_rng(n)
    values = np.where(rng.random(n) < 0.9, 0, rng.integers(0, 2 ** 60, n, dtype=np.uint64)
                      >> rng.integers(0, 60, n).astype(np.uint64)).astype(np.uint64)
    values[n // 4:n // 4 + 370] = 0  # runs for the 240- and 120-zero selectors
    assert (codec.simple8b_decode(codec.simple8b_encode(values), n) == values).all()
    assert (codec.simple8b_decode(slow_simple8b(values.tolist()), n) == values).all()
    counts = values + np.uint64(1)
    assert (codec.decode_counts(codec.encode_counts(counts), n) == counts).all()


@pytest.mark.parametrize("channels", [1, 2, 4])
def test_key_deltas_round_trip(channels):
    rng = np.random.default_rng(channels)
    # few values per channel: long runs of equal prefixes, the case the segmented prefix sum handles
    keys = random_uint64(rng, 3000)[rng.integers(0, 40, (channels, 3000))]
    keys = sort_count(keys)[0]
    assert (codec.decode_keys(codec.encode_keys(keys), channels, keys.shape[1]) == keys).all()


def test_dump_lines_match_string_formatting():
    rng = np.random.default_rng(4)
    layout = KmerLayout(37)
    keys = sort_count(rng.integers(0, 2 ** 63, (2, 500), dtype=np.uint64) >> np.uint64(1))[0]
    keys[1] &= np.uint64(4 ** 5 - 1)
    counts = rng.integers(1, 10 ** 19, keys.shape[1], dtype=np.uint64)
    counts >>= rng.integers(0, 64, keys.shape[1]).astype(np.uint64)
    counts[:3] = [1, 9, 10]
    counts = np.maximum(counts, np.uint64(1))
    expected = "".join(f"{s}\t{c}\n" for s, c in zip(as_strings(keys, layout), counts.tolist()))
    assert dump_lines(keys, counts, layout).decode() == expected
    assert numpy_lines(keys, counts, layout).decode() == expected
    for k in (1, 3, 4, 5, 31, 32, 33, 64, 65, 130):  # channels and their last one of every width mod 4
        strings = sorted({"".join(rng.choice(list("ACGT"), k)) for _ in range(300)})
        layout = KmerLayout(k)
        keys = keys_from_strings(strings, layout)
        counts = np.arange(1, len(strings) + 1, dtype=np.uint64)
        expected = "".join(f"{s}\t{c}\n" for s, c in zip(strings, range(1, 400)))
        assert dump_lines(keys, counts, layout).decode() == expected  # the compiled kernels
        assert numpy_lines(keys, counts, layout).decode() == expected  # numpy's, where there is no compiler


def dnaio_codes(text):
    """The reference parse: dnaio's records joined by N (as reading.py's dnaio path)."""
    import io

    import dnaio
    with dnaio.open(io.BytesIO(text), fileformat="fasta") as reader:
        sequences = [record.sequence for record in reader]
    return ENCODE[np.frombuffer("\n".join(sequences).encode(), dtype=np.uint8)]


def random_fasta(rng):
    """Headers, multi-line records, and every odd byte: CR, LF-CR, tabs, spaces, '#' and '>' inside and at
    the start of lines, blank lines, lower case, IUPAC letters."""
    parts = []
    for r in range(int(rng.integers(1, 6))):
        parts.append(b">r%d some description\n" % r)
        for _ in range(int(rng.integers(0, 5))):
            line = rng.choice(np.frombuffer(b"ACGTacgtNRn> #\t\r\x00\x0b", dtype=np.uint8), int(rng.integers(0, 20)))
            parts.append(line.astype(np.uint8).tobytes() + (b"\n" if rng.random() < 0.9 else b"\r\n"))
    return b"".join(parts)


def test_fasta_parsers_equal_dnaio():
    """fasta.py's two paths against dnaio record by record (our codes start with the first header's N)."""
    from mapper.kmers.fasta import fast_codes, general_codes
    rng = np.random.default_rng(5)
    texts = [random_fasta(rng) for _ in range(1500)] + [b">a\n", b">a\nAC\rGT\n>b\nGG", b">a\n\n\n ACG \n#x\n>b"]
    fast = 0
    for text in texts:
        want = dnaio_codes(text)
        assert np.array_equal(general_codes(text)[1:], want), text
        quick = fast_codes(text)
        if quick is not None:
            fast += 1
            assert np.array_equal(quick[1:], want), text
    assert fast > 50  # the clean texts took the fast path


def test_blocks_carry_records_across_cuts(tmp_path):
    """Tiny blocks (reading.blocks cuts after newlines): the codes of the blocks, joined where a block
    carries and N-separated where it does not, are the file's codes."""
    from mapper.kmers.reading import blocks
    rng = np.random.default_rng(6)
    text = b"".join(random_fasta(rng) for _ in range(20))
    path = tmp_path / "x.fa"
    path.write_bytes(text)
    for block_bytes in (1, 7, 64, 1 << 20):
        joined = []
        for block in blocks([path], block_bytes):
            assert block.is_text and (block.carry == bool(joined))
            joined.append(block.codes())
        assert np.array_equal(np.concatenate(joined)[1:], dnaio_codes(text))


def random_fastq(rng, n):
    """FASTQ records with lower case, N runs, IUPAC letters, empty reads, sometimes a last record without
    its newline; some blocks made odd on purpose: CRLF line ends, a '+' line repeating the name."""
    records = []
    for r in range(n):
        seq = rng.choice(np.frombuffer(b"ACGTacgtNNRn", dtype=np.uint8), int(rng.integers(0, 40))).tobytes()
        plus = b"+" + (b"r%d x" % r if rng.random() < 0.05 else b"")
        records.append(b"@r%d x\n%s\n%s\n%s\n" % (r, seq, plus, b"I" * len(seq)))
    text = b"".join(records)
    if rng.random() < 0.1:
        text = text.replace(b"\n", b"\r\n")
    if rng.random() < 0.1:
        text = text[:-1]
    return text


def dnaio_fastq_codes(text):
    import io

    import dnaio
    with dnaio.open(io.BytesIO(text), fileformat="fastq") as reader:
        sequences = [record.sequence for record in reader]
    return ENCODE[np.frombuffer("".join(s + "\n" for s in sequences).encode(), dtype=np.uint8)]


def test_fastq_parser_equals_dnaio():
    """fastq.py against dnaio record by record (each read followed by an N); the blocks it declines are the
    odd ones, which reading.py hands to dnaio."""
    from mapper.kmers.fastq import fastq_codes
    rng = np.random.default_rng(8)
    plain = 0
    for _ in range(400):
        text = random_fastq(rng, int(rng.integers(0, 30)))
        codes = fastq_codes(text)
        if codes is None:
            assert b"\r" in text or b"\n+r" in text
            continue
        plain += 1
        assert np.array_equal(codes, dnaio_fastq_codes(text)), text
    assert plain > 150
    assert fastq_codes(b"@a\nACGT\n+\nIII\n") is None and fastq_codes(b"@a\nACGT\n-\nIIII\n") is None


def test_fastq_blocks_cut_whole_records(tmp_path):
    """reading.blocks on FASTQ: blocks of whole records at any block size, whose codes (plain or via dnaio)
    joined are the file's; a malformed record deep in the file is named by its line in the file."""
    from mapper.errors import InputError
    from mapper.kmers.reading import blocks
    rng = np.random.default_rng(9)
    text = random_fastq(rng, 30).replace(b"\r\n", b"\n").rstrip(b"\n") + b"\n@last\nACGT\n+last\nIIII\n"
    path = tmp_path / "x.fq"
    path.write_bytes(text)
    for block_bytes in (1, 7, 64, 1 << 20):
        got = [block for block in blocks([path], block_bytes)]
        assert all(block.is_fastq and not block.carry for block in got)
        assert np.array_equal(np.concatenate([block.codes() for block in got]), dnaio_fastq_codes(text))
    bad = tmp_path / "bad.fq"
    lines = text.count(b"\n")
    bad.write_bytes(text + b"@bad\nACGT\n+\nIII\n")
    for block_bytes in (64, 1 << 20):
        with pytest.raises(InputError, match=f"line {lines + 4}"):
            for block in blocks([bad], block_bytes):
                block.codes()


def test_block_cuts_across_count_pieces_and_long_lines(tmp_path, monkeypatch):
    """The block reader counts newlines a piece at a time and looks for its cut in a tail window that
    doubles: records and lines longer than the window, and pieces of 5 bytes, cut where whole-block
    counting would (the codes are the file's)."""
    from mapper.kmers import reading
    monkeypatch.setattr(reading, "COUNT_PIECE", 5)
    rng = np.random.default_rng(12)
    long_read = "".join(rng.choice(list("ACGT"), 150_000))
    head = random_fastq(rng, 10).replace(b"\r\n", b"\n")
    fastq = (head + (b"" if head.endswith(b"\n") else b"\n")
             + f"@long\n{long_read}\n+\n{'I' * len(long_read)}\n".encode() + b"@end\nAC\n+\nII\n")
    fasta = b">a\n" + long_read.encode() + b"\n>b\nACGT\n"
    (tmp_path / "x.fq").write_bytes(fastq)
    (tmp_path / "x.fa").write_bytes(fasta)
    for block_bytes in (100, 1 << 16, 1 << 20):
        got = [block.codes() for block in reading.blocks([tmp_path / "x.fq"], block_bytes)]
        assert np.array_equal(np.concatenate(got), dnaio_fastq_codes(fastq))
        got = [block.codes() for block in reading.blocks([tmp_path / "x.fa"], block_bytes)]
        assert np.array_equal(np.concatenate(got)[1:], dnaio_codes(fasta))


def test_blocks_into_one_reused_buffer_plain_and_gzip(tmp_path, monkeypatch):
    """A consumer that reads every block into one buffer it reuses (the cuda backend's pinned one), taking
    each block before it asks for the next, gets the file's codes; so it does from gzip, whose newlines the
    reading threads count after the bytes came out of the decompressor. Three reading threads (and none:
    the calling thread alone), pieces of 5 bytes: a plain file is read in spans that end inside records
    and lines."""
    import gzip

    from mapper.device import host
    from mapper.kmers import reading
    monkeypatch.setattr(reading, "COUNT_PIECE", 5)
    monkeypatch.setattr(host, "_threads", [3])
    rng = np.random.default_rng(13)
    fastq = random_fastq(rng, 60).replace(b"\r\n", b"\n").rstrip(b"\n") + b"\n"
    fasta = b"".join(random_fasta(rng) for _ in range(20))
    for name, text in (("x.fq", fastq), ("x.fa", fasta)):
        (tmp_path / name).write_bytes(text)
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress(text))
    allocations, blocks = [], 0

    def reuse(size):
        if not allocations or len(allocations[-1]) < size:
            allocations.append(np.empty(size, np.uint8))
        allocations[-1].fill(0xA5)  # what the block before left is gone
        return allocations[-1]
    for block_bytes, parallel in ((40, True), (333, True), (1 << 20, True), (333, False)):
        for name in ("x.fq", "x.fq.gz"):
            got = [block.codes() for block in reading.blocks([tmp_path / name], block_bytes, reuse, parallel)]
            assert np.array_equal(np.concatenate(got), dnaio_fastq_codes(fastq)), (name, block_bytes)
            blocks += len(got)
        for name in ("x.fa", "x.fa.gz"):
            got = [block.codes() for block in reading.blocks([tmp_path / name], block_bytes, reuse, parallel)]
            assert np.array_equal(np.concatenate(got)[1:], dnaio_codes(fasta)), (name, block_bytes)
            assert len(got) > 3 or block_bytes == 1 << 20
            blocks += len(got)
    assert len(allocations) < blocks / 10  # one buffer, grown now and then


def test_plain_read_stops_at_the_first_short_span(tmp_path, monkeypatch):
    """The reading threads read their spans at once: bytes a later span finds beyond the point where an
    earlier one met the end (a file that grows while it is read) are not taken, so no gap is read over."""
    from mapper.device import host
    from mapper.kmers import reading
    monkeypatch.setattr(reading, "COUNT_PIECE", 32)
    monkeypatch.setattr(host, "_threads", [3])
    path = tmp_path / "x.fq"
    path.write_bytes(b"@r\nACGT\n+\nIIII\n" * 6 + b"@r\nAC\n+\nII\n")  # 101 bytes, 28 lines
    real = reading._pread_into

    def growing(fd, array, offset):  # the file "grew" after the second span met its end
        return len(array) if offset >= 192 else real(fd, array, offset)
    monkeypatch.setattr(reading, "_pread_into", growing)
    fd = os.open(path, os.O_RDONLY)
    try:
        array = np.zeros(300, np.uint8)
        assert reading._PlainSource(fd, True).fill(array, True) == (101, 28)
    finally:
        os.close(fd)


def test_compiled_key_decoder_equals_numpy():
    """layout.decode_keys (kernels/kmer_codec.cu's vlq_decode on the host) against codec.decode_keys: one to
    three channels, channel-0 prefixes shared by many keys, values of 10 VLQ bytes, empty and one-key
    streams; and the same CodecError for a stream cut short, one with a byte too many, and a value of 11
    bytes."""
    from mapper.kmers import layout
    rng = np.random.default_rng(21)
    for channels in (1, 2, 3):
        for n in (0, 1, 2, 777, 50_000):
            keys = rng.integers(0, 2 ** 64 - 1, (channels, n), dtype=np.uint64, endpoint=True)
            if channels > 1:
                keys[0] = rng.integers(0, 40, n).astype(np.uint64)  # many keys share channel 0
            keys, _ = sort_count(keys)
            data = codec.encode_keys(keys)
            got = layout.decode_keys(data, channels, keys.shape[1])
            assert np.array_equal(got, keys) and np.array_equal(got, codec.decode_keys(data, channels, keys.shape[1]))
    data = codec.encode_keys(np.arange(1, 100, dtype=np.uint64)[None, :]).tobytes()
    for bad, count in ((data[:-1], 99), (data + b"\x01", 99), (b"\xff" * 10 + b"\x01", 1)):
        for decode in (codec.decode_keys, layout.decode_keys):
            with pytest.raises(codec.CodecError):
                decode(np.frombuffer(bad, dtype=np.uint8), 1, count)


def test_host_extraction_equals_numpy():
    """The cpu backend's k-mers come from kernels/kmer_extract.cu compiled for the host: the same keys as
    encode.extract (numpy), forward and canonical, across the channel boundaries, with Ns."""
    from mapper.kmers.backend import HostExtractor
    rng = np.random.default_rng(10)
    codes = rng.integers(0, 4, 5000, dtype=np.uint8)
    codes[1000:1300] = np.tile(np.array([0, 1, 2, 3], dtype=np.uint8), 75)  # palindromes: strand ties
    codes[2200:2400] = 3 - codes[2000:2200][::-1]  # a reverse-complement palindrome of 400 bases
    codes[rng.integers(2400, 5000, 40)] = 4
    for k in (1, 5, 31, 32, 33, 64, 65, 100, 256):
        layout = KmerLayout(k)
        for canonical in (False, True):
            assert np.array_equal(HostExtractor(layout, canonical)(codes), extract(codes, layout, canonical))


def test_write_table_waits_for_its_writes_when_a_piece_fails(tmp_path, monkeypatch):
    """A piece that raises (a GPU error, a corrupt spilled bin) after others were queued: write_table
    returns its error only once every queued bin write is done, so none can land in a file that later
    reuses the descriptor."""
    import time

    from mapper.kmers import store
    from mapper.kmers.binning import bin_bits
    from mapper.kmers.layout import EncodedTable
    done = []

    def slow_write(fd, offset, parts):
        time.sleep(0.02)
        done.append(offset)
        return 0
    monkeypatch.setattr(store, "_write_bin", slow_write)
    bins = 2 ** bin_bits(5)
    n = np.zeros(bins, dtype=np.int64)
    n[:20] = 1
    sizes = np.where(n > 0, 8, 0)

    def pieces():
        yield EncodedTable(n, sizes, sizes * 0, 20, [(0, [(b"12345678",)] * 20)])
        raise RuntimeError("the next piece failed")
    with pytest.raises(RuntimeError, match="next piece failed"):
        store.write_table(tmp_path / "t", 5, False, 1, pieces())
    assert len(done) == 20


def test_table_bytes_the_same_with_and_without_a_compiler(tmp_path, monkeypatch):
    """TableWriter.write_bin and KmerTable.read_bin take the compiled codec (kernels/kmer_codec.cu on the
    host) where g++ is, numpy's where it is not: the same file, the same keys and counts read back."""
    from mapper.device import host
    from mapper.kmers import store
    from mapper.kmers.binning import bin_of
    rng = np.random.default_rng(17)
    for k in (21, 40):
        lay = KmerLayout(k)
        keys = keys_from_strings(["".join(rng.choice(list("ACGT"), k)) for _ in range(3000)], lay)
        keys, _ = sort_count(keys)
        counts = rng.integers(1, 2 ** 40, keys.shape[1], dtype=np.uint64)
        bins = bin_of(keys, k)
        paths = []
        for compiled in (True, False):
            monkeypatch.setattr(host, "available", lambda: compiled)
            path = tmp_path / f"t{k}{compiled}.kmers"
            with store.TableWriter(path, k, False) as writer:
                for b in np.unique(bins):
                    writer.write_bin(int(b), keys[:, bins == b], counts[bins == b])
            paths.append(path)
            with store.KmerTable(path) as table:
                got = list(table)
            assert np.array_equal(np.concatenate([g[0] for g in got], axis=1), keys)
            assert np.array_equal(np.concatenate([g[1] for g in got]), counts)
        assert paths[0].read_bytes() == paths[1].read_bytes()
