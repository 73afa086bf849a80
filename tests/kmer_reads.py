"""What the k-mer tests (test_kmers.py, test_kmers_gpu.py) share: read sets that look like users' reads."""
import numpy as np


def user_fastq(seed, genome_length, n, length, n_every, n_count, lower_every, lower_upto, qual):
    """FASTQ text of `n` reads of `length` drawn from a random genome, every `n_every`-th with `n_count` Ns,
    every `lower_every`-th lower case in its first `lower_upto` bases, then one read 12,000 times over
    (k-mers counted above 10,000)."""
    rng = np.random.default_rng(seed)
    genome = rng.choice(np.frombuffer(b"ACGT", dtype=np.uint8), genome_length)
    reads = []
    for i in range(n):
        start = int(rng.integers(0, len(genome) - length))
        seq = genome[start:start + length].copy()
        if i % n_every == 0:
            seq[rng.integers(0, length, n_count)] = ord("N")
        if i % lower_every == 0:
            seq[:lower_upto] |= 0x20
        reads.append(seq.tobytes())
    reads += [genome[:length].tobytes()] * 12000
    return b"".join(b"@r%d\n%s\n+\n%s\n" % (i, seq, qual * len(seq)) for i, seq in enumerate(reads))


def half_repeated_fasta(path, seed, length):
    """FASTA records of 300 random bases cut from one sequence of `length` whose third quarter repeats its
    first: about 0.75 `length` distinct k-mers, those of the first quarter seen twice, far apart (in two
    runs when the buffer holds a small part of the file). For the tests of the merges of several runs."""
    sequence = np.random.default_rng(seed).choice(list("ACGT"), length)
    quarter = length // 4
    sequence[2 * quarter:3 * quarter] = sequence[:quarter]
    path.write_text("".join(f">r{i}\n{''.join(sequence[i:i + 300])}\n" for i in range(0, length, 300)))
    return path
