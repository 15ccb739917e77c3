#!/usr/bin/env python3
"""Parse the raw runs of bench/compare.sh and print phalanx vs Open MPI medians.

Usage: compare.py RESULTS_DIR

RESULTS_DIR holds raw outputs named ``<test>-<impl>-<pair>.txt`` (impl is ``phalanx``:
the C benchmark built with ``phalanx cc``; ``ompi``: the same source on Open MPI; ``rust``:
the same loops through phalanx's Rust API), each an OSU-style table: ``#`` comment lines, then ``size value`` rows.
A one-value output (barrier: ``# Avg Latency(us)`` then the value alone) is size 0.
A table of several value columns (mbw_mr: ``# Size  MB/s  Messages/s``) is compared on
one of them: ``COMPARED_COLUMN[test]`` by its header name, else the first.
Writes ``runs.csv`` (every value), ``summary.csv`` and ``summary.json`` (medians and
ratios) into RESULTS_DIR and prints one table per test.

Ratio is always phalanx median / Open MPI median (the Rust API's ratio is printed beside). Whether higher is better depends on the
test's unit: for times (latency, collectives in us) lower is better, for bandwidth and
message rate (``RATE_TESTS``) higher.
"""
import csv
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

IMPLS = ("phalanx", "ompi", "rust")
RAW_NAME = re.compile(r"^(?P<test>[a-z0-9_]+)-(?P<impl>phalanx|ompi|rust)-(?P<pair>\d+)\.txt$")
# Tests whose value is a rate (higher is better); every other test reports a time.
RATE_TESTS = {"bw", "bibw", "mbw_mr", "put_bw", "get_bw", "put_bibw"}
# Tests with several value columns: the one compared (by header name). For mbw_mr the
# ratio is the same on either column (Messages/s = MB/s * 10^6 / size, at equal sizes).
COMPARED_COLUMN = {"mbw_mr": "Messages/s"}
# Summary points: (test, size, label).
HEADLINES = (
    ("latency", 1, "1 B latency"),
    ("bw", 1 << 20, "1 MiB bandwidth"),
    ("bibw", 1 << 20, "1 MiB bidirectional bandwidth"),
    ("mbw_mr", 1, "1 B message rate"),
)


def parse_table(path, column=None):
    """Returns ({size: value}, unit column header) of one OSU-style output.

    Value columns are named by the ``# Size`` header, split on runs of two or more spaces
    (names such as ``Bandwidth (MB/s)`` hold single spaces); the value is taken from the
    column named ``column`` if the header has it, else from the first."""
    rows, unit, index = {}, "", 0
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = re.match(r"#\s*Size\s+(.*)$", line) or re.match(r"#\s*(Avg Latency.*)$", line)
            if m:
                names = re.split(r"\s{2,}", m.group(1).strip())
                index = names.index(column) if column in names else 0
                unit = names[index]
            continue
        parts = line.split()
        if len(parts) == 1:
            try:
                rows[0] = float(parts[0])
            except ValueError:
                pass
        elif len(parts) >= 2 + index:
            try:
                rows[int(parts[0])] = float(parts[1 + index])
            except ValueError:
                pass
    return rows, unit


def load(results):
    """runs[test][impl][size] = [values...], units[test] = column header."""
    runs = defaultdict(lambda: {impl: defaultdict(list) for impl in IMPLS})
    units, records = {}, []
    for path in sorted(results.glob("*.txt")):
        m = RAW_NAME.match(path.name)
        if not m:
            continue
        test, impl, pair = m.group("test"), m.group("impl"), int(m.group("pair"))
        rows, unit = parse_table(path, COMPARED_COLUMN.get(test))
        if unit:
            units[test] = unit
        for size, value in rows.items():
            runs[test][impl][size].append(value)
            records.append({"test": test, "impl": impl, "pair": pair, "size": size, "value": value})
    return runs, units, records


def summarize(runs, units):
    summary = []
    for test, by_impl in runs.items():
        sizes = sorted(set(by_impl["phalanx"]) | set(by_impl["ompi"]))
        for size in sizes:
            ph, om = by_impl["phalanx"].get(size, []), by_impl["ompi"].get(size, [])
            ru = by_impl["rust"].get(size, [])
            ph_med = statistics.median(ph) if ph else None
            om_med = statistics.median(om) if om else None
            ru_med = statistics.median(ru) if ru else None
            ratio = ph_med / om_med if ph_med is not None and om_med else None
            rust_ratio = ru_med / om_med if ru_med is not None and om_med else None
            summary.append({
                "test": test, "size": size, "unit": units.get(test, ""),
                "phalanx_median": ph_med, "ompi_median": om_med, "ratio": ratio,
                "phalanx_min": min(ph, default=None), "phalanx_max": max(ph, default=None),
                "ompi_min": min(om, default=None), "ompi_max": max(om, default=None),
                "phalanx_runs": len(ph), "ompi_runs": len(om),
                "rust_median": ru_med, "rust_ratio": rust_ratio, "rust_runs": len(ru),
                "higher_is_better": test in RATE_TESTS,
            })
    return summary


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def read_np(results):
    """The rank count recorded in meta.txt (``tests: ...; np: N``), or None."""
    meta = results / "meta.txt"
    if meta.exists():
        m = re.search(r"\bnp: (\d+)", meta.read_text())
        if m:
            return int(m.group(1))
    return None


def print_tables(summary, np=None):
    ranks = f", p = {np}" if np else ""
    for test in sorted({s["test"] for s in summary}, key=lambda t: (t != "latency", t)):
        rows = [s for s in summary if s["test"] == test]
        better = "higher" if rows[0]["higher_is_better"] else "lower"
        print(f"\n## {test}{ranks} ({rows[0]['unit']}); same C source, ratio = phalanx/ompi, "
              f"{better} is better (medians of {rows[0]['phalanx_runs']} phalanx / "
              f"{rows[0]['ompi_runs']} Open MPI / {rows[0]['rust_runs']} Rust-API runs)")
        print(f"{'# Size':<10}{'phalanx C':>14}{'Open MPI C':>14}{'ratio':>10}"
              f"{'Rust API':>14}{'ratio':>10}")
        for s in rows:
            print(f"{s['size']:<10}{fmt(s['phalanx_median']):>14}{fmt(s['ompi_median']):>14}"
                  f"{fmt(s['ratio'], '.2f'):>10}{fmt(s['rust_median']):>14}"
                  f"{fmt(s['rust_ratio'], '.2f'):>10}")
    print()
    for test, size, label in HEADLINES:
        hit = [s for s in summary if s["test"] == test and s["size"] == size]
        if hit:
            s = hit[0]
            print(f"summary: {label}: phalanx {fmt(s['phalanx_median'])} vs Open MPI "
                  f"{fmt(s['ompi_median'])} {s['unit']} (ratio {fmt(s['ratio'])}; Rust API "
                  f"{fmt(s['rust_median'])}, ratio {fmt(s['rust_ratio'])})")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    results = Path(sys.argv[1])
    runs, units, records = load(results)
    if not records:
        sys.exit(f"compare.py: no raw runs in {results}")
    summary = summarize(runs, units)
    np = read_np(results)
    for s in summary:
        s["np"] = np
    with open(results / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["test", "impl", "pair", "size", "value"])
        w.writeheader()
        w.writerows(records)
    with open(results / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0]))
        w.writeheader()
        w.writerows(summary)
    (results / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print_tables(summary, np)


if __name__ == "__main__":
    main()
