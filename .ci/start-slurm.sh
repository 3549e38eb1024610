#!/usr/bin/env bash
# Start a one-node Slurm cluster on localhost for the rack-scale tests (issue #7).
# Idempotent; run as root on Debian 12 with slurm-wlm and munge installed. Waits until the node is idle.
set -euo pipefail

CONF_DIR=/etc/slurm
NODE=$(hostname -s)
CPUS=${REPRO_SLURM_CPUS:-8}
MEM_MB=${REPRO_SLURM_MEM_MB:-2048}

[ "$(id -u)" -eq 0 ] || { echo "start-slurm.sh: run as root" >&2; exit 2; }
command -v slurmctld >/dev/null || { echo "start-slurm.sh: slurm-wlm is not installed (apt-get install slurm-wlm munge)" >&2; exit 2; }

install -d -o munge -g munge -m 0700 /etc/munge
install -d -o munge -g munge -m 0755 /run/munge /var/lib/munge /var/log/munge
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none; }
chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged --force
  for _ in $(seq 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
fi

install -d -m 0755 /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm
# Nodes declare more CPUs than the runner has (config_overrides) so a small job array runs at once;
# OverSubscribe=FORCE lets the `--exclusive` tasks of one array share this single node.
cat > "$CONF_DIR/slurm.conf.new" <<CONF
ClusterName=repro-ci
SlurmctldHost=${NODE}(127.0.0.1)
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SlurmUser=root
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=${NODE} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM_MB} State=UNKNOWN
PartitionName=debug Nodes=${NODE} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
if ! cmp -s "$CONF_DIR/slurm.conf.new" "$CONF_DIR/slurm.conf"; then
  mv "$CONF_DIR/slurm.conf.new" "$CONF_DIR/slurm.conf"
  if pgrep -x slurmctld >/dev/null; then scontrol reconfigure || true; fi
else
  rm -f "$CONF_DIR/slurm.conf.new"
fi

pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd

for _ in $(seq 60); do
  state=$(sinfo -h -o '%T' 2>/dev/null | head -1 || true)
  case "$state" in
    idle|mixed|allocated) echo "slurm up: $(sinfo -h -o '%P %T %D')"; exit 0 ;;
    down*|drain*) scontrol update NodeName="$NODE" State=RESUME 2>/dev/null || true ;;
  esac
  sleep 1
done
echo "start-slurm.sh: node did not become idle in 60 s; see /var/log/slurm/slurmctld.log and slurmd.log" >&2
sinfo >&2 || true
exit 1
