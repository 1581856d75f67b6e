"""Writes a benchmark run as latest.json, latest.md and latest.png (gnuplot)."""
import json
import math
import os
import shutil
import subprocess

TITLES = {
    "S1": "S1 - a call in a reused sandbox (`true`, output captured)",
    "S2": "S2 - a call in a fresh container",
    "S3": "S3 - copy-in of 10,000 files / 100 MB",
    "S4": "S4 - the same workspace, unchanged, on the next call",
    "S5": "S5 - throughput, 8 concurrent clients making S1 calls",
    "S6": "S6 - the runner's resident memory",
    "S7": "S7 - removing sandboxes",
}


def row(results, scen, prefix):
    for r in results.get(scen, []):
        if r["name"].startswith(prefix):
            return r
    return None


def ratio(a, b):
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return float("nan")
    return a / b


def targets(res):
    """(id, text, value, limit, sense, ok): sense '<=' or '>='."""
    out = []

    def p50(s, prefix):
        r = row(res, s, prefix)
        return r["p50"] if r else None

    def add(tid, text, value, limit, sense):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            out.append({"id": tid, "text": text, "value": None, "limit": limit, "sense": sense,
                        "ok": False})
            return
        ok = value <= limit if sense == "<=" else value >= limit
        out.append({"id": tid, "text": text, "value": value, "limit": limit, "sense": sense,
                    "ok": ok})

    floor1 = p50("S1", "floor")
    add("S1-lib-floor", "S1 library p50 / floor p50", ratio(p50("S1", "sandman library"), floor1),
        1.15, "<=")
    add("S1-http-floor", "S1 HTTP API p50 / floor p50", ratio(p50("S1", "sandman HTTP"), floor1),
        1.15, "<=")
    sdk1 = p50("S1", "Python SDK")
    add("S1-lib-sdk", "S1 library p50 / SDK exec_run p50", ratio(p50("S1", "sandman library"), sdk1),
        0.7, "<=")
    add("S1-http-sdk", "S1 HTTP API p50 / SDK exec_run p50", ratio(p50("S1", "sandman HTTP"), sdk1),
        0.7, "<=")
    pool = p50("S2", "sandman per_tool, warm pool")
    add("S2-pool-S1", "S2 warm pool p50 / S1 library p50", ratio(pool, p50("S1", "sandman library")),
        1.5, "<=")
    add("S2-run-pool", "docker run --rm p50 / S2 warm pool p50", ratio(p50("S2", "docker run"), pool),
        3.0, ">=")
    run2 = p50("S2", "docker run")
    add("S2-run-spaced", "docker run --rm p50 / S2 HTTP API, 1-5 s between calls p50",
        ratio(run2, p50("S2", "sandman per_tool, HTTP API, 1-5 s")), 50.0, ">=")
    add("S2-spaced-ms", "S2 HTTP API, 1-5 s between calls p50 (ms)",
        p50("S2", "sandman per_tool, HTTP API, 1-5 s"), 5.0, "<=")
    add("S2-run-bursts", "docker run --rm p50 / S2 HTTP API, bursts p50",
        ratio(run2, p50("S2", "sandman per_tool, HTTP API, bursts")), 5.0, ">=")
    add("S1-http-ms", "S1 HTTP API p50 (ms)", p50("S1", "sandman HTTP"), 3.0, "<=")
    s3 = p50("S3", "sandman copy-in (sync)")
    s3call = p50("S3", "sandman call")
    add("S3-cp", "docker cp p50 / S3 sandman copy-in p50", ratio(p50("S3", "docker cp"), s3), 1.5,
        ">=")
    add("S3-cp-call", "docker cp p50 / S3 sandman whole call p50",
        ratio(p50("S3", "docker cp"), s3call), 1.5, ">=")
    add("S4-S3", "S4 p50 / S3 p50 (copy-in)", ratio(p50("S4", "sandman copy-in"), s3), 0.05, "<=")
    add("S4-S3-call", "S4 p50 / S3 p50 (whole calls)", ratio(p50("S4", "sandman call"), s3call),
        0.05, "<=")
    add("S5-floor", "S5 HTTP calls/s / floor calls/s", ratio(p50("S5", "sandman"), p50("S5", "floor")),
        0.9, ">=")
    add("S6-rss", "S6 runner VmRSS (MB)", p50("S6", "runner"), 20.0, "<=")
    add("S7-floor", "S7 sandman reap time / floor parallel time",
        ratio(p50("S7", "sandman"), p50("S7", "floor")), 1.2, "<=")
    return out


def fmt(v, unit=""):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if abs(v) >= 100:
        s = "%.0f" % v
    elif abs(v) >= 10:
        s = "%.1f" % v
    else:
        s = "%.2f" % v
    return s + unit


def markdown(meta, res, tgts, counts, png_name):
    L = []
    L.append("# sandman benchmark: latest run\n")
    L.append("%s on `%s` (%s CPUs, %s GB, kernel %s), Docker Engine %s, image `%s`%s. "
             "Every figure below comes from this one run; ratios compare p50s (S5: calls/s, "
             "S6: MB, S7: total time). Run time %ss.\n" % (
                 meta["date"], meta["host"], meta["cpus"], meta["mem_gb"], meta["kernel"],
                 meta["engine"], meta["image"], ", --quick" if meta["quick"] else "",
                 meta.get("duration_s", "?")))
    L.append("## Targets\n")
    L.append("| target | measured | limit | |")
    L.append("|---|---|---|---|")
    for t in tgts:
        L.append("| %s | %s | %s %s | %s |" % (t["text"], fmt(t["value"]), t["sense"],
                                               fmt(t["limit"]), "met" if t["ok"] else "**missed**"))
    L.append("")
    for scen in ("S1", "S2", "S3", "S4", "S5", "S6", "S7"):
        rows = res.get(scen)
        if not rows:
            continue
        L.append("## %s\n" % TITLES[scen])
        ref = None
        if scen in ("S1", "S2"):
            ref = next((r for r in rows if r["kind"] == "sandman"), None)
        if scen in ("S1", "S2", "S3", "S4"):
            L.append("| client | calls | p50 | p95 | mean | vs %s | note |" %
                     (ref["name"] if ref else "sandman"))
            L.append("|---|---|---|---|---|---|---|")
            for r in rows:
                vs = ""
                if ref is not None and r is not ref:
                    vs = "%sx" % fmt(ratio(r["p50"], ref["p50"]))
                L.append("| %s | %d | %s | %s | %s | %s | %s |" % (
                    r["name"], r["n"], fmt(r["p50"], " ms"), fmt(r["p95"], " ms"),
                    fmt(r["mean"], " ms"), vs, r.get("note", "")))
        else:
            L.append("| client | value | detail |")
            L.append("|---|---|---|")
            for r in rows:
                detail = []
                if "p50_latency_ms" in r:
                    detail.append("latency p50 %s, p95 %s" % (fmt(r["p50_latency_ms"], " ms"),
                                                              fmt(r["p95_latency_ms"], " ms")))
                if "round_rates" in r:
                    detail.append("%d calls; per round %s" % (
                        r["calls"], ", ".join(fmt(x) for x in r["round_rates"])))
                if "per_sandbox_ms" in r:
                    detail.append("%s per sandbox" % fmt(r["per_sandbox_ms"], " ms"))
                if "vmhwm_mb" in r:
                    detail.append("peak (VmHWM) %s, idle at start %s" % (
                        fmt(r["vmhwm_mb"], " MB"), fmt(r["idle_rss_mb"], " MB")))
                if r.get("note"):
                    detail.append(r["note"])
                L.append("| %s | %s %s | %s |" % (r["name"], fmt(r["p50"]), r["unit"],
                                                  "; ".join(detail)))
        L.append("")
    if counts:
        L.append("## Engine requests per call\n")
        L.append("Counted from the client's socket writes with `strace -f` over %d calls. \"On "
                 "the call's path\" are the requests a call waits for; \"background\" those of "
                 "the pool's threads (refills, removals), which no call waits for.\n" %
                 next(iter(counts.values()))["calls"])
        L.append("| client | on the call's path, per call | background, per call | connections "
                 "per call | breakdown (totals) |")
        L.append("|---|---|---|---|---|")
        for name, c in counts.items():
            n = c["calls"]
            fg = sum(c["requests"].values())
            bg = sum(c.get("background", {}).values())
            detail = "path: " + ", ".join("%s x%d" % kv for kv in sorted(c["requests"].items()))
            if c.get("background"):
                detail += "; background: " + ", ".join(
                    "%s x%d" % kv for kv in sorted(c["background"].items()))
            if c.get("housekeeping"):
                detail += "; the runner's own health check and idle reap meanwhile: " + ", ".join(
                    "%s x%d" % kv for kv in sorted(c["housekeeping"].items()))
            if c.get("note"):
                detail += " (%s)" % c["note"]
            L.append("| %s | %s | %s | %s | %s |" % (name, fmt(fg / n), fmt(bg / n),
                                                     fmt(c["connects"] / n), detail))
        L.append("")
    L.append("Process start-up of a CLI peer, measured here: %s ms (included in its rows).\n" %
             fmt(meta.get("spawn_ms")))
    if png_name:
        L.append("![chart](%s)\n" % png_name)
    return "\n".join(L)


def chart(path, res):
    gp = shutil.which("gnuplot")
    if gp is None:
        return False
    d = os.path.dirname(path)
    data = {}
    for scen in ("S1", "S2", "S3"):
        rows = list(res.get(scen, []))
        if scen == "S3":
            rows += res.get("S4", [])
        fn = os.path.join(d, ".chart-%s.dat" % scen)
        with open(fn, "w") as f:
            for r in rows:
                f.write('"%s" %.3f %.3f\n' % (r["name"].replace('"', "'"), r["p50"], r["p95"]))
        data[scen] = fn
    s5 = res.get("S5", [])
    s7 = res.get("S7", [])
    fn5 = os.path.join(d, ".chart-S5.dat")
    with open(fn5, "w") as f:
        for r in s5:
            f.write('"%s" %.3f\n' % (r["name"], r["p50"]))
    fn7 = os.path.join(d, ".chart-S7.dat")
    with open(fn7, "w") as f:
        for r in s7:
            f.write('"%s" %.3f\n' % (r["name"], r["p50"] / 1000.0))
    script = """
set terminal pngcairo size 1600,1200 font 'DejaVu Sans,10' noenhanced
set output '%(out)s'
set multiplot layout 3,2 title 'sandman vs peers (p50 and p95; lower is better except S5)'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set yrange [0:*]
set xtics rotate by -25 left
set key top left
set ylabel 'ms'
set title 'S1: a call in a reused sandbox'
plot '%(s1)s' using 2:xtic(1) title 'p50', '' using 3 title 'p95'
set title 'S2: a call in a fresh container'
plot '%(s2)s' using 2:xtic(1) title 'p50', '' using 3 title 'p95'
set title 'S3/S4: copy-in of 10,000 files / 100 MB, then unchanged'
plot '%(s3)s' using 2:xtic(1) title 'p50', '' using 3 title 'p95'
set title 'S5: throughput, 8 clients (higher is better)'
set ylabel 'calls/s'
plot '%(s5)s' using 2:xtic(1) title 'calls/s'
set title 'S7: removing sandboxes (total time)'
set ylabel 's'
plot '%(s7)s' using 2:xtic(1) title 'seconds'
unset multiplot
""" % {"out": path, "s1": data["S1"], "s2": data["S2"], "s3": data["S3"], "s5": fn5, "s7": fn7}
    p = subprocess.run([gp], input=script, text=True, capture_output=True)
    for fn in list(data.values()) + [fn5, fn7]:
        os.unlink(fn)
    if p.returncode != 0:
        print("bench: gnuplot failed: " + p.stderr[-1000:])
        return False
    return True


def write(out_dir, meta, res, counts):
    os.makedirs(out_dir, exist_ok=True)
    tgts = targets(res)
    png = os.path.join(out_dir, "latest.png")
    have_png = chart(png, res)
    with open(os.path.join(out_dir, "latest.json"), "w") as f:
        json.dump({"meta": meta, "scenarios": res, "targets": tgts, "engine_requests": counts}, f,
                  indent=1, allow_nan=True)
    md = markdown(meta, res, tgts, counts, "latest.png" if have_png else None)
    with open(os.path.join(out_dir, "latest.md"), "w") as f:
        f.write(md)
    print(md)
