#!/usr/bin/env python3
"""Multicast vs binomial Bcast across N test hosts (network namespaces on a bridge).

Creates N namespaces with veth pairs on a private bridge (MTU 1500, like a LAN), runs
`phalanx-bench bcast` with one rank per namespace, alternating PHALANX_COLL_BCAST=mcast
and =binomial for PAIRS pairs, and prints the median latency of each and their ratio
per size. Everything it creates is removed at exit (also on Ctrl-C or failure).

Environment (defaults give the comparison above):
  TEST=bcast            phalanx-bench test (bcast, allreduce, reduce, barrier, ...)
  ALGOS="mcast binomial" the two PHALANX_COLL_<TEST> values compared (first = new)
  SLOTS=1               ranks per namespace (e.g. SLOTS=3 ALGOS="hier mcast" compares
                        hierarchical collectives with flat multicast ones)

Usage: bench/netns_bcast.py [N=8] [PAIRS=5] [-- extra phalanx-bench args]
Needs root and iproute2. Builds nothing: run
`cargo build --release --workspace --bins` first (or set PHALANX_TARGET).
"""
import os, re, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("PHALANX_TARGET", os.path.join(ROOT, "target", "release"))


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


class Net:
    made = 0

    def __init__(self, n):
        # A fresh tag per network: the kernel removes a deleted namespace's veth ends
        # lazily, so a second network of one process must not reuse their names.
        Net.made += 1
        tag = f"{os.getpid() % 1000:03d}{Net.made % 100:02d}"
        self.bridge = f"pbb{tag}"
        self.names = [f"phxb-{tag}-{i}" for i in range(n)]
        self.subnet = f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}"
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "type", "bridge", "mcast_snooping", "0")
        sh("ip", "link", "set", self.bridge, "up")
        for i, ns in enumerate(self.names):
            host_if, ns_if = f"pbv{tag}{i}", "veth0"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", ns)
            sh("ip", "link", "set", host_if, "master", self.bridge)
            sh("ip", "link", "set", host_if, "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.subnet}.{10 + i}/24", "dev", ns_if)
            sh("ip", "-n", ns, "link", "set", ns_if, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "route", "add", "224.0.0.0/4", "dev", ns_if)
            if os.environ.get("RPS", "1") != "0":
                # Spread receive processing over all CPUs, like a multi-queue NIC: on
                # one machine the bridge otherwise delivers every copy of a multicast
                # on the sender's CPU.
                sh("ip", "netns", "exec", ns, "sh", "-c",
                   f"echo {(1 << os.cpu_count()) - 1:x} > /sys/class/net/{ns_if}/queues/rx-0/rps_cpus",
                   check=False)

    def close(self):
        for ns in self.names:
            sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", self.bridge, check=False)


TEST = os.environ.get("TEST", "bcast")
ALGOS = os.environ.get("ALGOS", "mcast binomial").split()
SLOTS = int(os.environ.get("SLOTS", "1"))


def run(hostfile, algo, extra):
    return run_env(hostfile, {f"PHALANX_COLL_{TEST.upper()}": algo}, [TEST] + extra)


def run_env(hostfile, env_extra, bench_args, target=None):
    """phalanx-bench BENCH_ARGS over the hostfile with ENV_EXTRA; {size: first column}."""
    target = target or TARGET
    env = dict(os.environ, **env_extra)
    cmd = [os.path.join(target, "phalanx"), "run", "--hostfile", hostfile, "--timeout", "300",
           os.path.join(target, "phalanx-bench")] + bench_args
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    if out.returncode != 0:
        sys.exit(f"{env_extra} run failed:\n{out.stdout}\n{out.stderr}")
    rows = {}
    for line in out.stdout.splitlines():
        m = re.match(r"^\s*(\d+)\s+([\d.]+)", line)
        if m:
            rows[int(m.group(1))] = float(m.group(2))
    return rows


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        extra = args[args.index("--") + 1:]
        args = args[:args.index("--")]
    n = int(args[0]) if args else 8
    pairs = int(args[1]) if len(args) > 1 else 5
    if not extra:
        extra = ["-m", "8:65536", "-i", "200", "-x", "20"]
    net = Net(n)
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False) as f:
            f.write("".join(f"netns:{ns} slots={SLOTS}\n" for ns in net.names))
            hostfile = f.name
        runs = {a: [] for a in ALGOS}
        for p in range(pairs):
            for algo in ALGOS:
                print(f"== pair {p + 1}/{pairs}: {algo}", file=sys.stderr)
                runs[algo].append(run(hostfile, algo, extra))
        os.unlink(hostfile)
    finally:
        net.close()
    a, b = ALGOS
    sizes = sorted(set().union(*[r.keys() for r in runs[a]]))
    print(f"# {TEST} across {n} namespaces x {SLOTS} ranks (veth MTU 1500), "
          f"medians of {pairs} alternating runs")
    print(f"# {'Size':<10}{a + ' (us)':>14}{b + ' (us)':>16}{'speed-up':>10}")
    for s in sizes:
        m = statistics.median(r[s] for r in runs[a] if s in r)
        o = statistics.median(r[s] for r in runs[b] if s in r)
        print(f"{s:<12}{m:>14.2f}{o:>16.2f}{o / m:>10.2f}")


if __name__ == "__main__":
    main()
