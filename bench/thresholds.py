#!/usr/bin/env python3
"""Measures one size threshold of phalanx: the same OSU-style C benchmark run with different
values of one environment variable, alternating (value 1, value 2, ..., then again), and the
median of each size printed side by side. The figures behind the README's table of
per-size choices were taken with it, for example:

    bench/thresholds.py allreduce 4 1024:1048576 PHALANX_COLL_BOARD_SPLIT 8192,0,1099511627776
    bench/thresholds.py scatter 8 65536:1048576 PHALANX_COLL_BOARD_PULL 16384,1099511627776
    bench/thresholds.py allreduce 4 4:65536 PHALANX_COLL_BOARD_STASH 32768,0
    bench/thresholds.py latency 2 2048:1048576 PHALANX_EAGER_LIMIT 8192,131072,4194304

Arguments: TEST NP SIZES VARIABLE VALUES (comma-separated). Environment: REPS (rounds of
alternation, default 3), EXTRA (arguments for osu_like, default "-i 200 -x 20"),
RUN_ARGS (more `phalanx run` arguments, e.g. "--hostfile H --bind-to none" to spread the
ranks over test hosts), PHALANX_TRANSPORT and any other PHALANX_* pass through to the ranks. Needs a release build
and target/release/c/osu_like_phalanx (bench/compare.sh builds both).
"""
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def main() -> int:
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    test, np_, sizes, var, values = sys.argv[1:]
    values = values.split(",")
    reps = int(os.environ.get("REPS", "3"))
    extra = os.environ.get("EXTRA", "-i 200 -x 20").split()
    phalanx = os.path.join(TARGET, "release", "phalanx")
    prog = os.path.join(TARGET, "release", "c", "osu_like_phalanx")
    run_args = os.environ.get("RUN_ARGS", "").split()
    res = {v: {} for v in values}
    for _ in range(reps):
        for v in values:
            env = dict(os.environ, **{var: v})
            cmd = [phalanx, "run", *run_args, "-n", np_, prog, test, "-m", sizes] + extra
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            if out.returncode != 0:
                print(f"{var}={v}: exit {out.returncode}\n{out.stderr}", file=sys.stderr)
                return 1
            for line in out.stdout.splitlines():
                f = line.split()
                if len(f) >= 2 and f[0].isdigit():
                    res[v].setdefault(int(f[0]), []).append(float(f[1]))
    print(f"# {test}, p = {np_}, {var}: medians of {reps} alternating runs")
    print(f"{'size':<10}" + "".join(f"{v:>16}" for v in values))
    for s in sorted(res[values[0]]):
        print(f"{s:<10}" + "".join(f"{statistics.median(res[v][s]):16.2f}" for v in values))
    return 0


if __name__ == "__main__":
    sys.exit(main())
