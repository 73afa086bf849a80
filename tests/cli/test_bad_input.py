"""Issue 19, items 3 to 6: bad input gives one line naming the file (and the line or record where known) and
exit 1, never a traceback, never a run that exits 0 having accepted it; and nothing is left behind.

- corrupt compressed input (reads and reference): a damaged deflate block, a CRC mismatch, a truncated
  gzip, a BAM given as reads or as the reference, non-UTF-8 bytes;
- what SAM cannot hold (README "Errors and safety"): read names outside [!-?A-~]{1,254}, sequences with
  anything but letters and '.', qualities outside '!'..'~', contig names SAM forbids;
- one FASTA reader: every rule checked on a plain and a gzipped copy of the same text, with the same
  outcome (the same contigs and bases, or the same message);
- a damaged index (meta.json edited, arrays truncated, offsets past the positions, positions shuffled,
  bases flipped), with and without the checksums meta.json carries since issue 19; `gkmap index --check`.

Each table case runs gkmap in-process in a folder of its own and checks the exit code, the one-line message,
and that nothing in the folder changed but what the case may write (no input changed, no output or
temporary file left). A seeded fuzz test damages small inputs at random for a few seconds.
"""
import fnmatch
import gzip
import json
import random
import shutil
import sys
import time
from dataclasses import dataclass

import numpy as np
import pytest

from cli_checks import one_line_error, snapshot
from conftest import MEASLES, READS, ROOT
from mapper.cli import main
from mapper.errors import InputError
from mapper.reference import read_fasta
from mapper.simulate import simulate, write_fastq

sys.path.insert(0, str(ROOT / "scripts"))
from fuzz_parsers import damaged_file  # noqa: E402  (the long fuzz run's damage, FUZZ_CASES of it here)

FUZZ_CASES = 80

SEQ = "ACCAAACAAAGTTGGGTAAGGATAGTTCAAATCAATGATCATCTTCTAGTGCACTTAGGA"
QUAL = "I" * len(SEQ)
GOOD = f"@ok\n{SEQ}\n+\n{QUAL}\n"
READS_BAM = READS / "human_NA12878_chr22_tiny_HiSeqX.bam"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A plain measles reference, 50 simulated reads, and an index of it (ws 10)."""
    folder = tmp_path_factory.mktemp("bad-input-data")
    (folder / "ref.fa").write_bytes(gzip.decompress(MEASLES.read_bytes()))
    reference = read_fasta(folder / "ref.fa")
    with open(folder / "reads.fq", "w") as out:
        write_fastq(simulate(reference, 50, 100), out)
    assert main(["index", "--quiet", "--ws", "10", "--index", str(folder / "idx"), str(folder / "ref.fa")]) == 0
    return folder


# -- inputs --------------------------------------------------------------------------------------------------

def put(name, content, compress=False):
    """A setup writing `content` (str or bytes) to `name`, gzipped (mtime 0: the same bytes every run)."""
    def setup(folder):
        raw = content.encode() if isinstance(content, str) else content
        (folder / name).write_bytes(gzip.compress(raw, mtime=0) if compress else raw)
    return setup


def damaged_gzip(name, source, position, xor=0x55, cut=None):
    """`source` (a file of the case folder) gzipped, one byte changed at `position` or cut after `cut`."""
    def setup(folder):
        packed = bytearray(gzip.compress((folder / source).read_bytes(), mtime=0))
        if cut is not None:  # a fraction of the compressed bytes kept, or a count
            packed = packed[:int(len(packed) * cut) if cut < 1 else cut]
        else:
            packed[position] ^= xor
        (folder / name).write_bytes(bytes(packed))
    return setup


def bam(name):
    def setup(folder):
        shutil.copy(READS_BAM, folder / name)
    return setup




# -- index damage: the case folder gets a copy of the shared index ----------------------------------------

def index_copy(edit=None, strip_checksums=False):
    """Copy the shared index into `idx/`, maybe drop the checksums (an index of an older gkmap), then
    `edit(folder)`."""
    def setup(folder, data=None):
        shutil.copytree(setup.source, folder / "idx")
        if strip_checksums:
            meta = json.loads((folder / "idx" / "meta.json").read_text())
            del meta["arrays"], meta["meta_checksum"]
            (folder / "idx" / "meta.json").write_text(json.dumps(meta))
        if edit:
            edit(folder / "idx")
    setup.index = True
    return setup


def edit_meta(change):
    def edit(idx):
        meta = json.loads((idx / "meta.json").read_text())
        change(meta)
        (idx / "meta.json").write_text(json.dumps(meta))
    return edit


def edit_array(name, change):
    def edit(idx):
        array = np.load(idx / f"{name}.npy")
        np.save(idx / f"{name}.npy", change(array))
    return edit


def truncate(name, keep):
    def edit(idx):
        raw = (idx / f"{name}.npy").read_bytes()
        (idx / f"{name}.npy").write_bytes(raw[:keep if keep >= 0 else len(raw) + keep])
    return edit


def set_item(meta, key, value):
    meta[key] = value


def rename_contig(name):
    def change(meta):
        meta["contigs"][0][0] = name
    return change


def shuffled(array):
    return np.random.default_rng(1).permutation(array)


def flip_bases(array):
    array = array.copy()
    array[::7] ^= np.uint32(0x5A5A5A5A)
    return array


def past_end(array):
    array = array.copy()
    array[-1] += 10
    return array


def reversed_offsets(array):
    return array[::-1].copy()


@dataclass
class Case:
    id: str
    argv: list
    code: int
    message: tuple = ()  # fragments of the one-line error (none: the run succeeds)
    setup: object = None
    writes: tuple = ()


MAP = ["map", "ref.fa", "--index", "{idx}", "-o", "out.sam"]
INDEX = ["index", "--ws", "10", "--index", "new"]


def reads_case(id, text, fragments, compress=False, name="r.fq"):
    name = name + (".gz" if compress else "")
    return Case(f"{id}{'-gz' if compress else ''}", MAP + [name], 1, (name,) + tuple(fragments),
                put(name, GOOD + text if name.startswith("r.fq") else text, compress))


CASES = [
    # 3. corrupt compressed reads: a damaged deflate block, a CRC mismatch, a truncated gzip; a BAM
    Case("reads-gzip-bad-block", MAP + ["c.fq.gz"], 1, ("c.fq.gz", "corrupt compressed data"),
         damaged_gzip("c.fq.gz", "reads.fq", 20)),
    Case("reads-gzip-crc", MAP + ["c.fq.gz"], 1, ("c.fq.gz", "corrupt compressed data"),
         damaged_gzip("c.fq.gz", "reads.fq", 505)),
    Case("reads-gzip-bad-trailer", MAP + ["c.fq.gz"], 1, ("c.fq.gz", "compressed"),
         damaged_gzip("c.fq.gz", "reads.fq", -6)),
    Case("reads-gzip-truncated", MAP + ["c.fq.gz"], 1, ("c.fq.gz", "truncated compressed file"),
         damaged_gzip("c.fq.gz", "reads.fq", None, cut=0.6)),
    Case("reads-gzip-header-only", MAP + ["c.fq.gz"], 1, ("c.fq.gz",),
         damaged_gzip("c.fq.gz", "reads.fq", None, cut=10)),
    Case("reads-bam", MAP + ["r.bam"], 1, ("r.bam", "BAM", "samtools fastq"), bam("r.bam")),
    Case("reads-bam-named-fq", MAP + ["r.fq"], 1, ("r.fq",), bam("r.fq")),
    Case("reads-non-utf8-gz", MAP + ["r.fq.gz"], 1, ("r.fq.gz", "line 6", "record 2"),
         put("r.fq.gz", GOOD.encode() + b"@r\nAC\xe9T\n+\nIIII\n", True)),
    Case("reads-non-ascii-plain", MAP + ["r.fq"], 1, ("r.fq", "line 6", "record 2"),
         put("r.fq", GOOD.encode() + b"@r\nAC\xe9T\n+\nIIII\n")),
    Case("reads-fasta-non-utf8-gz", MAP + ["r.fa.gz"], 1, ("r.fa.gz",),
         put("r.fa.gz", b">a\nACGT\n>b\nAC\xff\n", True)),
    Case("reads-multiline-dnaio-error", MAP + ["r.fq"], 1, ("r.fq", "line 7", "record 2"),
         put("r.fq", GOOD + "@r2\nACGT\n+r3\nIIII\n")),
    # the same damage given to `gkmap kmers count` (its own reader, kmers/reading.py)
    Case("kmers-gzip-bad-block", ["kmers", "count", "-k", "15", "-o", "k.out", "c.fq.gz"], 1,
         ("c.fq.gz", "corrupt compressed data"), damaged_gzip("c.fq.gz", "reads.fq", 20)),
    Case("kmers-gzip-truncated", ["kmers", "count", "-k", "15", "-o", "k.out", "c.fq.gz"], 1,
         ("c.fq.gz", "truncated compressed file"), damaged_gzip("c.fq.gz", "reads.fq", None, cut=0.6)),
]
for compress in (False, True):
    CASES += [
        # 4. what SAM cannot hold: SEQ, QUAL, QNAME
        reads_case("seq-nul", "@r\nAC\0GT\n+\nIIIII\n", ("line 6", "record 2", "NUL", "sequence"), compress),
        reads_case("seq-space", "@r\nAC GT\n+\nIIIII\n", ("line 6", "record 2", "a space"), compress),
        reads_case("seq-star", "@r\nAC*GT\n+\nIIIII\n", ("record 2", "'*'", "position 3"), compress),
        reads_case("seq-digit", "@r\nAC7GT\n+\nIIIII\n", ("record 2", "'7'"), compress),
        reads_case("seq-dash", "@r\nAC-GT\n+\nIIIII\n", ("record 2", "'-'"), compress),
        reads_case("seq-equals", "@r\nAC=GT\n+\nIIIII\n", ("record 2", "'='"), compress),
        reads_case("qual-space", "@r\nACGTA\n+\nII II\n", ("line 8", "record 2", "a space", "qualities"), compress),
        reads_case("qual-del", "@r\nACGTA\n+\nII\x7fII\n", ("line 8", "record 2", "0x7f"), compress),
        reads_case("qual-tab", "@r\nACGTA\n+\nII\tII\n", ("record 2", "a tab"), compress),
        reads_case("name-255", f"@{'x' * 255}\nACGT\n+\nIIII\n", ("record 2", "255 characters", "254"), compress),
        reads_case("name-300", f"@{'x' * 300}\nACGT\n+\nIIII\n", ("record 2", "300 characters"), compress),
        reads_case("name-million", f"@{'x' * 10**6}\nACGT\n+\nIIII\n", ("record 2", "1000000 characters"),
                   compress),
        reads_case("name-CO", "@@CO\tx\nACGT\n+\nIIII\n", ("record 2", "'@CO'", "'@'"), compress),
        reads_case("name-SQ", "@@SQ\tSN:x\nACGT\n+\nIIII\n", ("record 2", "'@SQ'"), compress),
        reads_case("name-at-inside", "@a@b\nACGT\n+\nIIII\n", ("record 2", "'@'"), compress),
        reads_case("name-control", "@a\x01b\nACGT\n+\nIIII\n", ("record 2", "0x01"), compress),
        reads_case("name-del", "@a\x7fb\nACGT\n+\nIIII\n", ("record 2", "0x7f"), compress),
        reads_case("fasta-reads-digit", ">a\nACGT\n>b\nAC7T\n", ("record 2", "'7'"), compress, "r.fa"),
        reads_case("fasta-reads-at-name", ">a\nACGT\n>@HD\nACGT\n", ("record 2", "'@'"), compress, "r.fa"),
    ]

# 5. one FASTA reader: (id, text, None if accepted else the message's fragments), plain and gzipped alike
FASTA_RULES = [
    ("varying-widths", f">a\n{SEQ}\nAC\n{SEQ[:7]}\n>b x\nACGTACGTACGTA\n", None),
    ("blank-lines", f"\n>a\n{SEQ}\n\n{SEQ}\n\n>b\nACGTACGTACGT\n\n", None),
    ("crlf", f">a d\r\n{SEQ}\r\n{SEQ}\r\n>b\r\nACGTACGTACGT\r\n", None),
    ("no-final-newline", f">a\n{SEQ}\n>b\nACGTACGTACGT", None),
    ("lower-and-iupac", f">a\n{SEQ.lower()}RYKMN\n", None),
    ("non-ascii-description", ">a café\nACGTACGTACGTACGT\n".encode(), None),
    ("digit", f">a\n{SEQ}\nAC1T\n", ("line 3", "'1'", "contig 'a'")),
    ("space", f">a\n{SEQ}\nAC T\n", ("line 3", "a space")),
    ("trailing-space", f">a\n{SEQ} \n", ("line 2", "a space")),
    ("tab", f">a\n{SEQ}\n\tACGT\n", ("line 3", "a tab")),
    ("star", f">a\n{SEQ}*\n", ("line 2", "'*'")),
    ("dash", f">a\nAC-GT{SEQ}\n", ("line 2", "'-'")),
    ("nul", f">a\n{SEQ}\0\n", ("line 2", "NUL")),
    ("non-ascii-last-base", f">a\n{SEQ}\n".encode()[:-1] + b"\xe9\n", ("line 2", "0xe9")),
    ("non-ascii-middle", f">a\n{SEQ}\n".encode()[:10] + b"\xc3\xa9" + f"{SEQ}\n".encode(), ("line 2", "0xc3")),
    ("lone-cr", f">a\n{SEQ}\rACGT\n", ("line 2", "carriage return")),
    ("comment-line", f">a\n{SEQ}\n;comment\n", ("line 3", "';'")),
    ("no-header", f"{SEQ}\n>a\n{SEQ}\n", ("line 1", "not a FASTA file")),
    ("binary", bytes(range(256)) * 4, ("not a FASTA file",)),
    ("empty-contig", f">a\n>b\n{SEQ}\n", ("line 1", "contig 'a' is empty")),
    ("empty-last-contig", f">a\n{SEQ}\n>b\n", ("line 3", "contig 'b' is empty")),
    ("no-name", f"> a\n{SEQ}\n", ("line 1", "without a contig name")),
    ("contig-star", f">*\n{SEQ}\n", ("line 1", "'*'", "not a valid SAM reference name")),
    ("contig-equals", f">=x\n{SEQ}\n", ("'=x'", "starts with '='")),
    ("contig-star-first", f">*x\n{SEQ}\n", ("'*x'", "starts with '*'")),
    ("contig-backslash", f">a\\b\n{SEQ}\n", ("line 1", "not a valid SAM reference name")),
    ("contig-comma", f">a,b\n{SEQ}\n", ("not a valid SAM reference name",)),
    ("contig-non-ascii", ">caf\xe9\nACGT\n".encode("latin-1"), ("line 1", "not a valid SAM reference name")),
    ("duplicate-contig", f">a\n{SEQ}\n>a\n{SEQ}\n", ("'a' occurs twice",)),
    ("empty-file", "", ("no FASTA records",)),
]
for id, text, fragments in FASTA_RULES:
    for compress in (False, True):
        name = "g.fa" + (".gz" if compress else "")
        CASES.append(Case(f"fasta-{id}{'-gz' if compress else ''}", INDEX + [name], 1 if fragments else 0,
                          (name,) + fragments if fragments else (), put(name, text, compress),
                          () if fragments else ("new", "new/*")))
CASES += [
    # 3. corrupt compressed references
    Case("ref-gzip-bad-block", INDEX + ["c.fa.gz"], 1, ("c.fa.gz", "corrupt compressed data"),
         damaged_gzip("c.fa.gz", "ref.fa", 20)),
    Case("ref-gzip-crc", INDEX + ["c.fa.gz"], 1, ("c.fa.gz", "compressed"), damaged_gzip("c.fa.gz", "ref.fa", -7)),
    Case("ref-gzip-truncated", INDEX + ["c.fa.gz"], 1, ("c.fa.gz", "truncated compressed file"),
         damaged_gzip("c.fa.gz", "ref.fa", None, cut=0.6)),
    Case("ref-bam", INDEX + ["r.bam"], 1, ("r.bam", "not a FASTA file"), bam("r.bam")),
    Case("ref-map-gzip-bad-block", ["map", "c.fa.gz", "reads.fq", "--index", "new", "-o", "out.sam"], 1,
         ("c.fa.gz", "corrupt compressed data"), damaged_gzip("c.fa.gz", "ref.fa", 20)),
]

# 6. a damaged index: (id, edit, fragments); each with the checksums (this gkmap's) and without (older)
INDEX_DAMAGE = [
    ("meta-contig-renamed", edit_meta(rename_contig("chrX")), ("meta.json",)),
    ("meta-contig-star", edit_meta(rename_contig("*")), ("meta.json",)),
    ("meta-contig-length", edit_meta(lambda m: m["contigs"][0].__setitem__(1, 100)), ("damaged index",)),
    ("meta-contigs-not-a-list", edit_meta(lambda m: set_item(m, "contigs", "x")), ("damaged index",)),
    ("meta-contigs-empty", edit_meta(lambda m: set_item(m, "contigs", [])), ("damaged index",)),
    ("meta-ws-changed", edit_meta(lambda m: set_item(m, "ws", 11)), ("damaged index",)),
    ("meta-ws-string", edit_meta(lambda m: set_item(m, "ws", "10")), ("damaged index",)),
    ("meta-ws-huge", edit_meta(lambda m: set_item(m, "ws", 40)), ("damaged index",)),
    ("meta-positions", edit_meta(lambda m: set_item(m, "positions", 5)), ("damaged index",)),
    ("meta-positions-missing", edit_meta(lambda m: m.pop("positions")), ("damaged index",)),
    ("meta-reference-missing", edit_meta(lambda m: m.pop("reference")), ("damaged index",)),
    ("meta-not-json", lambda idx: (idx / "meta.json").write_text("{"), ("meta.json",)),
    ("positions-truncated", truncate("positions", -100), ("damaged index",)),
    ("positions-header-only", truncate("positions", 80), ("damaged index",)),
    ("offsets-truncated", truncate("offsets", 1000), ("damaged index",)),
    ("seq2bit-empty-file", truncate("seq2bit", 0), ("damaged index",)),
    ("positions-shuffled", edit_array("positions", shuffled), ("damaged index",)),
    ("positions-2d", edit_array("positions", lambda a: a.reshape(1, -1)), ("damaged index",)),
    ("positions-int64", edit_array("positions", lambda a: a.astype(np.int64)), ("damaged index",)),
    ("offsets-past-positions", edit_array("offsets", past_end), ("damaged index",)),
    ("offsets-reversed", edit_array("offsets", reversed_offsets), ("damaged index",)),
    ("bases-flipped", edit_array("seq2bit", flip_bases), ("damaged index",)),
    ("nmask-set", edit_array("nmask", lambda a: np.full_like(a, 255)), ("damaged index",)),
    ("npy-garbage", lambda idx: (idx / "offsets.npy").write_bytes(b"not numpy"), ("damaged index",)),
]
for id, edit, fragments in INDEX_DAMAGE:
    for old in (False, True):
        if old and id in ("meta-contig-renamed",):  # without a checksum a valid new name cannot be told
            continue
        setup = index_copy(edit, strip_checksums=old)
        suffix = "-old" if old else ""
        CASES.append(Case(f"index-{id}{suffix}", ["map", "ref.fa", "reads.fq", "--index", "idx", "-o", "out.sam"],
                          1, fragments, setup))
        CASES.append(Case(f"index-check-{id}{suffix}", ["index", "--check", "--index", "idx", "ref.fa"], 1,
                          fragments, setup))
CASES += [
    Case("index-check-sound", ["index", "--check", "--index", "idx", "ref.fa"], 0, (), index_copy()),
    Case("index-check-sound-old", ["index", "--check", "--index", "idx", "ref.fa"], 0, (),
         index_copy(strip_checksums=True)),
    Case("index-check-with-ws", ["index", "--check", "--ws", "10", "--index", "idx", "ref.fa"], 2,
         ("--check",), index_copy()),
    Case("index-check-none", ["index", "--check", "--index", "none", "ref.fa"], 1, ("no meta.json",)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, data, tmp_path, monkeypatch, capsys):
    for name in ("ref.fa", "reads.fq"):
        shutil.copy(data / name, tmp_path / name)
    if case.setup:
        if getattr(case.setup, "index", False):
            case.setup.source = data / "idx"
        case.setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    argv = [a.format(idx=data / "idx") for a in case.argv]
    before, index_before = snapshot(tmp_path), snapshot(data / "idx")

    code = main(argv + ["--quiet"])

    err = capsys.readouterr().err
    assert code == case.code, err
    if case.message:
        one_line_error(err, *case.message)
    elif code == 0:
        assert "error" not in err
    after = snapshot(tmp_path)
    touched = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    unexpected = [p for p in touched if not any(fnmatch.fnmatch(p, w) for w in case.writes)]
    assert not unexpected, f"changed or left behind: {unexpected}"
    assert snapshot(data / "idx") == index_before


@pytest.mark.parametrize("id,text,fragments", FASTA_RULES, ids=[r[0] for r in FASTA_RULES])
def test_plain_and_gzip_fasta_read_alike(tmp_path, id, text, fragments):
    """The reader itself, on both copies: the same contigs and bases, or the same message."""
    raw = text.encode() if isinstance(text, str) else text
    outcomes = []
    for name, content in (("g.fa", raw), ("g.fa.gz", gzip.compress(raw, mtime=0))):
        (tmp_path / name).write_bytes(content)
        try:
            reference = read_fasta(tmp_path / name)
            outcomes.append((reference.names, reference.lengths.tolist(), reference.codes.tobytes()))
        except InputError as error:
            outcomes.append(str(error).replace("g.fa.gz", "g.fa"))
    assert outcomes[0] == outcomes[1]
    assert isinstance(outcomes[0], str) == bool(fragments)


def test_fasta_reader_does_not_depend_on_block_cuts(tmp_path, monkeypatch):
    """Blocks of 1 to 500 bytes give what one block gives, for valid and damaged texts (the first problem
    in the file is the one reported, whatever the block it lies in), and the C-loop path for plain
    sequence lines (fast_block) gives what the numpy parse of every block (`block` alone) gives."""
    import mapper.reference
    rng = random.Random(19)
    crlf = (f">a desc\n{SEQ}\n{SEQ[:30]}\n\n>b\r\nACGTNNacgt\r\n>c\n" + "G" * 300 + "\n>d\nA\n").encode()
    lf = (f">a desc\n{SEQ}\n{SEQ[:30]}\n\n>b\nACGTNNacgtRY\n>c\n" + "G" * 300 + "\n>d\nA\n").encode()
    numpy_only = lambda parser, data: False
    for i in range(300):
        text = bytearray(crlf if i % 2 else lf)
        for _ in range(rng.randint(0, 3)):
            text[rng.randrange(len(text))] = rng.choice(b"AC1 \r\n>*=\x00\xe9")
        (tmp_path / "g.fa").write_bytes(bytes(text))
        outcomes = []
        for chunk, fast in ((1 << 24, True), (rng.choice([1, 2, 3, 7, 64, 500]), True), (1 << 24, False)):
            monkeypatch.setattr(mapper.reference, "_CHUNK", chunk)
            if not fast:
                monkeypatch.setattr(mapper.reference._FastaParser, "fast_block", numpy_only)
            try:
                reference = read_fasta(tmp_path / "g.fa")
                outcomes.append((reference.names, reference.lengths.tolist(), reference.codes.tobytes()))
            except InputError as error:
                outcomes.append(str(error))
            monkeypatch.undo()
        assert outcomes[0] == outcomes[1] == outcomes[2], bytes(text)


def test_valid_reference_reads_as_before(tmp_path):
    """The reader against a plain-Python parse of a real two-contig genome."""
    from oracle import load_genome
    from conftest import HONEYBEE
    reference = read_fasta(HONEYBEE)
    genome = load_genome(HONEYBEE)
    assert reference.names == list(genome)
    assert reference.lengths.tolist() == [len(s) for s in genome.values()]
    text = "".join(genome.values())
    assert "".join("ACGTN"[c] for c in reference.codes) == "".join(c if c in "ACGT" else "N" for c in text)


def test_load_checks_are_cheap_and_catch_a_sampled_shuffle(data, tmp_path):
    """An index of an older gkmap (no checksums) with shuffled positions: the sampled content check."""
    setup = index_copy(edit_array("positions", shuffled), strip_checksums=True)
    setup.source = data / "idx"
    setup(tmp_path)
    from mapper.errors import IndexFormatError
    from mapper.index import load_index
    with pytest.raises(IndexFormatError, match="do not hold their bucket's k-mer"):
        load_index(data / "ref.fa", tmp_path / "idx")
    started = time.perf_counter()
    load_index(data / "ref.fa", data / "idx")
    assert time.perf_counter() - started < 1


# -- fuzz: random damage of small inputs, a few seconds ------------------------------------------------------

def test_fuzz_never_a_traceback(data, tmp_path, monkeypatch, capsys):
    """Seeded random flips, insertions, deletions and cuts of FASTQ and FASTA reads and of the reference,
    plain and gzipped (the damage before or after compressing): exit 0, or exit 1 with one gkmap line, and no
    output left behind. A fixed number of cases, not a time budget: the same cases on a busy or a cold machine
    (the first map compiles the kernels), about 5 seconds on a warm one."""
    monkeypatch.chdir(tmp_path)
    rng = random.Random(1919)
    reads = (data / "reads.fq").read_bytes()[:6000]
    reads = reads[:reads.rfind(b"\n@") + 1]
    fasta_reads = b"".join(b">" + lines[1:] for lines in
                           [b"\n".join(r.split(b"\n")[:2]) + b"\n" for r in reads.split(b"\n@")])
    reference = (data / "ref.fa").read_bytes()[:3000] + b"\n>second\nACGTACGTTGCA\n"
    shutil.copy(data / "ref.fa", "ref.fa")
    outcomes = {"ok": 0, "error": 0}
    for runs in range(FUZZ_CASES):
        kind = rng.choice(["fq", "fa", "ref"])
        raw = {"fq": reads, "fa": fasta_reads, "ref": reference}[kind]
        path, content = damaged_file(rng, tmp_path, {"fq": "x.fq", "fa": "x.fa", "ref": "g.fa"}[kind], raw)
        name = path.name
        if kind == "ref":
            argv = ["index", "--quiet", "--ws", "10", "--index", f"i{runs}", name]
        else:
            argv = ["map", "--quiet", "--index", str(data / "idx"), "-o", "out.sam", "ref.fa", name]
        code = main(argv)
        err = capsys.readouterr().err
        if code == 0:
            outcomes["ok"] += 1
        else:
            assert code == 1, (argv, content, err)
            one_line_error(err, name)
            outcomes["error"] += 1
            assert not any(p.name.startswith(".") for p in tmp_path.iterdir()), "temporary file left"
            assert kind == "ref" or not (tmp_path / "out.sam").exists()
        (tmp_path / "out.sam").unlink(missing_ok=True)
        shutil.rmtree(tmp_path / f"i{runs}", ignore_errors=True)
    assert outcomes["error"] and outcomes["ok"], outcomes
