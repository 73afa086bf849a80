"""The cuda backend writes the cpu backend's SAM byte for byte (the @PG line aside), with every filter,
on the shared real read sets; and the run summary proves verification ran on the GPU."""
import pytest

from cli_checks import without_pg
from conftest import HONEYBEE, MEASLES, READS, SHIGELLA

pytestmark = pytest.mark.gpu

SETS = [
    (MEASLES, READS / "measles_Hm2_HiSeq_R1.fastq.gz"),
    (SHIGELLA, READS / "shigella_dysenteriae_ERR6005894_R1.fastq.gz"),
    (HONEYBEE, READS / "honeybee_virus_SRR059298_GAII_subset.fastq.gz"),
]


@pytest.mark.parametrize("genome,reads", SETS, ids=["measles", "shigella", "honeybee"])
@pytest.mark.parametrize("filt", ["none", "gatekeeper", "gatekeeper-faithful"])
def test_cuda_sam_equals_cpu(gkmap, index_dir, tmp_path, genome, reads, filt):
    outs = {}
    for device in ("cpu", "cuda"):
        outs[device] = tmp_path / f"{device}.sam"
        code, err = gkmap("map", "--device", device, "--filter", filt, "--index", index_dir(genome),
                          "-o", outs[device], genome, reads)
        assert code == 0, err
        if device == "cuda":
            assert "seed: cuda" in err and "verify: cuda" in err and (filt == "none" or "filter: cuda" in err), err
            print(err.strip().splitlines()[-1])
    assert without_pg(outs["cpu"]) == without_pg(outs["cuda"])
