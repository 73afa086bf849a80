"""FASTA/FASTQ (plain or gzip) -> uint8 code arrays of bounded size, for k-mer extraction.

Out: a stream of code arrays (mapper.alphabet: A=0, C=1, G=2, T=3, 4 = N or any other letter, either case).
Records are joined with one N between them, so no k-mer spans two records (nor two files). A chunk
holds whole records up to about `chunk_bases`; a longer record (a chromosome) is cut into pieces that
overlap by k - 1 bases, so every k-mer lies wholly inside exactly one piece.

Parsing is dnaio's (C, records read in batches, never a whole file as Python objects); its format errors
become one-line InputErrors naming the file and line. An empty file is valid input and holds no k-mers
(as for jellyfish).
"""
import os

import dnaio
import numpy as np

from mapper.alphabet import ENCODE
from mapper.errors import InputError


def _pieces(codes, k, chunk_bases):
    if len(codes) <= chunk_bases:
        yield codes
        return
    step = max(chunk_bases - (k - 1), 1)
    for start in range(0, len(codes) - (k - 1), step):
        yield codes[start:start + step + k - 1]


def _codes(sequences):
    return ENCODE[np.frombuffer("\n".join(sequences).encode("ascii"), dtype=np.uint8)]


def _records(path):
    """The sequences of one file, as str, with dnaio's errors turned into InputErrors."""
    if not os.path.isfile(path):
        raise InputError(path, "no such file")
    try:
        if os.path.getsize(path) == 0:
            return
        with dnaio.open(path) as reader:
            for record in reader:
                yield record.sequence
    except dnaio.exceptions.UnknownFileFormat:
        raise InputError(path, "neither FASTA nor FASTQ (expected '>' or '@' at the start)") from None
    except dnaio.FileFormatError as e:
        line = None if e.line is None else e.line + 1
        raise InputError(path, e.message.rstrip("."), line=line) from None
    except (EOFError, UnicodeDecodeError, OSError) as e:
        raise InputError(path, f"truncated or unreadable file ({e})") from None


def code_chunks(paths, k, chunk_bases):
    """Yield uint8 code arrays covering every record of every file in `paths`, in order."""
    for path in paths:
        batch, size = [], 0
        for sequence in _records(os.fspath(path)):
            batch.append(sequence)
            size += len(sequence) + 1
            if size >= chunk_bases:
                yield from _pieces(_codes(batch), k, chunk_bases)
                batch, size = [], 0
        if batch:
            yield from _pieces(_codes(batch), k, chunk_bases)
