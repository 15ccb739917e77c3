#!/usr/bin/env bash
# Allgather time vs k for the k-concurrency multicast algorithm (seed 000 §4.3, Fig. 8):
# medians of PAIRS runs per k, at NP ranks and SIZE bytes per rank.
# Usage: bench/allgather_k.sh   (env: NP=4 SIZE=65536 PAIRS=5 KS="1 2 4 8 16")
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T=${CARGO_TARGET_DIR:-$ROOT/target}/release
NP=${NP:-4}; SIZE=${SIZE:-65536}; PAIRS=${PAIRS:-5}; KS=${KS:-"1 2 4 8 16"}
[[ ${SKIP_BUILD:-} == 1 ]] || (cd "$ROOT" && cargo build --release --workspace --bins >/dev/null)
echo "# Allgather of $SIZE B per rank, p = $NP, mcast2 (k-concurrency); median of $PAIRS runs"
echo "# k     Avg Latency(us)"
for k in $KS; do
    vals=()
    for _ in $(seq "$PAIRS"); do
        v=$(PHALANX_COLL_ALLGATHER=mcast2 PHALANX_COLL_ALLGATHER_K=$k \
            "$T/phalanx" run -n "$NP" "$T/phalanx-bench" allgather -m "$SIZE:$SIZE" -i 100 -x 10 |
            awk -v s="$SIZE" '$1 == s { print $2 }')
        vals+=("$v")
    done
    printf '%-7s %s\n' "$k" "$(printf '%s\n' "${vals[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
done
