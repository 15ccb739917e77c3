#!/usr/bin/env bash
# A whole Slurm on this machine for the tests that run under it (four emulated nodes
# n1..n4 on 127.0.0.1, munge authentication, the PMI-2 plugin, gang time-slicing), from
# the Debian packages (recipe: ../shared/notes/slurm-single-host.md).
#
#   .ci/slurm.sh start   install if needed, write the configuration, start munged,
#                        slurmctld and four slurmd; wait until the nodes are idle
#   .ci/slurm.sh stop    stop what start started, by the PIDs it recorded
#
# Needs root. Every daemon's PID goes to /run/phalanx-slurm/*.pid; stop kills exactly
# those (and waits for them), then removes the state it made.
set -euo pipefail
STATE=/run/phalanx-slurm
CONF=/etc/slurm/slurm.conf

# The pid in file $1 if that process is still a Slurm or munge daemon.
daemon_pid() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  case "$(cat "/proc/$pid/comm" 2>/dev/null)" in
    slurmctld|slurmd|munged) echo "$pid" ;;
    *) return 1 ;;
  esac
}

stop() {
  if [ -d "$STATE" ]; then
    # The jobs first (their steps and ranks outlive slurmd otherwise).
    scancel --full --quiet --user=root 2>/dev/null || true
    for _ in $(seq 1 50); do
      [ -z "$(squeue -h 2>/dev/null)" ] && break
      sleep 0.1
    done
    for f in "$STATE"/*.pid; do
      [ -e "$f" ] || continue
      pid=$(daemon_pid "$f") && kill "$pid" 2>/dev/null || true
    done
    for _ in $(seq 1 50); do
      alive=0
      for f in "$STATE"/*.pid; do
        [ -e "$f" ] || continue
        daemon_pid "$f" >/dev/null && alive=1
      done
      [ $alive = 0 ] && break
      sleep 0.1
    done
    for f in "$STATE"/*.pid; do
      [ -e "$f" ] || continue
      pid=$(daemon_pid "$f") && kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$STATE"
  fi
  rm -rf /var/spool/slurmctld /var/spool/slurmd-n*
}

start() {
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q munge slurmctld slurmd slurm-client slurm-wlm-basic-plugins \
      >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q munge \
      slurmctld slurmd slurm-client slurm-wlm-basic-plugins >/dev/null; }
  fi
  stop
  mkdir -p "$STATE" /run/munge /var/spool/slurmctld /etc/slurm
  chown munge:munge /run/munge
  [ -s /etc/munge/munge.key ] || { mungekey -c -f >/dev/null 2>&1 || \
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null; }
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
  cp /run/munge/munged.pid "$STATE/munged.pid"
  chown slurm:slurm /var/spool/slurmctld
  cat > "$CONF" <<CONF
ClusterName=ci
SlurmctldHost=localhost
SlurmUser=slurm
AuthType=auth/munge
ProctrackType=proctrack/pgid
TaskPlugin=task/none
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmi2
PreemptType=preempt/none
PreemptMode=GANG
SchedulerTimeSlice=5
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd-%n
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurmctld.log
SlurmdLogFile=/var/log/slurmd-%n.log
SlurmctldPort=6817
MailProg=/bin/true
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=n[1-4] NodeHostName=localhost NodeAddr=127.0.0.1 Port=[17001-17004] CPUs=2 RealMemory=2000
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  /usr/sbin/slurmctld
  for n in 1 2 3 4; do /usr/sbin/slurmd -N "n$n"; done
  for _ in $(seq 1 100); do
    idle=$(sinfo -h -o '%T %D' 2>/dev/null | awk '$1=="idle"{s+=$2} END{print s+0}')
    [ "$idle" = 4 ] && { echo "slurm: 4 nodes idle"; return 0; }
    sleep 0.2
  done
  echo "slurm: nodes did not come up" >&2
  sinfo >&2 || true
  return 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
