"""summary.json: how a run ended, written once by the run layer from the engine's Outcome (or from a
failure), plus the one-line form the commands print."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.core import safefs
from bench.core.algo.gain import b_simple, b_simple_average
from bench.core.files import (
    CHECKPOINT,
    METRICS,
    SUMMARY,
    atomic_write_bytes,
    finite_float,
    read_jsonl,
    tail_records,
    write_json,
)
from bench.core.runspec import RunSpec
from bench.run.provenance import git_commit, versions

IDENTIFYING = ("task", "method", "scale", "seed", "preset")


def _task_fields(task: Any) -> dict[str, Any]:
    """What a report needs to know of the metric without importing the task (reports read run files only)."""
    return {"metric": task.metric, "metric_label": task.metric_label, "higher_is_better": task.higher_is_better}


def _has_stats(record: dict[str, Any]) -> bool:
    return all(isinstance(record.get(k), int | float) for k in ("sum_sq", "mean_sq"))


def summarize(spec: RunSpec, task: Any, outcome: Any, run_dir: Path) -> dict[str, Any]:
    """The summary of a finished run (completed or diverged), from its Outcome and its metrics.jsonl."""
    state = outcome.state
    summary: dict[str, Any] = {
        **{k: getattr(spec, k) for k in IDENTIFYING},
        "status": outcome.status,
        "iterations": state.iteration,
        "tau": state.tau,
        "epochs": outcome.epochs,
        "target_epochs": state.target_epochs,
        "wall_time_s": round(state.wall_time, 3),
        **_task_fields(task),
        "val_metric": None,
        "train_loss": None,
        "T_AS": spec.T_AS,
        **({"initial_eval": state.initial_eval} if state.initial_eval is not None else {}),  # the untrained model's
        "versions": versions(),
        "git_commit": git_commit(),
    }
    if outcome.status == "completed":
        aggregates = (state.gain_sum, state.gain_count, state.var_sum, state.sqr_sum, state.moments_count)
        if all(v is not None for v in aggregates):
            # running aggregates (bench.core.engine.loopstate.State) and the file's tail: a transformer S = 1 run's
            # 1.5 M records are not read again (one record per iteration, so the count is the iterations)
            window = max(1, math.ceil(spec.train_loss_window * state.iteration))
            losses = [r["loss"] for r in tail_records(run_dir / METRICS, window, lambda r: not r.get("eval"))]
            mean_gain = state.gain_sum / state.gain_count if state.gain_count else None
            n = state.moments_count
            noise = b_simple(state.var_sum / n, state.sqr_sum / n, spec.batch_size) if n else math.nan
        else:  # resumed from a checkpoint that predates the aggregates
            records = [r for r in read_jsonl(run_dir / METRICS) if not r.get("eval")]
            window = max(1, math.ceil(spec.train_loss_window * len(records)))
            losses = [r["loss"] for r in records[-window:]]
            gains = [r["gain"] for r in records if r.get("gain") is not None]
            mean_gain = sum(gains) / len(gains) if gains else None
            stats = [(r["sum_sq"], r["mean_sq"], r.get("scale", 1)) for r in records if _has_stats(r)]
            noise = b_simple_average(stats, spec.batch_size)
        summary.update(
            val_metric=state.last_eval.get(task.metric),
            train_loss=sum(losses) / len(losses),
            eval=state.last_eval,
            mean_gain=mean_gain,
        )
        if outcome.noise_scale is not None:
            summary["noise_scale"] = outcome.noise_scale  # B_simple of the moving averages at the end
        if math.isfinite(noise):  # the training average (reports read it; inf/NaN: left out, they recompute)
            summary["B_simple"] = noise
    return summary


def write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    """The summary, then the checkpoint of the finished run goes."""
    write_json(run_dir / SUMMARY, summary)
    safefs.unlink(run_dir / CHECKPOINT)


def record_failure(
    spec: RunSpec, run_dir: Path, message: str, details: str | None = None, **extra: Any
) -> dict[str, Any]:
    """Write a `failed` summary (with `extra` keys) and error.log (`details`, e.g. a traceback, then the
    message): the one record of a failure, whether the engine crashed or the run never started (an unmet
    dependency, a dead rank, a user error found when the job starts). `status` shows its message."""
    atomic_write_bytes(run_dir / "error.log", ((details or "") + message + "\n").encode(errors="backslashreplace"))
    summary = {
        **{k: getattr(spec, k) for k in IDENTIFYING},
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


def describe(summary: dict[str, Any], run_dir: Path, already: bool = False) -> str:
    """One line: how the run ended, its numbers and where it is; `already`: it had ended before this command,
    which trained nothing (no wall time of this command to show)."""
    metric = finite_float(summary.get("val_metric"))  # a finished run's summary, read again: any JSON there
    loss = finite_float(summary.get("train_loss"))
    s = {k: str(summary.get(k, k))[:40] for k in ("status", "task", "method", "scale", "seed", "iterations", "metric")}
    status = f"already {'complete' if s['status'] == 'completed' else s['status']}, nothing trained"
    took = "" if already else f"  ({summary.get('wall_time_s')} s)"
    return (
        f"{status if already else s['status']}: {s['task']} {s['method']} S = {s['scale']} "
        f"seed {s['seed']}  {s['metric']} {'N/A' if metric is None else f'{metric:.4g}'}"
        f"  train loss {'N/A' if loss is None else f'{loss:.4g}'}  iterations {s['iterations']}"
        f"{took}  -> {run_dir}"
    )
