"""What every stage of the paper reproduction shares: locations, run sizes, the cache of measured rows, the
record of machine and versions each table states, the published figures, and the chr20 inputs.

Cache layout (under --out, default paper/):
    results/<stage>.csv    measured rows only, rewritten after every row (a run cut short keeps what it measured)
    results/<stage>.json   the run's record: status (running | complete), command, date, machine, GPU, versions,
                           settings (the run sizes), seconds the stage took, and what was skipped and why
Large intermediates (reads, candidate pairs, SAM files, indexes) go to --work (default paper/work/, git-ignored).
"""
import csv
import datetime
import importlib.metadata
import json
import logging
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("sets", "filter-accuracy", "filter-throughput", "end-to-end", "end-to-end-genome", "power", "multi-gpu")
FILTERS = ("none", "gatekeeper", "gatekeeper-faithful")
CHR20 = "genomes/human_GRCh37_chr20.fa.gz"
log = logging.getLogger("paper")

# E values of the throughput runs: the paper's Table 2 / S.13-S.15 thresholds (100 bp e=2,5; 250 bp e=6,10),
# S.20's e=0 and e=4 at every length, and, in full runs, S.16's sweep up to 10 % of L.
QUICK_ES = {100: [0, 2, 4, 5], 150: [0, 4, 8], 250: [0, 4, 6, 10]}
FULL_ES = {100: [0, 1, 2, 3, 4, 5, 6, 8, 10], 150: [0, 2, 4, 6, 8, 10, 12, 15],
           250: [0, 1, 2, 4, 6, 8, 10, 15, 20, 25]}

# Sizes by (quick?): --quick keeps the cpu parts within CI time; the cuda sizes are the GPU machine's. Full sizes
# keep every stage under 8 minutes on one H100 (issue #6; measured times in docs/paper.md). Throughput pairs are
# per (device, encoding): the cuda host-encoded path spends 2-7 us a pair packing on the host (0.15-0.5 M pairs/s
# in the quick H100 run, against 2-7 M/s device-encoded), so at 2^22 pairs its E sweep alone would take 15 minutes:
# it runs 2^19.
# repeats: timed passes per row (after a 1,024-pair warm-up that compiles the kernels); one on cuda, where a pass
# takes 0.2-2 s. Power runs each encoding's throughput pairs for power_seconds per configuration.
SIZES = {
    True: dict(set_reads=150, set_pairs=1500, pairs={"cpu": 1 << 13, "cuda device": 1 << 21, "cuda host": 1 << 21},
               repeats={"cpu": 1, "cuda": 1}, e2e_reads={"cpu": 300, "cuda": 20_000}, e2e=((100, 5), (150, 8)),
               e2e_genome=(3.1, 20_000),
               power_seconds=1.0, es=QUICK_ES),
    False: dict(set_reads=5000, set_pairs=100_000,
                pairs={"cpu": 1 << 17, "cuda device": 1 << 22, "cuda host": 1 << 19}, repeats={"cpu": 3, "cuda": 1},
                e2e_reads={"cpu": 5000, "cuda": 100_000}, e2e=((100, 5), (150, 8), (300, 15)), power_seconds=5.0,
                e2e_genome=(3.1, 200_000),
                es=FULL_ES),
}


class Missing(Exception):
    """A stage (or one of its inputs) cannot run on this machine; the message says why, the report shows it."""


@dataclass
class Context:
    out: Path       # results, tables, figures, REPORT.md
    work: Path      # large intermediates
    data: Path      # ../shared/data (or $GKMAP_SHARED_DATA)
    quick: bool
    device: str     # auto | cpu | cuda: the GPU parts run on cuda when this allows it

    @property
    def sizes(self):
        return SIZES[self.quick]

    @property
    def results(self):
        return self.out / "results"

    def devices(self):
        """Devices of the runs that compare backends: cpu always, cuda when asked for (or auto) and present."""
        from mapper.device import cuda_available
        if self.device == "cpu":
            return ["cpu"]
        if cuda_available():
            return ["cpu", "cuda"]
        if self.device == "cuda":
            raise Missing("--device cuda: no CUDA GPU or no pycuda here")
        return ["cpu"]

    def input(self, relative):
        """A file of the shared data; Missing when this machine's copy lacks it."""
        path = self.data / relative
        if not path.exists():
            raise Missing(f"{relative} is not in {self.data}")
        return path

    def scratch(self, *parts):
        folder = self.work.joinpath(*parts)
        folder.mkdir(parents=True, exist_ok=True)
        return folder


def _version(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def gpu_record():
    """Name, memory and driver of GPU 0 through NVML (pynvml), or pycuda when NVML is not there; {} without a GPU."""
    try:
        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        return dict(gpu=name.decode() if isinstance(name, bytes) else name,
                    gpu_memory_gib=round(pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2 ** 30, 1),
                    gpu_count=pynvml.nvmlDeviceGetCount(), driver=str(pynvml.nvmlSystemGetDriverVersion()))
    except Exception:
        pass
    try:
        import pycuda.driver as drv
        drv.init()
        device = drv.Device(0)
        return dict(gpu=device.name(), gpu_memory_gib=round(device.total_memory() / 2 ** 30, 1),
                    gpu_count=drv.Device.count(), driver=".".join(map(str, drv.get_driver_version_tuple()))
                    if hasattr(drv, "get_driver_version_tuple") else str(drv.get_driver_version()))
    except Exception:
        return {}


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit():
    """$GKMAP_COMMIT (set for a `git archive` copy, which has no .git of its own: the GPU machine's run), else HEAD
    of the checkout."""
    if os.environ.get("GKMAP_COMMIT"):
        return os.environ["GKMAP_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except Exception:
        return "unknown (no git checkout)"


def environment(devices):
    """The record each table states: machine, GPU (when cuda ran), versions, command, date."""
    import mapper
    record = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  command=" ".join([Path(sys.argv[0]).name] + sys.argv[1:]) if sys.argv else "",
                  machine=f"{_cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}",
                  versions=f"gkmap {mapper.__version__} ({_commit()}), Python {platform.python_version()}, "
                           f"numpy {_version('numpy')}, edlib {_version('edlib')}, pycuda {_version('pycuda')}",
                  devices=list(devices))
    if "cuda" in devices:
        record.update(gpu_record())
    return record


class StageResults:
    """One stage's measured rows. `add` rewrites the CSV, so a run stopped at its limit keeps every finished row;
    `finish` marks the record complete. Usable as a context manager (an exception leaves status 'failed')."""

    def __init__(self, ctx, stage, devices, settings):
        ctx.results.mkdir(parents=True, exist_ok=True)
        self.stage, self.start = stage, time.perf_counter()
        self.csv, self.json = ctx.results / f"{stage}.csv", ctx.results / f"{stage}.json"
        self.rows, self.skipped = [], []
        self.record = dict(stage=stage, status="running", quick=ctx.quick, settings=settings,
                           **environment(devices))
        self._write_record()
        self.csv.unlink(missing_ok=True)

    def add(self, row):
        self.rows.append(row)
        write_csv(self.csv, self.rows)
        log.info("%s row %d at %.0f s: %s", self.stage, len(self.rows), time.perf_counter() - self.start,
                 " ".join(str(v) for v in list(row.values())[:6]))

    def skip(self, what, why):
        self.skipped.append(f"{what}: {why}")
        self._write_record()

    def _write_record(self):
        self.record["skipped"] = self.skipped
        self.json.write_text(json.dumps(self.record, indent=1) + "\n")

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        self.record["status"] = "complete" if kind is None else f"failed: {kind.__name__}: {value}"
        self.record["seconds"] = round(time.perf_counter() - self.start, 1)
        self._write_record()
        return False


def write_csv(path, rows):
    """Rows (dicts) to CSV; the columns are the union of the rows' keys in first-seen order."""
    fields = list(dict.fromkeys(k for row in rows for k in row))
    tmp = Path(path).with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def load_stage(ctx, stage):
    """(rows, record) of a stage's cached results, or None when it never ran (or left no row)."""
    csv_path, json_path = ctx.results / f"{stage}.csv", ctx.results / f"{stage}.json"
    if not json_path.exists():
        return None
    record = json.loads(json_path.read_text())
    rows = read_csv(csv_path) if csv_path.exists() else []
    return rows, record


def published(ctx, name):
    """Rows of ../shared/data/published/gatekeeper_gpu_<name>.csv ([] when this machine has no copy)."""
    path = ctx.data / "published" / f"gatekeeper_gpu_{name}.csv"
    return read_csv(path) if path.exists() else []


def chr20_index(ctx):
    """The chr20 index, built once under work/index/ (never beside the shared input)."""
    from mapper.index import open_index
    genome = ctx.input(CHR20)
    return open_index(str(genome), None, str(index_dir(ctx, genome)))


def index_dir(ctx, genome):
    """One index folder per genome under work/index/, shared by every stage."""
    return ctx.scratch("index") / Path(genome).name.split(".")[0]


def simulated_reads(ctx, length, n):
    """FASTQ of n reads of `length` bp simulated on chr20 (CONVENTIONS.md model, seed 11), cached under work/."""
    from mapper.outputs import atomic_output
    from mapper.simulate import simulate, write_fastq
    path = ctx.scratch("reads") / f"chr20_sim_L{length}_n{n}_seed11.fq"
    if not path.exists():
        with atomic_output(str(path)) as out:
            write_fastq(simulate(chr20_index(ctx).reference, n, length, seed=11), out)
    return path


def map_once(ctx, genome, reads, e, filt, device, tag, dump=None):
    """`gkmap map` through map_reads (the benchmarks' way): Counters, with the SAM kept under work/sam/."""
    from mapper.options import MapOptions
    from mapper.runners import map_reads
    sam = ctx.scratch("sam") / f"{tag}.{device}.{filt}.sam"
    counters = map_reads(MapOptions(str(genome), str(reads), e=e, filter=filt, device=device,
                                    index_dir=str(index_dir(ctx, genome)), output=str(sam), quiet=True,
                                    dump_candidates=str(dump) if dump else None))
    return counters, sam


def missing_record(ctx, stage, why):
    """The record of a stage that cannot run on this machine (the report lists it with the reason)."""
    ctx.results.mkdir(parents=True, exist_ok=True)
    (ctx.results / f"{stage}.csv").unlink(missing_ok=True)
    record = dict(stage=stage, status=f"missing: {why}", quick=ctx.quick, skipped=[], **environment([]))
    (ctx.results / f"{stage}.json").write_text(json.dumps(record, indent=1) + "\n")
