"""The k-mer index against a slow, obvious twin: every (key, position) of every ws-mer that lies inside
one contig and has no N, and nothing else; the same index from plain and gzip FASTA."""
import gzip
import os
import time

import numpy as np
import pytest

from conftest import HONEYBEE
from mapper.index import build_index, load_index
from mapper.reference import read_fasta
from oracle import load_genome


def brute_force(genome, ws):
    """{(key, global position)} by string slicing, one k-mer at a time."""
    value = {"A": 0, "C": 1, "G": 2, "T": 3}
    expected, offset = set(), 0
    for seq in genome.values():
        for p in range(len(seq) - ws + 1):
            kmer = seq[p:p + ws]
            if all(c in value for c in kmer):
                key = 0
                for c in kmer:
                    key = key * 4 + value[c]
                expected.add((key, offset + p))
        offset += len(seq)
    return expected


def as_pairs(index):
    sizes = np.diff(index.offsets.astype(np.int64))
    keys = np.repeat(np.arange(len(sizes)), sizes)
    return set(zip(keys.tolist(), index.positions.tolist()))


@pytest.fixture
def tricky_fasta(tmp_path):
    """Two contigs, lower case, an N run, IUPAC letters, a contig shorter than ws."""
    path = tmp_path / "tricky.fa"
    path.write_text(">one desc\nACGTacgtNNNNNACGTTGCAAGCTAGCTAGGRACGTTTGA\nCCAGTACGATCGAT\n"
                    ">two\nTTGACCAGTTAGGCATTACG\n>tiny\nACGT\n")
    return path


@pytest.mark.parametrize("ws", [10, 12])
def test_index_equals_brute_force(tmp_path, tricky_fasta, ws):
    index = build_index(tricky_fasta, ws, tmp_path / "idx")
    assert as_pairs(index) == brute_force(load_genome(tricky_fasta), ws)
    assert index.reference.names == ["one", "two", "tiny"]


def test_real_two_contig_genome(tmp_path):
    index = build_index(HONEYBEE, 12, tmp_path / "idx")
    assert as_pairs(index) == brute_force(load_genome(HONEYBEE), 12)
    # positions sorted within each bucket
    pos = index.positions.astype(np.int64)
    bucket = np.repeat(np.arange(4**12), np.diff(index.offsets.astype(np.int64)))
    assert np.all((np.diff(pos) > 0) | (np.diff(bucket) > 0))


def test_reload_and_formats_agree(tmp_path, tricky_fasta):
    gz = tmp_path / "tricky.fa.gz"
    gz.write_bytes(gzip.compress(tricky_fasta.read_bytes()))
    a = build_index(tricky_fasta, 11, tmp_path / "a")
    b = build_index(gz, 11, tmp_path / "b")
    loaded = load_index(tricky_fasta, tmp_path / "a")
    for x, y in ((a, b), (a, loaded)):
        assert np.array_equal(x.offsets, y.offsets) and np.array_equal(x.positions, y.positions)
        assert np.array_equal(x.reference.codes, y.reference.codes)
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "tricky.fa", "tricky.fa.gz"], "wrote beside the input"


def test_reference_codes_and_contigs(tmp_path, tricky_fasta):
    ref = read_fasta(tricky_fasta, tmp_path / "x.fai")
    genome = load_genome(tricky_fasta)
    text = "".join(genome.values())
    assert "".join("ACGTN"[c] for c in ref.codes) == "".join(c if c in "ACGT" else "N" for c in text)
    assert ref.lengths.tolist() == [55, 20, 4]
    contig, offset = ref.locate(np.array([0, 54, 55, 75]))
    assert contig.tolist() == [0, 0, 1, 2] and offset.tolist() == [0, 54, 0, 0]


def test_loaded_reference_unpacks_on_first_use(tmp_path):
    """An index's reference decodes bases from its 2-bit words until `codes` is asked for, then unpacks them
    all: both agree with the FASTA's codes, N runs at every offset in a word and a byte included."""
    rng = np.random.default_rng(3)
    seq = rng.choice(list("ACGT"), 1000)
    for start, size in ((0, 1), (7, 2), (15, 18), (500, 64), (997, 3)):
        seq[start:start + size] = "N"
    fasta = tmp_path / "g.fa"
    fasta.write_text(">a\n" + "".join(seq[:613]) + "\n>b\n" + "".join(seq[613:]) + "\n")
    expected = read_fasta(fasta, tmp_path / "g.fai").codes
    reference = load_index(fasta, build_index(fasta, 10, tmp_path / "idx").folder).reference
    everywhere = np.arange(1000, dtype=np.int64)
    assert reference._codes is None and reference.size == 1000
    assert np.array_equal(reference.bases(everywhere), expected), "decoded from the packed arrays"
    assert reference._codes is None, "bases() unpacked the whole sequence"
    assert np.array_equal(reference.codes, expected) and np.array_equal(reference.bases(everywhere), expected)



def test_codes_unpacked_once_behind_the_caller(tmp_path, monkeypatch):
    """unpack_behind's thread and a caller of `codes` meanwhile share one unpacking (the caller waits for the
    thread's, or the thread finds the caller's), and a second unpack_behind starts none."""
    import mapper.reference as reference_module
    calls, real = [], reference_module.unpack_codes

    def slow(*args):
        calls.append(1)
        time.sleep(0.2)
        return real(*args)
    monkeypatch.setattr(reference_module, "unpack_codes", slow)
    fasta = tmp_path / "g.fa"
    fasta.write_text(">a\n" + "".join(np.random.default_rng(4).choice(list("ACGTN"), 777)) + "\n")
    reference = load_index(fasta, build_index(fasta, 10, tmp_path / "idx").folder).reference
    reference.unpack_behind()
    reference.unpack_behind()
    assert np.array_equal(reference.codes, read_fasta(fasta, tmp_path / "g.fai").codes)
    assert len(calls) == 1

@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 100, 1001])
def test_unpack_in_pieces_is_the_inverse_of_pack(monkeypatch, n):
    """unpack_2bit (pieces of 3 words here, so that several threads take a short genome) restores every
    code, N included, whatever n is modulo a word (16 bases) and a mask byte (8)."""
    from mapper import alphabet
    monkeypatch.setattr(alphabet, "UNPACK_WORDS", 3)
    codes = np.random.default_rng(n).integers(0, 5, n).astype(np.uint8)
    packed = alphabet.unpack_2bit(alphabet.pack_2bit(codes), n, np.packbits(codes == alphabet.CODE_N))
    assert packed.dtype == np.uint8 and np.array_equal(packed, codes)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 100, 1001, 200_003])
def test_compiled_unpack_equals_numpy(monkeypatch, n):
    """kernels/reference.cu's unpack_2bit (the host build Reference.codes uses where a compiler is, on 1 and 2
    threads) gives numpy's codes, N runs and mask bytes past the end included; without a compiler numpy's
    unpacking is used."""
    from mapper import alphabet
    from mapper.device import host
    from mapper.reference import unpack_codes
    rng = np.random.default_rng(n)
    codes = rng.integers(0, 5, n).astype(np.uint8)
    codes[n // 3:n // 3 + 40] = alphabet.CODE_N
    words, mask = alphabet.pack_2bit(codes), np.packbits(codes == alphabet.CODE_N)
    for threads in (1, 2):
        monkeypatch.setattr(host, "_threads", [threads])
        got, path = unpack_codes(words, n, mask)
        assert got.dtype == np.uint8 and np.array_equal(got, codes)
        if path:  # another process of this user maps the same bytes by the path
            assert np.array_equal(np.fromfile(path, dtype=np.uint8, count=n), codes)
    monkeypatch.setattr(host, "available", lambda: False)
    got, path = unpack_codes(words, n, mask)
    assert np.array_equal(got, codes) and path is None


def test_shared_codes_live_as_long_as_their_array(monkeypatch):
    """shared_bytes' memory is reachable by its path while the array lives, and its memfd is closed once the
    array is gone; a pickled Reference does not carry the path (it names a file of this process); where
    memfd_create is refused the memory is private, with no path."""
    import gc
    import os
    import pickle
    from mapper.reference import Reference, shared_bytes
    array, path = shared_bytes(1000)
    if path is None:
        pytest.skip("no memfd or /proc here")
    array[:] = 7
    assert os.path.getsize(path) == 1000 and np.fromfile(path, dtype=np.uint8).sum() == 7000
    del array
    gc.collect()
    assert not os.path.exists(path)
    codes, path = shared_bytes(16)
    reference = Reference(["c"], np.array([0]), np.array([16]), codes)
    reference.codes_path = path
    assert pickle.loads(pickle.dumps(reference)).codes_path is None and reference.codes_path == path

    def refused(*args):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "memfd_create", refused)  # a sandbox's seccomp: private memory, no path
    private, none = shared_bytes(10)
    assert none is None and len(private) == 10


def test_profile_load_script_times_each_step(tmp_path, tricky_fasta):
    import subprocess
    import sys
    from pathlib import Path
    build_index(tricky_fasta, 10, tmp_path / "idx")
    script = Path(__file__).resolve().parents[2] / "scripts" / "profile_load.py"
    out = subprocess.run([sys.executable, str(script), str(tricky_fasta), str(tmp_path / "idx")],
                         capture_output=True, text=True, check=True).stdout
    assert [line.split(":")[0] for line in out.splitlines()] == [
        "load_index", "unpack the reference (0.00 G bases)", "render processes' reference files"], out


def test_unchanged_reference_is_not_hashed_again(tmp_path, monkeypatch):
    """Loading trusts the checksum recorded at build time while the FASTA keeps its size and modification
    time; an edit of the same size (new time) is still caught."""
    from mapper import index as index_module
    from mapper.errors import IndexFormatError
    fasta = tmp_path / "g.fa"
    fasta.write_text(">a\n" + "ACGTTGCA" * 200 + "\n")
    build_index(fasta, 10, tmp_path / "idx")
    monkeypatch.setattr(index_module, "file_checksum", lambda path: pytest.fail("hashed again"))
    assert load_index(fasta, tmp_path / "idx").reference.lengths.tolist() == [1600]
    monkeypatch.undo()
    stat = os.stat(fasta)
    fasta.write_text(">a\n" + "TCGTTGCA" * 200 + "\n")
    os.utime(fasta, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(IndexFormatError, match="another reference"):
        load_index(fasta, tmp_path / "idx")


def test_index_carries_checksums_and_check_passes(tmp_path, tricky_fasta):
    """meta.json records each array's dtype, shape and digests and its own checksum; `check_index` (gkmap
    index --check) finds nothing wrong with a fresh index, and a meta.json edit is refused on load."""
    import json
    from mapper.errors import IndexFormatError
    from mapper.index import check_index
    build_index(tricky_fasta, 10, tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert set(meta["arrays"]) == {"seq2bit", "nmask", "offsets", "positions"}
    assert all({"dtype", "shape", "blake2b_chunks", "sampled"} <= set(r) for r in meta["arrays"].values())
    assert check_index(tricky_fasta, tmp_path / "idx").reference.names == ["one", "two", "tiny"]
    meta["contigs"][1][0] = "renamed"
    (tmp_path / "idx" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(IndexFormatError, match="meta.json changed"):
        load_index(tricky_fasta, tmp_path / "idx")


def test_chunks_without_kmers_build(tmp_path):
    """A build chunk with no valid k-mer (an assembly gap of N, or a genome of N only) is skipped: it made
    the numpy build raise IndexError (found in review)."""
    from mapper.index import build_arrays
    from mapper.reference import Reference
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 4, 120).astype(np.uint8)
    codes[:40] = 4  # chunks of 8 starts: the first five see only N
    gapped = Reference(["g"], np.array([0]), np.array([120]), codes)
    want = build_arrays(gapped, 10, chunk=1 << 20)
    got = build_arrays(gapped, 10, chunk=8)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and len(got[1]) == 120 - 40 - 9
    offsets, positions = build_arrays(Reference(["n"], np.array([0]), np.array([30]), np.full(30, 4, np.uint8)), 10)
    assert len(positions) == 0 and not offsets.any()


def test_fasta_of_many_short_contigs_reads_alike(tmp_path, monkeypatch):
    """Blocks with more than FAST_HEADERS headers go to the numpy parse whole (a call per header was 11x
    slower on 200,000 contigs); the codes and contigs are those of the numpy parse."""
    import mapper.reference
    from mapper.reference import read_fasta
    rng = np.random.default_rng(3)
    text = "".join(f">c{i}\n{''.join(rng.choice(list('ACGTN'), 50))}\n" for i in range(500))
    (tmp_path / "g.fa").write_text(text)
    fast = read_fasta(tmp_path / "g.fa")
    monkeypatch.setattr(mapper.reference._FastaParser, "fast_block", lambda parser, data: False)
    slow = read_fasta(tmp_path / "g.fa")
    assert fast.names == slow.names and fast.codes.tobytes() == slow.codes.tobytes()


def test_arrays_saved_by_threads_and_both_digests_checked(tmp_path, tricky_fasta, monkeypatch):
    """save_array writes np.save's bytes (here in 7-byte pieces, by many threads), chunked_digest does not
    depend on the threads, and `--check` verifies an index written before the chunked digests (its
    "blake2b" of the whole bytes) as well as a new one, and finds one changed byte in either."""
    import json
    import mapper.cores
    import mapper.index
    from mapper.errors import IndexFormatError
    from mapper.index import array_digest, check_index, chunked_digest, save_array
    array = np.arange(1000, dtype=np.uint32) * 7919
    np.save(tmp_path / "want.npy", array)
    monkeypatch.setattr(mapper.index, "DIGEST_CHUNK", 7)
    digest = save_array(tmp_path / "got.npy", array)
    assert (tmp_path / "got.npy").read_bytes() == (tmp_path / "want.npy").read_bytes()
    monkeypatch.setattr(mapper.cores, "usable_cores", lambda: 1)
    assert chunked_digest(array) == digest != chunked_digest(array[::-1])
    monkeypatch.undo()
    build_index(tricky_fasta, 10, tmp_path / "idx")
    meta_path = tmp_path / "idx" / "meta.json"
    for old_style in (False, True):
        meta = json.loads(meta_path.read_text())
        if old_style:
            for name, record in meta["arrays"].items():
                record["blake2b"] = array_digest(np.load(tmp_path / "idx" / f"{name}.npy"))
                del record["blake2b_chunks"]
            meta["meta_checksum"] = mapper.index._meta_checksum(meta)
            meta_path.write_text(json.dumps(meta))
        check_index(tricky_fasta, tmp_path / "idx")
        positions = tmp_path / "idx" / "positions.npy"
        good = positions.read_bytes()
        positions.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
        with pytest.raises(IndexFormatError, match="checksum mismatch"):
            check_index(tricky_fasta, tmp_path / "idx")
        positions.write_bytes(good)


def test_keys_from_packed_words_equal_the_bases():
    """Reference.keys_at reads a k-mer's key from two packed words and its N flag from three mask bytes
    (`--check` does it for every position); it must give the keys and N flags of the base-by-base reading
    at every start, the last k-mers, word and byte boundaries and N runs included."""
    from mapper.alphabet import CODE_N, pack_2bit, pack_n_mask
    from mapper.reference import Reference
    rng = np.random.default_rng(3)
    for n in (16, 17, 31, 1000, 4099):
        codes = rng.integers(0, 4, n).astype(np.uint8)
        codes[rng.random(n) < 0.05] = CODE_N
        codes[n // 2:n // 2 + 7] = CODE_N
        packed = Reference(["c"], np.array([0]), np.array([n]), packed=(pack_2bit(codes), pack_n_mask(codes)))
        plain = Reference(["c"], np.array([0]), np.array([n]), codes=codes)
        for k in (10, 12, 14, 16):
            starts = np.arange(0, n - k + 1, dtype=np.int64)
            (got, got_n), (want, want_n) = packed.keys_at(starts, k), plain.keys_at(starts, k)
            assert np.array_equal(got, want) and np.array_equal(got_n, want_n), (n, k)
            assert want_n.any() and (n < 1000 or not want_n.all())


@pytest.mark.parametrize("sampled", [1024, 4096])
@pytest.mark.parametrize("blocks,tail", [(4096, 0), (4097, 0), (4097, 123), (9000, 4095)])
def test_sampled_digest_keeps_its_definition(blocks, tail, sampled):
    """Indexes on users' disks carry sampled digests made one 4 KiB block at a time (the evenly spread
    blocks, the last one possibly short), of 4,096 blocks or (since meta.json records the count) 1,024; the
    load's one-buffer gather must give the same digest."""
    import hashlib
    from mapper.index import _BLOCK, array_digest
    data = np.random.default_rng(blocks + tail).integers(0, 256, (blocks - 1) * _BLOCK + (tail or _BLOCK),
                                                         dtype=np.uint8)
    want = hashlib.blake2b(str(len(data)).encode(), digest_size=16)
    n_blocks = -(-len(data) // _BLOCK)
    for block in np.linspace(0, n_blocks - 1, min(n_blocks, sampled)).astype(np.int64).tolist():
        want.update(data[block * _BLOCK:(block + 1) * _BLOCK])
    assert array_digest(data, sampled=sampled) == want.hexdigest()


def test_index_of_4096_block_digests_still_loads(tmp_path, tricky_fasta):
    """An index written before meta.json recorded "sampled_blocks" carries digests of 4,096 blocks: it
    loads as it did, and a damaged block among those 4,096 is still caught."""
    import json
    from mapper.errors import IndexFormatError
    from mapper.index import OLD_SAMPLED_BLOCKS, _meta_checksum, array_digest, build_index, load_index
    folder = tmp_path / "idx"
    build_index(tricky_fasta, 10, folder)
    meta = json.loads((folder / "meta.json").read_text())
    offsets = np.load(folder / "offsets.npy", mmap_mode="r")  # 4 MiB: more blocks than 1,024
    for name, record in meta["arrays"].items():
        del record["sampled_blocks"]
        record["sampled"] = array_digest(np.load(folder / f"{name}.npy", mmap_mode="r"), OLD_SAMPLED_BLOCKS)
    meta["meta_checksum"] = _meta_checksum(meta)
    (folder / "meta.json").write_text(json.dumps(meta))
    assert offsets.nbytes > 1024 * 4096 and load_index(tricky_fasta, folder).ws == 10
    header, n_blocks = offsets.offset, -(-offsets.nbytes // 4096)
    new = set(np.linspace(0, n_blocks - 1, 1024).astype(np.int64).tolist())
    old = set(np.linspace(0, n_blocks - 1, min(n_blocks, OLD_SAMPLED_BLOCKS)).astype(np.int64).tolist())
    block = min(old - new)
    with open(folder / "offsets.npy", "r+b") as f:  # a block only the 4,096-block digest reads
        f.seek(header + block * 4096 + 8)
        f.write(b"\xff\xff\xff\x7f")
    with pytest.raises(IndexFormatError, match="checksum mismatch"):
        load_index(tricky_fasta, folder)


@pytest.mark.parametrize("old,new", [(b"False", b"Fa)se"), (b"'descr'", b"'de\x00cr'"), (b"(", b"\""),
                                     (b"'descr'", b"b'escr'")])  # a bytes key: numpy's sort of the keys fails
def test_damaged_npy_header_is_one_line(tmp_path, tricky_fasta, old, new):
    """numpy parses an .npy header as a Python literal: damage there raised SyntaxError, TokenError or
    TypeError, a traceback (found by scripts/fuzz_parsers.py)."""
    from mapper.errors import IndexFormatError
    build_index(tricky_fasta, 10, tmp_path / "idx")
    target = tmp_path / "idx" / "offsets.npy"
    target.write_bytes(target.read_bytes().replace(old, new, 1))
    with pytest.raises(IndexFormatError, match="damaged index"):
        load_index(tricky_fasta, tmp_path / "idx")


def test_on_cores_keeps_order_and_raises_the_first_error(monkeypatch):
    """The helper behind the index's threaded steps (digests, packing, --check, index parts): results in the
    items' order on any number of threads, inline for one, and an item's exception raised to the caller."""
    import mapper.cores
    from mapper.cores import on_cores
    for cores in (1, 4):
        monkeypatch.setattr(mapper.cores, "usable_cores", lambda: cores)
        assert on_cores(lambda x: x * x, range(50)) == [x * x for x in range(50)]
        assert on_cores(lambda x: x, []) == []

        def fails(x):
            if x == 7:
                raise ValueError("item 7")
            return x
        with pytest.raises(ValueError, match="item 7"):
            on_cores(fails, range(20), most=2)
