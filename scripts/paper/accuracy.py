"""Stage `filter-accuracy` (paper Figs. 4-5, Tables S.2-S.12): both GateKeeper modes on every candidate set, for
E = 0 .. ceil(10 % of L), against the verifier's truth (edlib's global distance, N never matching).

Output rows, one per (set, E): pairs, undefined pairs (a non-ACGT letter: the published filter passes them
unexamined), edlib accepts (distance <= E) and rejects, then per mode accepts, false accepts (excluding and
including undefined pairs, as the paper's S.7-S.12 "N (M)"), false rejects and the false-accept rate
(false accepts / edlib rejects, %, undefined pairs left out as in S.2-S.6). For the shared samples, the published
program's accepts at E (from its decisions file) and how many of our faithful decisions differ from its.
"""
import math

import numpy as np

from mapper.filters.command import _truth
from mapper.filters.gatekeeper import backend, filter_pairs
from mapper.filters.pairs import read_pairs
from paper.common import Missing, StageResults, load_stage


def _published_decisions(path, n):
    """{E: accept bool [n]} from a published `*.gatekeeper-gpu.tsv` (columns pass_eN)."""
    if path is None:
        return {}
    header = open(path).readline().split()
    values = np.loadtxt(path, skiprows=1, dtype=np.int64, ndmin=2)
    if len(values) != n:
        return {}
    return {int(c[6:]): values[:, i] == 1 for i, c in enumerate(header) if c.startswith("pass_e")}


def _rate(count, of):
    return round(100.0 * count / of, 4) if of else ""


def run(ctx):
    cached = load_stage(ctx, "sets")
    if cached is None or not cached[0]:
        raise Missing("no candidate sets (stage `sets` made none)")
    device = "cuda" if "cuda" in ctx.devices() else "cpu"
    gk = backend(device)
    with StageResults(ctx, "filter-accuracy", [device], dict(filter_device=device)) as results:
        for s in cached[0]:
            path = (ctx.work if s["root"] == "work" else ctx.data) / s["pairs_file"]
            if not path.exists():
                results.skip(s["set"], f"{path} is missing (run stage `sets` again)")
                continue
            pairs = read_pairs(path)
            if not len(pairs):
                results.skip(s["set"], "no candidate pairs")
                continue
            length = int(s["read_length"])
            distance = _truth(pairs)
            decisions = _published_decisions(ctx.data / s["published_decisions"]
                                             if s["published_decisions"] else None, len(pairs))
            undefined = None
            for e in range(math.ceil(0.1 * length) + 1):
                within = distance <= e
                faithful = filter_pairs(pairs, e, mode="faithful", gk=gk)
                improved = filter_pairs(pairs, e, mode="improved", gk=gk)
                if undefined is None:
                    undefined = faithful.estimate == -2
                defined = ~undefined
                row = dict(set=s["set"], read_length=length, E=e, pairs=len(pairs), undefined_pairs=int(undefined.sum()),
                           edlib_accepts=int(within.sum()), edlib_rejects=int((~within).sum()))
                for mode, result in (("faithful", faithful), ("improved", improved)):
                    accept = result.accept
                    false_accept = accept & ~within
                    row.update({f"{mode}_accepts": int(accept.sum()),
                                f"{mode}_false_accepts": int((false_accept & defined).sum()),
                                f"{mode}_false_accepts_incl_undefined": int(false_accept.sum()),
                                f"{mode}_false_rejects": int((~accept & within).sum()),
                                f"{mode}_false_accept_rate_pct": _rate(int((false_accept & defined).sum()),
                                                                       int((~within & defined).sum()))})
                if e in decisions:
                    row["published_program_accepts"] = int(decisions[e].sum())
                    row["faithful_differs_from_published_program"] = int((decisions[e] != faithful.accept).sum())
                results.add(row)
    return results
