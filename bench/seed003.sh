#!/usr/bin/env bash
# Seed 003 §6 experiments: ring latency, chain throughput and flooding, each without and
# (ring, chain) with touching the data, over shared memory (the careful protocol: the
# reliable link with ring-index flow control) and over UDP (the traditional one:
# go-back-n with lazy ACKs). RUNS alternating runs per transport; the tables give the
# median of each column and the ratio shm/udp (< 1: shm faster for latency and time,
# > 1: shm faster for throughput).
#
# Usage: bench/seed003.sh
# Environment:
#   NP=4                 ranks (oversubscribed if above the cores)
#   RUNS=5               runs per transport and test (alternating shm, udp)
#   TESTS="ring ring-touch chain chain-touch flood"
#   ARGS_<test>="..."    arguments replacing the defaults below (test name with - as _)
#   RUN_TIMEOUT=600      seconds before a single run is killed (counts as a failure)
#   SKIP_BUILD=1         reuse existing binaries
#   CARGO_TARGET_DIR     where cargo builds (default: <repo>/target)
#   RESULTS_DIR          raw outputs (default: bench/results/seed003-<timestamp>)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T=${CARGO_TARGET_DIR:-$ROOT/target}/release
NP=${NP:-4}; RUNS=${RUNS:-5}; RUN_TIMEOUT=${RUN_TIMEOUT:-600}
TESTS=${TESTS:-"ring ring-touch chain chain-touch flood"}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/seed003-$(date +%Y%m%d-%H%M%S)}
[[ ${SKIP_BUILD:-} == 1 ]] || (cd "$ROOT" && cargo build --release -p phalanx-cli -p phalanx-bench >/dev/null)
mkdir -p "$RESULTS_DIR"

default_args() {
    case $1 in
    ring) echo "ring -i 1000 -x 100" ;;
    ring-touch) echo "ring --touch -i 1000 -x 100" ;;
    chain) echo "chain -i 1000 -x 10" ;;
    chain-touch) echo "chain --touch -i 1000 -x 10" ;;
    flood) echo "flood -n 200 -k 64 -i 1 -x 1" ;;
    *) echo "unknown test $1" >&2; exit 2 ;;
    esac
}

# Median per first column over files: prints "size median" lines.
medians() {
    awk '!/^#/ && NF >= 2 { v[$1] = v[$1] " " $2; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
         END { for (i = 1; i <= n; i++) { k = order[i]; m = split(v[k], a, " ");
               for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (a[y] + 0 < a[x] + 0) { t = a[x]; a[x] = a[y]; a[y] = t }
               med = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2; print k, med } }' "$@"
}

{
    echo "# seed 003 experiments, p = $NP, median of $RUNS runs per transport, $(date -Is)"
    echo "# host: $(uname -srm), $(nproc) cpus"
} | tee "$RESULTS_DIR/meta.txt"
status=0
for test in $TESTS; do
    var=ARGS_${test//-/_}
    read -r -a args <<<"${!var:-$(default_args "$test")}"
    for run in $(seq "$RUNS"); do
        for tr in shm udp; do
            out=$RESULTS_DIR/$test-$tr-$run.txt
            if ! PHALANX_TRANSPORT=$tr timeout "$RUN_TIMEOUT" \
                "$T/phalanx" run -n "$NP" "$T/phalanx-bench" "${args[@]}" >"$out" 2>"$out.err"; then
                echo "# FAILED: $test over $tr, run $run (see $out.err)" >&2
                status=1
            fi
        done
    done
    echo
    head -2 "$RESULTS_DIR/$test-shm-1.txt" | sed -n 1p
    col=$(sed -n 2p "$RESULTS_DIR/$test-shm-1.txt" | sed -E 's/^# *[A-Za-z]+ +//')
    first=$(sed -n 2p "$RESULTS_DIR/$test-shm-1.txt" | awk '{print $2}')
    printf '%-8s %14s %14s %9s    # %s, args: %s\n' "# $first" shm udp shm/udp "$col" "${args[*]}"
    join --nocheck-order <(medians "$RESULTS_DIR/$test"-shm-*.txt) <(medians "$RESULTS_DIR/$test"-udp-*.txt) |
        awk '{ printf "%-8s %14.2f %14.2f %9.3f\n", $1, $2, $3, ($3 > 0 ? $2 / $3 : 0) }'
done | tee "$RESULTS_DIR/summary.txt"
exit $status
