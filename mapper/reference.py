"""Reference genome: FASTA (plain, gzip or BGZF) -> one global sequence of 2-bit codes plus a contig table.

Output (`Reference`):
    codes    uint8 [G]   all contigs concatenated in FASTA order, one byte per base, 0..3 = ACGT, 4 = N
                         (any non-ACGT letter; lower case is upper-cased first)
    names    list[str]   contig names (first word of the header line), FASTA order
    starts   int64 [C]   global position of each contig's first base; lengths int64 [C]

Positions are global (0-based into `codes`); `locate()` maps them back to (contig, offset). No padding sits
between contigs: stages that look across a boundary (k-mers, verification windows) clip to the contig.
On disk (in the index folder) the sequence is stored as 2-bit words (16 bases per uint32, first base in
bits 31..30, the layout the kernels read) plus a packed bit mask of N positions.

Plain FASTA is read through pyfaidx with its `.fai` written where the caller says (the index folder, never
beside the input); compressed FASTA is streamed through dnaio/xopen (BGZF is valid gzip).
"""
import hashlib
import os
from dataclasses import dataclass

import dnaio
import numpy as np

from mapper.alphabet import CODE_N, ENCODE, REF_ASCII, pack_2bit, unpack_2bit
from mapper.errors import InputError


@dataclass
class Reference:
    names: list
    starts: np.ndarray
    lengths: np.ndarray
    codes: np.ndarray

    @property
    def ends(self):
        return self.starts + self.lengths

    @property
    def ascii(self):
        """The sequence spelled for edlib (alphabet.REF_ASCII: N never matches a read's N); built once."""
        if getattr(self, "_ascii", None) is None:
            self._ascii = REF_ASCII[self.codes]
        return self._ascii

    def locate(self, positions):
        """Global positions -> (contig index, 0-based offset in that contig), vectorised."""
        contig = np.searchsorted(self.starts, positions, side="right") - 1
        return contig, positions - self.starts[contig]

    def to_arrays(self):
        """The arrays stored in an index folder (see module docstring)."""
        return {"seq2bit": pack_2bit(self.codes), "nmask": np.packbits(self.codes == CODE_N)}

    @classmethod
    def from_arrays(cls, names, lengths, seq2bit, nmask):
        lengths = np.asarray(lengths, dtype=np.int64)
        total = int(lengths.sum())
        codes = unpack_2bit(np.asarray(seq2bit), total)
        codes[np.unpackbits(np.asarray(nmask), count=total).view(bool)] = CODE_N
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        return cls(list(names), starts, lengths, codes)


def require_readable(path):
    """Raise InputError unless `path` is readable (checked before any work starts). Pipes and process
    substitutions (`<(zcat reads.fq.gz)`) are fine; a folder is not."""
    if not os.path.exists(path):
        raise InputError(path, "no such file")
    if os.path.isdir(path):
        raise InputError(path, "is a folder, not a file")
    if not os.access(path, os.R_OK):
        raise InputError(path, "cannot read the file (permission denied)")


def file_checksum(path):
    """BLAKE2b of the file's bytes: identifies the reference an index was built from."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _is_compressed(path):
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _read_plain(path, fai_path):
    import pyfaidx  # here, not at the top: it brings fsspec (~85 ms) that runs loading an index never need
    try:
        fasta = pyfaidx.Fasta(str(path), indexname=str(fai_path), as_raw=True,
                              sequence_always_upper=True, read_long_names=False)
    except (pyfaidx.FastaIndexingError, pyfaidx.FetchError, ValueError) as e:
        raise InputError(path, f"not a valid FASTA file ({e})") from None
    try:
        for name in fasta.keys():
            yield name, fasta[name][:]
    finally:
        fasta.close()


def _read_compressed(path):
    try:
        with dnaio.open(path, fileformat="fasta") as reader:
            for record in reader:
                yield record.name.split(None, 1)[0] if record.name else "", record.sequence
    except dnaio.FileFormatError as e:
        raise InputError(path, f"not a valid FASTA file: {e.args[0]}",
                         line=None if e.line is None else e.line + 1) from None
    except (EOFError, OSError) as e:
        raise InputError(path, f"cannot decompress: {e}") from None


def read_fasta(path, fai_path):
    """Read a FASTA file into a `Reference`. `fai_path` is where pyfaidx may write its index (plain FASTA)."""
    path = os.fspath(path)
    require_readable(path)
    records = _read_compressed(path) if _is_compressed(path) else _read_plain(path, fai_path)
    names, chunks = [], []
    for name, sequence in records:
        if not name:
            raise InputError(path, f"contig {len(names) + 1} has an empty name")
        if not sequence:
            raise InputError(path, f"contig '{name}' is empty")
        names.append(name)
        chunks.append(ENCODE[np.frombuffer(sequence.encode("ascii", "replace"), dtype=np.uint8)])
    if not names:
        raise InputError(path, "no FASTA records found")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InputError(path, f"contig name '{dup}' occurs twice")
    lengths = np.array([len(c) for c in chunks], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return Reference(names, starts, lengths, np.concatenate(chunks))
