#!/usr/bin/env bash
# The C-boundary micro-benchmark (bench/c/boundary.c) built with `phalanx cc` and with
# Open MPI's mpicc, run alternately (phalanx, Open MPI, …) PAIRS times on one rank; prints
# the median ns per call of each and the ratio (phalanx / Open MPI, lower is better).
# Installs Open MPI if mpicc is missing. Usage: bench/boundary.sh [calls]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PAIRS=${PAIRS:-5}
CALLS=${1:-2000000}
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "boundary.sh: installing Open MPI" >&2
    apt-get update -q >&2 || true
    apt-get install -y openmpi-bin libopenmpi-dev >&2
fi
(cd "$ROOT" && cargo build --release -q -p phalanx-cli -p phalanx-capi)
mkdir -p "$TARGET/release/c"
mpicc -O2 -o "$TARGET/release/c/boundary_ompi" "$ROOT/bench/c/boundary.c"
"$TARGET/release/phalanx" cc -O2 -o "$TARGET/release/c/boundary_phalanx" "$ROOT/bench/c/boundary.c"
OUT=$(mktemp -d)
for ((p = 1; p <= PAIRS; p++)); do
    PHALANX_TRANSPORT=shm "$TARGET/release/phalanx" run -n 1 \
        "$TARGET/release/c/boundary_phalanx" "$CALLS" >"$OUT/phalanx.$p"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun --bind-to core --mca pml ob1 --mca btl vader,self -n 1 \
        "$TARGET/release/c/boundary_ompi" "$CALLS" >"$OUT/ompi.$p"
done
python3 - "$OUT" "$PAIRS" <<'PY'
import statistics, sys
out, pairs = sys.argv[1], int(sys.argv[2])
def runs(who):
    vals = {}
    for p in range(1, pairs + 1):
        for line in open(f"{out}/{who}.{p}"):
            if line.startswith("#") or not line.strip():
                continue
            name, v = line.split()
            vals.setdefault(name, []).append(float(v))
    return {k: statistics.median(v) for k, v in vals.items()}
ph, om = runs("phalanx"), runs("ompi")
print(f"# C boundary, ns per call, medians of {pairs} alternating runs (1 rank)")
print(f"{'# call':<12}{'phalanx':>10}{'Open MPI':>10}{'ratio':>8}")
for k in ph:
    print(f"{k:<12}{ph[k]:>10.1f}{om.get(k, float('nan')):>10.1f}{ph[k] / om[k]:>8.2f}")
PY
rm -rf "$OUT"
