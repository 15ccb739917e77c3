#!/usr/bin/env bash
# Seed 001 §4.2 (Figures 7-9) on this machine: the time of each context-switch stage —
# (1) halt: the outgoing job stops injecting, drains what is in flight and stops;
# (2) buffer switch: its ranks move the valid packets their links hold to ordinary
#     memory (only the valid packets: phalanx never copies whole buffers);
# (3) release: the incoming job is continued and restores its links —
# against the number of nodes (network namespaces, UDP between them, shared memory
# within), under an all-to-all load (two stress jobs, two ranks per node each), and the
# buffers' occupancy at each switch (datagrams held).
#
# Usage: bench/gang_switch.sh
# Environment:
#   NODES="1 2 4"     cluster sizes
#   QUANTUM=100       gang quantum (ms)
#   SWITCHES=100      switches to record per cluster size (at least)
#   OUT=bench/results/gang-switch-<timestamp>   table.txt, gang_switch.csv, gang_switch.svg
#   SKIP_BUILD=1      reuse the release binaries
# Needs root (network namespaces). Prints the table; nothing here is a test.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
NODES=${NODES:-"1 2 4"}
QUANTUM=${QUANTUM:-100}
SWITCHES=${SWITCHES:-100}
OUT=${OUT:-$ROOT/bench/results/gang-switch-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release -q -p phalanx-cli && cargo build --release -q -p phalanx --example stress
fi
PHX=$TARGET/release/phalanx
STRESS=$TARGET/release/examples/stress
CSV=$OUT/gang_switch.csv
echo "nodes,quantum_ms,halt_us,switch_us,release_us,datagrams,bytes" > "$CSV"
DIR=""
cleanup() { [ -n "$DIR" ] && "$PHX" gang --dir "$DIR" down >/dev/null 2>&1 || true; }
trap cleanup EXIT
for n in $NODES; do
  DIR=$(mktemp -d /tmp/phalanx-gang-sw.XXXXXX)
  "$PHX" gang --dir "$DIR" up --nodes "$n" --netns --quantum "$QUANTUM" >/dev/null
  ranks=$((2 * n))
  ids=()
  for seed in 1 2; do
    ids+=("$("$PHX" gang --dir "$DIR" submit -n "$ranks" --nodes "$n" "$STRESS" 100000 200 "$seed")")
  done
  # Let them switch SWITCHES times (and a few more), then end them.
  while [ "$("$PHX" gang --dir "$DIR" switches --json --last 100000 | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" -lt $((SWITCHES + 2)) ]; do
    sleep 0.5
  done
  for id in "${ids[@]}"; do "$PHX" gang --dir "$DIR" cancel "$id" >/dev/null || true; done
  "$PHX" gang --dir "$DIR" switches --json --last 100000 | python3 -c "
import json, sys
rows = json.load(sys.stdin)[1:]  # the first switch starts the second job
for r in rows:
    print(f\"$n,$QUANTUM,{r['halt_us']},{r['switch_us']},{r['release_us']},{r.get('datagrams', 0)},{r.get('bytes', 0)}\")
" >> "$CSV"
  "$PHX" gang --dir "$DIR" down >/dev/null
  rm -rf "$DIR"; DIR=""
done
python3 "$ROOT/bench/gang_plot.py" switch "$CSV" "$OUT/gang_switch.svg" | tee "$OUT/table.txt"
echo "CSV: $CSV  plot: $OUT/gang_switch.svg"
