#!/usr/bin/env bash
# Compare phalanx with Open MPI on the OSU-style benchmarks, like a user would: the
# headline is the *same* C source (bench/c/osu_like.c, the loops of the standard OSU
# benchmarks) built with `phalanx cc` and with Open MPI's `mpicc`; the Rust API's figures
# (phalanx-bench) are measured in the same pairs and printed beside them.
#
# Usage: bench/compare.sh [-- EXTRA_ARGS...]
#   EXTRA_ARGS are appended to every benchmark invocation (both implementations),
#   e.g. `bench/compare.sh -- -m 1:65536`.
#   Collectives with P ranks: `TESTS="bcast allgather barrier" NP=4 bench/compare.sh -- -m 8:65536`.
#
# Environment:
#   TESTS="latency bw"      tests to run (each must exist in phalanx-bench and osu_like):
#                           latency bw bibw (NP=2 only), mbw_mr (NP/2 sender-receiver
#                           pairs; compared on its Messages/s column), bcast allgather
#                           gather scatter barrier reduce allreduce alltoall; one-sided
#                           (osu_like only, so with RUST=0; NP=2): put_latency get_latency
#                           acc_latency fop_latency cas_latency put_bw get_bw put_bibw
#   PAIRS=5                 alternating (phalanx, Open MPI) pairs per test
#   ARGS_<test>="..."       per-test arguments replacing the short defaults below
#   PEER_BTL=tcp,self       Open MPI BTLs (e.g. vader,self for shared memory)
#   PEER_PML=ob1            Open MPI PML
#   PEER_TCP_IF=lo          Open MPI TCP interfaces (btl_tcp_if_include; interfaces that come
#                           and go, e.g. other jobs' test veths, otherwise break its runs)
#   NP=2                    ranks (oversubscribed on both sides if above the cores; both
#                           bind rank r to core r mod cores: phalanx's default
#                           --bind-to core, Open MPI's --bind-to core:overload-allowed)
#   PHALANX_COLL_<NAME>     passed through untouched to phalanx's ranks (algorithm choice)
#   NETNS=4                 spread the ranks over that many test hosts: network namespaces
#                           on a bridge, veths with MTU 1500 (made here, removed on exit).
#                           phalanx runs with a `netns:` hostfile, Open MPI with an rsh
#                           agent that enters the namespace; both leave placement to the
#                           kernel (--bind-to none) and use TCP/UDP on the bridge's subnet;
#                           with more ranks than CPUs Open MPI is told to yield when idle
#   RUN_TIMEOUT=600         seconds before a single run is killed
#   RETRIES=1               a failed or killed run is run again up to this many times
#                           (kept for safety: Open MPI's launches across test hosts
#                           hung now and then until its daemons got a hostname each),
#                           so both sides of a pair keep their runs; then it is left out
#                           (its partial output kept as <name>.txt.failed, not counted)
#   SKIP_BUILD=1            reuse existing binaries
#   RUST=0                  skip the Rust-API runs (phalanx-bench)
#   CARGO_TARGET_DIR        where cargo builds (default: <repo>/target)
#   RESULTS_DIR             where raw runs go (default: bench/results/<timestamp>)
#
# Raw outputs: RESULTS_DIR/<test>-<phalanx|ompi>-<pair>.txt; compare.py adds runs.csv,
# summary.csv and summary.json there and prints the median table.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
TESTS=${TESTS:-"latency bw"}
PAIRS=${PAIRS:-5}
NP=${NP:-2}
PEER_BTL=${PEER_BTL:-tcp,self}
PEER_PML=${PEER_PML:-ob1}
PEER_TCP_IF=${PEER_TCP_IF:-lo}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
RETRIES=${RETRIES:-1}
if [[ ! $RETRIES =~ ^[0-9]+$ ]]; then
    echo "compare.sh: RETRIES must be a number of retries, not '$RETRIES'" >&2
    exit 1
fi
# Like for like: against Open MPI's TCP transport phalanx uses UDP, against its
# shared-memory transport (vader/sm) phalanx's shared memory — unless set explicitly.
if [[ -z ${PHALANX_TRANSPORT:-} ]]; then
    case $PEER_BTL in
    *tcp*) export PHALANX_TRANSPORT=udp ;;
    *) export PHALANX_TRANSPORT=shm ;;
    esac
fi
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/$(date +%Y%m%d-%H%M%S)}
EXTRA_ARGS=()
if [[ ${1:-} == "--" ]]; then
    shift
    EXTRA_ARGS=("$@")
fi

# Short defaults (the full OSU defaults take minutes per run).
ARGS_latency=${ARGS_latency:-"-m 0:1048576 -i 1000 -x 100"}
ARGS_bw=${ARGS_bw:-"-m 1:1048576 -i 30 -x 3"}
ARGS_bibw=${ARGS_bibw:-"-m 1:1048576 -i 30 -x 3"}
ARGS_mbw_mr=${ARGS_mbw_mr:-"-m 1:1048576 -i 30 -x 3"}
# Collectives: OSU's 1 B .. 1 MiB with fewer calls per size than OSU's 1000 / 100.
for t in bcast allgather gather scatter reduce allreduce alltoall; do
    var="ARGS_$t"
    printf -v "$var" '%s' "${!var:-"-m 1:1048576 -i 200 -x 20"}"
done
ARGS_barrier=${ARGS_barrier:-"-i 1000 -x 100"}

test_args() {
    local var="ARGS_$1"
    echo "${!var:-}"
}

ensure_mpicc() {
    if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
        echo "compare.sh: installing Open MPI" >&2
        apt-get update -q >&2 || true
        apt-get install -y openmpi-bin libopenmpi-dev >&2
    fi
}

build() {
    ensure_mpicc
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo build --release --workspace --examples --bins)
    mkdir -p "$TARGET/release/c"
    mpicc -O2 -Wall -pthread -o "$TARGET/release/c/osu_like" "$ROOT/bench/c/osu_like.c"
    "$TARGET/release/phalanx" cc -O2 -Wall -pthread -o "$TARGET/release/c/osu_like_phalanx" \
        "$ROOT/bench/c/osu_like.c"
}

# Launch options of both runtimes (NETNS adds its hosts).
PHALANX_RUN=()
OMPI_RUN=(--oversubscribe --bind-to core:overload-allowed)
NS_NAMES=()
NS_BRIDGE=""

netns_up() {  # NETNS namespaces on a bridge; hostfile and rsh agent in RESULTS_DIR
    local n=$NETNS tag=cmp$$ sub="" i addrs
    addrs=$(ip -4 -o addr show)
    for i in $(seq 200 250); do
        if [[ $addrs != *"inet 10.$i.77."* ]]; then sub=10.$i.77; break; fi
    done
    [[ -n $sub ]] || { echo "compare.sh: no free subnet for the test hosts" >&2; exit 1; }
    NS_BRIDGE=cb$$
    trap netns_down EXIT
    ip link add "$NS_BRIDGE" type bridge
    ip addr add "$sub.1/24" dev "$NS_BRIDGE"
    ip link set "$NS_BRIDGE" up
    local slots=$(((NP + n - 1) / n)) hosts=()
    : >"$RESULTS_DIR/hostfile"
    for ((i = 0; i < n; i++)); do
        local ns=$tag-$i
        ip netns add "$ns"
        NS_NAMES+=("$ns")
        ip link add "cv$$-$i" type veth peer name veth0 netns "$ns"
        ip link set "cv$$-$i" master "$NS_BRIDGE" up
        ip -n "$ns" addr add "$sub.$((10 + i))/24" dev veth0
        ip -n "$ns" link set veth0 up
        ip -n "$ns" link set lo up
        ip -n "$ns" route add 224.0.0.0/4 dev veth0
        echo "netns:$ns slots=$slots" >>"$RESULTS_DIR/hostfile"
        hosts+=("$ns:$slots")
    done
    cat >"$RESULTS_DIR/nsagent" <<'EOF'
#!/bin/bash
# Open MPI's rsh agent for test hosts: the "host" is a network namespace, and its daemon
# gets a hostname of its own (a UTS namespace named after it). Sharing the machine's
# hostname, the daemons all reported one node and 10-25 % of launches hung or crashed.
while [[ $1 == -* ]]; do shift; done
host=$1
shift
exec ip netns exec "$host" unshare --uts /bin/sh -c "hostname '$host' && $*"
EOF
    chmod +x "$RESULTS_DIR/nsagent"
    PEER_TCP_IF=$sub.0/24
    PHALANX_RUN=(--hostfile "$RESULTS_DIR/hostfile" --bind-to none)
    local IFS=,
    OMPI_RUN=(--host "${hosts[*]}" --bind-to none --mca plm_rsh_agent "$RESULTS_DIR/nsagent"
        --mca oob_tcp_if_include "$PEER_TCP_IF" --mca plm_rsh_no_tree_spawn 1 --mca routed direct)
    if ((NP > $(nproc))); then
        # Open MPI cannot tell that its "hosts" share this machine's cores: told, it
        # yields when idle as it does on one oversubscribed host (phalanx sees it itself).
        OMPI_RUN+=(--mca mpi_yield_when_idle 1)
    fi
}

netns_down() {
    local ns
    for ns in ${NS_NAMES[@]+"${NS_NAMES[@]}"}; do ip netns del "$ns" 2>/dev/null || true; done
    [[ -z $NS_BRIDGE ]] || ip link del "$NS_BRIDGE" 2>/dev/null || true
}

run_phalanx() {  # test: the C benchmark built with `phalanx cc`
    # shellcheck disable=SC2046
    timeout "$RUN_TIMEOUT" "$TARGET/release/phalanx" run ${PHALANX_RUN[@]+"${PHALANX_RUN[@]}"} -n "$NP" \
        "$TARGET/release/c/osu_like_phalanx" "$1" $(test_args "$1") "${EXTRA_ARGS[@]}"
}

run_rust() {  # test: the same loops through phalanx's Rust API
    # shellcheck disable=SC2046
    timeout "$RUN_TIMEOUT" "$TARGET/release/phalanx" run ${PHALANX_RUN[@]+"${PHALANX_RUN[@]}"} -n "$NP" \
        "$TARGET/release/phalanx-bench" "$1" $(test_args "$1") "${EXTRA_ARGS[@]}"
}

run_ompi() {  # test pair
    # shellcheck disable=SC2046
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout "$RUN_TIMEOUT" mpirun "${OMPI_RUN[@]}" \
        --mca pml "$PEER_PML" \
        --mca btl "$PEER_BTL" --mca btl_tcp_if_include "$PEER_TCP_IF" -n "$NP" \
        "$TARGET/release/c/osu_like" "$1" $(test_args "$1") "${EXTRA_ARGS[@]}"
}

attempt() {  # label output command...: the command's stdout to output, retried on failure
    local label=$1 out=$2 a status
    shift 2
    for ((a = 0; a <= RETRIES; a++)); do
        if "$@" >"$out"; then
            return 0
        else
            status=$?
        fi
        if ((a < RETRIES)); then
            echo "compare.sh: $label run failed (status $status): running it again" >&2
        else
            # Rows a run printed before it failed would count: out of compare.py's sight.
            mv -f "$out" "$out.failed"
            echo "compare.sh: $label run failed (status $status): left out ($out.failed)" >&2
        fi
    done
}

main() {
    if [[ -z ${SKIP_BUILD:-} ]]; then
        build
    fi
    mkdir -p "$RESULTS_DIR"
    if [[ -n ${NETNS:-} ]]; then
        netns_up
    fi
    {
        echo "date: $(date -Is)"
        echo "host: $(uname -a)"
        echo "cpus: $(nproc)"
        echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "ompi: $(mpirun --version 2>/dev/null | head -n1) pml=$PEER_PML btl=$PEER_BTL tcp_if=$PEER_TCP_IF"
        echo "phalanx env: $(env | grep '^PHALANX_' | tr '\n' ' ' || true)"
        echo "tests: $TESTS; pairs: $PAIRS; np: $NP; test hosts: ${NETNS:-none}"
        for t in $TESTS; do echo "args[$t]: $(test_args "$t") ${EXTRA_ARGS[*]}"; done
    } >"$RESULTS_DIR/meta.txt"
    for t in $TESTS; do
        for ((p = 1; p <= PAIRS; p++)); do
            echo "== $t pair $p/$PAIRS: phalanx" >&2
            # A failed or hung run (killed after RUN_TIMEOUT) is reported, run again up
            # to RETRIES times, and then left out.
            attempt phalanx "$RESULTS_DIR/$t-phalanx-$p.txt" run_phalanx "$t"
            echo "== $t pair $p/$PAIRS: Open MPI" >&2
            attempt "Open MPI" "$RESULTS_DIR/$t-ompi-$p.txt" run_ompi "$t"
            if [[ ${RUST:-1} != 0 ]]; then
                echo "== $t pair $p/$PAIRS: phalanx, Rust API" >&2
                attempt "phalanx (Rust API)" "$RESULTS_DIR/$t-rust-$p.txt" run_rust "$t"
            fi
        done
    done
    python3 "$ROOT/bench/compare.py" "$RESULTS_DIR" | tee "$RESULTS_DIR/report.txt"
    echo "raw runs and summaries: $RESULTS_DIR" >&2
}

main
