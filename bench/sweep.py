"""`adascale-bench sweep --task logreg`: the critical-batch sweep (DESIGN §1), through the one engine.

For global batches 32 … 4096: epochs of data until the full loss reaches the target, under a fixed lr,
under linear scaling with warm-up and with AdaScale at S = B/32. The gradient-noise scale measured by
the AdaScale runs predicts where linear scaling stops paying (the critical batch).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from . import matrix as matrices
from .engine import install_signal_handlers
from .errors import UserError
from .runfiles import SUMMARY, atomic_write_bytes, read_json
from .runner import run_dir_of
from .smoke import run_matrix

METHOD_ORDER = ("fixed", "linear", "adascale")


def sweep_table(m: matrices.Matrix, out: Path) -> pd.DataFrame:
    """batch, method, epochs_to_target (NaN where the target was not reached), plus the noise scale and
    the status of each sweep run of `m` found under `out`."""
    rows = []
    for req in m.runs:
        if req.experiment.get("kind") != "sweep":
            continue
        path = run_dir_of(out, m.spec(req)) / SUMMARY
        summary = read_json(path) if path.exists() else {}
        rows.append(
            {
                "batch": req.experiment["batch"],
                "method": req.experiment["method"],
                "seed": req.seed,
                "epochs_to_target": summary.get("target_epochs"),
                "status": summary.get("status", "missing"),
                "noise_scale": summary.get("noise_scale"),
            }
        )
    df = pd.DataFrame(rows, columns=["batch", "method", "seed", "epochs_to_target", "status", "noise_scale"])
    df["epochs_to_target"] = pd.to_numeric(df["epochs_to_target"])
    df["noise_scale"] = pd.to_numeric(df["noise_scale"])
    return df


def write_sweep_csv(df: pd.DataFrame, path: Path) -> None:
    """sweep.csv as DESIGN §4 specifies: batch, method, epochs_to_target (empty where not reached); the
    mean over seeds where there are several."""
    table = df.groupby(["batch", "method"], sort=False)["epochs_to_target"].mean().reset_index()
    table["method"] = pd.Categorical(table["method"], METHOD_ORDER, ordered=True)
    table = table.sort_values(["method", "batch"])
    atomic_write_bytes(path, table.to_csv(index=False, na_rep="").encode())


def sweep(task: str, out: Path, jobs: int = 1) -> int:
    if task != "logreg":
        raise UserError(f"the sweep runs on logreg only, not {task}")
    install_signal_handlers()
    out.mkdir(parents=True, exist_ok=True)
    runs = matrices.sweep_runs(matrices.SWEEP_BATCHES, 80, [0])
    m = matrices.Matrix(Path("<sweep>"), "tiny", runs, {}, {})
    counts = run_matrix(m, out, jobs=jobs)
    df = sweep_table(m, out)
    write_sweep_csv(df, out / "sweep.csv")
    noise = df.loc[df["method"] == "adascale", "noise_scale"].median()
    wide = df.pivot_table(index="batch", columns="method", values="epochs_to_target", aggfunc="mean", dropna=False)
    print(wide.reindex(columns=list(METHOD_ORDER)).to_string(na_rep="–", float_format=lambda v: f"{v:.0f}"))
    if not math.isnan(noise):
        print(f"gradient-noise scale B_noise ≈ {noise:.0f} examples (predicted critical batch)")
    figure = _figure(df, out)
    print(f"sweep: {sum(counts.values())} runs; table: {out / 'sweep.csv'}" + (f"; figure: {figure}" if figure else ""))
    return 0 if counts.get("failed", 0) == 0 else 1


def _figure(df: pd.DataFrame, out: Path) -> Path | None:
    try:
        from reports.figures import sweep_figure
    except ImportError:
        return None
    return sweep_figure(df, out / "sweep.png")
