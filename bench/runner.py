"""Run one spec into its folder: skip it when done, resume it when checkpointed, record failures."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from .engine import Engine, Interrupted, git_commit, versions
from .errors import UserError
from .runfiles import SUMMARY, read_json_object, write_json
from .spec import check_same, find_T, find_T_AS, run_name

FINAL = ("completed", "diverged")


def run_dir_of(out: Path, spec: dict[str, Any]) -> Path:
    return Path(out) / run_name(spec)


def existing_summary(run_dir: Path) -> dict[str, Any] | None:
    """The summary of a finished run (completed or diverged), else None: failed runs are retried."""
    summary = read_json_object(run_dir / SUMMARY)
    return summary if summary is not None and summary.get("status") in FINAL else None


def run_spec(spec: dict[str, Any], out: Path, progress: bool = True, dist: Any = None) -> dict[str, Any]:
    """Train `spec` under `out` (or return the summary it already has). A crash is recorded as a
    `failed` summary, with the traceback in error.log, and re-raised."""
    run_dir = run_dir_of(out, spec)
    done = existing_summary(run_dir)
    if done is not None:
        return done
    if spec["method"] == "lsw+" and not spec.get("T_AS"):
        spec = {**spec, "T_AS": find_T_AS(Path(out), spec)}
    if spec["method"] == "scaled" and not spec.get("T"):
        spec = {**spec, "T": find_T(Path(out), spec)}
    check_same(run_dir, spec)
    try:
        return Engine(spec, run_dir, dist=dist, progress=progress).run()
    except (UserError, Interrupted):
        raise
    except Exception as e:
        if dist is None or dist.is_main:
            record_failure(spec, run_dir, f"{type(e).__name__}: {e}", traceback.format_exc())
        raise


def record_failure(
    spec: dict[str, Any], run_dir: Path, message: str, details: str | None = None, **extra: Any
) -> dict[str, Any]:
    """Write a `failed` summary (with `extra` keys) and error.log (`details`, e.g. a traceback, then the
    message): the one record of a failure, whether the engine crashed or the run never started (an unmet
    dependency, a dead rank, a user error found when the job starts). `status` shows its message."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "error.log").write_text((details or "") + message + "\n")
    summary = {
        **{k: spec[k] for k in ("task", "method", "scale", "seed", "preset")},
        "status": "failed",
        "error": message,
        **extra,
        "val_metric": None,
        "train_loss": None,
        "iterations": None,
        "tau": None,
        "wall_time_s": None,
        "versions": versions(),
        "git_commit": git_commit(),
    }
    write_json(run_dir / SUMMARY, summary)
    return summary
