"""Tables, target checks and plots of perf/compare/run (see that script).

How it works: run() hands over the medians per (system, collective, ranks,
size). Each collective is read from one column group: out of place, except
broadcast, read in place for every system (MPI_Bcast has one buffer). Bus
bandwidth is recomputed from the median time with nccl-tests' formulas
(busbw = bytes / time x 2(n-1)/n for all-reduce, (n-1)/n for all-gather and
reduce-scatter, 1 for broadcast and reduce), so tiny sizes keep their
precision. Grove's ratio to the best peer is best peer time / grove time:
above 1 grove is faster. Two comparisons: shared memory (grove-shm against
ompi-vader, mpich, gloo) and TCP loopback (grove-socket against ompi-tcp,
gloo). The performance targets are checked on those ratios.
"""
import glob
import os

FABRICS = [
    ("shm", "Shared memory", "grove-shm", ["ompi-vader", "mpich", "gloo"]),
    ("tcp", "TCP loopback", "grove-socket", ["ompi-tcp", "gloo"]),
]
LABELS = {"grove-shm": "grove shm", "grove-socket": "grove socket", "ompi-vader": "Open MPI vader",
          "ompi-tcp": "Open MPI tcp", "mpich": "MPICH", "gloo": "Gloo"}
COLORS = {"grove-shm": "tab:green", "grove-socket": "tab:green", "ompi-vader": "tab:blue",
          "ompi-tcp": "tab:blue", "mpich": "tab:orange", "gloo": "tab:red"}
KIB, MIB = 1 << 10, 1 << 20


# ---------------------------------------------------------------- shared with perf/fabric/bench

def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B") or "0"
    mult = units.get(t[-1], 1)
    return int(float(t[:-1] if t[-1] in units else t) * mult)


def size_list(lo, hi, factor):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def parse_rows(text, sizes):
    """Rows of an nccl-tests output: [{size, oop: (us, algbw, busbw, wrong), ip: ...}]."""
    rows = []
    for line in text.splitlines():
        t = line.split()
        if len(t) != 13 or line.startswith("#") or not t[0].isdigit():
            continue

        def group(k):
            if t[k] == "N/A":
                return None
            return {"us": float(t[k]), "algbw": float(t[k + 1]), "busbw": float(t[k + 2]),
                    "wrong": int(t[k + 3]) if t[k + 3] != "N/A" else 0}
        rows.append({"oop": group(5), "ip": group(9)})
    for r, s in zip(rows, sizes):
        r["size"] = s
    return rows[:len(sizes)]


# ---------------------------------------------------------------- reports


def iters_text(a):
    """How many timed (and warm-up) iterations each size had."""
    def one(its, warm):
        return "%d timed iterations (+%d warm-up)" % (its, warm)
    small = parse_size(str(a.get("small_max", "0")))
    its, warm = a.get("small_iters", a["iters"]), a.get("small_warmup", a["warmup"])
    if small <= 0 or a["size_min"] > small:
        return one(a["iters"], a["warmup"])
    if a["size_max"] <= small:
        return one(its, warm)
    return "%s up to %s, %s above" % (one(its, warm), human(small), one(a["iters"], a["warmup"]))


def variant(coll):
    return "ip" if coll == "broadcast" else "oop"


def human(size):
    for unit, div in (("MiB", MIB), ("KiB", KIB)):
        if size >= div and size % div == 0:
            return "%d %s" % (size // div, unit)
    return "%d B" % size


def bus_factor(coll, n):
    if coll == "all_reduce":
        return 2.0 * (n - 1) / n
    if coll in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    return 1.0


def payload(coll, size, n):
    """Bytes nccl-tests counts for algbw (float32): per-rank counts round down."""
    count = size // 4
    if coll in ("all_gather", "reduce_scatter"):
        count = count // n * n
    return count * 4


def cell(res, system, coll, n, size):
    """(median us, busbw GB/s) or None."""
    try:
        g = res["medians"][system][coll][str(n)][str(size)][variant(coll)]
    except KeyError:
        return None
    if not g:
        return None
    us = g["us"]
    bw = payload(coll, size, n) / (us * 1e-6) / 1e9 * bus_factor(coll, n) if us > 0 else 0.0
    return us, bw


def ratio(res, grove, peers, coll, n, size):
    """(best peer time / grove time, best peer name) or (None, None)."""
    if payload(coll, size, n) == 0:
        return None, None  # nothing moves (all-gather of less than an element per rank)
    g = cell(res, grove, coll, n, size)
    best = None
    for p in peers:
        c = cell(res, p, coll, n, size)
        if c and (best is None or c[0] < best[1]):
            best = (p, c[0])
    if not g or not best or g[0] <= 0:
        return None, None
    return best[1] / g[0], best[0]


def fmt_us(us):
    return "%.0f" % us if us >= 1000 else ("%.1f" % us if us >= 10 else "%.2f" % us)


def fmt_bw(bw):
    return "%.3g" % bw if bw >= 0.001 else "%.1e" % bw


def side_by_side(res, grove, peers, coll, n):
    a = res["args"]
    systems = [grove] + peers
    head = "| size | " + " | ".join("%s µs | GB/s" % LABELS[s] for s in systems) + \
           " | grove / best peer |"
    lines = [head, "|" + "---:|" * (2 * len(systems) + 2)]
    for size in a["size_list"]:
        cols = []
        for s in systems:
            c = cell(res, s, coll, n, size)
            cols += [fmt_us(c[0]), fmt_bw(c[1])] if c else ["—", "—"]
        r, best = ratio(res, grove, peers, coll, n, size)
        rtext = "**%.2f×** (%s)" % (r, LABELS[best]) if r is not None else "—"
        if payload(coll, size, n) == 0:
            rtext = "— (0 elements per rank)"
        lines.append("| %s | %s | %s |" % (human(size), " | ".join(cols), rtext))
    return "\n".join(lines)


def min_ratio(res, grove, peers, coll, n, lo):
    vals = []
    for size in res["args"]["size_list"]:
        if size >= lo:
            r, best = ratio(res, grove, peers, coll, n, size)
            if r is not None:
                vals.append((r, size, best))
    return min(vals) if vals else None


def target_rows(res):
    """[(target, measured text, met text)] for the performance targets, per rank count."""
    a, rows = res["args"], []
    shm_g, shm_p = FABRICS[0][2], FABRICS[0][3]
    tcp_g, tcp_p = FABRICS[1][2], FABRICS[1][3]

    def check(name, grove, peers, coll, n, lo, need):
        m = min_ratio(res, grove, peers, coll, n, lo)
        if m is None:
            rows.append((name, "no data", "—"))
        else:
            txt = "min %.2f× (at %s, vs %s)" % (m[0], human(m[1]), LABELS[m[2]])
            rows.append((name, txt, "met" if m[0] >= need else "**missed**"))

    for n in a["ranks"]:
        if "all_reduce" in a["colls"]:
            check("%d ranks, shm all-reduce ≥ best peer from 64 KiB" % n, shm_g, shm_p,
                  "all_reduce", n, 64 * KIB, 1.0)
            check("%d ranks, shm all-reduce ≥ 1.5× best peer from 4 MiB" % n, shm_g, shm_p,
                  "all_reduce", n, 4 * MIB, 1.5)
            size = a["size_list"][0]
            g, o = cell(res, shm_g, "all_reduce", n, size), cell(res, "ompi-vader", "all_reduce",
                                                                 n, size)
            if g and o:
                q = g[0] / o[0]
                rows.append(("%d ranks, %s latency ≤ 2× Open MPI vader" % (n, human(size)),
                             "%s µs vs %s µs = %.2g×" % (fmt_us(g[0]), fmt_us(o[0]), q),
                             "met" if q <= 2 else "**missed**"))
            else:
                rows.append(("%d ranks, %s latency ≤ 2× Open MPI vader" % (n, human(size)),
                             "no data", "—"))
            check("%d ranks, TCP all-reduce ≥ best peer from 64 KiB" % n, tcp_g, tcp_p,
                  "all_reduce", n, 64 * KIB, 1.0)
        for coll in ("broadcast", "all_gather"):
            if coll in a["colls"]:
                check("%d ranks, shm %s ≥ best peer from 64 KiB" % (n, coll), shm_g, shm_p, coll,
                      n, 64 * KIB, 1.0)
                check("%d ranks, TCP %s ≥ best peer from 64 KiB" % (n, coll), tcp_g, tcp_p, coll,
                      n, 64 * KIB, 1.0)
        for key, name, grove, peers in FABRICS:
            worst = [m for m in (min_ratio(res, grove, peers, c, n, 0) for c in a["colls"]) if m]
            if worst:
                m = min(worst)
                rows.append(("%d ranks, %s: no size > 2× slower (all collectives)" % (n, key),
                             "min %.2f× (%s)" % (m[0], human(m[1])),
                             "met" if m[0] >= 0.5 else "**missed**"))
    return rows


def header(res):
    a, m = res["args"], res["machine"]
    st = res["stream"]
    by_threads = {}
    for s in st:
        if s["gbs"]:
            by_threads.setdefault(s["threads"], []).append("%.1f" % s["gbs"])
    stream_txt = ", ".join("%d thread%s %s GB/s" % (t, "" if t == 1 else "s", " / ".join(g))
                           for t, g in sorted(by_threads.items())) or "not measured"
    vers = ", ".join("%s: %s" % (LABELS.get(k, k), v) for k, v in sorted(res["versions"].items()))
    out = [
        "# Grove vs Open MPI, MPICH and Gloo — %s" % res["started"],
        "",
        "- machine: %s, %s CPUs; load average %.2f at start, %.2f at end" % (
            m.get("cpu", "?"), m.get("cpus"), m["loadavg_start"][0], m["loadavg_end"][0]),
        "- grove %s (%s)" % (m.get("grove_rev", "?"), res.get("grove_bin")),
        "- peers: %s" % (vers or "none ran"),
        "- ranks %s; sizes %s … %s ×%d; float32, sum; %s per size; %smedian of %d interleaved "
        "repetitions" % (
            ",".join(map(str, a["ranks"])), human(a["size_min"]), human(a["size_max"]),
            a["factor"], iters_text(a),
            "a %g s pause before every launch; " % a["settle"] if a.get("settle") else "",
            a["reps"]),
        "- memory bandwidth (STREAM copy, read + write bytes, median of 10 trials; before / "
        "after the run): %s" % stream_txt,
        "- ratio = best peer time / grove time (> 1: grove faster); broadcast read in place "
        "(MPI_Bcast has one buffer), the others out of place",
    ]
    for s, why in sorted(res["missing"].items()):
        out.append("- **%s missing**: %s" % (LABELS[s], why))
    failed = [r for r in res["runs"] if not r["rows"]]
    for r in failed:
        out.append("- **failed run**: %s %s %d ranks rep %d: %s" % (
            LABELS[r["system"]], r["coll"], r["ranks"], r["rep"], r["note"]))
    return "\n".join(out)


def ratio_summary(res):
    """One table of grove / best peer: a row per size, a column per (fabric, collective, ranks)."""
    a = res["args"]
    short = {"all_reduce": "AR", "broadcast": "BC", "all_gather": "AG", "reduce": "R",
             "reduce_scatter": "RS"}
    cols = [(key, grove, peers, c, n) for key, _, grove, peers in FABRICS for c in a["colls"]
            for n in a["ranks"]]
    lines = ["| size | " + " | ".join("%s %s %d" % (k, short[c], n) for k, _, _, c, n in cols) + " |",
             "|---:|" + "---:|" * len(cols)]
    for size in a["size_list"]:
        vals = []
        for _, grove, peers, c, n in cols:
            r, _ = ratio(res, grove, peers, c, n, size)
            vals.append("—" if r is None else ("%.2f" % r if r >= 1 else "*%.2f*" % r))
        lines.append("| %s | %s |" % (human(size), " | ".join(vals)))
    return "\n".join(lines)


def markdown(res):
    parts = [header(res), "", "## Performance targets", "", "| target | measured | |",
             "|---|---|---|"]
    parts += ["| %s | %s | %s |" % r for r in target_rows(res)]
    parts += ["", "## grove / best peer at a glance", "",
              "shm: grove shm vs Open MPI vader, MPICH, Gloo; tcp: grove socket vs Open MPI tcp, "
              "Gloo. AR all-reduce, BC broadcast, AG all-gather; the number is the rank count. "
              "Below 1 (italic) grove is slower.", "", ratio_summary(res)]
    a = res["args"]
    for key, name, grove, peers in FABRICS:
        for coll in a["colls"]:
            for n in a["ranks"]:
                parts += ["", "## %s: %s, %d ranks" % (name, coll, n), "",
                          side_by_side(res, grove, peers, coll, n)]
    return "\n".join(parts) + "\n"


def plot(res, name, grove, peers, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a = res["args"]
    colls, ranks = a["colls"], a["ranks"]
    fig, axes = plt.subplots(len(colls), len(ranks), figsize=(5.5 * len(ranks), 3.8 * len(colls)),
                             squeeze=False)
    stream1 = max([s["gbs"] for s in res["stream"] if s["gbs"] and s["threads"] == 1] or [0])
    for i, coll in enumerate(colls):
        for j, n in enumerate(ranks):
            ax = axes[i][j]
            for s in [grove] + peers:
                pts = [(size, cell(res, s, coll, n, size)) for size in a["size_list"]]
                pts = [(size, c[1]) for size, c in pts if c and c[1] > 0]
                if pts:
                    ax.plot(*zip(*pts), marker="o", ms=3, color=COLORS[s], label=LABELS[s],
                            linewidth=2.2 if s == grove else 1.2)
            if stream1:
                ax.axhline(stream1, color="gray", linestyle="--", linewidth=1,
                           label="STREAM copy, 1 thread")
            ax.set_xscale("log", base=2)
            ticks = a["size_list"][::max(1, len(a["size_list"]) // 6)]
            ax.set_xticks(ticks)
            ax.set_xticklabels([human(t).replace(" ", "") for t in ticks], fontsize=8)
            ax.minorticks_off()
            ax.set_yscale("log")
            ax.set_title("%s: %s, %d ranks" % (name, coll, n), fontsize=10)
            ax.set_xlabel("size")
            ax.set_ylabel("busbw (GB/s)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def versions_from_logs(logdir):
    """{system: "# Peer:" text} from the first log of each system."""
    out = {}
    for path in sorted(glob.glob(os.path.join(logdir, "*.log"))):
        system = os.path.basename(path).split("-all")[0].split("-broadcast")[0]
        system = system.split("-reduce")[0]
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("# Peer: "):
                    out.setdefault(system, line[8:].strip())
                    break
    return out


def write_all(res, outdir):
    """Writes results.md and the plots; returns their paths."""
    paths = [os.path.join(outdir, "results.md")]
    with open(paths[0], "w") as f:
        f.write(markdown(res))
    for key, name, grove, peers in FABRICS:
        path = os.path.join(outdir, "busbw_%s.png" % key)
        try:
            plot(res, name, grove, peers, path)
            paths.append(path)
        except Exception as e:  # noqa: BLE001 - a missing matplotlib must not lose the tables
            print("run: plot %s failed: %s (use /usr/bin/python3 with python3-matplotlib)" %
                  (path, e))
    return paths

