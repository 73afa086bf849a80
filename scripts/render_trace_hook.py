"""The hook scripts/trace_render.py puts into every Python process of a traced `gkmap map` run (through a
sitecustomize module on PYTHONPATH, so the spawned render processes load it too): it wraps the render job,
its phases, the main process's submits, its waits for render slots and its stage timers, and appends one
line per interval to TRACE_DIR/<pid>.tsv:

    kind  start  end  fields...          (wall-clock seconds, shared by every process)
    job   t0 t1  reads  user_s  sys_s  minor_faults          a render job (render._render_job), its thread's
    phase t0 t1  name  job_number  user_s  sys_s  minor_faults   a part of one (job_number counts from 1)
    submit t0 t1  reads                                        the main process handing a piece on
    wait  t0 t1                                                the main process waiting for render slots
    stage t0 t1  name                                          pipeline.Counters.timed (seed, verify, ...)

Nothing here changes what a run computes; the file is read by trace_render.py's summary.
"""
import functools
import os
import resource
import time

TRACE_DIR = os.environ.get("GKMAP_TRACE_DIR")
PHASES = ("_worker_reference", "_read_batch", "_slice", "strand_rows", "render", "_spill")


def _log(kind, t0, t1, *fields):
    with open(os.path.join(TRACE_DIR, f"{os.getpid()}.tsv"), "a") as out:
        out.write("\t".join([kind, f"{t0:.6f}", f"{t1:.6f}", *map(str, fields)]) + "\n")


def _usage():
    return resource.getrusage(resource.RUSAGE_THREAD)


def _spent(before, after):
    return (f"{after.ru_utime - before.ru_utime:.4f}", f"{after.ru_stime - before.ru_stime:.4f}",
            after.ru_minflt - before.ru_minflt)


def install():
    """Wrap the render module's job and phases and the main process's hand-over points (see the docstring)."""
    import mapper.pipeline as pipeline
    import mapper.render as render
    jobs = [0]  # render jobs this process has run

    def phase(name):
        inner = getattr(render, name)

        @functools.wraps(inner)
        def wrapped(*args, **kwargs):
            before, t0 = _usage(), time.time()
            try:
                return inner(*args, **kwargs)
            finally:
                _log("phase", t0, time.time(), name, jobs[0], *_spent(before, _usage()))
        setattr(render, name, wrapped)

    for name in PHASES:
        phase(name)
    job = render._render_job

    @functools.wraps(job)  # pickled by name: the wrapper must stand where the function stood
    def render_job(reference, path, layout, first, a, b, *rest, **kwargs):
        jobs[0] += 1
        before, t0 = _usage(), time.time()
        done = job(reference, path, layout, first, a, b, *rest, **kwargs)
        _log("job", t0, time.time(), b - a, *_spent(before, _usage()))
        return done
    render._render_job = render_job

    submit = render.HostWorkers.submit

    def traced_submit(self, batch, rows, maps, a=0, b=None):
        t0 = time.time()
        submit(self, batch, rows, maps, a, b)
        _log("submit", t0, time.time(), (len(batch) if b is None else b) - a)
    render.HostWorkers.submit = traced_submit

    ready = render.HostWorkers.ready

    def traced_ready(self, block=False):
        pending = ready(self, block)
        while True:
            t0 = time.time()
            try:
                item = next(pending)
            except StopIteration:
                return
            finally:
                if time.time() - t0 > 1e-3:
                    _log("wait", t0, time.time())
            yield item
    render.HostWorkers.ready = traced_ready

    timed = pipeline.Counters.timed

    def traced_timed(self, stage):
        inner = timed(self, stage)

        class Interval:
            def __enter__(self):
                self.t0 = time.time()
                return inner.__enter__()

            def __exit__(self, *exc):
                try:
                    return inner.__exit__(*exc)
                finally:
                    _log("stage", self.t0, time.time(), stage)
        return Interval()
    pipeline.Counters.timed = traced_timed


if TRACE_DIR:
    install()
