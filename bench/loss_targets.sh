#!/usr/bin/env bash
# Go-back-n's figures against issue 13's targets, over UDP on loopback (PHALANX_STATS=1
# counters summed over the ranks; times as medians of RUNS runs):
#   1. 4-rank stress with no injected loss: retransmitted / sent datagrams (target < 1 %);
#   2. 8-rank stress at 10 % loss: wall time over the lossless time (target within 3x);
#   3. 8-rank Jacobi at 30 % loss: time per iteration over the lossless one (target 20x).
#
# Usage: bench/loss_targets.sh        Environment: RUNS=3, SKIP_BUILD=1, CARGO_TARGET_DIR.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T=${CARGO_TARGET_DIR:-$ROOT/target}/release
RUNS=${RUNS:-3}
[[ ${SKIP_BUILD:-} == 1 ]] || (cd "$ROOT" && cargo build --release -p phalanx-cli -p phalanx-bench -p phalanx --examples >/dev/null)
export PHALANX_TRANSPORT=udp PHALANX_STATS=1
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
sum() { grep -o "$1=[0-9]*" | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }'; }

for n in 4 8; do
    out=$(timeout 600 "$T/phalanx" run -n $n "$T/examples/stress" 2>&1)
    sent=$(sum ' sent' <<<"$out"); retx=$(sum retransmits <<<"$out")
    ures=$(sum urtp_resent <<<"$out"); probes=$(sum probes <<<"$out")
    awk -v n="$n" -v r="$retx" -v u="$ures" -v s="$sent" -v p="$probes" 'BEGIN {
        printf "stress, %d ranks, no loss: %d of %d datagrams retransmitted (%.2f %%; target < 1 %%), %d URTP re-sends, %d probes\n", n, r + u, s, 100 * (r + u) / s, u, p }'
done

wall() { # faults np program args...
    local f=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    if [[ -n $f ]]; then PHALANX_FAULTS=$f timeout 900 "$T/phalanx" run "$@" >/dev/null 2>&1
    else timeout 900 "$T/phalanx" run "$@" >/dev/null 2>&1; fi
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
clean=$(for ((i = 0; i < RUNS; i++)); do wall "" -n 8 "$T/examples/stress"; done | median)
lossy=$(for ((i = 0; i < RUNS; i++)); do wall "loss=0.1,seed=$((i + 7))" -n 8 "$T/examples/stress"; done | median)
awk -v a="$lossy" -v b="$clean" 'BEGIN {
    printf "stress, 8 ranks: %.2f s at 10 %% loss, %.2f s without: %.1fx (target within 3x)\n", a, b, a / b }'

jac() { # faults
    local f=$1
    if [[ -n $f ]]; then PHALANX_FAULTS=$f timeout 900 "$T/phalanx" run -n 8 "$T/examples/jacobi" 64 200 2>/dev/null
    else timeout 900 "$T/phalanx" run -n 8 "$T/examples/jacobi" 64 200 2>/dev/null; fi |
        grep -o '([0-9.]* us/iteration' | tr -d '(' | awk '{ print $1 }'
}
jclean=$(for ((i = 0; i < RUNS; i++)); do jac ""; done | median)
jlossy=$(for ((i = 0; i < RUNS; i++)); do jac "loss=0.3,seed=$((i + 3))"; done | median)
awk -v a="$jlossy" -v b="$jclean" 'BEGIN {
    printf "jacobi 64x64, 8 ranks: %.1f us/iteration at 30 %% loss, %.1f without: %.1fx (target within 20x)\n", a, b, a / b }'
