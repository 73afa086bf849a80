"""gkmap's Python API: what `import mapper` offers (mapper/__init__.py re-exports these names).

    build_index(reference)        build the k-mer index of a FASTA (what `gkmap index` does)
    open_index(reference)         load it, building it first where there is none (what `gkmap map` does)
    map_reads(MapOptions(...))    a whole `gkmap map` run: files in, SAM (or the paired outputs) out
    map_records(reference, reads) every record of single-end reads as `Record`s, in input order, no file

`map_records` runs the same job as the command (mapper/jobs.py) batch by batch in this process and parses
the records it renders, so a script gets exactly the SAM's loci; it turns each record into a Python object,
which costs about as much as mapping on a GPU: use `map_reads` for big read sets.
"""
import contextlib
from dataclasses import dataclass
from typing import Iterator, Optional

from mapper.index import DEFAULT_WS
from mapper.index import build_index as _build_index
from mapper.index import open_index
from mapper.jobs import SingleEndJob
from mapper.options import MapOptions
from mapper.runners import map_reads

__all__ = ["Record", "MapOptions", "build_index", "open_index", "map_reads", "map_records"]


def build_index(reference: str, ws: int = DEFAULT_WS, index_dir: Optional[str] = None, device: str = "cpu"):
    """Build (or rebuild) the k-mer index of FASTA `reference` with k = `ws` into `index_dir` (default: the
    folder `gkmap index` uses); `device` "cuda" builds it on the GPU. Returns the loaded index."""
    return _build_index(str(reference), ws, index_dir, device)


@dataclass(frozen=True)
class Record:
    """One SAM record, as gkmap wrote it. `pos` is 1-based (0 when unmapped); `tags` maps a tag name to its
    value (int for `i` tags, str otherwise): NM, MD, AS, XS, NH, HI and RG (README, "MAPQ and tags")."""
    name: str
    flag: int
    contig: Optional[str]
    pos: int
    mapq: int
    cigar: str
    sequence: str
    quality: str
    tags: dict

    @property
    def is_mapped(self) -> bool:
        return not self.flag & 4

    @property
    def is_reverse(self) -> bool:
        return bool(self.flag & 16)

    @property
    def is_secondary(self) -> bool:
        return bool(self.flag & 256)

    @property
    def edits(self) -> Optional[int]:
        """The alignment's edit distance (NM), None for an unmapped read."""
        return self.tags.get("NM")

    @classmethod
    def from_sam(cls, line: str) -> "Record":
        name, flag, contig, pos, mapq, cigar, _, _, _, seq, qual, *tags = line.split("\t")
        values = {}
        for tag in tags:
            key, kind, value = tag.split(":", 2)
            values[key] = int(value) if kind == "i" else value
        return cls(name, int(flag), None if contig == "*" else contig, int(pos), int(mapq), cigar, seq, qual,
                   values)


def map_records(reference: str, reads: str, e: Optional[int] = None, **options) -> Iterator[Record]:
    """Map single-end `reads` (FASTQ/FASTA, plain or gzip) to `reference` and yield every SAM record in
    input order: each read's loci within `e` edits (default: ceil(0.04 x read length) per read), primary
    first, or one unmapped record. `options` are MapOptions fields (device, index_dir, best, max_records,
    filter, batch_size, ...); the index is built first where there is none."""
    opts = MapOptions(str(reference), str(reads), e=e, quiet=True, **options).check()
    if opts.paired or opts.distributed:
        raise ValueError("map_records maps single-end reads in this process; use map_reads for paired or Dask runs")
    job = SingleEndJob(opts)
    counters = job.open()
    with contextlib.closing(job.inputs()) as batches:
        for batch in batches:
            text = job.render(job.map(batch, counters), counters)["sam"]
            yield from map(Record.from_sam, text.splitlines())
