"""The neighbourhood index (issue #8) on the cpu, against brute force and edlib.

- the perfect hash is a bijection from each block's keys onto vertices, and rejects keys not in the block;
- the index holds exactly the reference's patterns (brute force over the genome, contiguous and spaced seeds);
- perfect hash, binary search and list traversal give the same slots, equal to a sorted-array oracle, for
  present keys, absent keys and empty blocks;
- mapping: every simulated read with <= e edits whose true locus has a pattern with an exact seed and <= k
  substitutions in its neighbourhood (ungapped at the true start; N never matching) is reported at that
  locus, every record replays within e (edlib), and the three look-ups write the same SAM;
- bad options and indexes are one-line errors.
"""
import json
from collections import defaultdict

import numpy as np
import pytest

from cli_checks import one_line_error, without_pg
from conftest import LAMBDA, MEASLES, READS, SPACED
from mapper.alphabet import CODE_N, COMPLEMENT, encode
from mapper.errors import IndexFormatError, UsageError
from mapper.neighbourhood import lookup, mapping
from mapper.neighbourhood.hashing import build_phf, key_vertices, phf_slots, third_sizes
from mapper.neighbourhood.index import build_index, load_index, open_index, seed_mask
from mapper.neighbourhood.seeding import substitution_masks
from mapper.reference import read_fasta
from mapper.simulate import parse_truth, simulate, write_fastq
from oracle import check_record, load_genome, read_sam

def random_blocks(rng, n_keys, n_blocks, bits):
    """(keys uint32, first int64 [B+1]): distinct random keys per block, sorted inside a block."""
    block = rng.integers(0, n_blocks, n_keys)
    key = rng.integers(0, 1 << bits, n_keys).astype(np.uint32)
    pair = np.unique(block.astype(np.int64) << 32 | key)
    block, key = pair >> 32, (pair & 0xFFFFFFFF).astype(np.uint32)
    first = np.zeros(n_blocks + 1, dtype=np.int64)
    np.cumsum(np.bincount(block, minlength=n_blocks), out=first[1:])
    return key, first, block


@pytest.mark.parametrize("n_keys,n_blocks", [(1, 1), (2, 1), (3, 5), (5000, 3), (40000, 4096)])
def test_phf_is_a_bijection_on_each_block(n_keys, n_blocks):
    rng = np.random.default_rng(n_keys)
    key, first, block = random_blocks(rng, n_keys, n_blocks, 14)
    phf = build_phf(key, first)
    m = np.diff(first)
    r = (np.diff(phf.voff)) // 3
    assert (r == third_sizes(m)).all() and (3 * r >= 1.23 * m).all()
    # the three vertices lie in the block's three thirds
    v = key_vertices(key, phf.seed_j[block], r[block])
    assert ((v[:, 0] < r[block]) & (v[:, 1] >= r[block]) & (v[:, 1] < 2 * r[block]) & (v[:, 2] >= 2 * r[block])).all()
    # phf(k) = v_j names a vertex owned by k alone: distinct vertices, inside the block, vslot back to k
    v = v + phf.voff[block][:, None]
    j = phf.assignment(v).sum(axis=1) % 3
    owned = v[np.arange(len(key)), j]
    assert len(np.unique(owned)) == len(key)
    assert ((owned >= phf.voff[block]) & (owned < phf.voff[block + 1])).all()
    assert (phf.vslot[owned] == np.arange(len(key))).all()
    assert (phf_slots(phf, key, block, key) == np.arange(len(key))).all()
    # a key absent from its block is rejected (it lands on some vertex, the key check says no)
    present = set(zip(block.tolist(), key.tolist()))
    qb = rng.integers(0, n_blocks, 3000)
    qk = rng.integers(0, 1 << 14, 3000).astype(np.uint32)
    got = phf_slots(phf, key, qb, qk)
    expect = np.array([(b, k) in present for b, k in zip(qb.tolist(), qk.tolist())])
    assert ((got >= 0) == expect).all()
    assert (key[got[got >= 0]] == qk[got >= 0]).all() and (block[got[got >= 0]] == qb[got >= 0]).all()


def brute_force_patterns(reference, mask, ln):
    """{(seed string, neighbourhood string): [positions]} by walking the genome one position at a time."""
    codes = reference.codes
    width = len(mask) + ln
    out = defaultdict(list)
    for c_start, c_end in zip(reference.starts.tolist(), reference.ends.tolist()):
        for p in range(c_start, c_end - width + 1):
            seed = tuple(codes[p + i] for i, ch in enumerate(mask) if ch == "#")
            nb = tuple(codes[p + len(mask) + i] for i in range(ln))
            if CODE_N not in seed and CODE_N not in nb:
                out[seed, nb].append(p)
    return out


def key_of(bases):
    k = 0
    for b in bases:
        k = k << 2 | int(b)
    return k


@pytest.mark.parametrize("mask,ln", [("########", 7), (SPACED, 7), ("####", 4), ("#-#", 16)])
def test_index_holds_exactly_the_reference_patterns(nb_index, mask, ln):
    index = nb_index(MEASLES, mask, ln)
    truth = brute_force_patterns(index.reference, mask, ln)
    assert len(index.nbkeys) == len(truth) and len(index.positions) == sum(map(len, truth.values()))
    block = np.array([key_of(s) for s, _ in truth])
    key = np.array([key_of(b) for _, b in truth], dtype=np.uint32)
    slot = lookup.slots(index, "phf", block, key)
    assert (slot >= 0).all()
    for (s, b), k in zip(truth, slot.tolist()):
        assert index.positions[index.posoff[k]:index.posoff[k + 1]].tolist() == truth[s, b]


def test_index_skips_n_and_contig_ends(tmp_path):
    fasta = tmp_path / "two.fa"
    fasta.write_text(">a\nACGTACGTNACGTTGCAACGTAGG\n>b\nTTGACCAGTACGATCGA\n")
    index = build_index(fasta, "###", 3, tmp_path / "two.nbx")
    truth = brute_force_patterns(index.reference, "###", 3)
    assert sorted(index.positions.tolist()) == sorted(p for v in truth.values() for p in v)
    assert index.reference.names == ["a", "b"]


@pytest.mark.parametrize("mask,ln", [("########", 7), ("####", 8), (SPACED, 7)])
def test_lookups_agree_with_a_sorted_array_oracle(nb_index, mask, ln):
    index = nb_index(LAMBDA, mask, ln)
    rng = np.random.default_rng(7)
    ls = mask.count("#")
    block_of_slot = np.repeat(np.arange(4**ls), np.diff(index.nboff))
    pick = rng.integers(0, len(index.nbkeys), 2000)
    block = np.concatenate([block_of_slot[pick], block_of_slot[pick], rng.integers(0, 4**ls, 2000)])
    key = np.concatenate([index.nbkeys[pick], index.nbkeys[pick] ^ substitution_masks(ln, 1)[1 + pick % (3 * ln)],
                          rng.integers(0, 4**ln, 2000)]).astype(np.uint32)
    combined = block_of_slot.astype(np.int64) << 32 | index.nbkeys
    query = block.astype(np.int64) << 32 | key
    at = np.minimum(np.searchsorted(combined, query), len(combined) - 1)
    expect = np.where(combined[at] == query, at, -1)
    assert 0 < (expect >= 0).sum() < len(expect)
    for method in lookup.LOOKUPS:
        assert (lookup.slots(index, method, block, key) == expect).all(), method


def test_substitution_masks_cover_the_hamming_ball():
    ln = 5
    for errors, size in ((0, 1), (1, 1 + 3 * ln), (2, 1 + 3 * ln + 9 * ln * (ln - 1) // 2)):
        masks = substitution_masks(ln, errors)
        assert len(masks) == size == len(np.unique(masks))
        digits = (masks[:, None] >> (2 * np.arange(ln, dtype=np.uint32))) & 3
        assert ((digits != 0).sum(axis=1) <= errors).all()


def intact_pattern(read, ref, mask, ln, step, k):
    """True when some pattern of the read (codes, N = 4) has an exact seed and <= k substitutions in its
    neighbourhood against `ref` (the reference codes under the read, ungapped); N never matches."""
    width = len(mask) + ln
    seed = np.array([c == "#" for c in mask] + [False] * ln)
    nb = np.array([False] * len(mask) + [True] * ln)
    for i in range(0, len(read) - width + 1, step):
        r, g = read[i:i + width], ref[i:i + width]
        if len(g) < width:
            break
        diff = (r != g) | (r == CODE_N) | (g == CODE_N)
        if not diff[seed].any() and diff[nb].sum() <= k:
            return True
    return False


def simulated_reads(path, genome, n, length, seed, n_every=0):
    """Simulated reads written to `path`; every n_every-th read gets an N at a random base."""
    reads = simulate(read_fasta(genome, path.with_suffix(".fai")), n, length, seed=seed)
    if n_every:
        rng = np.random.default_rng(seed)
        for i in range(0, n, n_every):
            name, seq = reads[i]
            at = int(rng.integers(0, length))
            reads[i] = (name, seq[:at] + "N" + seq[at + 1:])
    with open(path, "w") as f:
        write_fastq(reads, f)
    return reads


@pytest.mark.parametrize("mask,nb_errors,step,e", [("########", 1, 1, 5), (SPACED, 2, 3, 4), ("########", 0, 2, 3)])
def test_every_read_with_an_intact_pattern_is_found(gkmap, nb_index, tmp_path, mask, nb_errors, step, e):
    index = nb_index(LAMBDA, mask, 7)
    reads = simulated_reads(tmp_path / "r.fq", LAMBDA, 400, 60, seed=step, n_every=9)
    out = tmp_path / "out.sam"
    code, err = gkmap("map", "--quiet", "--index-kind", "neighbourhood", "--index", index.folder, "--device", "cpu",
                      "--nb-errors", nb_errors, "--step", step, "-e", e, "-o", out, LAMBDA, tmp_path / "r.fq")
    assert code == 0, err
    _, records = read_sam(out)
    genome = load_genome(LAMBDA)
    found = defaultdict(list)
    for rec in records:
        if not rec["flag"] & 4:
            check_record(rec, genome, e)
            found[rec["qname"]].append((rec["pos"], "-" if rec["flag"] & 16 else "+"))
    codes = index.reference.codes
    expected = 0
    for name, seq in reads:
        contig, pos, strand, edits = parse_truth(name)
        read = encode(seq.encode())
        if strand == "-":
            read = COMPLEMENT[read[::-1]]
        if edits + seq.count("N") > e or not intact_pattern(read, codes[pos - 1:pos - 1 + len(read)], mask, 7, step,
                                                            nb_errors):
            continue
        expected += 1
        assert any(s == strand and abs(p - pos) <= e for p, s in found[name.split()[0]]), (name, found[name])
    assert expected > 200  # the test sees many reads with an intact pattern


def test_lookups_write_the_same_sam(gkmap, nb_index, tmp_path, monkeypatch):
    """The three look-ups write the same SAM; with verification cut into small chunks (the last one too)."""
    index = nb_index(MEASLES, SPACED, 7)
    reads = READS / "measles_Hm2_HiSeq_R1.fastq.gz"
    texts = []
    for method in ("phf", "binary", "list"):
        if method == "list":
            monkeypatch.setattr(mapping, "VERIFY_CHUNK", 101)
        out = tmp_path / f"{method}.sam"
        code, err = gkmap("map", "--quiet", "--index-kind", "neighbourhood", "--index", index.folder, "--device",
                          "cpu", "--nb-errors", 2, "--lookup", method, "--batch-size", 777, "-o", out, MEASLES, reads)
        assert code == 0, err
        texts.append(without_pg(out))
    assert texts[0] == texts[1] == texts[2]
    assert sum(not line.startswith("@") and line.split("\t")[1] != "4" for line in texts[0]) > 1000


@pytest.mark.parametrize("args,needle", [
    (["--nb-errors", "3"], "--nb-errors must be 0, 1 or 2"),
    (["--step", "0"], "--step must be at least 1"),
    (["--spaced", "##x#"], "--spaced must be"),
    (["--spaced=-###"], "--spaced must be"),
    (["--seed-len", "13"], "--seed-len must be between"),
    (["--nb-len", "17"], "--nb-len must be between"),
    (["--seed-len", "7", "--spaced", SPACED], "disagrees with --spaced"),
    (["--ws", "12"], "--ws is the k-mer index's"),
    (["--pe"], "single-end"),
])
def test_bad_neighbourhood_options_are_one_line_errors(gkmap, tmp_path, args, needle):
    reads = tmp_path / "r.fq"
    reads.write_text("@r\nACGTACGTACGTACGTACGTACGT\n+\nIIIIIIIIIIIIIIIIIIIIIIII\n")
    extra = [reads] if "--pe" in args else []
    code, err = gkmap("map", "--quiet", "--index-kind", "neighbourhood", "--index", tmp_path / "x.nbx",
                      "-o", tmp_path / "o.sam", *args, MEASLES, reads, *extra)
    assert code == 2
    one_line_error(err, needle)
    assert not (tmp_path / "o.sam").exists()


@pytest.mark.parametrize("command,args,needle", [
    ("map", ["--nb-errors", "2"], "--nb-errors needs --index-kind neighbourhood"),
    ("map", ["--lookup", "list"], "--lookup needs --index-kind neighbourhood"),
    ("index", ["--seed-len", "8"], "--seed-len needs --index-kind neighbourhood"),
    ("index", ["--index-kind", "neighbourhood", "--ws", "12"], "--ws is the k-mer index's"),
    ("index", ["--index-kind", "neighbourhood", "--nb-len", "0"], "--nb-len must be between"),
])
def test_flags_of_the_other_kind_are_refused(gkmap, tmp_path, command, args, needle):
    reads = tmp_path / "r.fq"
    reads.write_text("@r\nACGTACGTACGTACGTACGTACGT\n+\nIIIIIIIIIIIIIIIIIIIIIIII\n")
    files = [MEASLES, reads] if command == "map" else [MEASLES]
    code, err = gkmap(command, "--quiet", "--index", tmp_path / "x", *args, *files)
    assert code == 2
    one_line_error(err, needle)


def test_index_format_and_parameters_are_checked(gkmap, tmp_path):
    folder = tmp_path / "m.nbx"
    build_index(MEASLES, seed_mask(6), 5, folder)
    with pytest.raises(UsageError, match="--seed-len 8 asked, but the index"):
        open_index(MEASLES, seed_len=8, index_dir=folder)
    with pytest.raises(UsageError, match="--nb-len 7 asked"):
        open_index(MEASLES, nb_len=7, index_dir=folder)
    assert open_index(MEASLES, seed_len=6, nb_len=5, index_dir=folder).ln == 5
    with pytest.raises(IndexFormatError, match="built from another reference"):
        load_index(LAMBDA, folder)
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps(dict(meta, format_version=99)))
    with pytest.raises(IndexFormatError, match="format version 99"):
        load_index(MEASLES, folder)
    (folder / "meta.json").write_text(json.dumps(dict(meta, kind="kmer")))
    reads = tmp_path / "r.fq"
    reads.write_text("@r\nACGTACGTACGTACGTACGTACGT\n+\nIIIIIIIIIIIIIIIIIIIIIIII\n")
    code, err = gkmap("map", "--quiet", "--index-kind", "neighbourhood", "--index", folder, MEASLES, reads)
    assert code == 1
    one_line_error(err, "a 'kmer' index, not a 'neighbourhood' index")
