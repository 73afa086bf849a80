"""`gkmap filter`: output format and order, the published program's files, --truth, bad input, atomic output."""
import numpy as np
import pytest

from filter_common import PAIRS_DIR, shared_set, shared_truth


def read_columns(path):
    return np.loadtxt(path, dtype=np.int64, ndmin=2)


def test_faithful_output_is_the_published_output(gkmap, tmp_path, device):
    out = tmp_path / "out.tsv"
    code, err = gkmap("filter", PAIRS_DIR / "shigella_ERR6005894_L150.pairs.txt", "-e", 6,
                      "--filter", "gatekeeper-faithful",
                      "--device", device, "-o", out, "--gatekeeper-files")
    assert code == 0, err
    _, table = shared_set("shigella_ERR6005894_L150")
    np.testing.assert_array_equal(read_columns(out), table[:, 12:14])
    decisions = read_columns(tmp_path / "gateKeeperGPU_1G_filter_output_err6.txt")[:, 0]
    edits = read_columns(tmp_path / "gateKeeperGPU_1G_edit_output_err6.txt")[:, 0]
    np.testing.assert_array_equal(decisions, table[:, 12])
    np.testing.assert_array_equal(edits, table[:, 13])
    assert "3000 pairs" in err and f"{int(table[:, 12].sum())} accepted" in err
    assert f"{int((table[:, 13] == -2).sum())} undefined" in err
    assert "kernel" in err and "filter" in err


def test_truth_counts(gkmap, tmp_path):
    out = tmp_path / "out.tsv"
    name = "ERR240727_1_E2"
    code, err = gkmap("filter", PAIRS_DIR / f"{name}.pairs.txt", "-e", 4, "--filter", "gatekeeper-faithful", "--truth",
                      "--device", "cpu", "-o", out)
    assert code == 0, err
    cols = read_columns(out)
    truth = shared_truth(name)
    np.testing.assert_array_equal(cols[:, 2], truth)
    false_accepts = int(((cols[:, 0] == 1) & (truth > 4)).sum())
    assert f"{int((truth <= 4).sum())} within e, {false_accepts} false accepts, 0 false rejects" in err


def test_mixed_lengths_crlf_and_last_line_without_newline(gkmap, tmp_path):
    """Lines of several lengths, global (equal lengths) and window (longer column 1) lines, in input order."""
    read = "ACGTTGCAAGCTTAGCCGATAGGCTAACGT"
    lines = [read + "\t" + read,                            # equal: 0 edits
             "GG" + read + "TT\t" + read,                   # window with flanks: 0 edits
             read[:10] + "T" + read[11:] + "\t" + read,     # one substitution
             "ACGTA\tACGTC",                                # short, one substitution
             read[::-1] + "\t" + read]                      # far
    path = tmp_path / "pairs.txt"
    path.write_bytes("\r\n".join(lines).encode())
    out = tmp_path / "out.tsv"
    code, err = gkmap("filter", path, "-e", 1, "--device", "cpu", "-o", out)
    assert code == 0, err
    assert read_columns(out).tolist() == [[1, 0], [1, 0], [1, 1], [1, 1], [0, -1]]


BAD = [(b"ACGT\tACGT\nACGTACGT\n", 2, "tab"),
       (b"ACGT\tACGT\nACGT\tAC\tGT\n", 2, "tab"),
       (b"ACGT\tACGT\n\tACGT\n", 2, "empty"),
       (b"ACGT\tACGT\nACGT\tACGT\n\nACGT\tACGT\n", 3, "tab"),
       (b"ACGT\tACGT\r\nAC GT\tACGT\n", 2, "letter"),
       (b"ACGT\tACGT\nACGT\tAC\rGT\n", 2, "letter"),
       (b"ACGT\tACG7\n", 1, "letter"),
       (b"ACGT\tACGT\nACG\tACGT\n", 2, "at least as long")]


@pytest.mark.parametrize("text,line,what", BAD)
def test_bad_line_names_its_line(gkmap, tmp_path, text, line, what):
    path = tmp_path / "pairs.txt"
    path.write_bytes(text)
    out = tmp_path / "out.tsv"
    code, err = gkmap("filter", path, "-e", 1, "--device", "cpu", "-o", out)
    assert code == 1
    assert err.count("\n") == 1 and f"line {line}" in err and what in err, err
    assert not out.exists() and not list(tmp_path.glob(".out.tsv*"))


def test_faithful_needs_equal_lengths(gkmap, tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_bytes(b"ACGTACGTACGTACGTACGT\tACGTACGTACGTACGTACGT\nGGACGTACGTACGTACGTACGT\tACGTACGTACGTACGTACGT\n")
    code, err = gkmap("filter", path, "-e", 1, "--filter", "gatekeeper-faithful", "--device", "cpu")
    assert code == 1 and "line 2" in err and "equal length" in err


@pytest.mark.parametrize("args,flag", [(("-e", "-1"), "-e"), (("-e", "33", "--filter", "gatekeeper-faithful"), "-e"),
                                       (("-e", "2", "--device", "tpu"), "--device")])
def test_usage_errors(gkmap, tmp_path, args, flag):
    path = tmp_path / "pairs.txt"
    path.write_bytes(b"ACGT\tACGT\n")
    code, err = gkmap("filter", path, *args)
    assert code == 2 and flag in err


def test_missing_input(gkmap, tmp_path):
    code, err = gkmap("filter", tmp_path / "nope.txt", "-e", 1)
    assert code == 1 and "nope.txt" in err


def test_empty_input(gkmap, tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_bytes(b"")
    out = tmp_path / "out.tsv"
    code, err = gkmap("filter", path, "-e", 1, "--device", "cpu", "-o", out)
    assert code == 0 and out.read_bytes() == b"" and "0 pairs" in err


def test_old_mode_names_still_work(gkmap, tmp_path):
    """--mode improved|faithful (before gkmap map's --filter names were the filter command's too): the same
    decisions as --filter gatekeeper|gatekeeper-faithful, with one warning."""
    path = PAIRS_DIR / "shigella_ERR6005894_L150.pairs.txt"
    outs = []
    for k, args in enumerate((("--mode", "faithful"), ("--filter", "gatekeeper-faithful"))):
        out = tmp_path / f"{k}.tsv"
        code, err = gkmap("filter", path, "-e", 6, *args, "--device", "cpu", "-o", out)
        assert code == 0, err
        assert ("--mode faithful is --filter gatekeeper-faithful now" in err) == (k == 0)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0]
