"""Tables, plots and the one-line summary of perf/fabric/bench (see that script).

How it works: bench hands over, per fabric, the median busbw per (system,
collective, size) and grove-plan's predictions for the same sizes. Figures
are shown in MB/s, the unit the fabrics are emulated in (a fabric's link of
"25 GB/s" runs at 25 x scale MB/s; the scale is in each fabric's note).
For each size the table shows every system's measured busbw with the cost
model's prediction for that algorithm in brackets, the planner's upper bound,
and auto's ratios: to rings, to Open MPI, to the bound, and its measured
figure against its prediction.
"""
import json
import os

import compare_report

LABELS = {"rings": "grove rings", "trees": "grove trees", "auto": "grove auto", "ompi": "Open MPI tcp"}
COLORS = {"rings": "tab:orange", "trees": "tab:green", "auto": "black", "ompi": "tab:blue"}
# grove-plan's prediction that stands beside each measured system.
PREDICTED = {"rings": "ring", "trees": "trees", "auto": "selected"}


def mbs(gbs):
    return gbs * 1000.0


def measured(f, system, coll, size):
    """Median busbw (GB/s) or None."""
    try:
        return f["medians"][system][coll][str(size)]["busbw"]
    except KeyError:
        return None


def predicted(f, system, coll, size):
    try:
        return f["predictions"][coll][str(size)].get(PREDICTED.get(system, "-"))
    except KeyError:
        return None


def bound(f, coll, size):
    try:
        return f["predictions"][coll][str(size)].get("bound")
    except KeyError:
        return None


def fmt(v, digits=1):
    return "-" if v is None else "%.*f" % (digits, v)


def ratio(x, y):
    return None if not x or not y else x / y


def table(f, coll, sizes, systems):
    lines = ["| size | " + " | ".join(LABELS[s] for s in systems) +
             " | bound | auto picks | auto / rings | auto / MPI | auto / bound | auto / predicted |",
             "|---|" + "---|" * (len(systems) + 6)]
    for size in sizes:
        cells = []
        for s in systems:
            m, p = measured(f, s, coll, size), predicted(f, s, coll, size)
            cells.append(fmt(mbs(m) if m else None) + ("" if p is None else " (%s)" % fmt(mbs(p))))
        auto = measured(f, "auto", coll, size)
        b = bound(f, coll, size)
        picks = f["predictions"].get(coll, {}).get(str(size), {}).get("picks", "-")
        r = [ratio(auto, measured(f, "rings", coll, size)), ratio(auto, measured(f, "ompi", coll, size)),
             ratio(auto, b), ratio(auto, predicted(f, "auto", coll, size))]
        lines.append("| %s | %s | %s | %s | %s |" % (
            compare_report.human(size), " | ".join(cells), fmt(mbs(b) if b else None), picks,
            " | ".join(fmt(x, 2) for x in r)))
    return "\n".join(lines)


def markdown(res):
    a = res["args"]
    out = ["# grove over emulated fabrics", "",
           "busbw in MB/s as emulated (nccl-tests formulas), median of %d repetition(s); "
           "in brackets the cost model's prediction for the same program; 'bound' is the "
           "planner's upper bound. Sizes %s .. %s." % (
               a["reps"], compare_report.human(a["size_list"][0]), compare_report.human(a["size_list"][-1])),
           ""]
    for f in res["fabrics"]:
        out.append("## %s" % f["fabric"])
        out.append("")
        if "error" in f:
            out += ["failed: `%s`" % f["error"].strip().splitlines()[-1] if f["error"].strip() else "failed", ""]
            continue
        if f.get("note"):
            out += ["%s (%d ranks)" % (f["note"], f.get("nranks", 0)), ""]
        for coll in a["colls"]:
            out += ["### %s" % coll, "", table(f, coll, a["size_list"], a["systems"]), ""]
        for fail in f["failures"]:
            out.append("- failed: %s %s rep %d: %s" % (fail["system"], fail["coll"], fail["rep"], fail["why"]))
        out.append("")
    out += ["## Summary (all-reduce at the largest size)", "", "```", json.dumps(summary(res), sort_keys=True), "```", ""]
    return "\n".join(out)


def summary(res):
    """{fabric: {rings, trees, auto, ompi, predicted, bound}} in MB/s, all-reduce at the largest size."""
    out = {}
    size = res["args"]["size_list"][-1]
    for f in res["fabrics"]:
        if "error" in f:
            out[f["fabric"]] = {"error": f["error"].strip().splitlines()[-1] if f["error"].strip() else "failed"}
            continue
        row = {"size": size, "unit": "MB/s"}
        for s in ("rings", "trees", "auto", "ompi"):
            m = measured(f, s, "all_reduce", size)
            row[s] = round(mbs(m), 2) if m else None
        for s in ("rings", "trees", "auto"):
            p = predicted(f, s, "all_reduce", size)
            row["predicted_" + s] = round(mbs(p), 2) if p else None
        b = bound(f, "all_reduce", size)
        row["bound"] = round(mbs(b), 2) if b else None
        out[f["fabric"]] = row
    return out


def plot(res, f, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a = res["args"]
    fig, axes = plt.subplots(1, len(a["colls"]), figsize=(6 * len(a["colls"]), 4), squeeze=False)
    for j, coll in enumerate(a["colls"]):
        ax = axes[0][j]
        for s in a["systems"]:
            pts = [(z, measured(f, s, coll, z)) for z in a["size_list"]]
            pts = [(z, mbs(v)) for z, v in pts if v]
            if pts:
                ax.plot(*zip(*pts), marker="o", ms=3, color=COLORS[s], label=LABELS[s],
                        linewidth=2.2 if s == "auto" else 1.2)
            pred = [(z, predicted(f, s, coll, z)) for z in a["size_list"]]
            pred = [(z, mbs(v)) for z, v in pred if v]
            if pred and s != "auto":
                ax.plot(*zip(*pred), linestyle=":", color=COLORS[s], linewidth=1,
                        label=LABELS[s] + " (predicted)")
        bd = [(z, bound(f, coll, z)) for z in a["size_list"]]
        bd = [(z, mbs(v)) for z, v in bd if v]
        if bd:
            ax.plot(*zip(*bd), linestyle="--", color="gray", linewidth=1, label="upper bound")
        ax.set_xscale("log", base=2)
        ax.set_xticks(a["size_list"])
        ax.set_xticklabels([compare_report.human(t).replace(" ", "") for t in a["size_list"]], fontsize=8)
        ax.minorticks_off()
        ax.set_title("%s: %s, %d ranks" % (f["fabric"], coll, f.get("nranks", 0)), fontsize=10)
        ax.set_xlabel("size")
        ax.set_ylabel("busbw (MB/s, emulated)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_all(res, outdir, extra=None):
    """Writes results.md, results.json and one PNG per fabric; returns the names written."""
    written = []
    dirs = [outdir] + ([extra] if extra else [])
    for d in dirs:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "results.md"), "w") as fh:
            fh.write(markdown(res))
        with open(os.path.join(d, "results.json"), "w") as fh:
            json.dump(res, fh, indent=1, default=str)
    written += ["results.md", "results.json"]
    try:
        for f in res["fabrics"]:
            if "error" in f or not f.get("medians"):
                continue
            name = "busbw_%s.png" % f["fabric"]
            for d in dirs:
                plot(res, f, os.path.join(d, name))
            written.append(name)
    except ImportError:
        print("bench: matplotlib missing: no plots (apt-get install python3-matplotlib)")
    return written


# ------------------------------------------------------------------ --model

MODEL_BEGIN, MODEL_END = "<!-- model-table -->", "<!-- /model-table -->"


def model_table(res):
    """Markdown: per fabric and collective, predicted / measured time per size with the pick."""
    sizes = res["args"]["size_list"]
    lines = ["| fabric | collective | " + " | ".join(compare_report.human(z) for z in sizes) + " |",
             "|---|---|" + "---|" * len(sizes)]
    ratios = []
    for f in res["fabrics"]:
        if "error" in f:
            lines.append("| %s | failed | %s |" % (f["fabric"], " | ".join("-" for _ in sizes[1:])))
            continue
        for coll in res["args"]["colls"]:
            cells = []
            for z in sizes:
                pred = f["predictions"].get(coll, {}).get(str(z), {})
                try:
                    us = f["medians"]["auto"][coll][str(z)]["us"]
                except KeyError:
                    us = None
                r = ratio(pred.get("selected_us"), us)
                if r is not None:
                    ratios.append((r, f["fabric"], coll, z))
                cells.append("%s (%s)" % (fmt(r, 2), pred.get("picks", "-")))
            lines.append("| %s | %s | %s |" % (f["fabric"], coll, " | ".join(cells)))
    within = sum(1 for r in ratios if 0.85 <= r[0] <= 1.15)
    lines += ["", "(predicted / measured time per call, the algorithm the tuned selector picks "
              "in brackets; %d of %d within 0.85-1.15%s.)" % (
                  within, len(ratios),
                  "; range %.2f-%.2f" % (min(r[0] for r in ratios), max(r[0] for r in ratios))
                  if ratios else "")]
    return "\n".join(lines)


def write_model(res, outdir, extra=None, doc=None):
    """Writes model.md (and the table into `doc` between the markers); returns the names written."""
    text = model_table(res) + "\n"
    for d in [outdir] + ([extra] if extra else []):
        with open(os.path.join(d, "model.md"), "w") as fh:
            fh.write(text)
    print(text)
    if doc:
        with open(doc) as fh:
            body = fh.read()
        a, b = body.find(MODEL_BEGIN), body.find(MODEL_END)
        if a < 0 or b < a:
            raise SystemExit("bench: %s lacks the lines %s and %s" % (doc, MODEL_BEGIN, MODEL_END))
        body = body[:a + len(MODEL_BEGIN)] + "\n" + text + body[b:]
        with open(doc, "w") as fh:
            fh.write(body)
    return ["model.md"]
