"""Stage `report`: REPORT.md, one CSV per table and the figures, from whatever stages have cached results.

Measured numbers come from OUT/results/ (written by the stages); published numbers are read from
../shared/data/published/*.csv and joined into separate `published_*` columns that name their table and row.
Nothing else is typed in. Figures are drawn when matplotlib is importable (the `report` extra), and the report
says when they are skipped.
"""
import json
import math

from paper.common import STAGES, load_stage, published, write_csv

TITLES = {"sets": "Candidate sets", "filter-accuracy": "Table 1: filter accuracy",
          "filter-throughput": "Table 2: filter throughput", "end-to-end": "Table 4: end-to-end mapping",
          "end-to-end-genome": "Table 4 on a 3.1 Gbp genome proxy",
          "power": "Table 5: GPU power and utilisation", "multi-gpu": "Tables S.21-S.23: several GPUs"}


def _num(value):
    """A CSV cell as float, or None for empty / NA / '-' cells; a published '0.37?' reads as 0.37."""
    try:
        return float(str(value).rstrip("?"))
    except ValueError:
        return None


def _fmt(value):
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, str) and value.replace(".", "", 1).isdigit() and "." in value:
        return _fmt(float(value))
    return "" if value is None else str(value)


def md_table(columns, rows):
    """Markdown table; columns are (header, key or function of the row)."""
    out = ["| " + " | ".join(h for h, _ in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [_fmt(key(row) if callable(key) else row.get(key, "")) for _, key in columns]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _status(record):
    """A record left 'running' belongs to a run stopped at its time limit: its rows are a partial result."""
    if record["status"] == "running":
        return "incomplete: the run stopped (time limit) before the stage finished; its finished rows are shown"
    return record["status"]


def provenance(record):
    """The line each table states: machine, GPU, versions, command, date, run size and status."""
    gpu = record.get("gpu")
    gpu = f"{gpu} ({record.get('gpu_memory_gib')} GiB, driver {record.get('driver')}, {record.get('gpu_count')} " \
          f"on the host)" if gpu else "none used"
    size = "quick" if record.get("quick") else "full"
    if "seconds" in record:
        size += f", {record['seconds']:.0f} s"
    line = (f"*Measured {record['date']} on {record['machine']}; GPU: {gpu}; {record['versions']}; command "
            f"`{record['command']}` ({size} run, status: {_status(record)}).*")
    settings = record.get("settings")
    sizes = "\n- run sizes: " + "; ".join(f"{k} = {json.dumps(v, separators=(', ', ': '))}"
                                        for k, v in settings.items()) if settings else ""
    skipped = "".join(f"\n- skipped: {s}" for s in record.get("skipped", []))
    return [line + sizes + skipped, ""]


# ---------------------------------------------------------------- joins of the published figures

def join_accuracy(ctx, rows):
    """Paper Tables S.2-S.4 (false-accept analysis of GateKeeper-GPU against edlib, by read length and e)."""
    family1 = {}
    for p in published(ctx, "false_accepts"):
        if p["gkgpu_false_accept_rate_pct"]:
            family1.setdefault((int(p["read_length_bp"]), int(p["error_threshold"])), p)
    for row in rows:
        length, e = int(row["read_length"]), int(row["E"])
        match = next((family1[(L, e)] for L in (length, length - 1, length + 1) if (L, e) in family1), None)
        if match:
            row.update(published_source=f"{match['source_table']} ({match['dataset']}, {match['read_length_bp']} bp), "
                                        f"row e={e}",
                       published_gkgpu_false_accepts=match["gkgpu_false_accept_count"],
                       published_gkgpu_false_accept_rate_pct=match["gkgpu_false_accept_rate_pct"])
    return rows


def join_throughput(ctx, rows):
    """cuda rows: Tables S.17-S.19 (Setup 1, 1 GPU, M filtrations/s by encoding); cpu rows: Table 2 / S.13-S.15
    (Setup 1, GateKeeper-CPU 1 core, billions of pairs in 40 min)."""
    actor = {(int(p["read_length_bp"]), int(p["error_threshold"])): p for p in published(ctx, "encoding_actor")
             if p["source_table"] != "Table S.20"}
    table2 = {(int(p["read_length_bp"]), p["time_measure"], int(p["error_threshold"])): p
              for p in published(ctx, "throughput") if p["setup"] == "Setup 1"}
    for row in rows:
        length, e = int(row["read_length"]), int(row["E"])
        if row["device"] == "cuda" and (length, e) in actor:
            p, enc = actor[(length, e)], row["encoding"]
            row.update(published_source=f"{p['source_table']}, Setup 1 (GTX 1080 Ti), {enc}-encoded, row e={e}",
                       published_kernel_mpairs_per_s=p[f"setup1_{enc}_enc_kernel_mfilt_per_s"],
                       published_filter_mpairs_per_s=p[f"setup1_{enc}_enc_filter_mfilt_per_s"])
        elif row["device"] == "cpu" and (length, "kernel_time", e) in table2:
            kt, ft = table2[(length, "kernel_time", e)], table2.get((length, "filter_time", e), {})
            row.update(published_source=f"{kt['source_tables']}, Setup 1, GateKeeper-CPU 1 core, row e={e}",
                       published_kernel_gpairs_per_40min=kt["cpu_1core_gpairs_per_40min"],
                       published_filter_gpairs_per_40min=ft.get("cpu_1core_gpairs_per_40min", ""))
    return rows


E2E_SOURCES = {  # (L, e) -> (mapping-information table, time table) of gatekeeper_gpu_mrfast.csv
    (100, 5): ("Table 3", "Table 5"), (150, 8): ("Table S.25 (mapping information)", "Table S.25 (time)"),
    (300, 15): ("Table S.24 (mapping information)", "Table S.24 (time)")}


def join_end_to_end(ctx, rows):
    """Filter rows get the paper's GateKeeper-GPU row of the same read length and e (device-encoded, Setup 1)."""
    mrfast = published(ctx, "mrfast")
    for row in rows:
        key = (int(row["read_length"]), int(row["e"]))
        if row["filter"] == "none" or key not in E2E_SOURCES:
            continue
        info_table, time_table = E2E_SOURCES[key]
        info = next((p for p in mrfast if p["source_table"] == info_table and p["mrfast_with"] == "GateKeeper-GPU"
                     and int(p["error_threshold"]) == key[1]), {})
        times = next((p for p in mrfast if p["source_table"] == time_table and p["mrfast_with"] == "GateKeeper-GPU"
                      and p["encoding"] == "device"), {})
        row.update(published_source=f"{info_table} / {time_table}: mrFAST + GateKeeper-GPU, device-encoded, Setup 1, "
                                    f"{info.get('dataset', '')}",
                   published_rejected_pct=info.get("rejected_pct", ""),
                   published_filter_dp_speedup=times.get("filtering_dp_speedup_setup1", ""),
                   published_overall_speedup=times.get("overall_speedup_setup1", ""))
    return rows


def join_power(ctx, rows):
    """Paper Table 6 (Setup 1, GTX 1080 Ti): min / max / average mW by encoding and read length."""
    table6 = {p["statistic"]: p for p in published(ctx, "power") if p["setup"] == "Setup 1"}
    for row in rows:
        column = f"{row['encoding']}_enc_{row['read_length']}bp_mw"
        if table6 and column in table6.get("min", {}):
            row.update(published_source=f"Table 6, Setup 1, column {column}",
                       **{f"published_power_{s}_mw": table6[s][column] for s in ("min", "max", "average")})
    return rows


# columns of gatekeeper_gpu_multigpu.csv beside each of our ways in (packed = 2-bit words made on the host,
# the host-encoded kernel without the packing)
MULTI_GPU_COLUMNS = {"packed": "host", "host": "host", "device": "device", "device (file)": "device"}


def join_multi_gpu(ctx, rows):
    """Filter rows: speed-up and efficiency over our N = 1 row of the same way, and the paper's row of the
    same read length, e and N (Tables S.21-S.23, Setup 1) with its own speed-up over its 1 GPU."""
    paper = {(int(p["read_length_bp"]), int(p["error_threshold"]), int(p["n_gpus"])): p
             for p in published(ctx, "multigpu")}
    ones = {(r["part"], r["read_length"], r["way"]): r for r in rows
            if r["part"] != "map" and int(r["n_gpus"]) == 1}
    for row in rows:
        if row["part"] == "map":
            continue
        n = int(row["n_gpus"])
        one = ones.get((row["part"], row["read_length"], row["way"]))
        for kind in ("kernel", "filter"):
            ours, base = _num(row.get(f"{kind}_mpairs_per_s")), _num(one.get(f"{kind}_mpairs_per_s")) if one else None
            if ours and base:
                row[f"{kind}_speedup"] = round(ours / base, 2)
                row[f"{kind}_efficiency"] = round(ours / base / n, 2)
        key = (int(row["read_length"]), int(row["E"]), n)
        enc = MULTI_GPU_COLUMNS.get(row["way"])
        if key in paper and enc:
            p, p1 = paper[key], paper[key[:2] + (1,)]
            row["published_source"] = f"{p['source_table']}, Setup 1 (GTX 1080 Ti), {enc}-encoded, {n} GPU(s)"
            for kind in ("kernel", "filter"):
                value, first = _num(p[f"{kind}_{enc}_enc_mfilt_per_s"]), _num(p1[f"{kind}_{enc}_enc_mfilt_per_s"])
                row[f"published_{kind}_mpairs_per_s"] = value
                if value is not None and first:
                    row[f"published_{kind}_speedup"] = round(value / first, 2)
                    row[f"published_{kind}_efficiency"] = round(value / first / n, 2)
    return rows


# ---------------------------------------------------------------- the summary of headline claims

def _verdict(ours, paper):
    if ours is None or paper is None:
        return "not measured"
    if ours >= 1.1 * paper:
        return "beat"
    return "reproduced" if ours >= 0.9 * paper else "missed"


def summary(ctx, data):
    """Rows (claim, paper's figure and where it is, ours, verdict, why) of the paper's headline claims."""
    mrfast = published(ctx, "mrfast")
    table5 = [p for p in mrfast if p["source_table"] == "Table 5" and p["mrfast_with"] == "GateKeeper-GPU"]
    claims = []
    e2e = [r for r in data.get("end-to-end", []) if r["filter"] == "gatekeeper"]
    none = {(r["config"], r["device"]): r for r in data.get("end-to-end", []) if r["filter"] == "none"}
    for claim, column, ours_key in (("verification (filtering + DP) speed-up", "filtering_dp_speedup_setup1",
                                     "filter_verify_speedup"),
                                    ("end-to-end mapping speed-up", "overall_speedup_setup1", "overall_speedup")):
        values = [(_num(p[column]), p) for p in table5 if _num(p[column]) is not None]
        paper, source = max(values, key=lambda v: v[0]) if values else (None, None)
        best = max(e2e, key=lambda r: float(r[ours_key])) if e2e else None
        ours = float(best[ours_key]) if best else None
        why = ""
        if best:
            base = none[(best["config"], best["device"])]
            why = (f"best at {best['config']} on {best['device']}: the improved filter rejects {best['rejected_pct']} % "
                   f"of the candidate windows; without a filter, verification is "
                   f"{100 * float(base['verify_s']) / float(base['overall_s']):.0f} % of the run and seeding "
                   f"{100 * float(base['seed_s']) / float(base['overall_s']):.0f} %")
        claims.append(dict(claim=f"up to {paper}x {claim}" if paper else claim, paper=paper,
                           paper_source=f"{source['source_table']}, GateKeeper-GPU {source['encoding']}-encoded, "
                                        f"Setup 1" if source else "", ours=ours, verdict=_verdict(ours, paper),
                           why=why))
    ratios = []
    for p in published(ctx, "false_accepts"):
        fpga, gkgpu = _num(p["gatekeeper_fpga_false_accepts"]), _num(p["gkgpu_false_accepts_incl_undefined"])
        if fpga is not None and gkgpu:
            ratios.append((fpga / gkgpu, p))
    paper, source = max(ratios, key=lambda v: v[0]) if ratios else (None, None)
    accuracy = data.get("filter-accuracy", [])
    faithful_fa = sum(int(r["faithful_false_accepts_incl_undefined"]) for r in accuracy)
    improved_fa = sum(int(r["improved_false_accepts_incl_undefined"]) for r in accuracy)
    ours = (faithful_fa / improved_fa if improved_fa else math.inf) if accuracy else None
    claims.append(dict(
        claim=f"up to {paper:.0f}x fewer false accepts than GateKeeper" if paper else "fewer false accepts",
        paper=round(paper, 1) if paper else None,
        paper_source=f"{source['source_table']} row e={source['error_threshold']}: GateKeeper-FPGA / GateKeeper-GPU "
                     f"false accepts (undefined pairs included), computed from the CSV" if source else "",
        ours=f"no false accepts (faithful: {faithful_fa})" if ours == math.inf else ours,
        verdict="beat" if ours == math.inf else _verdict(ours, paper),
        why=f"our improved GateKeeper against the faithful one (the published GateKeeper-GPU) over {len(accuracy)} "
            f"(set, E) rows: {improved_fa} vs {faithful_fa} false accepts; the improved estimate is the banded edit "
            f"distance, so it only accepts what edlib accepts" if accuracy else ""))
    multi = [r for r in data.get("multi-gpu", []) if r["part"] == "filter-memory" and r["way"] == "device"
             and int(r["read_length"]) == 100 and int(r["n_gpus"]) == 4]
    if multi:
        r = multi[0]
        claims.append(dict(claim=f"4-GPU kernel throughput {r.get('published_kernel_speedup')}x one GPU's (100 bp, e=2)",
                           paper=_num(r.get("published_kernel_speedup")), paper_source=r.get("published_source", ""),
                           ours=_num(r.get("kernel_speedup")),
                           verdict=_verdict(_num(r.get("kernel_speedup")), _num(r.get("published_kernel_speedup"))),
                           why=f"device-encoded pairs in memory, one process per GPU on a quarter each: "
                               f"{r['kernel_mpairs_per_s']} M filtrations/s on 4 H100s"))
    rejects = sum(int(r["improved_false_rejects"]) + int(r["faithful_false_rejects"]) for r in accuracy)
    claims.append(dict(claim="no false rejects", paper=0, paper_source="paper, Sec. 5.2 (stated in the text)",
                       ours=rejects if accuracy else None,
                       verdict=("reproduced" if rejects == 0 else "missed") if accuracy else "not measured",
                       why=f"false rejects of both modes summed over {len(accuracy)} rows" if accuracy else ""))
    return claims


# ---------------------------------------------------------------- figures

def figures(ctx, data):
    """PNG figures; returns (list of files, note). Needs matplotlib (the `report` extra)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], "Figures skipped: matplotlib is not installed (pip install '.[report]')."
    made = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(ctx.out / name, dpi=110)
        plt.close(fig)
        made.append(name)

    accuracy = data.get("filter-accuracy", [])
    if accuracy:
        fig, ax = plt.subplots(figsize=(8, 5))
        for name in dict.fromkeys(r["set"] for r in accuracy):
            rows = [r for r in accuracy if r["set"] == name]
            line, = ax.plot([int(r["E"]) for r in rows], [_num(r["faithful_false_accept_rate_pct"]) for r in rows],
                            marker=".", label=f"{name} faithful")
            ax.plot([int(r["E"]) for r in rows], [_num(r["improved_false_accept_rate_pct"]) for r in rows],
                    ls="--", color=line.get_color())
        ax.set(xlabel="E (edits)", ylabel="false-accept rate (% of edlib rejects)",
               title="False accepts: faithful (solid) vs improved (dashed), cf. paper Figs. 4-5")
        ax.legend(fontsize=6)
        save(fig, "fig1_false_accepts.png")
    throughput = data.get("filter-throughput", [])
    actor = published(ctx, "encoding_actor")
    if throughput:
        for name, x_key, select, title in (
                ("fig2_error_threshold.png", "E", lambda r: int(r["read_length"]) == 250,
                 "250 bp: filter throughput vs E (cf. paper Table S.16, Fig. S.12)"),
                ("fig3_read_length.png", "read_length", lambda r: int(r["E"]) in (0, 4),
                 "Filter throughput vs read length at E = 0 and 4 (cf. paper Table S.20, Fig. 7)")):
            fig, ax = plt.subplots(figsize=(8, 5))
            groups = {}
            for r in throughput:
                if select(r):
                    key = f"ours {r['device']} {r['encoding']} {r['mode']}" + \
                          (f" E={r['E']}" if x_key == "read_length" else "")
                    groups.setdefault(key, []).append((int(r[x_key]), float(r["filter_mpairs_per_s"])))
            for key, points in groups.items():
                ax.plot(*zip(*sorted(points)), marker="o", label=key)
            for enc in ("device", "host"):
                column = f"setup1_{enc}_enc_filter_mfilt_per_s"
                if x_key == "E":
                    points = [(int(p["error_threshold"]), _num(p[column])) for p in actor
                              if p["source_table"] == "Table S.19"]
                    label = f"paper S.19 Setup 1 {enc}-encoded"
                else:
                    points = [(int(p["read_length_bp"]), _num(p[column])) for p in actor
                              if p["source_table"] == "Table S.20" and int(p["error_threshold"]) == 4]
                    label = f"paper S.20 Setup 1 {enc}-encoded E=4"
                if points:
                    ax.plot(*zip(*sorted(points)), ls=":", marker="x", label=label)
            ax.set(xlabel="E (edits)" if x_key == "E" else "read length (bp)", ylabel="filter M pairs/s",
                   yscale="log", title=title)
            ax.legend(fontsize=6)
            save(fig, name)
    e2e = data.get("end-to-end", [])
    if e2e:
        fig, ax = plt.subplots(figsize=(9, 5))
        labels = [f"{r['config']}\n{r['device']} {r['filter']}" for r in e2e]
        bottom = [0.0] * len(e2e)
        for stage in ("seed_s", "filter_s", "verify_s"):
            values = [float(r[stage]) for r in e2e]
            ax.bar(range(len(e2e)), values, bottom=bottom, label=stage[:-2])
            bottom = [b + v for b, v in zip(bottom, values)]
        ax.bar(range(len(e2e)), [float(r["overall_s"]) - b for r, b in zip(e2e, bottom)], bottom=bottom,
               label="other (parse, CIGAR, SAM)")
        ax.set_xticks(range(len(e2e)), labels, rotation=90, fontsize=6)
        ax.set(ylabel="seconds", title="gkmap map with and without the filter (cf. paper Table 5, S.24-S.25)")
        ax.legend()
        save(fig, "fig4_end_to_end.png")
    multi = data.get("multi-gpu", [])
    if multi:
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5))
        top = max(int(r["n_gpus"]) for r in multi)
        for ax in (left, right):
            ax.plot([1, top], [1, top], color="grey", lw=0.8, label="linear")
        for (length, way), marker in zip(sorted({(int(r["read_length"]), r["way"]) for r in multi
                                                  if r["part"] == "filter-memory"}), "osd^v<>ph*+x"):
            points = sorted((int(r["n_gpus"]), _num(r.get("kernel_speedup"))) for r in multi
                            if r["part"] == "filter-memory" and int(r["read_length"]) == length and r["way"] == way)
            left.plot(*zip(*points), marker=marker, label=f"ours {length} bp {way}")
        for length in sorted({int(r["read_length"]) for r in multi if r["part"] == "filter-memory"}):
            points = sorted((int(r["n_gpus"]), _num(r.get("published_kernel_speedup"))) for r in multi
                            if r["part"] == "filter-memory" and int(r["read_length"]) == length and r["way"] == "device"
                            and r.get("published_kernel_speedup") not in (None, ""))
            if points:
                left.plot(*zip(*points), ls=":", marker="x", label=f"paper {length} bp device-enc")
        left.set(xlabel="GPUs", ylabel="kernel speed-up over 1 GPU", title="Filter kernel, pairs in memory (cf. S.21-S.23)")
        left.legend(fontsize=6)
        maps = [r for r in multi if r["part"] == "map"]
        newest = max((r.get("device_run") or "" for r in maps), key=lambda run: int(run or 0), default="")
        final = [r for r in maps if r.get("device_run") == newest]
        for name in dict.fromkeys(r["set"] for r in final):
            points = sorted((max(int(r["n_gpus"]), 1), _num(r["speedup_vs_single"])) for r in final
                            if r["set"] == name and r["run"] != "single process")
            right.plot(*zip(*points), marker="o", label=f"gkmap map --gpus N, {name}: x single process")
        for length in sorted({int(r["read_length"]) for r in multi if r["part"] == "filter-file"}):
            points = sorted((int(r["n_gpus"]), _num(r.get("filter_speedup"))) for r in multi
                            if r["part"] == "filter-file" and int(r["read_length"]) == length)
            right.plot(*zip(*points), ls="--", marker="s", label=f"gkmap filter --gpus N file, {length} bp")
            points = sorted((int(r["n_gpus"]), _num(r.get("published_filter_speedup"))) for r in multi
                            if r["part"] == "filter-file" and int(r["read_length"]) == length
                            and r.get("published_filter_speedup") not in (None, ""))
            if points:
                right.plot(*zip(*points), ls=":", marker="x", label=f"paper filter {length} bp device-enc")
        right.set(xlabel="GPUs", ylabel="speed-up", title="Whole commands: map (x single process), filter (x 1 GPU)")
        right.legend(fontsize=6)
        save(fig, "fig5_multigpu_scaling.png")
    return made, ""


# ---------------------------------------------------------------- the report

def _selected_es(rows):
    """E = 0 and about 2, 5 and 10 % of L: the rows the report shows (the CSV holds every E)."""
    length = int(rows[0]["read_length"])
    return {0, math.ceil(0.02 * length), math.ceil(0.05 * length), math.ceil(0.1 * length)}


def build(ctx):
    loaded = {stage: load_stage(ctx, stage) for stage in STAGES}
    data = {s: got[0] for s, got in loaded.items() if got and got[0]}
    if "end-to-end-genome" in data:  # the whole-genome rows are Table 4's too
        data["end-to-end"] = data.get("end-to-end", []) + data["end-to-end-genome"]
    joins = {"filter-accuracy": join_accuracy, "filter-throughput": join_throughput,
             "end-to-end": join_end_to_end, "power": join_power, "multi-gpu": join_multi_gpu}
    for stage, join in joins.items():
        if stage in data:
            data[stage] = join(ctx, data[stage])
    tables = {"sets": "table0_candidate_sets.csv", "filter-accuracy": "table1_filter_accuracy.csv",
              "filter-throughput": "table2_filter_throughput.csv", "end-to-end": "table4_end_to_end.csv",
              "power": "table5_power.csv", "multi-gpu": "table7_multigpu.csv"}
    for stage, name in tables.items():
        if stage in data:
            write_csv(ctx.out / name, data[stage])
    claims = summary(ctx, data)
    write_csv(ctx.out / "table6_summary.csv", claims)
    made, note = figures(ctx, data)

    lines = ["# GateKeeper-GPU paper, reproduced with gkmap", "",
             "Generated by `scripts/reproduce_paper.py` (`make paper`). Every measured number below comes from the "
             "stage runs recorded under `results/`; columns headed **paper** are the published figures, read from "
             "`../shared/data/published/*.csv`, each naming its table and row. Published runs: GTX 1080 Ti "
             "(Setup 1), 30 million pairs, mrFAST on GRCh37; ours: the machines named per table, our own candidate "
             "sets and simulated reads (docs/paper.md says how they differ).", ""]
    missing = [f"- **{TITLES[s]}** (`{s}`): " + (_status(loaded[s][1]) if loaded[s] else "never run")
               for s in STAGES if s not in data or not loaded[s][1]["status"] == "complete"]
    lines += ["## Missing or incomplete stages", ""] + (missing or ["None: every stage has complete results."]) + [""]
    lines += ["## Where each stage ran", "", "Each stage's own run (the tables below repeat it with the command and "
              "versions); seconds = the stage's wall time, without the report.", ""]
    lines += md_table([("stage", "stage"), ("status", "status"), ("size", "size"), ("seconds", "seconds"),
                       ("machine", "machine"), ("GPU", "gpu"), ("date", "date")],
                      [dict(stage=f"`{s}`", status=_status(loaded[s][1]).split(":")[0],
                            size="quick" if loaded[s][1].get("quick") else "full",
                            seconds=loaded[s][1].get("seconds", "not recorded"), machine=loaded[s][1]["machine"],
                            gpu=loaded[s][1].get("gpu", "none used"), date=loaded[s][1]["date"])
                       for s in STAGES if loaded[s]]) + [""]
    lines += ["## 6. Summary of the headline claims", ""]
    lines += md_table([("claim", "claim"), ("paper", "paper"), ("paper source", "paper_source"), ("ours", "ours"),
                       ("verdict", "verdict"), ("why", "why")], claims) + [""]

    if "sets" in data:
        lines += ["## Candidate sets (the paper's \"Sets\")", ""] + provenance(loaded["sets"][1])
        lines += md_table([("set", "set"), ("origin", "origin"), ("genome", "genome"), ("L", "read_length"),
                           ("reads", "reads"), ("candidate pairs", "candidate_pairs"), ("pairs used", "pairs"),
                           ("undefined", "undefined_pairs")], data["sets"]) + [""]
    if "filter-accuracy" in data:
        rows = data["filter-accuracy"]
        shown = [r for r in rows if int(r["E"]) in _selected_es([r])]
        compared = [r for r in rows if r.get("faithful_differs_from_published_program", "") != ""]
        lines += ["## 1. Filter accuracy (paper Figs. 4-5, Tables S.2-S.12)", ""] + provenance(loaded["filter-accuracy"][1])
        lines += [f"False rejects over all {len(rows)} (set, E) rows: improved "
                  f"{sum(int(r['improved_false_rejects']) for r in rows)}, faithful "
                  f"{sum(int(r['faithful_false_rejects']) for r in rows)}. Faithful decisions that differ from the "
                  f"published program's output files: {sum(int(r['faithful_differs_from_published_program']) for r in compared)} "
                  f"over {len(compared)} (shared set, E) rows. Shown: E = 0 and about 2, 5 and 10 % of L; every E is "
                  f"in `table1_filter_accuracy.csv`. FA = false accepts (undefined pairs excluded; in brackets "
                  f"included), rate = FA / edlib rejects.", ""]
        lines += md_table([("set", "set"), ("E", "E"), ("pairs", "pairs"), ("undef.", "undefined_pairs"),
                           ("edlib accepts", "edlib_accepts"), ("faithful accepts", "faithful_accepts"),
                           ("faithful FA", lambda r: f"{r['faithful_false_accepts']} ({r['faithful_false_accepts_incl_undefined']})"),
                           ("improved accepts", "improved_accepts"),
                           ("improved FA", lambda r: f"{r['improved_false_accepts']} ({r['improved_false_accepts_incl_undefined']})"),
                           ("false rejects f/i", lambda r: f"{r['faithful_false_rejects']}/{r['improved_false_rejects']}"),
                           ("FA rate % f/i", lambda r: f"{_fmt(r['faithful_false_accept_rate_pct'])}/"
                                                       f"{_fmt(r['improved_false_accept_rate_pct'])}"),
                           ("**paper** GK-GPU FA rate %", lambda r: r.get("published_gkgpu_false_accept_rate_pct", "")),
                           ("**paper** source", lambda r: r.get("published_source", "")),
                           ("**published program** accepts", lambda r: r.get("published_program_accepts", ""))],
                          shown) + [""]
    if "filter-throughput" in data:
        record = loaded["filter-throughput"][1]
        lines += ["## 2-3. Filter throughput (paper Table 2, S.13-S.20)", ""] + provenance(record)
        lines += [f"One GPU only: the stage times one GPU's in-memory path (this machine has "
                  f"{record.get('gpu_count', 0) or 'no'} GPU(s)); the paper's n-GPU columns (S.21-S.23) are the "
                  f"`multi-gpu` stage's (section 7). "
                  f"Kernel = the filter computation alone (cuda: kernel events); filter = ASCII in host memory to "
                  f"decisions in host memory. Pair counts differ by device and encoding (the run sizes above; "
                  f"cuda host-encoded runs fewer pairs: its host-side packing is the slow part). Effect of E and of "
                  f"read length: figures 2 and 3.", ""]
        lines += md_table([("device", "device"), ("encoding", "encoding"), ("mode", "mode"), ("L", "read_length"),
                           ("E", "E"), ("pairs", "pairs"), ("passes", "repeats"), ("kernel s", "kernel_s"),
                           ("filter s", "filter_s"),
                           ("kernel M/s", "kernel_mpairs_per_s"), ("filter M/s", "filter_mpairs_per_s"),
                           ("kernel G/40min", "kernel_gpairs_per_40min"), ("filter G/40min", "filter_gpairs_per_40min"),
                           ("**paper** kernel M/s", lambda r: r.get("published_kernel_mpairs_per_s", "")),
                           ("**paper** filter M/s", lambda r: r.get("published_filter_mpairs_per_s", "")),
                           ("**paper** kernel G/40min", lambda r: r.get("published_kernel_gpairs_per_40min", "")),
                           ("**paper** filter G/40min", lambda r: r.get("published_filter_gpairs_per_40min", "")),
                           ("**paper** source", lambda r: r.get("published_source", ""))], data["filter-throughput"])
        lines += [""]
    if "end-to-end" in data:
        rows = data["end-to-end"]
        lines += ["## 4. End-to-end mapping with and without the filter (paper Tables 3-5, S.24-S.25)", ""]
        lines += [line for stage in ("end-to-end", "end-to-end-genome") if loaded[stage] and loaded[stage][0]
                  for line in provenance(loaded[stage][1])]
        checks = [f"{r['config']} {r['device']} {r['filter']}: SAM {'identical to' if r['sam_identical_to_none'] == 'True' else 'differs from'} "
                  f"--filter none, {r['lost_mappings']} mappings and {r['lost_mapped_reads']} mapped reads lost"
                  for r in rows if r["filter"] != "none"]
        lines += ["Mapping sets against `--filter none`:", ""] + [f"- {c}" for c in checks] + [""]
        by_key = {(r["config"], r["device"], r["filter"]): r for r in rows}
        ratios = [f"- {c} {f}: cuda {float(g['reads_per_s']) / float(by_key[(c, 'cpu', f)]['reads_per_s']):.1f}x the "
                  f"cpu backend's reads/s ({g['reads']} vs {by_key[(c, 'cpu', f)]['reads']} reads)"
                  for (c, d, f), g in by_key.items() if d == "cuda" and (c, "cpu", f) in by_key]
        if ratios:
            lines += ["cpu vs cuda backend:", ""] + ratios + [""]
        lines += md_table([("config", "config"), ("device", "device"), ("filter", "filter"), ("reads", "reads"),
                           ("mappings", "mappings"), ("mapped reads", "mapped_reads"),
                           ("verification pairs", "verification_pairs"),
                           ("rejected (%)", lambda r: f"{r['rejected_pairs']} ({r['rejected_pct']})"),
                           ("filter+verify s", "filter_verify_s"), ("overall s", "overall_s"),
                           ("reads/s", "reads_per_s"), ("f+v speed-up", "filter_verify_speedup"),
                           ("overall speed-up", "overall_speedup"),
                           ("**paper** rejected %", lambda r: r.get("published_rejected_pct", "")),
                           ("**paper** filtering+DP speed-up", lambda r: r.get("published_filter_dp_speedup", "")),
                           ("**paper** overall speed-up", lambda r: r.get("published_overall_speedup", "")),
                           ("**paper** source", lambda r: r.get("published_source", ""))], rows) + [""]
    if "power" in data:
        rows = data["power"]
        lines += ["## 5. GPU power and utilisation (paper Table 6 / S.26)", ""] + provenance(loaded["power"][1])
        busiest = max(float(r["utilisation_avg_pct"]) for r in rows)
        lines += [f"Average power {min(int(r['power_avg_mw']) for r in rows) / 1000:.0f}-"
                  f"{max(int(r['power_avg_mw']) for r in rows) / 1000:.0f} W against "
                  f"{int(rows[0]['idle_power_mw']) / 1000:.0f} W idle (median before the runs), at an average GPU "
                  f"utilisation of {busiest} % at most"
                  + (": the filter from ASCII in host memory is bound by host work (encoding, copies), so the GPU "
                     "waits most of each pass" if busiest < 10 else "") +
                  ". Samples: NVML readings taken every 10 ms by a Python thread, fewer when the filter holds the "
                  "interpreter.", ""]
        lines += md_table([("mode", "mode"), ("encoding", "encoding"), ("L", "read_length"), ("E", "E"),
                           ("passes", "passes"), ("samples", "samples"), ("idle mW", "idle_power_mw"),
                           ("min mW", "power_min_mw"), ("max mW", "power_max_mw"), ("avg mW", "power_avg_mw"),
                           ("util avg %", "utilisation_avg_pct"),
                           ("**paper** min mW", lambda r: r.get("published_power_min_mw", "")),
                           ("**paper** max mW", lambda r: r.get("published_power_max_mw", "")),
                           ("**paper** avg mW", lambda r: r.get("published_power_average_mw", "")),
                           ("**paper** source", lambda r: r.get("published_source", ""))], data["power"]) + [""]
    if "multi-gpu" in data:
        rows = data["multi-gpu"]
        lines += ["## 7. Several GPUs (paper Tables S.21-S.23, Figure 8 / S.15)", ""] + provenance(loaded["multi-gpu"][1])
        lines += ["Filter rows use the published filter's decisions (`--filter gatekeeper-faithful`). **Pairs in memory**: one "
                  "process per GPU filters its 1/N share at once; kernel = the slowest GPU's filter kernels (CUDA "
                  "events), filter = first start to last end, both as M filtrations/s of all pairs; packed = 2-bit "
                  "words already in pinned memory (the paper's host-encoded kernel without the packing). Speed-up and "
                  "efficiency are over the N = 1 row of the same way (ours) and over the paper's 1-GPU row.", ""]
        lines += md_table([("L", "read_length"), ("E", "E"), ("way", "way"), ("GPUs", "n_gpus"), ("pairs", "pairs"),
                           ("kernel M/s", "kernel_mpairs_per_s"), ("kernel x1", "kernel_speedup"),
                           ("kernel eff.", "kernel_efficiency"), ("filter M/s", "filter_mpairs_per_s"),
                           ("filter x1", "filter_speedup"),
                           ("**paper** kernel M/s", lambda r: r.get("published_kernel_mpairs_per_s", "")),
                           ("**paper** kernel x1", lambda r: r.get("published_kernel_speedup", "")),
                           ("**paper** kernel eff.", lambda r: r.get("published_kernel_efficiency", "")),
                           ("**paper** filter M/s", lambda r: r.get("published_filter_mpairs_per_s", "")),
                           ("**paper** filter x1", lambda r: r.get("published_filter_speedup", "")),
                           ("**paper** source", lambda r: r.get("published_source", ""))],
                          [r for r in rows if r["part"] == "filter-memory"]) + [""]
        lines += ["**From a pairs file** (`gkmap filter --gpus N`, device-encoded, the file in the page cache): the "
                  "command's own filter time (file to output), its kernel time, and the rate at which the file's bytes "
                  "can be read into memory (64 threads; the bound from a file).", ""]
        lines += md_table([("L", "read_length"), ("E", "E"), ("GPUs", "n_gpus"), ("pairs", "pairs"), ("GB", "file_gb"),
                           ("filter M/s", "filter_mpairs_per_s"), ("x1", "filter_speedup"),
                           ("kernel M/s", "kernel_mpairs_per_s"), ("whole command s", "wall_s"),
                           ("file read bound M/s", "file_read_mpairs_per_s"),
                           ("output = 1 GPU's", "output_same_as_first"),
                           ("**paper** filter M/s", lambda r: r.get("published_filter_mpairs_per_s", "")),
                           ("**paper** filter x1", lambda r: r.get("published_filter_speedup", ""))],
                          [r for r in rows if r["part"] == "filter-file"]) + [""]
        lines += ["**Mapping** (`gkmap map -e 5 --gpus N` beside the single process, whole command; the SAM's md5 "
                  "without @PG compared with the single process's; each row names its commit and machine). The "
                  "newest run (the highest run number; its sets carry no run suffix) is the final tree and the figure's; "
                  "earlier runs also have the chunk path (`--chunk-reads 100000`, what `--gpus` ran before issue "
                  "#22). Timeline: seconds from the start of the run, from its summary.", ""]
        lines += md_table([("set", "set"), ("reads", "reads"), ("run", "run"), ("commit", "commit"),
                           ("machine", lambda r: r.get("machine", "")),
                           ("wall s", "wall_s"), ("reads/s", "reads_per_s"), ("x single", "speedup_vs_single"),
                           ("eff.", "efficiency_vs_single"), ("SAM = single", "sam_identical_to_single"),
                           ("timeline", "timeline")], [r for r in rows if r["part"] == "map"]) + [""]
    lines += ["## Figures", ""] + ([f"![{m}]({m})" for m in made] if made else [note or "No stage has results to plot."])
    path = ctx.out / "REPORT.md"
    path.write_text("\n".join(lines) + "\n")
    return path
