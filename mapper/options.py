"""Mapping options: every default lives here, `--help` shows these values, and `check()` validates a
whole option set once, naming the flag at fault."""
from dataclasses import dataclass

from mapper.errors import UsageError

MAX_E = 25
FILTERS = ("none", "gatekeeper", "gatekeeper-faithful")
DEVICES = ("auto", "cpu", "cuda")


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
    best: bool = False
    max_records: int = None     # -n
    index_dir: str = None
    batch_size: int = 100_000
    quiet: bool = False
    command_line: str = "gkmap map"

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
        return self
