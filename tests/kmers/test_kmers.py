"""`gkmap kmers` against jellyfish (the oracle, a hard requirement): same k-mers, same counts, same histogram.

Every comparison runs jellyfish in the test on the same input and compares sorted `KMER<TAB>COUNT` dumps
byte for byte (by SHA-256; the first differing lines are shown on failure).
"""
import gzip
import hashlib
import os
import shutil
import subprocess

import numpy as np
import pytest

from kmer_reads import user_fastq
from mapper.cli import main
from mapper.kmers import KmerTable



@pytest.fixture(scope="session")
def jellyfish():
    path = shutil.which("jellyfish")
    if path is None:
        pytest.fail("oracle tool jellyfish is not installed (make test installs it from Debian)")
    return path


@pytest.fixture(scope="session")
def shigella_head(shigella_fastq, tmp_path_factory):
    """The first 3,000 Shigella reads: enough to spill many runs under a tiny --memory."""
    out = tmp_path_factory.mktemp("shigella_head") / "head.fastq"
    with open(shigella_fastq) as src, open(out, "w") as dst:
        dst.writelines(line for _, line in zip(range(4 * 3000), src))
    return out


def random_records(rng, n, max_len):
    """Sequences that exercise the edge cases: N runs, IUPAC letters, lower case, reads shorter than k,
    empty records."""
    records = []
    for _ in range(n):
        length = int(rng.integers(0, max_len))
        seq = rng.choice(np.frombuffer(b"ACGT", dtype=np.uint8), length)
        for _ in range(int(rng.integers(0, 3))):  # N runs and other non-ACGT letters
            start = int(rng.integers(0, max(length, 1)))
            seq[start:start + int(rng.integers(1, 12))] = rng.choice(np.frombuffer(b"NNNRYn", dtype=np.uint8))
        if rng.random() < 0.3:  # a lower-case stretch
            start = int(rng.integers(0, max(length, 1)))
            seq[start:start + 40] |= 0x20
        records.append(seq.tobytes().decode())
    return records


@pytest.fixture(scope="session")
def edge_fasta(tmp_path_factory):
    """Multi-line FASTA with every edge case, and the same records as FASTQ."""
    rng = np.random.default_rng(7)
    records = random_records(rng, 300, 400) + ["ACGT" * 80, "a" * 300, "N" * 50, ""]
    folder = tmp_path_factory.mktemp("edge")
    with open(folder / "edge.fa", "w") as f:
        for i, seq in enumerate(records):
            lines = "\n".join(seq[j:j + 60] for j in range(0, len(seq), 60))
            f.write(f">r{i} description\n{lines}\n")
    with open(folder / "edge.fq", "w") as f:
        for i, seq in enumerate(records):
            f.write(f"@r{i}\n{seq}\n+\n{'I' * len(seq)}\n")
    return folder / "edge.fa", folder / "edge.fq"


def start_jellyfish(jellyfish, inputs, k, canonical, folder):
    """Start `jellyfish count` in the background (it runs beside gkmap); returns (process, database)."""
    db = folder / "jf.jf"
    count = [jellyfish, "count", "-m", str(k), "-s", "4M", "-t", "2", "-o", str(db)]
    return subprocess.Popen(count + (["-C"] if canonical else []) + [str(p) for p in inputs]), db


def jellyfish_dump(jellyfish, inputs, k, canonical, folder, extra=(), started=None):
    """Path of jellyfish's dump (tab-separated, sorted like ours: C locale)."""
    process, db = started or start_jellyfish(jellyfish, inputs, k, canonical, folder)
    assert process.wait() == 0
    out = folder / "jf.txt"
    with open(out, "wb") as f:
        dump = subprocess.run([jellyfish, "dump", "-c", "-t", *extra, str(db)], check=True, capture_output=True)
        f.write(subprocess.run(["sort"], input=dump.stdout, capture_output=True, check=True,
                               env=dict(os.environ, LC_ALL="C")).stdout)
    return out


def gkmap_table(inputs, k, canonical, folder, *options):
    table = folder / "gk.kmers"
    args = ["kmers", "count", "--quiet", "-k", str(k), "-o", str(table), *options]
    assert main(args + (["--canonical"] if canonical else []) + [str(p) for p in inputs]) == 0
    return table


def gkmap_dump(table, folder):
    out = folder / "gk.txt"
    assert main(["kmers", "dump", "-o", str(out), str(table)]) == 0
    return out


def digest(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def assert_same_dump(ours, theirs):
    if digest(ours) != digest(theirs):
        diff = subprocess.run(["diff", str(ours), str(theirs)], capture_output=True, text=True).stdout
        pytest.fail(f"gkmap dump ({ours}) differs from jellyfish ({theirs}):\n" + "\n".join(diff.splitlines()[:20]))


def check_against_jellyfish(jellyfish, inputs, k, canonical, folder, *options):
    started = start_jellyfish(jellyfish, inputs, k, canonical, folder)
    try:
        table = gkmap_table(inputs, k, canonical, folder, *options)
        ours = gkmap_dump(table, folder)
    finally:
        theirs = jellyfish_dump(jellyfish, inputs, k, canonical, folder, started=started)
    assert_same_dump(ours, theirs)
    return table


@pytest.fixture(scope="session")
def user_reads(tmp_path_factory):
    """Reads as users give them: 100 bp reads of a 5 kb genome, a fifth N-rich (20 Ns), a seventh lower case,
    and one read 12,000 times over (k-mers counted above 10,000); plain FASTQ and the same gzipped."""
    text = user_fastq(12, 5000, 3000, 100, n_every=5, n_count=20, lower_every=7, lower_upto=100, qual=b"I")
    folder = tmp_path_factory.mktemp("user_reads")
    (folder / "reads.fq").write_bytes(text)
    (folder / "reads.fq.gz").write_bytes(gzip.compress(text, compresslevel=1))
    return folder / "reads.fq", folder / "reads.fq.gz"


@pytest.mark.parametrize("k, canonical", [(1, True), (21, False), (31, True), (65, True), (99, False)])
def test_user_reads_match_jellyfish_plain_and_gzip(jellyfish, user_reads, tmp_path, k, canonical):
    """N-rich and lower-case reads, counts above 10,000: jellyfish's dump; the gzip file gives the same
    table, byte for byte."""
    plain, gz = user_reads
    table = check_against_jellyfish(jellyfish, [plain], k, canonical, tmp_path)
    with KmerTable(table) as t:
        assert t.total >= 12000
    (tmp_path / "gz").mkdir()
    assert gkmap_table([gz], k, canonical, tmp_path / "gz").read_bytes() == table.read_bytes()


@pytest.mark.parametrize("k", [25, 31, 65])
def test_user_reads_match_kmc(user_reads, tmp_path, k):
    """KMC 3 as a second oracle where it is installed (canonical, every count, no cap)."""
    kmc, kmc_dump = shutil.which("kmc"), shutil.which("kmc_dump")
    if kmc is None or kmc_dump is None:
        pytest.skip("KMC is not installed")
    plain, _ = user_reads
    work = tmp_path / "kmc"
    work.mkdir()
    subprocess.run([kmc, f"-k{k}", "-ci1", "-cs4294967295", "-t2", "-m2", str(plain), str(tmp_path / "db"),
                    str(work)], check=True, capture_output=True)
    subprocess.run([kmc_dump, str(tmp_path / "db"), str(tmp_path / "kmc.txt")], check=True, capture_output=True)
    theirs = tmp_path / "kmc.sorted"
    with open(theirs, "wb") as f:
        f.write(subprocess.run(["sort", str(tmp_path / "kmc.txt")], capture_output=True, check=True,
                               env=dict(os.environ, LC_ALL="C")).stdout)
    assert_same_dump(gkmap_dump(gkmap_table([plain], k, True, tmp_path), tmp_path), theirs)


@pytest.mark.parametrize("canonical", [False, True], ids=["forward", "canonical"])
@pytest.mark.parametrize("k", [21, 31, 32, 33, 63])
def test_shigella_reads_match_jellyfish(jellyfish, shigella_fastq, tmp_path, k, canonical):
    check_against_jellyfish(jellyfish, [shigella_fastq], k, canonical, tmp_path)


@pytest.mark.parametrize("canonical", [False, True], ids=["forward", "canonical"])
@pytest.mark.parametrize("k", [1, 2, 5, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200, 255, 256])
def test_edge_cases_match_jellyfish(jellyfish, edge_fasta, tmp_path, k, canonical):
    """k = 1, the 32/33 and 64/65 channel boundaries, k up to 256 (longer than most records), N runs,
    IUPAC letters, lower case, empty records, multi-line FASTA; FASTA and FASTQ in one count."""
    check_against_jellyfish(jellyfish, list(edge_fasta), k, canonical, tmp_path)


def test_empty_input_and_k_longer_than_every_read(jellyfish, tmp_path, shigella_head):
    empty = tmp_path / "empty.fa"
    empty.write_bytes(b"")
    for inputs, k in [([empty], 21), ([shigella_head], 152), ([empty, shigella_head], 152)]:
        table = check_against_jellyfish(jellyfish, inputs, k, False, tmp_path)
        assert gkmap_dump(table, tmp_path).read_bytes() == b""


@pytest.mark.parametrize("k, canonical", [(5, True), (27, False), (33, True), (70, False)])
def test_out_of_core_spills_and_merges_exactly(jellyfish, shigella_head, tmp_path, k, canonical):
    """A tiny --memory forces sorted runs to the temporary folder (k=5: a run so small that it stays in
    memory, weighted); the merged table still equals jellyfish's, and the folder is left empty."""
    spill = tmp_path / "spill"
    spill.mkdir()
    check_against_jellyfish(jellyfish, [shigella_head], k, canonical, tmp_path,
                            "--memory", "0.002", "--tmp", str(spill))
    assert list(spill.iterdir()) == []


def test_min_count_matches_jellyfish_lower_count(jellyfish, shigella_head, tmp_path):
    table = gkmap_table([shigella_head], 17, True, tmp_path, "--min-count", "3")
    theirs = jellyfish_dump(jellyfish, [shigella_head], 17, True, tmp_path, extra=("-L", "3"))
    assert_same_dump(gkmap_dump(table, tmp_path), theirs)


@pytest.mark.parametrize("options", [(), ("-l", "2", "--high", "5"), ("-i", "3"), ("-l", "5", "-i", "10"),
                                     ("-l", "10", "-i", "10"), ("-l", "11", "-i", "10", "--high", "50", "-f"),
                                     ("-l", "0", "-f", "--high", "10"), ("-l", "4", "--high", "4")])
def test_histo_matches_jellyfish(jellyfish, shigella_head, tmp_path, capsys, options):
    table = gkmap_table([shigella_head], 9, True, tmp_path)
    capsys.readouterr()
    assert main(["kmers", "histo", *options, str(table)]) == 0
    ours = capsys.readouterr().out
    db = tmp_path / "jf.jf"
    subprocess.run([jellyfish, "count", "-m", "9", "-C", "-s", "1M", "-o", str(db), str(shigella_head)], check=True)
    jf_options = ["-h" if o == "--high" else o for o in options]
    theirs = subprocess.run([jellyfish, "histo", *jf_options, str(db)], capture_output=True, text=True, check=True)
    assert ours == theirs.stdout


@pytest.mark.parametrize("k, canonical", [(25, True), (40, False)])
def test_query_matches_jellyfish(jellyfish, shigella_head, tmp_path, capsys, k, canonical):
    table = gkmap_table([shigella_head], k, canonical, tmp_path)
    present = gkmap_dump(table, tmp_path).read_text().splitlines()[::997]
    kmers = [line.split("\t")[0] for line in present]
    rng = np.random.default_rng(3)
    kmers += ["".join(rng.choice(list("ACGT"), k)) for _ in range(20)]  # mostly absent
    kmers += [kmer.lower()[::-1] for kmer in kmers[:5]]
    capsys.readouterr()
    assert main(["kmers", "query", str(table), *kmers]) == 0
    ours = capsys.readouterr().out
    db = tmp_path / "jf.jf"
    subprocess.run([jellyfish, "count", "-m", str(k), "-s", "1M", "-o", str(db), str(shigella_head)]
                   + (["-C"] if canonical else []), check=True)
    theirs = subprocess.run([jellyfish, "query", str(db), *kmers], capture_output=True, text=True, check=True)
    assert ours == theirs.stdout.replace(" ", "\t")
    assert ours.count("\n") == len(kmers)


def test_bad_input_is_one_line_error_and_leaves_nothing(shigella_head, tmp_path, capsys):
    """A malformed FASTQ after a good file that already spilled: exit 1, file and line named, no OUT,
    no temporary file left anywhere."""
    bad = tmp_path / "bad.fastq"
    bad.write_text("@r1\nACGTACGT\n+\nIIIIIIII\n@r2\nACGT\n+\nII\n")
    spill = tmp_path / "spill"
    spill.mkdir()
    out = tmp_path / "out" / "t.kmers"
    out.parent.mkdir()
    code = main(["kmers", "count", "--quiet", "-k", "21", "--memory", "0.002", "--tmp", str(spill), "-o", str(out),
                 str(shigella_head), str(bad)])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert err.startswith(f"gkmap: error: {bad} line 8:") and "\n" not in err
    assert list(spill.iterdir()) == [] and list(out.parent.iterdir()) == []


@pytest.mark.parametrize("args, code, message", [
    (["count", "-k", "0", "-o", "{tmp}/t", "{tmp}/x.fa"], 2, "-k must be between 1 and 256"),
    (["count", "-k", "257", "-o", "{tmp}/t", "{tmp}/x.fa"], 2, "-k must be between 1 and 256"),
    (["count", "-k", "5", "-o", "{tmp}/t", "{tmp}/missing.fa"], 1, "missing.fa: no such file"),
    (["count", "-k", "5", "-o", "{tmp}/t", "{tmp}/junk.txt"], 1, "neither FASTA nor FASTQ"),
    (["count", "-k", "5", "-o", "{tmp}/t", "{tmp}/plain.fa.gz"], 1, "plain.fa.gz: corrupt compressed data"),
    (["dump", "{tmp}/x.fa"], 1, "not a gkmap k-mer table"),
    (["query", "{tmp}/t5", "ACGTN"], 2, "'ACGTN' is not a k-mer of 5 bases"),
    (["query", "{tmp}/t5", "ACG"], 2, "'ACG' is not a k-mer of 5 bases"),
    (["histo", "--high", "3", "-l", "5", "{tmp}/t5"], 2, "--high (3) must be >= --low (5)"),
])
def test_errors_name_the_problem(tmp_path, capsys, args, code, message):
    (tmp_path / "x.fa").write_text(">a\nACGTACGTAC\n")
    (tmp_path / "junk.txt").write_text("hello\n")
    (tmp_path / "plain.fa.gz").write_text(">a\nACGTACGT\n")  # named as gzip, plain inside: an error, as xopen gives
    assert main(["kmers", "count", "-k", "5", "-o", str(tmp_path / "t5"), str(tmp_path / "x.fa")]) == 0
    capsys.readouterr()
    assert main(["kmers", *[a.format(tmp=tmp_path) for a in args]]) == code
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_corrupt_table_is_detected(tmp_path, capsys, edge_fasta):
    table = gkmap_table([edge_fasta[0]], 12, False, tmp_path)
    data = bytearray(table.read_bytes())
    data[-3] ^= 0xFF
    table.write_bytes(bytes(data))
    assert main(["kmers", "dump", "-o", str(tmp_path / "d.txt"), str(table)]) == 1
    assert "checksum mismatch" in capsys.readouterr().err
    assert main(["kmers", "histo", str(table)]) == 1  # the counts alone are read there, checked the same
    assert "checksum mismatch" in capsys.readouterr().err


def test_memory_budget_default_and_given(tmp_path, capsys):
    """Without --memory the cpu backend's budget is 2 GB, and said; --memory is taken as given; a budget
    that is not positive is a usage error, and so is --gpu-memory on the cpu backend, or a size that is not
    one."""
    (tmp_path / "x.fa").write_text(">a\nACGTACGTAC\n")
    base = ["kmers", "count", "-k", "5", "--device", "cpu", "-o", str(tmp_path / "t5"), str(tmp_path / "x.fa")]
    assert main(base) == 0
    assert "cpu, 2.0 GB of buffers, 0 runs spilled" in capsys.readouterr().err
    assert main(base + ["--memory", "0.5"]) == 0
    assert "cpu, 0.5 GB of buffers, 0 runs spilled" in capsys.readouterr().err
    assert main(base + ["--memory", "0"]) == 2
    assert "--memory must be a positive number of GB" in capsys.readouterr().err
    assert main(base + ["--gpu-memory", "4G"]) == 2
    assert "--gpu-memory is for the cuda backend" in capsys.readouterr().err
    assert main(base + ["--gpu-memory", "lots"]) == 2
    assert "--gpu-memory must be a size such as 16G" in capsys.readouterr().err
