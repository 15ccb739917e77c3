#!/usr/bin/env python3
"""Tables and SVG plots of the job manager's experiments (seed 001 §4).

    gang_plot.py bw CSV SVG       aggregate bandwidth (bench/gang_bw.sh): per mode, one
                                  line per number of jobs over message size (Figures 5, 6)
    gang_plot.py switch CSV SVG   context-switch stage times (bench/gang_switch.sh): per
                                  number of nodes, the median of each stage (Figures 7-9)

Prints the table; writes a self-contained SVG (no plotting library needed).
"""
import csv
import math
import statistics
import sys

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]


def svg_panel(x0, y0, w, h, title, xs_label, ys_label, series, xlog=True):
    """One line chart; series: list of (name, [(x, y)])."""
    out = []
    pts = [p for _, s in series for p in s]
    if not pts:
        return out
    xv = [math.log2(x) if xlog else x for x, _ in pts]
    xmin, xmax = min(xv), max(xv)
    if xmax == xmin:
        xmax = xmin + 1
    ymax = max(y for _, y in pts) * 1.1 or 1
    px = lambda x: x0 + 50 + (((math.log2(x) if xlog else x) - xmin) / (xmax - xmin)) * (w - 70)
    py = lambda y: y0 + h - 40 - (y / ymax) * (h - 70)
    out.append(f'<text x="{x0 + w / 2}" y="{y0 + 16}" text-anchor="middle" font-size="13">{title}</text>')
    out.append(f'<line x1="{x0 + 50}" y1="{y0 + h - 40}" x2="{x0 + w - 20}" y2="{y0 + h - 40}" stroke="black"/>')
    out.append(f'<line x1="{x0 + 50}" y1="{y0 + 30}" x2="{x0 + 50}" y2="{y0 + h - 40}" stroke="black"/>')
    for i in range(5):
        y = ymax * i / 4
        out.append(f'<text x="{x0 + 45}" y="{py(y) + 4}" text-anchor="end" font-size="10">{y:.0f}</text>')
    for x in sorted({x for x, _ in pts}):
        out.append(f'<text x="{px(x)}" y="{y0 + h - 26}" text-anchor="middle" font-size="10">{x}</text>')
    out.append(f'<text x="{x0 + w / 2}" y="{y0 + h - 8}" text-anchor="middle" font-size="11">{xs_label}</text>')
    out.append(f'<text x="{x0 + 12}" y="{y0 + h / 2}" font-size="11" transform="rotate(-90 {x0 + 12} {y0 + h / 2})" text-anchor="middle">{ys_label}</text>')
    for i, (name, s) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        s = sorted(s)
        d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s)
        out.append(f'<polyline points="{d}" fill="none" stroke="{c}" stroke-width="2"/>')
        for x, y in s:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}"/>')
        out.append(f'<text x="{x0 + w - 90}" y="{y0 + 36 + 14 * i}" font-size="11" fill="{c}">{name}</text>')
    return out


def write_svg(path, panels, w=440, h=320):
    body = []
    for i, p in enumerate(panels):
        body += svg_panel(i * w, 0, w, h, *p)
    with open(path, "w") as f:
        f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{w * len(panels)}" height="{h}" font-family="sans-serif">\n')
        f.write('<rect width="100%" height="100%" fill="white"/>\n')
        f.write("\n".join(body))
        f.write("\n</svg>\n")


def bw(csv_path, svg_path):
    rows = list(csv.DictReader(open(csv_path)))
    modes = sorted({r["mode"] for r in rows}, key=lambda m: m != "partitioned")
    panels = []
    for mode in modes:
        mine = [r for r in rows if r["mode"] == mode]
        jobs = sorted({int(r["jobs"]) for r in mine})
        sizes = sorted({int(r["bytes"]) for r in mine})
        val = {(int(r["jobs"]), int(r["bytes"])): float(r["aggregate_MBps"]) for r in mine}
        print(f"\n{mode}: aggregate bandwidth (MB/s) of K concurrent 2-rank jobs")
        print(f"{'bytes':>8} " + " ".join(f"{'K=' + str(k):>10}" for k in jobs)
              + "   K=max/K=1")
        for s in sizes:
            cells = [val.get((k, s)) for k in jobs]
            ratio = (cells[-1] / cells[0]) if cells[0] and cells[-1] is not None else float("nan")
            print(f"{s:>8} " + " ".join(f"{c:>10.1f}" if c is not None else f"{'-':>10}" for c in cells)
                  + f"   {ratio:>8.2f}")
        series = [(f"{k} job{'s' if k > 1 else ''}", [(s, val[(k, s)]) for s in sizes if (k, s) in val])
                  for k in jobs]
        panels.append((f"{mode} buffers", "message size (bytes)", "aggregate MB/s", series))
    write_svg(svg_path, panels)


def switch(csv_path, svg_path):
    rows = list(csv.DictReader(open(csv_path)))
    nodes = sorted({int(r["nodes"]) for r in rows})
    stages = ["halt_us", "switch_us", "release_us"]
    med = {}
    print(f"{'nodes':>5} {'switches':>8} " + " ".join(f"{s:>12}" for s in stages)
          + f" {'total_us':>10} {'% of quantum':>12} {'% of 1 s':>9} {'saved dgrams':>12}")
    for n in nodes:
        mine = [r for r in rows if int(r["nodes"]) == n]
        m = [statistics.median(float(r[s]) for r in mine) for s in stages]
        q = statistics.median(float(r["quantum_ms"]) for r in mine) * 1000
        saved = statistics.median(float(r.get("datagrams") or 0) for r in mine)
        med[n] = m
        print(f"{n:>5} {len(mine):>8} " + " ".join(f"{v:>12.0f}" for v in m)
              + f" {sum(m):>10.0f} {100 * sum(m) / q:>11.2f}% {sum(m) / 1e4:>8.2f}% {saved:>12.0f}")
    series = [(s.replace("_us", ""), [(n, med[n][i]) for n in nodes]) for i, s in enumerate(stages)]
    series.append(("total", [(n, sum(med[n])) for n in nodes]))
    write_svg(svg_path, [("context-switch stages (median)", "nodes", "microseconds", series)])


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("bw", "switch"):
        sys.exit(__doc__)
    {"bw": bw, "switch": switch}[sys.argv[1]](sys.argv[2], sys.argv[3])
