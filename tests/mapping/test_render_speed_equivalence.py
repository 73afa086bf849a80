"""The host rendering (the numpy align.describe + sam.batch_records, and the compiled kernels/render.cu) against
slow, obvious per-mapping and per-record versions of the same rules, on real reads: the CIGAR/MD of the
co-optimal alignment the rule picks, and the SAM text must be the same, byte for byte.

The per-mapping alignment here is a plain (unbanded) global DP traced back from the end preferring a diagonal
step, then an insertion, then a deletion: on a path of cost <= K no cell or neighbour that it compares lies
outside align.py's band, so both pick the same alignment."""
import dataclasses

import numpy as np
import pytest

from conftest import HONEYBEE, READS, SHIGELLA
from mapper import sam_kernel
from mapper.align import describe
from mapper.alphabet import CODE_N, MD_ASCII
from mapper.backends.cpu import CpuBackend
from mapper.index import load_index
from mapper.pipeline import Counters, find_mappings
from mapper.reads import ReadBatch, read_batches
from mapper.render import batch_loci, cap_records, render
from mapper.sam import FLAG_REVERSE, FLAG_SECONDARY, FLAG_UNMAPPED, value_texts
from mapper.verify import _sort_order, select_loci


def slow_alignment(read, span, edits):
    """(CIGAR, MD, NM) of one mapping by align.py's rule, one DP cell row and one traceback step at a time."""
    L, W = len(read), len(span)
    differs = (read[:, None] != span[None, :]) | (read[:, None] == CODE_N)
    if W == L and differs[np.arange(L), np.arange(L)].sum() == edits:
        ops = ["X" if d else "=" for d in differs[np.arange(L), np.arange(L)]]
    else:
        D = np.zeros((L + 1, W + 1), dtype=np.int64)
        D[0] = np.arange(W + 1)
        j = np.arange(W + 1)
        for i in range(1, L + 1):
            row = np.empty(W + 1, dtype=np.int64)
            row[0] = i
            row[1:] = np.minimum(D[i - 1, :-1] + differs[i - 1], D[i - 1, 1:] + 1)
            D[i] = np.minimum.accumulate(row - j) + j
        i, k, ops = L, W, []
        while i > 0 or k > 0:
            if i > 0 and k > 0 and D[i, k] == D[i - 1, k - 1] + differs[i - 1, k - 1]:
                ops.append("X" if differs[i - 1, k - 1] else "=")
                i, k = i - 1, k - 1
            elif i > 0 and D[i, k] == D[i - 1, k] + 1:
                ops.append("I")
                i -= 1
            else:
                ops.append("D")
                k -= 1
        ops.reverse()
    md, nm, matches, k, previous = "", 0, 0, 0, None
    for op in ops:
        letter = chr(MD_ASCII[span[min(k, W - 1)]])
        if op == "=":
            matches += 1
        elif op == "X":
            md, matches = md + f"{matches}{letter}", 0
        elif op == "D":
            md, matches = md + (letter if previous == "D" else f"{matches}^{letter}"), 0
        nm += op != "="
        k += op != "I"
        previous = op
    runs = []
    for op in ops:
        kind = "M" if op in "=X" else op
        if runs and runs[-1][0] == kind:
            runs[-1][1] += 1
        else:
            runs.append([kind, 1])
    return "".join(f"{n}{kind}" for kind, n in runs), md + str(matches), nm


def slow_describe(rows, loci, reference):
    out = ([], [], [])
    for row, start, end, edits in zip(loci.row.tolist(), loci.start.tolist(), loci.end.tolist(),
                                      loci.edits.tolist()):
        read = rows.codes[rows.start[row]:rows.start[row] + rows.length[row]]
        for column, value in zip(out, slow_alignment(read, reference.codes[start:end], edits)):
            column.append(value)
    return out


def slow_mapq(edits, e):
    """The README's MAPQ of a read's primary record and its XS tag, from the edits of every locus found
    (sorted): 0 on a tie for the fewest edits, else 20 per edit of gap to the second-best (e + 1 when
    there is none), at most 60."""
    if not edits:
        return 0, ""
    edits = sorted(edits)
    second = edits[1] if len(edits) > 1 else e + 1
    return min(60, 20 * (second - edits[0])), f"\tXS:i:{-edits[1]}" if len(edits) > 1 else ""


def slow_records(batch, reference, read, strand, loci, cigars, mds, nms, nh, found_edits, e, read_group=None):
    """One f-string per record, as sam.py built them before. `found_edits`: per read, the edits of every
    locus found (before any cap); `e`: each read's threshold."""
    rg = "" if read_group is None else f"\tRG:Z:{read_group}"
    seq = batch.seq.tobytes().decode()
    qual = None if batch.qual is None else batch.qual.tobytes().decode()
    flip = str.maketrans("ACGTRYKMBVDHN", "TGCAYRMKVBHDN")
    lines, k = [], 0
    for r in range(len(batch)):
        a, b = batch.starts[r], batch.starts[r + 1]
        forward = (seq[a:b] or "*", "*" if qual is None else qual[a:b] or "*")
        if nh[r] == 0:
            lines.append(f"{batch.names[r]}\t{FLAG_UNMAPPED}\t*\t0\t0\t*\t*\t0\t0\t{forward[0]}\t{forward[1]}{rg}")
        first, hit = True, 1
        mapq, xs = slow_mapq(found_edits[r], int(e[r]))
        while k < len(read) and read[k] == r:
            s, c = int(strand[k]), int(loci.contig[k])
            text = (seq[a:b][::-1].translate(flip) or "*", "*" if qual is None else qual[a:b][::-1] or "*") if s \
                else forward
            flag = s * FLAG_REVERSE + (not first) * FLAG_SECONDARY
            pos = loci.start[k] - reference.starts[c] + 1
            lines.append(f"{batch.names[r]}\t{flag}\t{reference.names[c]}\t{pos}\t{mapq if first else 0}\t"
                         f"{cigars[k]}\t*\t0\t0\t{text[0]}\t{text[1]}\tNM:i:{nms[k]}\tMD:Z:{mds[k]}\t"
                         f"AS:i:{-nms[k]}{xs}\tNH:i:{nh[r]}\tHI:i:{hit}{rg}")
            first, k, hit = False, k + 1, hit + 1
    return "".join(line + "\n" for line in lines)


def trimmed(batch, rng):
    """The batch with each read cut to a random length (some to nothing, some kept whole)."""
    keep = np.minimum(np.diff(batch.starts), rng.integers(0, 2 * np.diff(batch.starts).max(), len(batch)))
    keep[rng.random(len(batch)) < 0.02] = 0
    starts = np.concatenate([[0], np.cumsum(keep)])
    take = np.concatenate([np.arange(a, a + n) for a, n in zip(batch.starts[:-1].tolist(), keep.tolist())])
    return ReadBatch(batch.names, batch.seq[take], batch.qual[take], starts, batch.first)


@pytest.fixture(scope="module")
def mapped(index_dir):
    """(reference, batch, rows, maps) of real reads: Shigella 150 bp and R2 reads trimmed
    to mixed lengths (default e), honeybee 72 bp with e = 8 (many gapped mappings)."""
    out = []
    for genome, reads, e, cut in ((SHIGELLA, "shigella_dysenteriae_ERR6005894_R1.fastq.gz", None, False),
                                  (SHIGELLA, "shigella_dysenteriae_ERR6005894_R2.fastq.gz", None, True),
                                  (HONEYBEE, "honeybee_virus_SRR059298_GAII_subset.fastq.gz", 8, False)):
        index = load_index(genome, index_dir(genome))
        batch = next(read_batches(READS / reads, 1500))
        if cut:
            batch = trimmed(batch, np.random.default_rng(3))
        rows, maps = find_mappings(batch, index, CpuBackend(), None, e, reads, Counters())
        out.append((index.reference, batch, rows, maps))
    return out


def test_select_loci_ignores_the_order_of_mappings(mapped):
    """The reporting rule itself is checked against exhaustive verification in tests/mapping/test_loci_rule.py;
    here: the mappings' order (the GPU writes them in any order) never changes what is reported."""
    for reference, _, rows, maps in mapped:
        shuffled = maps.take(np.random.default_rng(1).permutation(len(maps)))
        got, want = select_loci(rows, shuffled, reference), select_loci(rows, maps, reference)
        assert all(np.array_equal(getattr(got, f), getattr(want, f)) for f in ("row", "contig", "start", "end", "edits"))


def test_sort_order_packed_and_lexsort_agree():
    rng = np.random.default_rng(2)
    small = [rng.integers(0, 5, 3000), rng.integers(0, 2, 3000), rng.integers(0, 10 ** 9, 3000) // 1000]
    assert np.array_equal(_sort_order(*small), np.lexsort(small[::-1]))
    huge = [rng.integers(0, 4, 3000) * 10 ** 12, rng.integers(0, 3, 3000), rng.integers(0, 4, 3000) * 10 ** 9]
    assert np.array_equal(_sort_order(*huge), np.lexsort(huge[::-1]))


def test_describe_picks_the_rules_alignment(mapped):
    gapped = 0
    for reference, batch, rows, maps in mapped:
        loci = select_loci(rows, maps, reference)
        got = describe(rows, loci, reference)
        assert got == slow_describe(rows, loci, reference)
        assert all(type(v) is str for v in got[0] + got[1]) and all(type(v) is int for v in got[2])
        gapped += sum(not c.endswith("M") or not c[:-1].isdigit() for c in got[0])
    assert gapped > 100


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "compiled"])
@pytest.mark.parametrize("best,max_records", [(False, None), (True, None), (False, 2)])
def test_sam_text_equals_per_record_formatting(mapped, best, max_records, compiled):
    """Both renderers (the numpy one, and kernels/render.cu where a compiler is) against the slow oracle."""
    if compiled and not sam_kernel.available():
        pytest.skip("no C++ compiler for the host kernels")
    for reference, batch, rows, maps in mapped:
        for reads in (batch, dataclasses.replace(batch, qual=None)):
            found = batch_loci(rows, maps, len(reads), reference)
            loci, read, strand = cap_records(found, best, max_records)
            cigars, mds, nms = slow_describe(rows, loci, reference)
            found_edits = [[] for _ in range(len(reads))]
            for r, edits in zip(found.read.tolist(), found.loci.edits.tolist()):
                found_edits[r].append(edits)
            want = slow_records(reads, reference, read, strand, loci, cigars, mds, nms, found.nh, found_edits, rows.e,
                                "grp 1")
            assert render(reads, rows, maps, reference, best, max_records, False, "grp 1",
                          compiled=compiled).sam == want
            assert len(loci) and (found.nh == 0).any()


@pytest.mark.parametrize("top", [30, 10 ** 7])
def test_value_texts_format_each_value(top):
    """FLAG+RNAME, NM and NH texts by value, over a small range (counted) and a wide one (sorted)."""
    values = np.random.default_rng(top).integers(0, top, 500)
    assert value_texts(values, "<{}>".format).tolist() == [f"<{v}>" for v in values.tolist()]
