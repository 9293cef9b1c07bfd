#!/usr/bin/env bash
# Stop the cluster that slurm/local/start.sh (or two_nodes.sh) started: cancel its jobs, then stop each daemon by its PID file
# (TERM, then KILL after 20 s). Idempotent. --purge also deletes $SLURM_LOCAL_DIR (state, database, logs).
set -uo pipefail

DIR=${SLURM_LOCAL_DIR:-/tmp/adascale-slurm}
CONF=$DIR/etc/slurm.conf
export SLURM_CONF=$CONF
START_NS=$(date +%s%N)
say() { local ms=$((($(date +%s%N) - START_NS) / 1000000)); printf '[slurm/local/stop %3d.%03ds] %s\n' $((ms / 1000)) $((ms % 1000)) "$*"; }
alive() { [ -n "$1" ] && [ -d "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
[ "$(id -u)" -eq 0 ] || { say "run me as root" >&2; exit 1; }

if [ -f "$CONF" ] && alive "$(cat "$DIR/run/slurmctld.pid" 2>/dev/null)"; then
  jobs=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
  if [ -n "${jobs// /}" ]; then
    say "cancelling jobs $jobs"
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null
    for ((i = 0; i < 100; i++)); do [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.2; done
  fi
fi

stop() { # stop NAME PIDFILE
  local pid
  pid=$(cat "$2" 2>/dev/null) || return 0
  if alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 100; i++)); do alive "$pid" || break; sleep 0.2; done
    if alive "$pid"; then say "$1 ($pid) ignored SIGTERM for 20 s: SIGKILL"; kill -KILL "$pid" 2>/dev/null; fi
    say "stopped $1 ($pid)"
  fi
  rm -f "$2"
}
for pidfile in "$DIR"/run/slurmd.pid "$DIR"/run/slurmd-*.pid; do # two_nodes.sh's slurmd-n1, slurmd-n2 too
  [ -e "$pidfile" ] && stop slurmd "$pidfile"
done
stop slurmctld "$DIR/run/slurmctld.pid"
stop slurmdbd "$DIR/run/slurmdbd.pid"
stop mariadbd "$DIR/run/mariadbd.pid"
stop munged "$DIR/munge/munged.pid"

# Remove our /etc/slurm/slurm.conf link, never a file we did not make.
[ "$(readlink /etc/slurm/slurm.conf 2>/dev/null)" = "$CONF" ] && rm -f /etc/slurm/slurm.conf
if [ "${1:-}" = "--purge" ]; then
  rm -rf "$DIR"
  say "removed $DIR"
fi
exit 0
