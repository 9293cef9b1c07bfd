"""What the scheduler says of the jobs `submit` recorded: SLURM through sacct (submitit's SlurmInfoWatcher)
and squeue, a run of the local pool while its `submit` lives (its process, checked to be this user's), the
debug executor ended; the states that mean a job has not ended (`ACTIVE`) or was ended from outside (`STOPPED`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from bench.core.files import finite_float

from .records import process_start

# Scheduler states of a job that has not ended (submitit treats PREEMPTED as not ended too: it is requeued).
ACTIVE = {
    "PENDING",
    "RUNNING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "CONFIGURING",
    "COMPLETING",
    "SUSPENDED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "PREEMPTED",
    "READY",
}
# Scheduler states of a job ended from outside (scancel, its time limit, a deadline): with a checkpoint
# the run is `stopped`, not `failed` (a crash, a dead node or an OOM kill is failed, checkpoint or not).
STOPPED = {"CANCELLED", "TIMEOUT", "DEADLINE", "ENDED"}  # ENDED: a local run whose submit stopped (Ctrl-C)


# -- the scheduler --------------------------------------------------------------------------------------------
def _pid_is_submitit(pid: str) -> bool:
    return _own_python(pid, b"submitit")


def _own_python(pid: Any, word: bytes = b"python") -> bool:
    """Whether `pid` (from a job.json another user may have written) is a process of this user's whose
    command line holds `word`: pid 1, or any process of someone else's that never ends, is no job of the
    user's (a job.json naming it kept `status --watch` waiting for ever)."""
    try:
        n = int(pid)
        if isinstance(pid, bool) or n <= 1:
            return False
        proc = Path(f"/proc/{n}")
        return proc.stat().st_uid == os.geteuid() and word in (proc / "cmdline").read_bytes()[:65536]
    except (OSError, ValueError, TypeError, OverflowError):
        return False


def _squeue(ids: list[str]) -> dict[str, str]:
    if not ids or shutil.which("squeue") is None:
        return {}
    mains = sorted({i.split("_")[0] for i in ids})
    try:
        res = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(mains)], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    states = {}
    for line in res.stdout.splitlines():
        jid, _, state = line.partition("|")
        states[jid.strip()] = state.strip()
    return states


def scheduler_states(jobs: list[dict[str, Any]]) -> dict[str, str]:
    """Job id -> scheduler state (first word: 'CANCELLED by 0' -> CANCELLED) for the recorded jobs.
    SLURM: one sacct call through submitit's watcher, squeue for jobs sacct has not seen yet; local:
    RUNNING while the job's controller process lives, else ENDED. UNKNOWN when nothing answers."""
    states: dict[str, str] = {}
    slurm_ids = sorted({j["job_id"] for j in jobs if j.get("executor") == "slurm" and j.get("job_id")})
    if slurm_ids and shutil.which("sacct"):
        from submitit.slurm.slurm import SlurmInfoWatcher

        watcher = SlurmInfoWatcher(delay_s=0)
        for jid in slurm_ids:
            watcher.register_job(jid)
        watcher.update()
        for jid in slurm_ids:
            state = watcher.get_state(jid, mode="cache")
            if state != "UNKNOWN":
                states[jid] = state.split()[0].upper()
        unknown = [jid for jid in slurm_ids if jid not in states]
        states.update({k: v for k, v in _squeue(unknown).items() if k in unknown})
    for j in jobs:
        if j.get("executor") == "local" and j.get("job_id") and "pid" in j:  # a run of submit's local pool
            alive = (
                _seconds(j.get("pid_start")) > 0
                and _own_python(j["pid"])
                and process_start(j["pid"]) == j.get("pid_start")
            )
            states[j["job_id"]] = ("RUNNING" if j.get("started") else "PENDING") if alive else "ENDED"
        elif j.get("executor") == "local" and j.get("job_id"):  # a submitit local job (before the pool)
            states[j["job_id"]] = "RUNNING" if _pid_is_submitit(j["job_id"]) else "ENDED"
        elif j.get("executor") == "debug" and j.get("job_id"):
            states[j["job_id"]] = "ENDED"  # ran inside the submitting process, which has returned
    return states


def _seconds(value: Any) -> float:
    """A job record's time (submitted_at) as a number, 0 for anything else (bench.core.files.finite_float: a 10**400
    there was an OverflowError in status and submit)."""
    return finite_float(value) or 0.0
