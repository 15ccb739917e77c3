#!/usr/bin/env bash
# What the mismatch check costs (issue 13 item 3): small collectives (4 ranks; Barrier,
# Bcast 1 and 8 B, Allreduce and Reduce 8 B; shared memory and UDP) with the library as
# it is against the same source with the check taken out (bench/mismatch_nocheck.patch:
# signatures compared on first fragments only, data of a mismatched call still used,
# schedules not stopped by a raised error — the code before the check). RUNS
# alternating runs each (checked, unchecked, ...); prints the medians and their ratio
# (checked / unchecked: above 1 means the check costs that much).
#
# Usage: bench/mismatch_cost.sh     Environment: RUNS=5, CARGO_TARGET_DIR.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
RUNS=${RUNS:-5}
WT=$(mktemp -d /tmp/phalanx-nocheck.XXXXXX)
trap 'git -C "$ROOT" worktree remove --force "$WT" >/dev/null 2>&1 || true; rm -rf "$WT"' EXIT
(cd "$ROOT" && cargo build -q --release -p phalanx-cli -p phalanx-bench)
git -C "$ROOT" worktree add --detach "$WT" HEAD >/dev/null 2>&1
git -C "$WT" apply "$ROOT/bench/mismatch_nocheck.patch"
(cd "$WT" && CARGO_TARGET_DIR=$TGT/nocheck cargo build -q --release -p phalanx-cli -p phalanx-bench)
A=$TGT/release B=$TGT/nocheck/release

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
one() { # dir transport test size
    local args=("$3")
    [[ $3 != barrier ]] && args+=(-m "$4:$4")
    PHALANX_TRANSPORT=$2 timeout 120 "$1/phalanx" run -n 4 "$1/phalanx-bench" "${args[@]}" \
        -i 5000 -x 500 2>/dev/null | awk '!/^#/ && NF { print $NF }' | tail -1
}
for tr in shm udp; do
    for spec in "barrier 0" "bcast 1" "bcast 8" "allreduce 8" "reduce 8"; do
        set -- $spec
        : >"/tmp/mm.$$.a"; : >"/tmp/mm.$$.b"
        for ((i = 0; i < RUNS; i++)); do
            one "$A" $tr $1 $2 >>"/tmp/mm.$$.a"
            one "$B" $tr $1 $2 >>"/tmp/mm.$$.b"
        done
        a=$(median <"/tmp/mm.$$.a"); b=$(median <"/tmp/mm.$$.b")
        awk -v t=$tr -v n=$1 -v s=$2 -v a="$a" -v b="$b" 'BEGIN {
            printf "%-4s %-10s %2s B: checked %8.2f us, unchecked %8.2f us, ratio %.3f\n", t, n, s, a, b, a / b }'
        rm -f "/tmp/mm.$$.a" "/tmp/mm.$$.b"
    done
done
