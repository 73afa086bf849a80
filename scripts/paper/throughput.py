"""Stages `filter-throughput` (paper Table 2, S.13-S.20) and `power` (Table 6 / S.26).

Pairs, as the paper's throughput sets (30 million real mrFAST pairs) as far as we have them: 100 bp = the shared
ERR240727_1 mrFAST -e 5 sample (the paper's Set 3 source), 150 bp = the shared Shigella sample, 250 bp = pairs
made by scripts/bench_filter.py's `real` model (seed 11); each tiled to the row's pair count (speed does not
depend on pairs being distinct). Timing is bench_filter.run_one: kernel s = the filter computation alone (cuda:
event time of the kernels), filter s = ASCII rows in host memory to decisions in host memory (encoding,
transfers, kernels), for the host- and device-encoded paths. Rows report the mean of `repeats` passes; pair
counts and repeats per (device, encoding) are paper/common.py's SIZES (each row states its own).

Power: NVML (pynvml) sampled every 10 ms on GPU 0 while one configuration filters repeatedly for a few seconds
(the paper's runs: 100 bp at E = 4 and 250 bp at E = 10, both encodings); min / max / average mW and utilisation.
"""
import threading
import time

import numpy as np

from bench_filter import make_pairs, run_one
from mapper.filters.gatekeeper import backend
from mapper.filters.pairs import read_pairs
from paper.common import Missing, StageResults

PAIRS_FILES = {100: "filter-pairs/ERR240727_1_E5.pairs.txt", 150: "filter-pairs/shigella_ERR6005894_L150.pairs.txt"}
MODES = ("faithful", "improved")
POWER_RUNS = ((100, 4), (250, 10))


def pairs_of_length(ctx, length, count):
    """(segments, reads, origin): ASCII uint8 [count, L] each, tiled from this length's source."""
    if length in PAIRS_FILES:
        pairs = read_pairs(ctx.input(PAIRS_FILES[length]))
        _, segments, reads = next(g for g in pairs.groups() if g[1].shape[1] == length)
        origin = PAIRS_FILES[length]
    else:
        segments, reads = make_pairs("real", length, min(count, 1 << 16), np.random.default_rng(11))
        origin = "bench_filter.py real model, seed 11"
    reps = -(-count // len(segments))
    return np.tile(segments, (reps, 1))[:count], np.tile(reads, (reps, 1))[:count], origin


def encodings(device):
    return ("device", "host") if device == "cuda" else ("host",)


def pair_count(sizes, device, encoding):
    """Pairs of a (device, encoding) row: SIZES gives the cpu one and each cuda encoding's."""
    return sizes["pairs"]["cpu" if device == "cpu" else f"cuda {encoding}"]


def run(ctx):
    sizes, devices = ctx.sizes, ctx.devices()
    with StageResults(ctx, "filter-throughput", devices, dict(pairs=sizes["pairs"], repeats=sizes["repeats"],
                                                              es=sizes["es"])) as results:
        for device in devices:
            gk, repeats = backend(device), sizes["repeats"][device]
            for length, es in sizes["es"].items():
                counts = {encoding: pair_count(sizes, device, encoding) for encoding in encodings(device)}
                segments, reads, origin = pairs_of_length(ctx, length, max(counts.values()))
                for e in es:
                    for mode in MODES:
                        for encoding, count in counts.items():
                            run_one(gk, mode, encoding, segments[:1024], reads[:1024], e)  # compile, warm up
                            times = np.array([run_one(gk, mode, encoding, segments[:count], reads[:count], e)
                                              for _ in range(repeats)])
                            kernel, total = times.mean(axis=0)
                            results.add(dict(device=device, encoding=encoding, mode=mode, read_length=length, E=e,
                                             pairs=count, repeats=repeats, pairs_from=origin,
                                             kernel_s=round(kernel, 6), filter_s=round(total, 6),
                                             kernel_mpairs_per_s=round(count / kernel / 1e6, 3),
                                             filter_mpairs_per_s=round(count / total / 1e6, 3),
                                             kernel_gpairs_per_40min=round(count / kernel * 2400 / 1e9, 3),
                                             filter_gpairs_per_40min=round(count / total * 2400 / 1e9, 3)))
    return results


class PowerSampler:
    """NVML power (mW) and GPU utilisation (%) of GPU 0, sampled on a thread until stopped."""

    def __init__(self, interval=0.01):
        try:
            import pynvml
        except ImportError:
            raise Missing("pynvml (nvidia-ml-py) is not installed") from None
        pynvml.nvmlInit()
        self.nvml, self.handle, self.interval = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0), interval
        self.power, self.util, self.error, self._stop = [], [], None, threading.Event()

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.power.append(self.nvml.nvmlDeviceGetPowerUsage(self.handle))
                self.util.append(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
            except self.nvml.NVMLError as e:  # e.g. a virtualised GPU without power readings
                self.error = e
                return
            time.sleep(self.interval)

    def __enter__(self):
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join()
        if not self.power:
            raise Missing(f"NVML gave no power reading here ({self.error})")
        return False


def run_power(ctx):
    if "cuda" not in ctx.devices():
        raise Missing("no CUDA GPU here: power is read through NVML on the GPU machine")
    sizes = ctx.sizes
    counts = {encoding: pair_count(sizes, "cuda", encoding) for encoding in encodings("cuda")}
    gk = backend("cuda")
    with StageResults(ctx, "power", ["cuda"], dict(pairs=counts, seconds=sizes["power_seconds"])) as results:
        with PowerSampler() as idle:
            time.sleep(0.5)
        for length, e in POWER_RUNS:
            segments, reads, origin = pairs_of_length(ctx, length, max(counts.values()))
            for mode in MODES:
                for encoding, count in counts.items():
                    run_one(gk, mode, encoding, segments[:1024], reads[:1024], e)
                    passes, start = 0, time.perf_counter()
                    with PowerSampler() as sampler:
                        while time.perf_counter() - start < sizes["power_seconds"]:
                            run_one(gk, mode, encoding, segments[:count], reads[:count], e)
                            passes += 1
                    power, util = np.array(sampler.power), np.array(sampler.util)
                    results.add(dict(mode=mode, encoding=encoding, read_length=length, E=e, pairs=count,
                                     passes=passes, seconds=round(time.perf_counter() - start, 3),
                                     samples=len(power), idle_power_mw=int(np.median(idle.power)),
                                     power_min_mw=int(power.min()), power_max_mw=int(power.max()),
                                     power_avg_mw=int(power.mean()), utilisation_avg_pct=round(float(util.mean()), 1),
                                     utilisation_max_pct=int(util.max())))
    return results
