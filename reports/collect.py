"""Read a results folder into pandas: one row per run, from its summary.json and spec.json only."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd

from bench.runfiles import METRICS, SPEC, SUMMARY, read_jsonl

RUN_COLUMNS = [
    "task",
    "method",
    "scale",
    "seed",
    "preset",
    "status",
    "val_metric",
    "train_loss",
    "iterations",
    "tau",
    "wall_time_s",
    "batch_size",
    "T1",
    "metric",
    "overrides",
    "run_dir",
]


def _read(path: Path) -> dict | None:
    try:
        with open(path) as f:
            obj = json.load(f)
        return obj if isinstance(obj, dict) else None
    except (OSError, ValueError):
        return None


def runs(out: Path) -> pd.DataFrame:
    """Every run folder under `out` (a folder holding spec.json). Runs without a final summary show as
    `running` (a checkpoint or metrics present) or `pending`; unreadable files are skipped with a warning."""
    rows, skipped = [], []
    for spec_path in sorted(Path(out).rglob(SPEC)):
        run_dir = spec_path.parent
        spec = _read(spec_path)
        if spec is None:
            skipped.append(str(spec_path))
            continue
        summary_path = run_dir / SUMMARY
        summary = _read(summary_path) if summary_path.exists() else None
        if summary_path.exists() and summary is None:
            skipped.append(str(summary_path))
        row = {k: spec.get(k) for k in ("task", "method", "scale", "seed", "preset", "batch_size", "T1")}
        row["overrides"] = json.dumps(spec.get("overrides") or {}, sort_keys=True)
        row["run_dir"] = str(run_dir)
        if summary is not None:
            row.update(
                {
                    k: summary.get(k)
                    for k in ("status", "val_metric", "train_loss", "iterations", "tau", "wall_time_s", "metric")
                }
            )
        else:
            row["status"] = "running" if (run_dir / METRICS).exists() else "pending"
        rows.append(row)
    if skipped:
        warnings.warn(f"skipped unreadable files: {', '.join(skipped)}", stacklevel=2)
    df = pd.DataFrame(rows, columns=RUN_COLUMNS)
    df["scale"] = df["scale"].astype(str)
    return df


def metrics(run_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(training records, eval records) of one run's metrics.jsonl."""
    records = read_jsonl(Path(run_dir) / METRICS)
    train = pd.DataFrame([r for r in records if not r.get("eval")])
    evals = pd.DataFrame([r for r in records if r.get("eval")])
    return train, evals
