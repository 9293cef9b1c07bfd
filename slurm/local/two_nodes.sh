#!/usr/bin/env bash
# Two SLURM nodes on this machine, n1 and n2, for the multi-node path (CI's SLURM stage runs on them).
#
#   sudo bash slurm/local/two_nodes.sh          # idempotent: start.sh's cluster, then n1 + n2 (see below)
#   source /tmp/adascale-slurm/env.sh
#   sudo bash slurm/local/two_nodes.sh stop     # = slurm/local/stop.sh (it stops every slurmd it finds)
#
# Debian's slurm is built with multiple-slurmd support: two NodeName records with the same host, each with
# its own Port, served by two `slurmd -N NAME`. Every SLURM variable is then as on a real 2-node allocation
# (SLURM_JOB_NODELIST=n[1-2], SLURM_NODEID, srun fan-out, signals from each node's slurmstepd). Jobs name
# their master by the first node's name, which must resolve inside the jobs: the two slurmds (and so every
# job step they start) run in a private mount namespace whose /etc/hosts adds "127.0.0.1 n1 n2"; the
# machine's own /etc/hosts is never touched. Not real: one kernel, one hostname, one file system, gloo
# over loopback, the cores shared by both nodes (the reference: /work/shared/reference/multinode.md).
# Knobs: SLURM_LOCAL_DIR (start.sh's), SLURM_LOCAL_GPUS (fake GPUs per node, default 2).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${SLURM_LOCAL_DIR:-/tmp/adascale-slurm}
CONF=$DIR/etc/slurm.conf
GPUS=${SLURM_LOCAL_GPUS:-2}
export SLURM_CONF=$CONF
START_NS=$(date +%s%N)
say() { local ms=$((($(date +%s%N) - START_NS) / 1000000)); printf '[slurm/local/two_nodes %3d.%03ds] %s\n' $((ms / 1000)) $((ms % 1000)) "$*"; }
fail() { say "FAILED: $*" >&2; exit 1; }
is_up() { local pid; pid=$(cat "$1" 2>/dev/null) || return 1; [ -n "$pid" ] && [ -d "/proc/$pid" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null; }
stop_pid() { # stop PIDFILE: TERM, wait up to 20 s, then KILL
  local pid; pid=$(cat "$1" 2>/dev/null) || return 0
  if is_up "$1"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do is_up "$1" || break; sleep 0.2; done
    is_up "$1" && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}
[ "$(id -u)" -eq 0 ] || fail "run me as root (as start.sh)"

if [ "${1:-start}" = "stop" ]; then
  exec bash "$HERE/stop.sh" "${@:2}"
fi
[ "${1:-start}" = "start" ] || fail "usage: two_nodes.sh [start|stop [--purge]]"

nodes_idle() { [ "$(sinfo -h -N -n n1,n2 -o %T 2>/dev/null | grep -cE '^(idle|mixed|allocated)')" = 2 ]; }
if grep -q '^NodeName=n1 ' "$CONF" 2>/dev/null && is_up "$DIR/run/slurmctld.pid" \
  && is_up "$DIR/run/slurmd-n1.pid" && is_up "$DIR/run/slurmd-n2.pid" && nodes_idle; then
  say "already up: $(sinfo -h -o '%D nodes %N, gres %G')"
  exit 0
fi

# 1. The project's one-node cluster (packages, munge, the accounting database, slurmdbd, slurmctld).
stop_pid "$DIR/run/slurmd-n1.pid"
stop_pid "$DIR/run/slurmd-n2.pid"
if grep -q '^NodeName=n1 ' "$CONF" 2>/dev/null; then stop_pid "$DIR/run/slurmctld.pid"; fi # start.sh rewrites it
bash "$HERE/start.sh"
config=$(scontrol show config)
grep -q 'MULTIPLE_SLURMD *= *Yes' <<<"$config" || fail "this slurm is not built with multiple-slurmd support"

# 2. Its slurmd and slurmctld stop: new node records need a slurmctld restart.
stop_pid "$DIR/run/slurmd.pid"
stop_pid "$DIR/run/slurmctld.pid"

# 3. n1 and n2: the same host, their own ports, half of start.sh's memory each, GPUS fake GPUs each.
MEM=$(awk '/^MemTotal/ {print int($2 / 1024 * 0.4)}' /proc/meminfo)
sed -i -e "s|^SlurmdPidFile=.*|SlurmdPidFile=$DIR/run/slurmd-%n.pid|" \
  -e "s|^SlurmdLogFile=.*|SlurmdLogFile=$DIR/log/slurmd-%n.log|" \
  -e '/^NodeName=/d' -e '/^PartitionName=/d' -e '/^GresTypes=/d' "$CONF"
gres="" node_gres=""
if [ "$GPUS" -gt 0 ]; then
  gres="GresTypes=gpu" node_gres="Gres=gpu:$GPUS"
  mkdir -p "$DIR/fakegpu"
  for ((g = 0; g < 2 * GPUS; g++)); do [ -c "$DIR/fakegpu/nvidia$g" ] || mknod "$DIR/fakegpu/nvidia$g" c 1 3; done
  printf 'AutoDetect=off\nNodeName=n1 Name=gpu File=%s/fakegpu/nvidia[0-%d]\nNodeName=n2 Name=gpu File=%s/fakegpu/nvidia[%d-%d]\n' \
    "$DIR" $((GPUS - 1)) "$DIR" "$GPUS" $((2 * GPUS - 1)) >"$DIR/etc/gres.conf"
fi
cat >>"$CONF" <<EOF
$gres
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=6821 CPUs=$(nproc) RealMemory=$MEM $node_gres State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=6822 CPUs=$(nproc) RealMemory=$MEM $node_gres State=UNKNOWN
PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
EOF
say "starting slurmctld with n1 and n2"
slurmctld -i </dev/null >>"$DIR/log/daemons.out" 2>&1
for ((i = 0; i < 150; i++)); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
scontrol ping >/dev/null 2>&1 || { tail -n 15 "$DIR/log/slurmctld.log" >&2; fail "slurmctld did not come up"; }

# 4. The two slurmds in a private mount namespace whose /etc/hosts names n1 and n2.
{ cat /etc/hosts; echo "127.0.0.1 n1 n2"; } >"$DIR/etc/hosts"
say "starting slurmd n1 and n2 (private /etc/hosts: 127.0.0.1 n1 n2)"
unshare --mount --propagation private sh -c \
  "mount --bind '$DIR/etc/hosts' /etc/hosts && slurmd -N n1 && slurmd -N n2" </dev/null >>"$DIR/log/daemons.out" 2>&1

for ((i = 0; i < 300; i++)); do
  nodes_idle && break
  if sinfo -h -N -n n1,n2 -o %T 2>/dev/null | grep -qE '^(down|drain)'; then
    scontrol update nodename=n1,n2 state=resume >/dev/null 2>&1 || true
  fi
  sleep 0.2
done
nodes_idle || { tail -n 15 "$DIR/log/slurmd-n1.log" >&2; fail "n1 and n2 did not come up idle within 60 s"; }
out=$(srun -N2 --ntasks-per-node=1 -t 1 sh -c 'echo $SLURMD_NODENAME $(getent hosts n1 | cut -d" " -f1)' 2>&1 | sort | tr '\n' ' ')
case "$out" in
  "n1 127.0.0.1 n2 127.0.0.1 ") ;;
  *) fail "a 2-node step does not see n1 and n2 resolve: $out" ;;
esac
say "ready: $(sinfo -h -N -o '%N %T %c CPUs %m MB %G' | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
