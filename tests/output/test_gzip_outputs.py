"""--unmapped and --dump-candidates paths ending in .gz are written gzip-compressed (the same text as the
plain files of the same run, inline or through render processes, whose texts come as files); -o ending in
.gz (SAM) is refused with one line that says what to do instead, and writes nothing."""
import gzip

import pytest

from cli_checks import one_line_error
from conftest import MEASLES, READS

R1 = READS / "measles_Hm2_HiSeq_R1.fastq.gz"


@pytest.mark.parametrize("extra", [(), ("-t", "2", "--batch-size", "200")])
def test_gzip_named_outputs_hold_the_plain_text(gkmap, index_dir, tmp_path, extra):
    """`-t 2 --batch-size 200`: render processes, whose unmapped texts reach the writer as files."""
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    for folder, suffix in ((plain, ""), (packed, ".gz")):
        folder.mkdir()
        code, err = gkmap("map", "--quiet", "--device", "cpu", "--index", index_dir(MEASLES), *extra,
                          "--unmapped", folder / f"un.fq{suffix}", "--dump-candidates", folder / f"c.txt{suffix}",
                          "-o", folder / "out.sam", MEASLES, R1)
        assert code == 0, err
    for name in ("un.fq", "c.txt"):
        text = (plain / name).read_bytes()
        assert text.count(b"\n") > 100
        assert (packed / f"{name}.gz").read_bytes()[:2] == b"\x1f\x8b"
        assert gzip.decompress((packed / f"{name}.gz").read_bytes()) == text
    assert sorted(p.name for p in packed.iterdir()) == ["c.txt.gz", "out.sam", "un.fq.gz"]


def test_gzip_sam_is_refused(gkmap, index_dir, tmp_path):
    out = tmp_path / "out.sam.gz"
    code, err = gkmap("map", "--index", index_dir(MEASLES), "-o", out, MEASLES, R1)
    assert code == 2
    one_line_error(err, "out.sam.gz", "BAM", "bgzip")
    assert not out.exists() and list(tmp_path.iterdir()) == []
