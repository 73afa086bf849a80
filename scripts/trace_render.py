#!/usr/bin/env python3
"""Where a `gkmap map` run's time goes between the mapping thread and the render processes: the run traced
in every process, then summarised.

    scripts/trace_render.py [--keep DIR] -- REF.fa READS.fq [gkmap map options...]

The run is `python -m mapper map` with scripts/render_trace_hook.py loaded into each of its processes (a
sitecustomize module on PYTHONPATH, which the spawned render processes inherit): every render job (wall,
user and system time of its thread, minor faults) and its phases, the main process's stages, its hand-over
of pieces and its waits for render slots. Printed: the main thread's stages and waits, the render
processes' jobs and how many were busy over the run, and each phase of a job, a process's first job apart
(it maps the genome's codes). Why a script: at genome scale the render processes set the whole command
(issues #17, #18), and the run summary gives only their summed align and output seconds; it found the
first jobs' contended mapping of the codes and the texts' page churn (docs/benchmarks.md, session 28).
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = "import render_trace_hook  # scripts/trace_render.py\n"


def read_trace(folder):
    """{kind: [(pid, start, end, fields)]} of every process's file in `folder`."""
    rows = collections.defaultdict(list)
    for path in Path(folder).glob("*.tsv"):
        for line in path.read_text().splitlines():
            kind, start, end, *fields = line.split("\t")
            rows[kind].append((path.stem, float(start), float(end), fields))
    return rows


def busy_profile(jobs):
    """(mean busy processes, seconds with fewer than half of the processes busy) over the jobs' span."""
    events = sorted([(t0, 1) for _, t0, _, _ in jobs] + [(t1, -1) for _, _, t1, _ in jobs])
    processes = len({pid for pid, *_ in jobs})
    busy = area = low = 0.0
    for (t, step), (after, _) in zip(events, events[1:]):
        busy += step
        area += busy * (after - t)
        low += (after - t) if busy < processes / 2 else 0.0
    span = events[-1][0] - events[0][0]
    return area / span if span else 0.0, low


def summary(rows):
    """The printed summary of a trace (read_trace), as lines."""
    if not rows:
        return ["no trace: the run wrote none (did it fail?)"]
    t0 = min(start for kind in rows for _, start, _, _ in rows[kind])
    end = max(stop for kind in rows for _, _, stop, _ in rows[kind])
    stages = collections.Counter()
    for _, start, stop, (name, *_) in rows["stage"]:
        stages[name] += stop - start
    out = [f"traced {end - t0:.2f} s from the first stage; main thread: "
           + ", ".join(f"{name} {seconds:.2f}" for name, seconds in stages.most_common()) + " s"]
    waits, submits = rows["wait"], rows["submit"]
    out.append(f"main thread waited for render slots {len(waits)} times, {sum(b - a for _, a, b, _ in waits):.2f} s; "
               f"{len(submits)} pieces handed on in {sum(b - a for _, a, b, _ in submits):.2f} s"
               + (f", the first at {min(a for _, a, _, _ in submits) - t0:.2f} s, the last at "
                  f"{max(b for _, _, b, _ in submits) - t0:.2f} s" if submits else ""))
    jobs = rows["job"]
    if not jobs:
        return out + ["no render jobs: the batches were rendered in the main process"]
    wall = sum(b - a for _, a, b, _ in jobs)
    user, system = (sum(float(f[k]) for *_, f in jobs) for k in (1, 2))
    faults = sum(int(f[3]) for *_, f in jobs)
    mean, low = busy_profile(jobs)
    processes = len({pid for pid, *_ in jobs})
    out.append(f"render jobs: {len(jobs)} in {processes} processes, {wall:.1f} s summed (user {user:.1f}, "
               f"system {system:.1f}, {faults:,} minor faults); busy processes {mean:.1f} on average, fewer "
               f"than half busy for {low:.2f} s; the last job ended {end - t0:.2f} s in")
    phases = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0])
    for _, start, stop, (name, job, user_s, sys_s, minflt) in rows["phase"]:
        total = phases[name, "first job" if int(job) <= 1 else "later jobs"]
        total[0] += 1
        total[1] += stop - start
        total[2] += float(user_s)
        total[3] += float(sys_s)
        total[4] += int(minflt)
    for (name, which), (calls, seconds, user_s, sys_s, minflt) in sorted(phases.items()):
        out.append(f"  {name:>18} {which:>10}: {calls:5d} calls {seconds:7.2f} s (user {user_s:6.2f}, "
                   f"system {sys_s:6.2f}, {minflt:,} faults)")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--keep", help="keep the trace files in this folder, new or empty (default: a temporary one, "
                                  "removed)")
    p.add_argument("map_args", nargs=argparse.REMAINDER, help="-- then `gkmap map`'s arguments")
    args = p.parse_args()
    map_args = args.map_args[1:] if args.map_args[:1] == ["--"] else args.map_args
    if not map_args:
        p.error("give gkmap map's arguments after --")
    if args.keep and os.path.exists(args.keep) and (not os.path.isdir(args.keep) or os.listdir(args.keep)):
        p.error(f"--keep {args.keep}: give a new or empty folder (the trace's files are named by process id)")
    with tempfile.TemporaryDirectory(prefix="gkmap-trace-") as tmp:
        folder = Path(args.keep or Path(tmp) / "trace")
        folder.mkdir(parents=True, exist_ok=True)
        (Path(tmp) / "sitecustomize.py").write_text(SITE)
        path = os.pathsep.join([tmp, str(ROOT / "scripts"), str(ROOT), os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep), "GKMAP_TRACE_DIR": str(folder)}
        started = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "mapper", "map", *map_args], env=env)
        print(f"gkmap map: exit {run.returncode}, {time.perf_counter() - started:.2f} s", file=sys.stderr)
        print("\n".join(summary(read_trace(folder))))
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
