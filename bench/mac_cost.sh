#!/usr/bin/env bash
# What the datagram MAC costs (issue 13 item 1): over UDP on loopback, 2 ranks, the
# 1-byte ping-pong latency and the 1 MiB bandwidth, with the job's MAC (the default) and
# without it (PHALANX_MAC=0), RUNS alternating runs each (mac, none, mac, ...); prints
# the medians and their ratio (mac / none: above 1 means the MAC costs that much).
#
# Usage: bench/mac_cost.sh
# Environment: RUNS=5, SKIP_BUILD=1 (reuse binaries), CARGO_TARGET_DIR.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T=${CARGO_TARGET_DIR:-$ROOT/target}/release
RUNS=${RUNS:-5}
[[ ${SKIP_BUILD:-} == 1 ]] || (cd "$ROOT" && cargo build --release -p phalanx-cli -p phalanx-bench >/dev/null)

# One figure: the second column of the table row for SIZE.
figure() { # mac test size iters
    PHALANX_MAC=$1 PHALANX_TRANSPORT=udp timeout 300 "$T/phalanx" run -n 2 \
        "$T/phalanx-bench" "$2" -m "$3:$3" -i "$4" -x 20 |
        awk -v s="$3" '$1 == s { print $2 }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

for spec in "latency 1 10000 us" "bw 1048576 200 MB/s"; do
    set -- $spec
    test=$1 size=$2 iters=$3 unit=$4
    : >"/tmp/mac_cost.$$.1"; : >"/tmp/mac_cost.$$.0"
    for ((i = 0; i < RUNS; i++)); do
        for mac in 1 0; do
            figure "$mac" "$test" "$size" "$iters" >>"/tmp/mac_cost.$$.$mac"
        done
    done
    with=$(median <"/tmp/mac_cost.$$.1"); without=$(median <"/tmp/mac_cost.$$.0")
    awk -v t="$test" -v s="$size" -v a="$with" -v b="$without" -v u="$unit" 'BEGIN {
        printf "%-8s %8s B: MAC %10.2f %s, none %10.2f %s, mac/none %.3f\n", t, s, a, u, b, u, a / b }'
    rm -f "/tmp/mac_cost.$$.1" "/tmp/mac_cost.$$.0"
done
