#!/usr/bin/env python3
"""Seed 002's experiments on this machine, with tables and SVG figures.

    seed002.py multisend [OUT_DIR]
        `phalanx-bench multisend`: one multi-send (sendmmsg) against k separate sends to
        k = 1..15 destinations, sizes 64 B .. 16 KiB (the paper's Figures 4 and 5):
        latency and factor of improvement per size, one line per k in {1, 3, 7, 15}.

    seed002.py trees [OUT_DIR] [N ...]
        Broadcast without multicast (PHALANX_MCAST=0) across N test hosts (network
        namespaces on a bridge, veth MTU 1500, one rank each; default N = 4 8 16):
        the optimal tree with packet-wise pipelining, the optimal tree without it, and
        the binomial tree, PAIRS (default 5) alternating runs each (tree, tree-nopipe,
        binomial, tree, ...); medians per size and the factor binomial/tree (Figures
        6-9). Also the default choice (no PHALANX_COLL_BCAST) beside them.

Writes OUT_DIR/seed002_<name>.txt (the table) and .svg (the figure); OUT_DIR defaults to
bench/results. Needs root and iproute2 for `trees`; builds nothing: run
`cargo build --release --workspace --bins` first (or set PHALANX_TARGET).
"""
import os, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gang_plot import write_svg  # noqa: E402
from netns_bcast import Net, run_env  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("PHALANX_TARGET", os.path.join(ROOT, "target", "release"))
PAIRS = int(os.environ.get("PAIRS", "5"))


def out_dir(args):
    d = args[0] if args and not args[0].isdigit() else os.path.join(ROOT, "bench", "results")
    os.makedirs(d, exist_ok=True)
    return d


def save(d, name, text):
    path = os.path.join(d, f"seed002_{name}.txt")
    with open(path, "w") as f:
        f.write(text)
    print(text, end="")
    print(f"# table: {path}")


def multisend(args):
    d = out_dir(args)
    out = subprocess.run([os.path.join(TARGET, "phalanx-bench"), "multisend"],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 7 and f[0].isdigit():
            rows.append((int(f[0]), int(f[1]), float(f[2]), float(f[3]), float(f[4]),
                         float(f[5]), float(f[6])))
    save(d, "multisend", out)
    ks = [1, 3, 7, 15]
    lat = [(f"k={k} multi", [(s, m) for s, kk, m, _, _, _, _ in rows if kk == k]) for k in ks[1:]]
    lat += [(f"k={k} separate", [(s, sep) for s, kk, _, sep, _, _, _ in rows if kk == k])
            for k in ks[1:]]
    fac = [(f"k={k}", [(s, x) for s, kk, _, _, x, _, _ in rows if kk == k]) for k in ks]
    svg = os.path.join(d, "seed002_multisend.svg")
    write_svg(svg, [("Multi-send vs separate sends", "bytes", "us to last destination", lat),
                    ("Factor of improvement", "bytes", "separate / multi", fac)])
    print(f"# figure: {svg}")


def bench_run(hostfile, env_extra):
    return run_env(hostfile, dict(PHALANX_MCAST="0", **env_extra),
                   ["bcast", "-m", "8:65536", "-i", "200", "-x", "20"], TARGET)


VARIANTS = [
    ("tree", {"PHALANX_COLL_BCAST": "tree"}),
    ("tree-nopipe", {"PHALANX_COLL_BCAST": "tree", "PHALANX_COLL_PIPELINE": "0"}),
    ("binomial", {"PHALANX_COLL_BCAST": "binomial"}),
    ("default", {}),
]


def trees(args):
    d = out_dir(args)
    ns = [int(a) for a in args if a.isdigit()] or [4, 8, 16]
    panels, text = [], ""
    for n in ns:
        net = Net(n)
        try:
            with tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False) as f:
                f.write("".join(f"netns:{x} slots=1\n" for x in net.names))
                hostfile = f.name
            runs = {name: [] for name, _ in VARIANTS}
            for p in range(PAIRS):
                for name, env in VARIANTS:
                    print(f"== N={n} run {p + 1}/{PAIRS}: {name}", file=sys.stderr)
                    runs[name].append(bench_run(hostfile, env))
            os.unlink(hostfile)
        finally:
            net.close()
        sizes = sorted(set().union(*[r.keys() for r in runs["tree"]]))
        med = {name: {s: statistics.median(r[s] for r in runs[name] if s in r) for s in sizes}
               for name, _ in VARIANTS}
        text += (f"# bcast without multicast across {n} namespaces (veth MTU 1500), "
                 f"medians of {PAIRS} alternating runs, us\n")
        text += (f"# {'Size':<8}" + "".join(f"{name:>13}" for name, _ in VARIANTS)
                 + f"{'binom/tree':>12}{'nopipe/tree':>13}\n")
        for s in sizes:
            t = med["tree"][s]
            text += (f"{s:<10}" + "".join(f"{med[name][s]:>13.2f}" for name, _ in VARIANTS)
                     + f"{med['binomial'][s] / t:>12.2f}{med['tree-nopipe'][s] / t:>13.2f}\n")
        panels.append((f"Bcast, {n} hosts, no multicast", "bytes", "us",
                       [(name, sorted(med[name].items())) for name, _ in VARIANTS]))
    save(d, "trees", text)
    svg = os.path.join(d, "seed002_trees.svg")
    write_svg(svg, panels)
    print(f"# figure: {svg}")


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("multisend", "trees"):
        sys.exit(__doc__)
    {"multisend": multisend, "trees": trees}[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
