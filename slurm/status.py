"""`adascale-bench status DIR [--json] [--watch N]`: the state of every cell of a results folder.

A run's state comes from its own files first (summary.json says done, diverged or failed), then from
the scheduler for the job that `submit` recorded in job.json (sacct through submitit's SlurmInfoWatcher,
squeue for what sacct does not know yet; a run of the local executor is active while its `submit` lives).
A run waiting for its job to start is `queued`; one that a matrix named but that has no folder and no job
is `missing`. Each run's τ/T1 and ETA come from its files (slurm/progress.py).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import safefs
from bench.algo.rules import method_order, shared_note
from bench.errors import UserError
from bench.experiments.matrix import is_shared
from bench.experiments.names import method_name, variant_name
from bench.files import (
    CHECKPOINT,
    LOCK,
    METRICS,
    SPEC,
    SUMMARY,
    lock_is_held,
    open_regular,
    read_json,
    read_json_object,
    write_json,
)

from .procgroup import describe_bad_task
from .progress import Progress, duration, progress
from .records import ATTEMPTS, JOB, SUBMITIT_DIR, process_start

MANIFEST = "matrix.json"  # the runs that `submit` was asked for, so that status can name missing ones

STATES = ("done", "running", "queued", "stopped", "failed", "unreadable", "diverged", "missing")
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
STALE_S = 600  # a run folder without a job whose metrics have not moved for this long has stopped


@dataclass
class RunState:
    name: str  # the run's folder relative to the results folder: task/method/s8/seed0[,key=value...]
    state: str
    job_id: str | None = None
    scheduler: str | None = None
    detail: str | None = None
    preset: str | None = None
    progress: Progress = field(default_factory=Progress)
    job_ids: list[str] = field(default_factory=list)  # every job that started the run (attempts.json), then job.json's
    shown: tuple[str, str] = ("", "")  # (method, variant) for humans (bench.experiments.names); ("", "") unread

    def as_json(self) -> dict[str, Any]:
        task, method, scale, seed, variant = self.parts
        p = self.progress
        return {
            "name": self.name,
            "task": task,
            "method": method,
            "scale": scale,
            "seed": seed,
            "variant": variant,
            "variant_name": self.shown[1] or None,
            "preset": self.preset,
            "state": self.state,
            "scheduler": self.scheduler,
            "job_id": self.job_id,
            "job_ids": self.job_ids,
            "tau": p.tau,
            "T1": p.T1,
            "progress": p.fraction,
            "rate_tau_per_s": p.rate,
            "eta_s": p.eta_s,
            "detail": self.detail,
        }

    @property
    def parts(self) -> tuple[str, str, str, int, str]:
        """(task, method, scale label, seed, variant) parsed from the run name (bench.run.spec.run_name)."""
        task, method, scale, leaf = self.name.split("/", 3)
        seed_part, _, variant = leaf.partition(",")
        seed = int(seed_part.removeprefix("seed")) if seed_part.removeprefix("seed").isdigit() else -1
        return task, method, scale.removeprefix("s") if scale[1:].isdigit() else scale, seed, variant


# -- the files ------------------------------------------------------------------------------------------------
def _warn(message: str) -> None:
    print(f"adascale-bench: warning: {printable(message)}", file=sys.stderr)


def _run_name(name: Any) -> bool:
    """A run name as submit writes it: task/method/scale/leaf, relative, no '..' (it names a folder)."""
    parts = name.split("/") if isinstance(name, str) else []
    return len(parts) == 4 and all(p and p not in (".", "..") for p in parts)


def read_manifest(out: Path) -> dict[str, dict[str, Any]]:
    """matrix.json's runs; entries of another shape are skipped with a warning naming the file."""
    path = Path(out) / MANIFEST
    obj = read_json_object(path)
    if obj is None:
        if path.exists():
            _warn(f"{path}: not a readable JSON object; ignored")
        return {}
    runs = obj.get("runs", {})
    if not isinstance(runs, dict):
        _warn(f"{path}: 'runs' is a {type(runs).__name__}, not a mapping; ignored")
        return {}
    good = {k: (v if isinstance(v, dict) else {}) for k, v in runs.items() if _run_name(k)}
    if len(good) < len(runs):
        _warn(f"{path}: {len(runs) - len(good)} run name(s) that are not task/method/scale/seed; ignored")
    return good


def add_to_manifest(out: Path, runs: dict[str, dict[str, Any]], matrix: str) -> None:
    old = read_json_object(Path(out) / MANIFEST) or {}
    merged = {**read_manifest(out), **runs}
    before = old.get("matrices") if isinstance(old.get("matrices"), list) else []
    matrices = list(dict.fromkeys([*(m for m in before if isinstance(m, str)), matrix]))
    write_json(Path(out) / MANIFEST, {"matrices": matrices, "runs": dict(sorted(merged.items()))})


RUN_LEAF = re.compile(r"[^/]+/[^/]+/(s\d+|elastic-[a-z]+)/seed\d+([,_].*)?")  # task/method/s4/seed0[,overrides]


def run_names(out: Path) -> list[str]:
    """Every run the folder knows of: submitted by a matrix, or a folder holding a run's files."""
    out = Path(out)
    names = set(read_manifest(out))
    for marker in (SPEC, SUMMARY, JOB, LOCK):  # the lock: a run is there from its first second
        for path in out.rglob(marker):
            rel = path.parent.relative_to(out)
            if rel.parts and rel.parts[0] != SUBMITIT_DIR and len(rel.parts) == 4 and RUN_LEAF.match(rel.as_posix()):
                names.add(rel.as_posix())
    return sorted(names)


def last_line(path: Path | str | None) -> str | None:
    """The last non-empty line of a log (progress bars' carriage returns count as line ends)."""
    if not path or not isinstance(path, str | Path):  # job.json's stderr may be anything
        return None
    if not safefs.inside(path):  # a path from a file, outside the results folder: never shown
        return None
    try:
        with open_regular(path, "rb") as f:  # job.json names it: a FIFO there must not block `status`
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    lines = [line.strip() for line in re.split(r"[\r\n]+", text) if line.strip()]
    return lines[-1] if lines else None


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


# -- one run --------------------------------------------------------------------------------------------------
def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def read_job(out: Path, name: str) -> dict[str, Any] | None:
    """job.json of a run when it names a job (a non-empty string job_id); else None, with a warning
    naming the file when there is one."""
    path = Path(out) / name / JOB
    job = read_json_object(path)
    if job is None:
        if path.exists():
            _warn(f"{path}: not a readable JSON object; ignored")
        return None
    if not isinstance(job.get("job_id"), str) or not job["job_id"]:
        _warn(f"{path}: no job_id (a string); ignored")
        return None
    return job


@safefs.rooted
def run_state(out: Path, name: str, job: dict[str, Any] | None, scheduler: str | None) -> RunState:
    run_dir = Path(out) / name
    summary = read_json_object(run_dir / SUMMARY)
    status = summary.get("status") if summary else None
    job_id = job.get("job_id") if job else None
    if status == "completed":
        return RunState(name, "done", job_id, scheduler)
    if status == "diverged":
        return RunState(name, "diverged", job_id, scheduler)
    if job is not None and scheduler in ACTIVE:  # a new attempt is under way, whatever the last one left
        return RunState(name, "running" if scheduler in ("RUNNING", "COMPLETING") else "queued", job_id, scheduler)
    if job is not None and scheduler == "UNKNOWN" and time.time() - _seconds(job.get("submitted_at")) < 60:
        return RunState(name, "queued", job_id, scheduler)  # sacct and squeue lag a fresh submission
    if status is None and (run_dir / SUMMARY).exists():
        return RunState(name, "unreadable", job_id, scheduler, f"{run_dir / SUMMARY} is not a readable summary")
    if status == "failed":
        error = summary.get("error") if isinstance(summary.get("error"), str) else None
        line = last_line(run_dir / "error.log") or error or last_line(job and job.get("stderr"))
        said = _srun_says(job)
        if said and not said.startswith("rank 0 ") and line and "ended first" not in line:
            line = f"{line}; {said}"  # the rank whose end the others saw (srun names it, and its node)
        return RunState(name, "failed", job_id, scheduler, line)
    if job is not None and job.get("executor") == "local" and job.get("started") is False and scheduler == "ENDED":
        return RunState(name, "stopped", job_id, scheduler, "never started: its submit ended first; submit again")
    if job is not None:
        why = f"job {job_id} ended ({scheduler or 'UNKNOWN'}) without a summary"
        if (run_dir / CHECKPOINT).exists():
            why += "; checkpoint saved, submit again to resume"
            if scheduler in STOPPED:  # stopped from outside, not broken: nothing to investigate
                return RunState(name, "stopped", job_id, scheduler, why)
        said = _srun_says(job)
        line = said or last_line(job.get("stderr"))
        return RunState(name, "failed", job_id, scheduler, f"{why}; log: {line}" if line else why)
    if job is None and lock_is_held(run_dir) is True:  # training, before its first metrics or checkpoint
        return RunState(name, "running")
    if (run_dir / METRICS).exists() or (run_dir / CHECKPOINT).exists():  # started outside `submit`
        held = lock_is_held(run_dir)  # its writer holds the lock while it trains
        if held is True:
            return RunState(name, "running")
        if held is False and (run_dir / CHECKPOINT).exists():
            return RunState(name, "stopped", detail="checkpoint saved; run the same command to resume")
        if held is False:
            return RunState(name, "failed", detail="stopped before its first checkpoint; run it again")
        recent = max(p.stat().st_mtime for p in (run_dir / METRICS, run_dir / CHECKPOINT) if p.exists())
        if time.time() - recent < STALE_S:
            return RunState(name, "running")
        return RunState(name, "failed", detail="stopped without a summary; submit again to resume")
    return RunState(name, "missing")


def _srun_says(job: dict[str, Any] | None) -> str | None:
    """srun's word on the rank that ended first, from a SLURM job's log (slurm/procgroup.py)."""
    if not job or job.get("executor") != "slurm" or not isinstance(job.get("stderr"), str):
        return None
    if not safefs.inside(job["stderr"]):  # a path from a file, outside the results folder: never read
        return None
    try:
        with open_regular(Path(job["stderr"]), "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 65536))
            return describe_bad_task(f.read().decode(errors="replace"))
    except OSError:
        return None


def _job_ids(out: Path, name: str, job: dict[str, Any] | None) -> list[str]:
    attempts = read_json_list(Path(out) / name / ATTEMPTS)
    ids = [str(a["job_id"]) for a in attempts if isinstance(a, dict) and isinstance(a.get("job_id"), str | int)]
    if job is not None:
        ids.append(job["job_id"])
    return list(dict.fromkeys(ids))


def read_json_list(path: Path) -> list[Any]:
    try:
        value = read_json(path)
    except (OSError, ValueError):
        return []
    return value if isinstance(value, list) else []


@safefs.rooted  # below `out` no link is followed (bench.safefs)
def collect(out: Path) -> list[RunState]:
    """The state of every run of a results folder, with its progress and the jobs that ran it."""
    out = Path(out)
    names = run_names(out)
    jobs = {name: read_job(out, name) for name in names}
    states = scheduler_states([j for j in jobs.values() if j])
    manifest = read_manifest(out)
    result = []
    now = time.time()
    for name in names:
        job = jobs[name]
        state = run_state(out, name, job, states.get(job["job_id"], "UNKNOWN") if job else None)
        spec = read_json_object(out / name / SPEC) or {}
        preset = spec.get("preset") or manifest.get(name, {}).get("preset")
        state.preset = preset if isinstance(preset, str) else None
        if spec:
            state.shown = (method_name(spec), variant_name(spec))
        if state.state != "missing":
            summary = read_json_object(out / name / SUMMARY) if state.state in ("done", "diverged") else None
            state.progress = progress(out / name, summary, state.state == "running", now)
        state.job_ids = _job_ids(out, name, job)
        result.append(state)
    return result


# -- the table ------------------------------------------------------------------------------------------------
def _scale_key(scale: str) -> tuple[int, int | str]:
    return (0, int(scale)) if scale.isdigit() else (1, scale)


def _cell_state(states: list[str]) -> str:
    counts = Counter(states)
    if len(counts) == 1:
        return states[0]
    return ", ".join(f"{counts[s]} {s}" for s in STATES if counts[s])


def _jobs(ids: list[str]) -> str:
    unique = list(dict.fromkeys(i for i in ids if i))
    return ",".join(unique[:4]) + (f",… ({len(unique)})" if len(unique) > 4 else "") if unique else "-"


def _leaf_name(variant: str) -> str:
    """A run folder's override suffix (`key=value,…`, no spec to read) written as a name: `key value, …`."""
    return ", ".join(part.rsplit(".", 1)[-1].replace("=", " ", 1) for part in variant.split(",") if part)


def _cell_progress(members: list[RunState]) -> tuple[str, str]:
    """τ/T1 of a cell's runs (one percentage, or the least and the most; a finished run is at 100 %, though
    its last step may pass T1) and the ETA of its last one."""
    done = [1.0 if r.state == "done" else f for r in members if (f := r.progress.fraction) is not None]
    if not done:
        share = "-"
    else:
        lo, hi = min(done), max(done)
        share = f"{lo:.0%}" if round(lo * 100) == round(hi * 100) else f"{lo:.0%}–{hi:.0%}"
    etas = [r.progress.eta_s for r in members if r.state == "running"]
    eta = duration(max(e for e in etas if e is not None)) if any(e is not None for e in etas) else "-"
    return share, eta


def table(runs: list[RunState]) -> str:
    """One row per cell (task, method, scale, variant) with its seeds, state and job ids; then the failed
    runs, each with the last line of its log. The S = 1 adascale run is shown once, as shared: at S = 1 the
    Table 2 rules that are identity scaling there are one computation (bench.experiments.matrix)."""
    cells: dict[tuple, list[RunState]] = {}
    shown: dict[tuple, tuple[str, str]] = {}  # a cell's method and variant as a human reads them
    for r in runs:
        task, method, scale, _, variant = r.parts
        key = (task, method, scale, variant, r.preset or "-")
        cells.setdefault(key, []).append(r)
        if r.shown[0] or key not in shown:
            shown[key] = (r.shown[0] or method, r.shown[1] if r.shown[0] else _leaf_name(variant))
    order = sorted(cells, key=lambda k: (k[0], method_order(k[1]), k[1], _scale_key(k[2]), k[3]))
    shared = f"({shared_note(k[1] for k in cells)})"  # the rules of this folder that its S = 1 run stands for
    rows = [("task", "method", "scale", "variant", "seeds", "state", "τ/T1", "ETA", "jobs", "preset")]
    for key in order:
        members = sorted(cells[key], key=lambda r: r.parts[3])
        seeds = ",".join(str(r.parts[3]) for r in members)
        state = _cell_state([r.state for r in members])
        method, variant = shown[key]
        sweep = method.startswith("sweep ")  # a sweep's run at S = 1 stands for no Table 2 rule
        method = f"{method} {shared}" if is_shared(key[1], key[2], None) and not sweep else method
        jobs = _jobs([r.job_id or "" for r in members])
        rows.append((key[0], method, key[2], variant or "-", seeds, state, *_cell_progress(members), jobs, key[4]))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for kind in ("failed", "unreadable", "stopped"):
        listed = [r for r in runs if r.state == kind]
        if listed:
            lines += ["", f"{kind}:"]
        for r in listed:
            job = f" (job {r.job_id}{', ' + r.scheduler if r.scheduler else ''})" if r.job_id else ""
            lines.append(f"  {r.name}{job}: {r.detail or 'no log'}")
    counts = Counter(r.state for r in runs)
    lines += ["", f"{len(runs)} runs: " + ", ".join(f"{counts[s]} {s}" for s in STATES if counts[s])]
    return "\n".join(printable(line) for line in lines)


def printable(text: str) -> str:
    """`text` with every character a terminal would act on (ESC, CR, BEL, …: a run folder named with an
    escape code that clears the screen, or a log line holding one) shown escaped instead, as \\x1b."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] if len(repr(c)) > 3 else f"\\x{ord(c):02x}" for c in text)


def as_json(out: Path, runs: list[RunState]) -> dict[str, Any]:
    """`status --json`: every run's state, τ, T1, progress, ETA and job ids, and the counts per state."""
    counts = Counter(r.state for r in runs)
    return {
        "out": str(out),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "counts": {s: counts[s] for s in STATES if counts[s]},
        "runs": [r.as_json() for r in runs],
    }


ACTIVE_STATES = ("queued", "running")


def _strict_json(obj: Any) -> Any:
    """`obj` with every non-finite float as None, so `--json` prints JSON a strict parser reads."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _strict_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_strict_json(v) for v in obj]
    return obj


def status(out: Path, as_json_: bool = False, watch: float | None = None) -> int:
    """Print the state of every cell of the results folder `out` (or, `as_json_`, every run as JSON);
    with `watch`, again every `watch` seconds until no run is queued or running. 1 when a run failed or
    is unreadable."""
    import json

    out = Path(out)
    if not out.is_dir():
        raise UserError(f"results folder {out} does not exist")
    while True:
        runs = collect(out)
        if not runs:
            raise UserError(
                f"{out} is not a results folder: no run folders (TASK/METHOD/sS/seedN) and no matrix.json in it; "
                f"submit a matrix there first (adascale-bench submit MATRIX --out {out})"
            )
        if as_json_:
            doc = _strict_json(as_json(out, runs))  # no Infinity/NaN: strict JSON, null where not finite
            print(json.dumps(doc, indent=None if watch else 2, allow_nan=False), flush=True)
        else:
            if watch and sys.stdout.isatty():
                print("\033[H\033[J", end="")  # a terminal: redraw in place
            elif watch:
                print(f"-- {time.strftime('%Y-%m-%d %H:%M:%S')}")
            print(table(runs), flush=True)
        if not watch or not any(r.state in ACTIVE_STATES for r in runs):
            break
        time.sleep(watch)
    return 1 if any(r.state in ("failed", "unreadable") for r in runs) else 0
