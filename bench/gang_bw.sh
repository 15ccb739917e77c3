#!/usr/bin/env bash
# Seed 001 §4.1 (Figures 5 and 6) on this machine: aggregate bandwidth of K concurrent
# two-rank bandwidth jobs (examples/gang_bw, one rank per node, so over UDP between two
# network-namespace nodes), with the nodes' communication budget partitioned (every job
# sizes its credits as FM did, C0 = B/(n²p) with n = K time slots) or switched (the
# running job gets all of B, C0 = B/p). Each job streams for SECONDS of wall-clock time
# and reports bytes / elapsed (its suspended time included); the aggregate is the sum
# over the K jobs, as the seed does (average × K).
#
# Usage: bench/gang_bw.sh
# Environment:
#   BUDGET=256k       each node's budget B (the seed: ~256 KiB suffices)
#   SIZES="1024 4096 16384 65536"   message sizes (bytes)
#   JOBS="1 2 4 8"    numbers of concurrent jobs K
#   SECONDS_PER_JOB=3 wall-clock seconds each job streams
#   QUANTUM=200       gang quantum (ms)
#   MODES="partitioned switched"
#   OUT=bench/results/gang-bw-<timestamp>   where the table (table.txt), the CSV
#                     (gang_bw.csv) and the plot (gang_bw.svg) go
#   SKIP_BUILD=1      reuse the release binaries
# Needs root (network namespaces). Prints the table; nothing here is a test.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BUDGET=${BUDGET:-256k}
SIZES=${SIZES:-"1024 4096 16384 65536"}
JOBS=${JOBS:-"1 2 4 8"}
SECS=${SECONDS_PER_JOB:-3}
QUANTUM=${QUANTUM:-200}
MODES=${MODES:-"partitioned switched"}
OUT=${OUT:-$ROOT/bench/results/gang-bw-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release -q -p phalanx-cli && cargo build --release -q -p phalanx --example gang_bw
fi
PHX=$TARGET/release/phalanx
BW=$TARGET/release/examples/gang_bw
CSV=$OUT/gang_bw.csv
echo "mode,jobs,bytes,aggregate_MBps,per_job_MBps" > "$CSV"
DIR=""
cleanup() { [ -n "$DIR" ] && "$PHX" gang --dir "$DIR" down >/dev/null 2>&1 || true; }
trap cleanup EXIT
for mode in $MODES; do
  for k in $JOBS; do
    DIR=$(mktemp -d /tmp/phalanx-gang-bw.XXXXXX)
    "$PHX" gang --dir "$DIR" up --nodes 2 --netns --quantum "$QUANTUM" --slots "$k" \
      --comm-budget "$BUDGET" --buffers "$mode" >/dev/null
    for size in $SIZES; do
      ids=()
      for _ in $(seq 1 "$k"); do
        ids+=("$("$PHX" gang --dir "$DIR" submit -n 2 --nodes 2 "$BW" "$size" "$SECS")")
      done
      sum=0; per=""
      for id in "${ids[@]}"; do
        line=$("$PHX" gang --dir "$DIR" logs -f "$id" | grep -o 'MB/s=[0-9.]*' | cut -d= -f2 || true)
        line=${line:-0}
        sum=$(python3 -c "print(round($sum + $line, 3))")
        per="$per $line"
      done
      echo "$mode,$k,$size,$sum,\"${per# }\"" >> "$CSV"
      echo "$mode jobs=$k bytes=$size aggregate=$sum MB/s (per job:$per)"
    done
    "$PHX" gang --dir "$DIR" down >/dev/null
    rm -rf "$DIR"; DIR=""
  done
done
python3 "$ROOT/bench/gang_plot.py" bw "$CSV" "$OUT/gang_bw.svg" | tee "$OUT/table.txt"
echo "CSV: $CSV  plot: $OUT/gang_bw.svg"
