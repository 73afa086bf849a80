"""mapper/bam.py against samtools: gkmap's own SAM (measles single-end and paired-end, Shigella paired-end) and
hand-made edge cases, written as BAM and as coordinate-sorted BAM.

The strongest check is byte equality of the decompressed BAM stream with what `samtools view -u` (and
`samtools sort -u`) makes of the same SAM: every field, tag type and bin as htslib encodes them. The
compressed files are then checked as a user would: quickcheck, `view -h` equal to the SAM, `view -c`,
`index` on the sorted output, and Picard ValidateSamFile where Picard is installed.
"""
import gzip
import os
import subprocess

import pytest

from conftest import MEASLES, MEASLES_PAIR, SHIGELLA, SHIGELLA_PAIR, first_reads, need_tool
from mapper import bam
from mapper.bam import _Run
from mapper.errors import InputError, UsageError

RG = r"@RG\tID:run1\tSM:sample\tPL:ILLUMINA"


def samtools(*args, **kwargs):
    return subprocess.run([need_tool("samtools"), *map(str, args)], check=True, capture_output=True, **kwargs)


def stream(path):
    """The decompressed BGZF stream (header and records) of a BAM file."""
    return gzip.decompress(path.read_bytes())


@pytest.fixture(scope="module")
def gkmap_sams(tmp_path_factory, index_dir):
    """SAM files written by gkmap on real data: measles single-end with a read group, measles and Shigella
    paired-end (mates, negative TLEN, unmapped mates)."""
    from mapper.cli import main
    folder = tmp_path_factory.mktemp("sams")
    shig = [first_reads(p, 3000, folder / f"shig{k}.fq") for k, p in enumerate(SHIGELLA_PAIR)]
    runs = {"measles": (["-R", RG], MEASLES, MEASLES_PAIR[:1]),
            "measles_pe": (["--pe", "-R", RG], MEASLES, MEASLES_PAIR),
            "shigella_pe": (["--pe"], SHIGELLA, shig)}
    out = {}
    for name, (options, genome, reads) in runs.items():
        out[name] = folder / f"{name}.sam"
        assert main(["map", "--quiet", "-t", "1", "--index", str(index_dir(genome)), "-o", str(out[name]),
                     *options, str(genome), *map(str, reads)]) == 0
    return out


EDGE_HEADER = "".join(["@HD\tVN:1.6\tSO:unsorted\tGO:query\n"]
                      + [f"@SQ\tSN:{n}\tLN:{1000 + 7 * k}\n" for k, n in enumerate(
                          ["chr1", "chr10", "chr1_random", "chr2", "c", "chrM", "x" * 200, "HLA-A*01:01"]
                          + [f"contig{k:03d}" for k in range(60)])])


def edge_records():
    """Records that exercise every field and tag type: unmapped, '*' fields, reverse strand, long CIGARs,
    IUPAC and lower-case bases, every integer width on both sides of its limits, floats, B arrays, negative
    TLEN, 254-character names, mates on other references."""
    seq = "ACGTNacgtn=MRWSYKVHDBU" * 3 + "A"
    qual = "".join(chr(33 + k % 60) for k in range(len(seq)))
    long_cigar = "".join("1M1I" for _ in range(20)) + "1S"  # 41 ops, query length 41
    long_seq = "ACGTA" * 8 + "C"
    ints = [0, 1, 127, 128, 255, 256, 32767, 32768, 65535, 65536, 2147483647, 2147483648, 4294967295,
            -1, -127, -128, -129, -32767, -32768, -32769, -2147483647, -2147483648]
    int_tags = "\t".join(f"Y{chr(65 + k)}:i:{v}" for k, v in enumerate(ints))
    tags = ("NM:i:3\tMD:Z:10A5^AC20\tAS:i:-3\tXS:i:-5\tNH:i:2\tHI:i:1\tRG:Z:run1\tXA:A:Q\tXF:f:0.5\tXG:f:-1.25e-3"
            "\tXH:H:1AE301\tXZ:Z:\tXY:Z:with space and :colons:\tXB:B:c,-128,0,127\tXC:B:C,0,255\tXD:B:s,-32768,7"
            "\tXE:B:S,65535\tXI:B:i,-2147483648,2147483647\tXJ:B:I,4294967295,0\tXK:B:f,1.5,-2,3e10\tXL:B:c"
            "\tYF:f:3.14159265358979\tYG:f:1e30\tYH:f:7\tYI:f:1234567890123456789012")
    lines = [
        f"read1\t0\tchr1\t1\t60\t{len(seq)}M\t*\t0\t0\t{seq}\t{qual}\t{tags}",
        f"read2\t16\tchr10\t5\t0\t3S10M2D5M1I5M{len(seq) - 24}H\t=\t100\t-250\t{seq[:24]}\t*\t{int_tags}",
        f"read3\t4\t*\t0\t0\t*\t*\t0\t0\t{seq}\t{qual}",
        "read4\t4\t*\t0\t0\t*\t*\t0\t0\t*\t*",
        f"{'n' * 254}\t99\tchr1_random\t900\t255\t{long_cigar}\tchr2\t17\t2147483647\t{long_seq}\t{qual[:41]}\tRG:Z:x",
        "read6\t147\tchr2\t17\t3\t5M100N5M\tchr1_random\t900\t-2147483648\tACGTAACGTA\t##########",
        f"read7\t2048\tx{'x' * 199}\t1000\t1\t10=2X3P4M\tc\t1\t0\tACGTACGTACGTACGT\t*\tSA:Z:chr1,1,+,5M,0,0;",
        f"read8\t73\tHLA-A*01:01\t16385\t7\t40M\t=\t16385\t0\t{long_seq[:40]}\t{qual[:40]}",
        "read9\t0\tchrM\t1\t60\t0M\t*\t0\t0\t*\t*",
        f"read10\t4\tcontig033\t250\t0\t*\t=\t250\t0\t{seq}\t{qual}",
        # inconsistent records samtools repairs: no FLAG 0x4 without RNAME or CIGAR, RNAME with POS 0,
        # RNEXT with PNEXT 0; and SEQ digits 0-3 (read as ACGT)
        "read11\t0\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII",
        "read12\t0\tchr1\t0\t0\t4M\t=\t0\t0\tACGT\tIIII",
        "read13\t32\tchr2\t5\t0\t*\tchr1\t0\t0\t0123\tIIII",
    ]
    lines += [f"r{k}\t{16 * (k % 2)}\tcontig{k % 60:03d}\t{1 + (k * 37) % 900}\t{k % 61}\t8M\t*\t0\t0\tACGTACGT\tIIIIIIII"
              f"\tNM:i:{k % 3}\tHI:i:{k}" for k in range(300)]
    return "".join(line + "\n" for line in lines)


@pytest.fixture
def edge_sam(tmp_path):
    path = tmp_path / "edge.sam"
    path.write_text(EDGE_HEADER + edge_records())
    return path


def check_bam(sam, out, sort=False, **kwargs):
    """`out` from `sam` by mapper.bam: samtools reads it back as the SAM, byte for byte as its own encoding."""
    bam.sam_to_bam(sam, out, sort=sort, **kwargs)
    samtools("quickcheck", out)
    reference = out.with_suffix(".samtools.bam")
    samtools(*(["sort", "-T", out.with_suffix(".tmp")] if sort else ["view"]), "--no-PG", "-u", "-o", reference, sam)
    assert stream(out) == stream(reference)
    with open(sam) as text:
        records = sum(1 for line in text if not line.startswith("@"))
    assert samtools("view", "-c", out).stdout.decode().strip() == str(records)
    return reference


@pytest.mark.parametrize("name", ["measles", "measles_pe", "shigella_pe"])
def test_gkmap_sam_to_bam(gkmap_sams, tmp_path, name):
    sam = gkmap_sams[name]
    out = tmp_path / f"{name}.bam"
    check_bam(sam, out, threads=2)
    assert samtools("view", "-h", "--no-PG", out).stdout == sam.read_bytes()


@pytest.mark.parametrize("name", ["measles_pe", "shigella_pe"])
def test_gkmap_sorted_bam(gkmap_sams, tmp_path, name, monkeypatch):
    """A budget of 64 KiB spills dozens of runs, merged in several passes; the order is samtools sort's."""
    sam = gkmap_sams[name]
    out = tmp_path / f"{name}.sorted.bam"
    spills = tmp_path / "spills"
    spills.mkdir()
    made = []
    monkeypatch.setattr(bam, "_Run", lambda folder: made.append(folder) or _Run(folder))
    check_bam(sam, out, sort=True, memory=64 << 10, temp_dir=spills, threads=2)
    assert len(made) > 10 and set(made) == {spills}  # more runs than the 5 one pass may merge: passes
    assert not os.listdir(spills)
    samtools("index", out)
    text = samtools("view", "-h", "--no-PG", out).stdout.decode()
    assert text.splitlines()[0] == "@HD\tVN:1.6\tSO:coordinate"
    assert text == samtools("sort", "-O", "sam", "--no-PG", sam).stdout.decode()


def test_edge_cases(edge_sam, tmp_path):
    reference = check_bam(edge_sam, tmp_path / "edge.bam")
    assert (samtools("view", "-h", "--no-PG", tmp_path / "edge.bam").stdout
            == samtools("view", "-h", "--no-PG", reference).stdout)
    check_bam(edge_sam, tmp_path / "edge.sorted.bam", sort=True, memory=1)
    samtools("index", tmp_path / "edge.sorted.bam")


def test_threads_and_levels_agree(edge_sam, tmp_path):
    """The compressed bytes do not depend on the thread count; every level decompresses to one stream."""
    outs = {}
    for threads, level in [(1, 1), (3, 1), (2, 0), (2, 3), (1, 6)]:
        outs[threads, level] = tmp_path / f"t{threads}l{level}.bam"
        bam.sam_to_bam(edge_sam, outs[threads, level], threads=threads, level=level)
        samtools("quickcheck", outs[threads, level])
    assert outs[1, 1].read_bytes() == outs[3, 1].read_bytes()
    assert len({stream(p) for p in outs.values()}) == 1


def test_bgzf_framing(edge_sam, tmp_path):
    """Every member is a BGZF block (BC field equal to its size - 1, at most 65,280 bytes of input), the file
    ends with the 28-byte EOF block, and the header has a block of its own."""
    import struct
    import zlib
    big = tmp_path / "big.sam"
    with open(big, "w") as out:
        out.write(EDGE_HEADER)
        for _ in range(40):
            out.write(edge_records())
    bam.sam_to_bam(big, tmp_path / "big.bam", threads=2)
    data = (tmp_path / "big.bam").read_bytes()
    assert data.endswith(bam.EOF_BLOCK)
    at, sizes = 0, []
    while at < len(data):
        assert data[at:at + 4] == b"\x1f\x8b\x08\x04" and data[at + 12:at + 16] == b"BC\x02\x00"
        size = struct.unpack_from("<H", data, at + 16)[0] + 1
        crc, isize = struct.unpack_from("<II", data, at + size - 8)
        body = zlib.decompress(data[at + 18:at + size - 8], -15)
        assert len(body) == isize <= bam.BLOCK_DATA and zlib.crc32(body) == crc
        sizes.append(isize)
        at += size
    assert len(sizes) > 10 and sizes[0] == len(bam.header_block(EDGE_HEADER)) and sizes[-1] == 0


def test_picard_validates(gkmap_sams, tmp_path):
    """Picard's ValidateSamFile (Debian picard-tools) finds nothing wrong with the BAM and the sorted BAM of
    gkmap runs whose read group has a platform (single-end and paired-end: mates checked). Picard is an
    oracle tool: `make test` installs it, and a missing one fails the test."""
    picard = need_tool("PicardCommandLine")
    for name in ("measles", "measles_pe"):
        for sort in (False, True):
            out = tmp_path / f"{name}{'.sorted' if sort else ''}.bam"
            bam.sam_to_bam(gkmap_sams[name], out, sort=sort)
            run = subprocess.run([picard, "ValidateSamFile", f"I={out}", "MODE=SUMMARY"], capture_output=True,
                                 text=True)
            assert run.returncode == 0 and "No errors found" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("record, reason", [
    ("r\t0\tchr9\t1\t0\t*\t*\t0\t0\t*\t*", "RNAME not an @SQ name"),
    ("r\t0\tchr1\t1\t0\t4M\t*\t0\t0\tACG\t*", "SEQ length differs"),
    ("r\t0\tchr1\t1\t0\t3M\t*\t0\t0\tACG\tII", "QUAL length differs"),
    ("r\t0\tchr1\t1\t0\t3Q\t*\t0\t0\tACG\tIII", "bad CIGAR"),
    ("r\t70000\tchr1\t1\t0\t*\t*\t0\t0\t*\t*", "FLAG"),
    ("r\t0\tchr1\t1\t256\t*\t*\t0\t0\t*\t*", "MAPQ"),
    ("r\t0\tchr1\t1\t0\t*\t*\t0\t3000000000\t*\t*", "TLEN"),
    ("r\t0\tchr1\t1\t0\t*\t*\t0\t0\t*\t*\tXI:i:4294967296", "bad optional field"),
    ("r\t0\tchr1\t1\t0\t*\t*\t0\t0\t*\t*\tXH:H:ABC", "bad optional field"),
    ("r\t0\tchr1\t1\t0\t*\t*\t0\t0\t*\t*\tXB:B:c,128", "bad optional field"),
    ("r\t0\tchr1\t1\t0\t*\t*\t0\t0\t*", "fewer than 11"),
    ("\t0\tchr1\t1\t0\t*\t*\t0\t0\t*\t*", "QNAME"),
    ("r r\t0\tchr1\t1\t0\t*\t*\t0\t0\t*\t*", "QNAME"),
    ("r\t0\tchr1\t1\t0\t3M\t*\t0\t0\tACG\tI\x7fI", "QUAL"),
    ("r\t0\tchr1\t1\t0\t*\t*\t0\t0\t*\t*\t1X:i:5", "bad optional field"),
    ("r\t0\tchr1\t1\t0\t*\t*\t0\t0\t*\t*\tXZ:Z:a\x00b", "NUL"),
])
def test_bad_records(tmp_path, record, reason):
    """A record samtools would refuse or change is an error naming it, and its batch writes nothing."""
    good = "g\t0\tchr1\t1\t0\t*\t*\t0\t0\t*\t*\n"
    for kind in (bam.BamWriter, bam.SortedBamWriter):
        with open(tmp_path / "out.bam", "wb") as handle:
            writer = kind(handle, EDGE_HEADER)
            with pytest.raises(bam.BamEncodeError, match=reason) as error:
                writer.write((good * 3 + record + "\n" + good).encode())
            writer.abort()
        assert error.value.index == 3
    sam = tmp_path / "bad.sam"
    sam.write_text(EDGE_HEADER + good + record + "\n")
    with pytest.raises(InputError, match=f"bad.sam line {EDGE_HEADER.count(chr(10)) + 2}: "):
        bam.sam_to_bam(sam, tmp_path / "bad.bam")
    assert not (tmp_path / "bad.bam").exists()


def test_sort_cleans_up_on_error(tmp_path):
    """Run files are gone once the writer fails, as after close."""
    records = edge_records().encode()
    with open(tmp_path / "out.bam", "wb") as handle:
        with pytest.raises(bam.BamEncodeError):
            with bam.SortedBamWriter(handle, EDGE_HEADER, memory=1, temp_dir=tmp_path) as writer:
                for _ in range(20):
                    writer.write(records)
                assert writer._runs
                writer.write(b"broken\n")
    assert os.listdir(tmp_path) == ["out.bam"]


def test_coordinate_header():
    assert bam.coordinate_header("@HD\tVN:1.6\tSO:unsorted\tGO:query\n@SQ\tSN:a\tLN:1\n") == \
        "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:a\tLN:1\n"
    assert bam.coordinate_header("@SQ\tSN:a\tLN:1\n") == "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:a\tLN:1\n"


def test_small_slices_and_a_failed_write(edge_sam, tmp_path, monkeypatch):
    """Pass 2 in slices of a few records gives the same BAM; a write with a bad record keeps none of its
    records and the writer goes on."""
    monkeypatch.setattr(bam, "SLICE", 500)
    check_bam(edge_sam, tmp_path / "sliced.bam")
    good = edge_records().encode()
    for kind in (bam.BamWriter, bam.SortedBamWriter):
        out = tmp_path / f"{kind.__name__}.bam"
        with open(out, "wb") as handle, kind(handle, EDGE_HEADER) as writer:
            writer.write(good)
            with pytest.raises(bam.BamEncodeError):
                writer.write(good + b"bad\n")
            writer.write(good)
        assert samtools("view", "-c", out).stdout.decode().strip() == str(2 * good.count(b"\n"))


def test_header_without_final_newline(tmp_path):
    out = tmp_path / "h.bam"
    with open(out, "wb") as handle, bam.BamWriter(handle, "@HD\tVN:1.6\n@SQ\tSN:a\tLN:5") as writer:
        writer.write(b"r\t0\ta\t1\t0\t2M\t*\t0\t0\tAC\t*\n")
    assert samtools("view", "-h", "--no-PG", out).stdout.decode().splitlines()[1:] == [
        "@SQ\tSN:a\tLN:5", "r\t0\ta\t1\t0\t2M\t*\t0\t0\tAC\t*"]


def test_sort_settings_checked_first(tmp_path):
    """A temporary folder that cannot be used, or a budget no machine has, is refused when the writer is
    made, not at its first spill."""
    with open(os.devnull, "wb") as handle:
        with pytest.raises(UsageError, match="not a writable folder"):
            bam.SortedBamWriter(handle, EDGE_HEADER, temp_dir=tmp_path / "missing")
        with pytest.raises(UsageError, match="more than this machine can reserve"):
            bam.SortedBamWriter(handle, EDGE_HEADER, memory=1 << 50)


def test_mutated_records_never_crash(tmp_path):
    """Thousands of records damaged at random (bytes changed, dropped, repeated): each is refused with
    BamEncodeError or encoded exactly as samtools encodes it (samtools accepts every record kept)."""
    import random
    rng = random.Random(18)
    lines = edge_records().encode().splitlines()
    alphabet = b"\t:*=-+.,0123456789ACGTNMIDSHPXZfiABc\x00\xff!~ "
    kept = []
    with open(tmp_path / "fuzz.bam", "wb") as handle, bam.BamWriter(handle, EDGE_HEADER) as writer:
        for _ in range(3000):
            line = bytearray(rng.choice(lines))
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(len(line) + 1)
                action = rng.randrange(3)
                if action == 0 and at < len(line):
                    line[at] = rng.choice(alphabet)
                elif action == 1:
                    del line[at:at + rng.randint(1, 12)]
                else:
                    line[at:at] = line[max(0, at - rng.randint(1, 12)):at]
            record = bytes(line).replace(b"\n", b"") + b"\n"
            try:
                writer.write(record)
            except bam.BamEncodeError:
                continue
            kept.append(record)
    assert 100 < len(kept) < 3000
    sam = tmp_path / "kept.sam"
    sam.write_bytes(EDGE_HEADER.encode() + b"".join(kept))
    samtools("view", "--no-PG", "-u", "-o", tmp_path / "kept.samtools.bam", sam)
    assert stream(tmp_path / "fuzz.bam") == stream(tmp_path / "kept.samtools.bam")
