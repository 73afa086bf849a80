"""mapper.simulate.draw_starts, which the benchmarks' simulated reads start from: uniform over every N-free
window inside one contig, the very draw of rng.choice over all such starts (so a seed gives the reads it
always gave), while reading the genome in pieces (memory bounded whatever its size)."""
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import GENOMES, HONEYBEE, SHIGELLA
from mapper import simulate
from mapper.alphabet import CODE_N, COMPLEMENT, READ_ASCII
from mapper.reference import read_fasta


def every_start(reference, span):
    """The definition, one window at a time on a small genome: N-free and inside one contig."""
    codes, ok = reference.codes, []
    for lo, hi in zip(reference.starts.tolist(), reference.ends.tolist()):
        for s in range(lo, hi - span + 1):
            if not (codes[s:s + span] == CODE_N).any():
                ok.append(s)
    return np.array(ok, dtype=np.int64)


@pytest.fixture(scope="module")
def genomes(tmp_path_factory):
    """Two real genomes with N runs put in (one inside, one near the first contig's end)."""
    folder = tmp_path_factory.mktemp("sim")
    out = {}
    for path in (HONEYBEE, GENOMES / "lambda_phage_NC_001416.1.fa.gz"):
        reference = read_fasta(path, folder / f"{path.name}.fai")
        codes = reference.codes.copy()
        codes[3000:3040] = CODE_N
        codes[int(reference.ends[0]) - 5] = CODE_N
        out[path.name] = SimpleNamespace(codes=codes, starts=reference.starts, ends=reference.ends)
    return out


@pytest.mark.parametrize("chunk", [simulate.CHUNK, 4096, 7])
@pytest.mark.parametrize("span", [102, 9000])
def test_draw_is_rng_choice_over_every_start(genomes, monkeypatch, chunk, span):
    """Pieces of any size (smaller than a window too); windows longer than a contig (the honeybee genome's
    two viruses, about 10 kb each) leave it out; the N runs are skipped."""
    monkeypatch.setattr(simulate, "CHUNK", chunk)
    for name, reference in genomes.items():
        starts = every_start(reference, span)
        assert len(starts) > 1000, name
        want = np.random.default_rng(5).choice(starts, size=5000)
        got = simulate.draw_starts(reference, span, 5000, np.random.default_rng(5))
        assert (got == want).all(), name


def test_no_window_to_draw_from(genomes):
    reference = genomes[HONEYBEE.name]
    with pytest.raises(ValueError, match="no N-free window of 20000 bases"):
        simulate.draw_starts(reference, 20000, 10, np.random.default_rng(1))
    assert len(simulate.draw_starts(reference, 20000, 0, np.random.default_rng(1))) == 0


def test_simulated_reads_hold_their_truth(tmp_path):
    """The reads still start where their names say (on Shigella's two contigs)."""
    reference = read_fasta(SHIGELLA, tmp_path / "s.fai")
    checked = 0
    for name, seq in simulate.simulate(reference, 300, 100, seed=3):
        contig, pos, strand, edits = simulate.parse_truth(name)
        if edits == 0:
            at = int(reference.starts[reference.names.index(contig)]) + pos - 1
            window = reference.codes[at:at + 100]
            assert READ_ASCII[window if strand == "+" else COMPLEMENT[window[::-1]]].tobytes().decode() == seq
            checked += 1
    assert checked > 50
