"""Mapping options: every default lives here, `--help` shows these values, and `check()` validates a
whole option set once, naming the flag at fault."""
import re
from dataclasses import dataclass

from mapper.cores import usable_cores
from mapper.device import DEVICES
from mapper.errors import UsageError

MAX_E = 25
FILTERS = ("none", "gatekeeper", "gatekeeper-faithful")
PAIRED = {"pe": "FR", "mp": "RF"}  # --pe: Illumina paired-end (mates face each other); --mp: mate pair
INDEX_KINDS = ("kmer", "neighbourhood")
LOOKUPS = ("phf", "binary", "list")
OUTPUT_FORMATS = ("sam", "bam")  # neighbourhood look-ups (mapper/neighbourhood/lookup.py)


@dataclass
class MapOptions:
    reference: str
    reads: str
    e: int = None               # None: per read, ceil(0.04 * length) (mrFAST's rule)
    ws: int = None              # None: the index's (12 when building)
    filter: str = "none"
    device: str = "auto"
    output: str = None          # None: stdout
    unmapped: str = None
    dump_candidates: str = None  # write the candidate pairs before the filter (pair format)
    best: bool = False
    max_records: int = None     # -n
    index_dir: str = None
    batch_size: int = 100_000
    gpu_memory: int = None      # --gpu-memory: device bytes the run may take (None: no bound but the GPU)
    memory: int = 2 << 30       # --memory: host bytes a batch's buffers may take on the cpu backend
    threads: int = None         # -t: host processes rendering CIGAR/MD and SAM (None: the cores but one, at most 16)
    quiet: bool = False
    command_line: str = "gkmap map"
    paired: str = None          # None (single-end), "pe" or "mp" (PAIRED)
    reads2: str = None          # the R2 file of --pe / --mp
    min_insert: int = None      # --min / --max: TLEN range of a concordant pair (None: estimated)
    max_insert: int = None
    max_oea: int = 100          # --maxoea: an anchor with more loci is left out of OUT_OEA.sam (mrFAST's)
    max_dis: int = 300          # --maxdis: at most this many DIVET lines per read pair (mrFAST's)
    gpus: object = None         # --gpus: a number of GPUs of this host, or "auto" (every visible GPU)
    scheduler: str = None       # --scheduler: address of a Dask scheduler
    local_cluster: int = None   # --local-cluster: this many local worker processes
    chunk_reads: int = None     # --chunk-reads: reads per task of a distributed run (None: batch_size)
    index_kind: str = "kmer"    # --index-kind: kmer (mapper/index.py) or neighbourhood (mapper/neighbourhood/)
    seed_len: int = None        # --seed-len, --nb-len, --spaced: the neighbourhood index's (8, 7, none when building)
    nb_len: int = None
    spaced: str = None
    nb_errors: int = 1          # --nb-errors: substitutions allowed in a pattern's neighbourhood (0..2)
    step: int = 1               # --step: read offset between two patterns (delta)
    lookup: str = "phf"         # --lookup: phf, binary or list
    read_group: str = None      # -R: the @RG line as given ('\t' escapes, bwa's -R)
    secondary_seq: bool = True  # False (--no-secondary-seq): SEQ and QUAL '*' on secondary records
    comments: tuple = ()        # --comment: @CO texts
    output_format: str = None   # --output-fmt: "sam" or "bam" (None: BAM when -o ends in .bam, else SAM)
    sort: bool = False          # --sort: coordinate-sorted BAM
    sort_memory: int = 768 << 20  # --sort-memory: bytes of records --sort holds before it spills a run

    def host_workers(self):
        """Processes rendering SAM text (mapper/render.py): -t, or every core this process may use but one
        (the main process parses reads and drives the mapping core)."""
        if self.threads is not None:
            return self.threads
        cores = usable_cores()
        return max(1, cores - 1)

    @property
    def read_group_line(self):
        """The @RG header line of -R (escapes turned into tabs), or None."""
        return None if self.read_group is None else read_group_line(self.read_group)[0]

    @property
    def read_group_id(self):
        """The ID of -R's read group (RG:Z on every record), or None."""
        return None if self.read_group is None else read_group_line(self.read_group)[1]

    @property
    def bam(self):
        """Whether the records go out as BAM (mapper/bam.py)."""
        if self.output_format is not None:
            return self.output_format == "bam"
        return self.output is not None and self.output.endswith(".bam")

    @property
    def distributed(self):
        """True when the run is spread over Dask workers (mapper/runners/cluster.py)."""
        return (self.gpus, self.scheduler, self.local_cluster) != (None, None, None)

    def check(self):
        if self.e is not None and not 0 <= self.e <= MAX_E:
            raise UsageError(f"-e must be between 0 and {MAX_E}, not {self.e}")
        if self.filter not in FILTERS:
            raise UsageError(f"--filter must be one of {', '.join(FILTERS)}, not {self.filter!r}")
        if self.device not in DEVICES:
            raise UsageError(f"--device must be one of {', '.join(DEVICES)}, not {self.device!r}")
        if self.max_records is not None and self.max_records < 1:
            raise UsageError(f"-n must be at least 1, not {self.max_records}")
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"--threads must be at least 1, not {self.threads}")
        if self.batch_size < 1:
            raise UsageError(f"--batch-size must be at least 1, not {self.batch_size}")
        if self.gpu_memory is not None and self.device == "cpu":
            raise UsageError("--gpu-memory is for the cuda backend, not --device cpu")
        if self.read_group is not None:
            read_group_line(self.read_group)
        if self.output_format not in (None, *OUTPUT_FORMATS):
            raise UsageError(f"--output-fmt must be one of {', '.join(OUTPUT_FORMATS)}, not {self.output_format!r}")
        if self.sort and not self.bam:
            raise UsageError("--sort writes a coordinate-sorted BAM: add --output-fmt bam or an -o ending in .bam")
        if not self.bam and self.output is not None and str(self.output).endswith(".gz"):
            raise UsageError(f"-o {self.output}: gkmap does not write gzip-compressed SAM; write BAM (-o "
                             f"{str(self.output)[:-3].removesuffix('.sam')}.bam) or pipe the SAM: -o - | bgzip > "
                             f"{self.output}")
        if self.memory < 1 << 20:
            raise UsageError(f"--memory must be at least 1M, not {self.memory} bytes")
        if self.sort_memory < 1 << 20:
            raise UsageError(f"--sort-memory must be at least 1M, not {self.sort_memory} bytes")
        for text in self.comments:
            if _CONTROL.search(text):
                raise UsageError(f"--comment {text!r} has a tab, a line break or another control character: "
                                 f"an @CO line is one line of text")
        self._check_paired()
        self._check_cluster()
        self._check_neighbourhood()
        return self

    def _check_neighbourhood(self):
        if self.index_kind not in INDEX_KINDS:
            raise UsageError(f"--index-kind must be one of {', '.join(INDEX_KINDS)}, not {self.index_kind!r}")
        given = [flag for flag, value, default in (
            ("--seed-len", self.seed_len, None), ("--nb-len", self.nb_len, None), ("--spaced", self.spaced, None),
            ("--nb-errors", self.nb_errors, 1), ("--step", self.step, 1), ("--lookup", self.lookup, "phf"))
            if value != default]
        if self.index_kind == "kmer":
            if given:
                raise UsageError(f"{given[0]} needs --index-kind neighbourhood")
            return
        if self.ws is not None:
            raise UsageError("--ws is the k-mer index's; the neighbourhood index takes --seed-len and --nb-len")
        if self.paired is not None or self.distributed:
            raise UsageError("--index-kind neighbourhood maps single-end reads in one process (no --pe/--mp, "
                             "--gpus, --scheduler or --local-cluster yet)")
        if self.nb_errors not in (0, 1, 2):
            raise UsageError(f"--nb-errors must be 0, 1 or 2, not {self.nb_errors}")
        if self.step < 1:
            raise UsageError(f"--step must be at least 1, not {self.step}")
        if self.lookup not in LOOKUPS:
            raise UsageError(f"--lookup must be one of {', '.join(LOOKUPS)}, not {self.lookup!r}")

    def _check_cluster(self):
        chosen = [flag for flag, value in (("--gpus", self.gpus), ("--scheduler", self.scheduler),
                                           ("--local-cluster", self.local_cluster)) if value is not None]
        if not chosen:
            if self.chunk_reads is not None:
                raise UsageError("--chunk-reads needs --gpus, --scheduler or --local-cluster")
            return
        if len(chosen) > 1:
            raise UsageError(f"{chosen[0]} and {chosen[1]} can't be used together: choose one place for the workers")
        if self.gpus is not None and self.gpus != "auto" and not (isinstance(self.gpus, int) and self.gpus >= 1):
            raise UsageError(f"--gpus must be a number of GPUs (at least 1) or 'auto', not {self.gpus!r}")
        if self.gpus is not None and self.device == "cpu":
            raise UsageError("--gpus runs one worker per GPU, not with --device cpu; use --local-cluster N for CPU workers")
        if self.local_cluster is not None and self.local_cluster < 1:
            raise UsageError(f"--local-cluster must be at least 1, not {self.local_cluster}")
        if self.chunk_reads is not None and self.chunk_reads < 1:
            raise UsageError(f"--chunk-reads must be at least 1, not {self.chunk_reads}")

    def _check_paired(self):
        if self.paired is None:
            if self.reads2 is not None:
                raise UsageError("two reads files need --pe or --mp (paired-end or mate-pair)")
            if (self.min_insert, self.max_insert) != (None, None):
                raise UsageError("--min/--max need --pe or --mp")
            return
        if self.paired not in PAIRED:
            raise UsageError(f"paired mode must be one of {', '.join(PAIRED)}, not {self.paired!r}")
        if self.reads2 is None:
            raise UsageError(f"--{self.paired} needs two reads files, R1 and R2")
        if self.output in (None, "-"):
            raise UsageError(f"--{self.paired} needs -o OUT.sam: OUT_OEA.sam and OUT_DIVET.vh are named from it")
        if self.unmapped is not None:
            raise UsageError(f"--unmapped is for single-end reads; with --{self.paired} unmapped mates are in the SAM")
        if self.dump_candidates is not None:
            raise UsageError(f"--dump-candidates is for single-end reads, not --{self.paired}")
        for flag, value in (("--min", self.min_insert), ("--max", self.max_insert),
                            ("--maxoea", self.max_oea), ("--maxdis", self.max_dis)):
            if value is not None and value < 0:
                raise UsageError(f"{flag} must be at least 0, not {value}")
        if None not in (self.min_insert, self.max_insert) and self.min_insert > self.max_insert:
            raise UsageError(f"--min {self.min_insert} is more than --max {self.max_insert}")


def parse_size(text, flag="--gpu-memory"):
    """Bytes of a size such as 16G, 1.5G, 512M, 64K or 1000000 (binary units), for `flag`."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = units.get(value[-1:], 1)
    try:
        size = float(value[:-1] if value[-1:] in units else value) * scale
    except ValueError:
        raise UsageError(f"{flag} must be a size such as 16G, 512M or a number of bytes, not {text!r}") from None
    if size < 1:
        raise UsageError(f"{flag} must be more than 0 bytes, not {text!r}")
    return int(size)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_UNESCAPED = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}
_FIELD = re.compile(r"[A-Za-z][A-Za-z0-9]:.+")


def read_group_line(text):
    """(@RG line, ID) of -R TEXT, read as bwa reads it: the escapes \\t (tab) and \\\\ (backslash) are
    turned into their characters (a real tab is a tab too); the line must start with @RG, hold TAG:VALUE
    fields with one ID among them, each tag once, and no line break or other control character."""
    line = _ESCAPE.sub(lambda m: _UNESCAPED.get(m[1], m[0]), text)
    example = "e.g. -R '@RG\\tID:sample1\\tSM:sample1'"
    if re.search(r"[\n\r]", line):
        raise UsageError(f"-R {text!r} holds a line break: the read group is one header line ({example})")
    if _CONTROL.search(line.replace("\t", "")):
        raise UsageError(f"-R {text!r} holds a control character ({example})")
    fields = line.split("\t")
    if fields[0] != "@RG" or len(fields) < 2:
        raise UsageError(f"-R must be a read group header line starting with '@RG\\t' ({example}), not {text!r}")
    bad = [f for f in fields[1:] if not _FIELD.fullmatch(f)]
    if bad:
        raise UsageError(f"-R: {bad[0]!r} is not a TAG:VALUE field ({example})")
    tags = [f[:2] for f in fields[1:]]
    if tags.count("ID") != 1:
        raise UsageError(f"-R needs exactly one ID field, not {tags.count('ID')} ({example})")
    twice = next((t for t in tags if tags.count(t) > 1), None)
    if twice:
        raise UsageError(f"-R has the {twice} field twice")
    return line, fields[1 + tags.index("ID")][3:]
