"""Mapping options: every default lives here, `--help` shows these values, and `check()` validates a
whole option set once, naming the flag at fault."""
from dataclasses import dataclass

from mapper.errors import UsageError

MAX_E = 25
FILTERS = ("none", "gatekeeper", "gatekeeper-faithful")
DEVICES = ("auto", "cpu", "cuda")
PAIRED = {"pe": "FR", "mp": "RF"}  # --pe: Illumina paired-end (mates face each other); --mp: mate pair


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

    @property
    def distributed(self):
        """True when the run is spread over Dask workers (mapper/cluster.py)."""
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
        if self.batch_size < 1:
            raise UsageError(f"--batch-size must be at least 1, not {self.batch_size}")
        self._check_paired()
        self._check_cluster()
        return self

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
        if self.paired is not None:
            raise UsageError(f"--{self.paired} runs can't be spread over workers yet (docs/cluster.md): drop {chosen[0]}")

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
