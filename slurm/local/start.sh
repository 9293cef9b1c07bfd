#!/usr/bin/env bash
# Start a real single-node SLURM cluster on this machine (Debian 12: slurm 22.05, munge, slurmdbd on a
# private MariaDB so that `sacct` works), for CI and for trying `adascale-bench submit --executor slurm`.
#
#   sudo bash slurm/local/start.sh            # idempotent: installs what is missing, starts what is down
#   source /tmp/adascale-slurm/env.sh         # SLURM_CONF (also linked from /etc/slurm/slurm.conf)
#   sudo bash slurm/local/stop.sh [--purge]
#
# Every file (config, state, accounting database, logs) lives under $SLURM_LOCAL_DIR; daemons are started
# directly (no systemd) and tracked by their PID files. Knobs (environment):
#   SLURM_LOCAL_DIR=/tmp/adascale-slurm   where everything lives
#   SLURM_LOCAL_CPUS=$(nproc)             CPUs the node advertises (more than the real cores oversubscribes)
#   SLURM_LOCAL_MEM_MB=80% of RAM         the node's RealMemory
#   SLURM_LOCAL_GPUS=2                    fake `gpu` gres (char devices, no real GPU): lets jobs ask for GPUs,
#                                         SLURM sets CUDA_VISIBLE_DEVICES, torch still runs on the CPU
#   SLURM_LOCAL_DB_PORT=3307              MariaDB port on 127.0.0.1 (SLURM itself uses 6817-6819)
set -euo pipefail

DIR=${SLURM_LOCAL_DIR:-/tmp/adascale-slurm}
NCPU=$(nproc)
CPUS=${SLURM_LOCAL_CPUS:-$NCPU}
MEM_MB=${SLURM_LOCAL_MEM_MB:-$(awk '/^MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)}
GPUS=${SLURM_LOCAL_GPUS:-2}
DB_PORT=${SLURM_LOCAL_DB_PORT:-3307}
NODE=localhost
CONF=$DIR/etc/slurm.conf
SOCKET=$DIR/munge/munge.socket.2
export SLURM_CONF=$CONF

START_NS=$(date +%s%N)
say() { local ms=$((($(date +%s%N) - START_NS) / 1000000)); printf '[slurm/local/start %3d.%03ds] %s\n' $((ms / 1000)) $((ms % 1000)) "$*"; }
fail() { say "FAILED: $*" >&2; exit 1; }
# A PID file names a live process (this VM reaps orphans lazily: a zombie is not alive).
is_up() { local pid; pid=$(cat "$1" 2>/dev/null) || return 1; [ -n "$pid" ] && [ -d "/proc/$pid" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null; }
# poll SECONDS WHAT CMD...: retry CMD every 0.2 s, fail loudly with WHAT and the log tail when time is up.
poll() {
  local seconds=$1 what=$2 log=${POLL_LOG:-}; shift 2
  for ((i = 0; i < seconds * 5; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  [ -n "$log" ] && [ -f "$log" ] && tail -n 15 "$log" >&2
  fail "$what did not come up within ${seconds}s"
}
[ "$(id -u)" -eq 0 ] || fail "run me as root (the daemons run as root, and packages may need installing)"

# --- packages ---------------------------------------------------------------------------------------------
want=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server-core mariadb-client-core)
missing=()
for pkg in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  say "apt-get install ${missing[*]}"
  aptlog=$(mktemp /tmp/slurm-local-apt.XXXXXX.log)
  # Forbid the packages' maintainer scripts from starting system services: we start our own daemons.
  own_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; own_policy=1; fi
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$aptlog" 2>&1 || {
    tail -n 30 "$aptlog" >&2; [ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d; fail "apt-get (log: $aptlog)"; }
  [ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  say "installed $(dpkg-query -W -f='${Package}=${Version} ' slurmctld munge slurmdbd)"
fi

# --- configuration ----------------------------------------------------------------------------------------
mkdir -p "$DIR"/{etc,state,log,run,spool,munge,db}
chmod 755 "$DIR/munge" # munged wants others to be able to reach its socket
[ -s "$DIR/munge/munge.key" ] || mungekey --create --keyfile="$DIR/munge/munge.key"
chmod 400 "$DIR/munge/munge.key"

gres_types="" node_gres=""
rm -f "$DIR/etc/gres.conf"
if [ "$GPUS" -gt 0 ]; then
  # SLURM accepts only device files as gres File=; /dev/null's numbers (1,3) make harmless fakes.
  mkdir -p "$DIR/fakegpu"
  for ((g = 0; g < GPUS; g++)); do [ -c "$DIR/fakegpu/nvidia$g" ] || mknod "$DIR/fakegpu/nvidia$g" c 1 3; done
  printf 'AutoDetect=off\nNodeName=%s Name=gpu File=%s/fakegpu/nvidia[0-%d]\n' "$NODE" "$DIR" $((GPUS - 1)) >"$DIR/etc/gres.conf"
  gres_types="GresTypes=gpu" node_gres="Gres=gpu:$GPUS"
fi
overrides=""
[ "$CPUS" != "$NCPU" ] && overrides="SlurmdParameters=config_overrides" # let slurmd believe our CPU count

conf=$(cat <<EOF
# Written by adascale-bench slurm/local/start.sh: a one-node cluster for CI and demos.
ClusterName=adascale
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire is also how long a requeued job waits before it may start again (default 120 s).
AuthInfo=socket=$SOCKET,cred_expire=5
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
# Schedule at once: no batching of submissions, a main pass every 2 s, backfill every second.
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
ReturnToService=2
# Accounting through slurmdbd: sacct is how submitit and 'adascale-bench status' see finished jobs.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
# slurmctld authenticates to slurmdbd with munge; this names the munge socket to use.
AccountingStoragePass=$SOCKET
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
MinJobAge=300
# Seconds between SIGTERM and SIGKILL: time for a run to write its checkpoint when stopped.
KillWait=10
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=60
$gres_types
$overrides
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB $node_gres State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
)
if [ -f "$CONF" ] && [ "$(cat "$CONF")" != "$conf" ] && is_up "$DIR/run/slurmctld.pid"; then
  say "warning: the configuration changed while SLURM runs; run slurm/local/stop.sh first to apply it"
fi
printf '%s\n' "$conf" >"$CONF"
cat >"$DIR/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$SOCKET
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
DebugLevel=info
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=root
StorageLoc=slurm_acct_db
EOF
chmod 600 "$DIR/etc/slurmdbd.conf" # slurmdbd refuses a config others can read
echo "export SLURM_CONF=$CONF" >"$DIR/env.sh"
# Let plain `sbatch` find the config too, unless the machine has a real one of its own.
if [ -e /etc/slurm/slurm.conf ] && [ ! -L /etc/slurm/slurm.conf ]; then
  say "note: /etc/slurm/slurm.conf is a real file, left alone: export SLURM_CONF=$CONF"
else
  mkdir -p /etc/slurm && ln -sfn "$CONF" /etc/slurm/slurm.conf
fi

# --- daemons (stdin/stdout detached so that a CI step does not wait on them) -------------------------------
if ! is_up "$DIR/munge/munged.pid"; then
  say "starting munged"
  munged --key-file="$DIR/munge/munge.key" --socket="$SOCKET" --pid-file="$DIR/munge/munged.pid" \
    --seed-file="$DIR/munge/munged.seed" --log-file="$DIR/log/munged.log" </dev/null >>"$DIR/log/daemons.out" 2>&1
fi
POLL_LOG=$DIR/log/munged.log poll 10 munged bash -c "munge -S '$SOCKET' -n | unmunge -S '$SOCKET'"

if [ ! -d "$DIR/db/data/mysql" ]; then
  say "creating the accounting database"
  mariadb-install-db --no-defaults --user=root --datadir="$DIR/db/data" --auth-root-authentication-method=normal \
    --skip-test-db --skip-name-resolve >"$DIR/log/mariadb-install.log" 2>&1 ||
    { tail -n 20 "$DIR/log/mariadb-install.log" >&2; fail "mariadb-install-db"; }
fi
if ! is_up "$DIR/run/mariadbd.pid"; then
  say "starting mariadbd on 127.0.0.1:$DB_PORT"
  setsid mariadbd --no-defaults --user=root --datadir="$DIR/db/data" --socket="$DIR/db/mysqld.sock" \
    --pid-file="$DIR/run/mariadbd.pid" --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve \
    --skip-log-bin --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 \
    --log-error="$DIR/log/mariadbd.log" </dev/null >>"$DIR/log/daemons.out" 2>&1 &
fi
POLL_LOG=$DIR/log/mariadbd.log poll 60 mariadbd mariadb --no-defaults -h 127.0.0.1 -P "$DB_PORT" -u root -e 'select 1'

if ! is_up "$DIR/run/slurmdbd.pid"; then
  say "starting slurmdbd"
  slurmdbd </dev/null >>"$DIR/log/daemons.out" 2>&1
fi
POLL_LOG=$DIR/log/slurmdbd.log poll 60 slurmdbd sacctmgr -n show cluster

if ! is_up "$DIR/run/slurmctld.pid"; then
  say "starting slurmctld"
  slurmctld -i </dev/null >>"$DIR/log/daemons.out" 2>&1 # -i: ignore job state left by an earlier cluster
fi
POLL_LOG=$DIR/log/slurmctld.log poll 30 slurmctld scontrol ping
if ! is_up "$DIR/run/slurmd.pid"; then
  say "starting slurmd"
  slurmd -N "$NODE" </dev/null >>"$DIR/log/daemons.out" 2>&1
fi

node_idle() {
  case "$(sinfo -h -n "$NODE" -o %T 2>/dev/null)" in
    idle | mixed | allocated) return 0 ;;
    down* | drain*) scontrol update nodename="$NODE" state=resume >/dev/null 2>&1; return 1 ;; # e.g. after a restart
    *) return 1 ;;
  esac
}
POLL_LOG=$DIR/log/slurmd.log poll 60 "node $NODE" node_idle
# slurmctld registers the cluster with slurmdbd on its first start; sacct shows nothing until it has.
POLL_LOG=$DIR/log/slurmctld.log poll 30 "cluster registration" \
  bash -c "sacctmgr -n -P show cluster format=cluster | grep -qx adascale"
sacct -n -X -S now >/dev/null || fail "sacct does not answer"
say "ready: $(sinfo -h -o 'partition %P (%a), %D node %N, %c CPUs, %m MB, gres %G')"
say "use: source $DIR/env.sh   (or rely on /etc/slurm/slurm.conf)"
