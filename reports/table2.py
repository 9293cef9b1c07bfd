"""Table 2 of the paper from a results folder: per task, rows = scales, columns = total batch and,
for each method, validation metric, training loss and iterations (means over seeds)."""

from __future__ import annotations

import math

import pandas as pd

METHODS = ("adascale", "lsw", "lsw+")
LABELS = {"adascale": "AS", "lsw": "LSW", "lsw+": "LSW+"}
NA, MISSING = "N/A", "–"


def scale_order(scale: str) -> tuple[int, float]:
    return (1, 0.0 if scale == "elastic-up" else 1.0) if scale.startswith("elastic") else (0, float(scale))


def cells(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, scale, method): means over completed seeds, `diverged` if any seed diverged."""
    rows = []
    for (task, scale, method), g in df[df["method"].isin(METHODS)].groupby(["task", "scale", "method"]):
        done = g[g["status"] == "completed"]
        diverged = bool((g["status"] == "diverged").any())
        b = g["batch_size"].iloc[0]
        rows.append(
            {
                "task": task,
                "scale": scale,
                "method": method,
                "seeds": len(done),
                "diverged": diverged,
                "total_batch": "" if scale.startswith("elastic") else int(float(scale) * b),
                "val_metric": done["val_metric"].mean() if len(done) else math.nan,
                "val_metric_std": done["val_metric"].std() if len(done) > 1 else math.nan,
                "train_loss": done["train_loss"].mean() if len(done) else math.nan,
                "iterations": done["iterations"].mean() if len(done) else (g["iterations"].mean()),
            }
        )
    out = pd.DataFrame(
        rows,
        columns=[
            "task",
            "scale",
            "method",
            "seeds",
            "diverged",
            "total_batch",
            "val_metric",
            "val_metric_std",
            "train_loss",
            "iterations",
        ],
    )
    return out


def _fmt(value: float, digits: int) -> str:
    return MISSING if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def markdown(c: pd.DataFrame) -> str:
    """Table 2 in Markdown, one table per task."""
    parts = []
    for task, g in c.groupby("task"):
        header = ["S", "total batch"]
        for what in ("metric", "train loss", "iterations"):
            header += [f"{what} {LABELS[m]}" for m in METHODS]
        lines = [f"### {task}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for scale in sorted(g["scale"].unique(), key=scale_order):
            rows = g[g["scale"] == scale].set_index("method")
            tb = next((str(v) for v in rows["total_batch"]), "")
            out = [scale, tb]
            for col, digits in (("val_metric", 2), ("train_loss", 3), ("iterations", 0)):
                for m in METHODS:
                    if m not in rows.index:
                        out.append(MISSING)
                    elif rows.loc[m, "diverged"] and col != "iterations":
                        out.append(NA)
                    else:
                        out.append(_fmt(rows.loc[m, col], digits))
            lines.append("| " + " | ".join(out) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
