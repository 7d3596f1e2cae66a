#!/usr/bin/env bash
# A Slurm cluster on this machine, for trying ElasticDL's Slurm backend and
# for its tests: Slurm's controller and node daemons (n1, n2, ..., all on
# localhost) under a state directory of your choosing, with munge for
# authentication. No systemd needed; Slurm and munge come from Debian.
#
#   scripts/slurm_cluster.sh start DIR   install (if missing), configure, start
#   scripts/slurm_cluster.sh stop DIR    stop the daemons started from DIR
#   scripts/slurm_cluster.sh env DIR     print the export line for Slurm's tools
#
# After `start`, `export SLURM_CONF=DIR/slurm.conf` points sbatch, squeue,
# sinfo and `elasticdl train --cluster=slurm` at it. Jobs go to the least
# loaded node (CR_LLN), so that a job's processes spread over the nodes as
# they would over a real cluster's.
#
# Partitions, all over the nodes n*, with preemption by partition priority
# (the README's "Sharing a cluster"):
#   debug  the default; nothing preempts its jobs (masters, parameter servers)
#   high   `--priority=high` workers; preempts `low`, is never preempted
#   low    `--priority=low` workers; preempted with a 5 s grace time
#   service  only with SLURM_SERVICE_CPUS: a node of its own (s1) for the
#          jobs' masters, outside the CPUs the workers share
# The backfill scheduler runs every second, so that a preemption starts
# within a second of the job that needs it.
#
# Environment:
#   SLURM_NODES          how many virtual nodes n1, n2, ... (default 2)
#   SLURM_CPUS_PER_NODE  CPUs each of them offers (default 4)
#   SLURM_SERVICE_CPUS   CPUs of the service node s1 (default 0: none)
#   SLURM_PORT_BASE      first of the TCP ports used, one more than the
#                        nodes (default 17100)
set -euo pipefail

usage() {
  echo "usage: $0 start|stop|env DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
dir=$(realpath -m "$2")
conf=$dir/slurm.conf
nodes=${SLURM_NODES:-2}
service_cpus=${SLURM_SERVICE_CPUS:-0}
names=()
for ((i = 1; i <= nodes; i++)); do names+=("n$i"); done
((service_cpus > 0)) && names+=(s1)

install_packages() {
  local missing=()
  for p in slurmctld slurmd slurm-client munge; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "slurm_cluster: installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

start_munge() {
  if [ ! -s /etc/munge/munge.key ]; then
    /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null ||
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  if ! munge -n </dev/null >/dev/null 2>&1; then
    mkdir -p /run/munge
    chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do munge -n </dev/null >/dev/null 2>&1 && return; sleep 0.1; done
    echo "slurm_cluster: munged did not start" >&2
    exit 1
  fi
}

write_conf() {
  local cpus=${SLURM_CPUS_PER_NODE:-4} base=${SLURM_PORT_BASE:-17100}
  mkdir -p "$dir/state"
  for n in "${names[@]}"; do mkdir -p "$dir/spool-$n"; done
  cat >"$conf" <<CONF
ClusterName=edl
SlurmctldHost=localhost
SlurmctldPort=$base
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core,CR_LLN
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=30
MinJobAge=600
KillWait=5
MailProg=/bin/true
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
NodeName=n[1-$nodes] NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + 1))-$((base + nodes)) CPUs=$cpus State=UNKNOWN
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=debug Nodes=n[1-$nodes] Default=YES MaxTime=INFINITE State=UP PriorityTier=3 PreemptMode=OFF
PartitionName=high Nodes=n[1-$nodes] MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
PartitionName=low Nodes=n[1-$nodes] MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE GraceTime=5
CONF
  if ((service_cpus > 0)); then
    cat >>"$conf" <<CONF
NodeName=s1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + nodes + 1)) CPUs=$service_cpus State=UNKNOWN
PartitionName=service Nodes=s1 MaxTime=INFINITE State=UP PriorityTier=3 PreemptMode=OFF
CONF
  fi
}

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

case $cmd in
start)
  install_packages
  start_munge
  mkdir -p "$dir"
  write_conf
  export SLURM_CONF=$conf
  if ! running "$dir/slurmctld.pid"; then
    # -i: ignore state from an earlier run in the same directory.
    /usr/sbin/slurmctld -i -f "$conf"
  fi
  for n in "${names[@]}"; do
    running "$dir/slurmd-$n.pid" || /usr/sbin/slurmd -N "$n" -f "$conf"
  done
  for _ in $(seq 100); do
    idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | grep -c -E ' (idle|mix|alloc)$' || true)
    if [ "$idle" = "${#names[@]}" ]; then
      echo "slurm_cluster: ${#names[@]} nodes up; export SLURM_CONF=$conf"
      exit 0
    fi
    # Nodes left DOWN by an earlier test come back when asked.
    scontrol update nodename="$(IFS=,; echo "${names[*]}")" state=resume >/dev/null 2>&1 || true
    sleep 0.3
  done
  echo "slurm_cluster: nodes did not come up; see $dir/slurmctld.log" >&2
  sinfo -N >&2 || true
  exit 1
  ;;
stop)
  if [ -f "$conf" ]; then
    # Jobs first, so that their steps end before the daemons that run them.
    SLURM_CONF=$conf scancel --user="$(id -un)" >/dev/null 2>&1 || true
    for _ in $(seq 50); do
      [ -z "$(SLURM_CONF=$conf squeue --noheader 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  # Every node daemon started from DIR, whatever the environment says now.
  pidfiles=("$dir"/slurmd-*.pid "$dir"/slurmctld.pid)
  for pidfile in "${pidfiles[@]}"; do
    if running "$pidfile"; then kill "$(cat "$pidfile")"; fi
  done
  for _ in $(seq 50); do
    alive=0
    for pidfile in "${pidfiles[@]}"; do running "$pidfile" && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for pidfile in "${pidfiles[@]}"; do
    if running "$pidfile"; then kill -9 "$(cat "$pidfile")"; fi
  done
  echo "slurm_cluster: stopped ($dir)"
  ;;
env)
  echo "export SLURM_CONF=$conf"
  ;;
*) usage ;;
esac
