"""A run's state, read off its own files first (summary.json says done, diverged or failed), then off the
scheduler for the job `submit` recorded in job.json: `RunState`, `run_state`, and `collect` over every run a
results folder knows of (matrix.json's, `MANIFEST`, and the folders holding a run's files); a log's last line
and `printable`, what a terminal is shown."""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core import safefs
from bench.core.files import (
    CHECKPOINT,
    LOCK,
    METRICS,
    SPEC,
    SUMMARY,
    open_regular,
    read_json,
    read_json_object,
    write_json,
)
from bench.core.locks import lock_is_held
from bench.experiments.names import method_name, variant_name

from .procgroup import describe_bad_task
from .progress import Progress, progress
from .records import ATTEMPTS, JOB, SUBMITIT_DIR
from .scheduler import ACTIVE, STOPPED, _seconds, scheduler_states

MANIFEST = "matrix.json"  # the runs that `submit` was asked for, so that status can name missing ones

STATES = ("done", "running", "queued", "stopped", "failed", "unreadable", "diverged", "missing")
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


# -- one run --------------------------------------------------------------------------------------------------
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


@safefs.rooted  # below `out` no link is followed (bench.core.safefs)
def collect(out: Path, ended: set[str] | frozenset[str] = frozenset()) -> list[RunState]:
    """The state of every run of a results folder, with its progress and the jobs that ran it. `ended`: runs the
    caller knows have ended (submit's own, once it has seen each end), whatever their scheduler says: a run of the
    local executor reads as running while its submit lives."""
    out = Path(out)
    names = run_names(out)
    jobs = {name: read_job(out, name) for name in names}
    states = scheduler_states([j for j in jobs.values() if j])
    manifest = read_manifest(out)
    result = []
    now = time.time()
    for name in names:
        job = jobs[name]
        scheduler = states.get(job["job_id"], "UNKNOWN") if job else None
        state = run_state(out, name, job, "EXITED" if job and name in ended else scheduler)
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


def printable(text: str) -> str:
    """`text` with every character a terminal would act on (ESC, CR, BEL, …: a run folder named with an
    escape code that clears the screen, or a log line holding one) shown escaped instead, as \\x1b."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] if len(repr(c)) > 3 else f"\\x{ord(c):02x}" for c in text)
