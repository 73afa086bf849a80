#!/usr/bin/env python3
"""Reproduce the GateKeeper-GPU paper's tables and figures from our own runs (issue #6): `make paper`.

    scripts/reproduce_paper.py [--stage STAGE ...] [--quick] [--device auto|cpu|cuda] [--out paper] [--force]

Stages (each runs alone, caches its measured rows under OUT/results/, and is reused by later runs until --force
or until it is named with --stage):
    sets               candidate pairs of real and simulated reads (gkmap map --dump-candidates) + shared samples
    filter-accuracy    Table 1: false accepts / rejects of faithful and improved GateKeeper vs edlib, E = 0..10 % L
    filter-throughput  Table 2/3: kernel and filter time, pairs/s, host- vs device-encoded, 100/150/250 bp
    end-to-end         Table 4: gkmap map with and without the filter, cpu and cuda backends
    end-to-end-genome  Table 4 on a whole genome: the 3.1 Gbp proxy (scripts/genome_proxy.py), cuda backend
    power              Table 5: GPU power and utilisation through NVML (GPU machine only)
    multi-gpu          Tables S.21-S.23: filter and mapper on 1..4 GPUs (scripts/bench_multigpu.py; 2+ GPUs)
    report             REPORT.md, one CSV per table, figures (matplotlib) and the summary of headline claims
The report is assembled after every run from whatever stages have results, and says which are missing and why.
--quick runs the cpu parts on small inputs (CI time); cuda parts take their sizes from paper/common.py SIZES.
"""
import argparse
import logging
import os
import sys
import traceback
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
sys.path[:0] = [str(SCRIPTS), str(SCRIPTS.parent)]

from paper import accuracy, endtoend, multigpu, report, sets, throughput  # noqa: E402
from paper.common import ROOT, STAGES, Context, Missing, load_stage, missing_record  # noqa: E402

RUNNERS = {"sets": sets.run, "filter-accuracy": accuracy.run, "filter-throughput": throughput.run,
           "end-to-end": endtoend.run,
           "end-to-end-genome": endtoend.run_genome, "power": throughput.run_power, "multi-gpu": multigpu.run}
log = logging.getLogger("paper")


def complete(ctx, stage):
    cached = load_stage(ctx, stage)
    return cached is not None and cached[1]["status"] == "complete"


def run_stage(ctx, stage):
    """Run one stage; True unless it failed. A stage that cannot run here leaves a 'missing' record, but never
    replaces complete results (from another machine, say)."""
    log.info("stage %s", stage)
    try:
        RUNNERS[stage](ctx)
        return True
    except Missing as why:
        log.warning("stage %s cannot run here: %s", stage, why)
        if not complete(ctx, stage):
            missing_record(ctx, stage, str(why))
        return True
    except Exception:
        log.error("stage %s failed:\n%s", stage, traceback.format_exc())
        return False


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stage", nargs="+", choices=STAGES + ("report",), help="run these stages only (default: all)")
    ap.add_argument("--quick", action="store_true", help="small inputs: the cpu parts in CI time")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                    help="auto: the GPU parts run on cuda when a GPU is there")
    ap.add_argument("--out", default=str(ROOT / "paper"), help="results, tables, figures, REPORT.md")
    ap.add_argument("--work", help="large intermediates (default OUT/work, git-ignored)")
    ap.add_argument("--data", default=os.environ.get("GKMAP_SHARED_DATA") or str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--force", action="store_true", help="run stages again even when their results are cached")
    ap.add_argument("--no-report", action="store_true", help="do not assemble REPORT.md")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("gkmap").setLevel(logging.WARNING)
    out = Path(args.out)
    ctx = Context(out=out, work=Path(args.work) if args.work else out / "work", data=Path(args.data),
                  quick=args.quick, device=args.device)
    ok = True
    for stage in args.stage or STAGES:
        if stage == "report":
            continue
        if not args.stage and not args.force and complete(ctx, stage):
            log.info("stage %s: cached in %s (--force runs it again)", stage, ctx.results)
            continue
        if stage == "filter-accuracy" and load_stage(ctx, "sets") is None:
            ok &= run_stage(ctx, "sets")
        ok &= run_stage(ctx, stage)
    if not args.no_report or (args.stage and "report" in args.stage):
        path = report.build(ctx)
        log.info("wrote %s", path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
