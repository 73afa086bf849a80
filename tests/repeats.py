"""Genomes of tandem repeats, shared by the tests of the reporting rule (mapping/test_loci_rule.py) and
of the verifier's records (device/test_cuda_backend.py): reads inside them align with many ends a few
bases apart."""

MOTIFS = ["A", "CA", "TTC", "AAAT", "AAAAT", "TTTCCA"]


def tandem_genome(rng):
    """Two contigs: random flanks around imperfect tandem repeats of periods 1-6, some of them with
    substitutions every few periods (so ends of different distances sit a few bases apart)."""
    contigs = {}
    for name, motifs in (("rep1", MOTIFS[:3]), ("rep2", MOTIFS[3:])):
        parts = []
        for motif in motifs:
            parts.append("".join(rng.choice(list("ACGT"), 300)))
            repeat = list(motif * (400 // len(motif)))
            for k in rng.choice(len(repeat), 6, replace=False):
                repeat[k] = "ACGT"[(("ACGT".index(repeat[k])) + 1) % 4]
            parts.append("".join(repeat))
        parts.append("".join(rng.choice(list("ACGT"), 300)))
        contigs[name] = "".join(parts)
    return contigs
