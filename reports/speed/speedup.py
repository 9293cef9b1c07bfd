"""Speed-ups against S, for any results folder: the table (`speedups`, speedup.csv) and AdaScale's noise scales
behind it (`noise_scales`); its figure is reports.figures.speedup.

- Speed-up = T1 / iterations (a fixed-S run; mean over its completed seeds), per table (task, preset,
  variant), Table 2 rule (every rule with runs: a rule whose pace is the scale, LSW, √S, LEGW, has S by
  construction) and S, beside the ideal S and the paper's own speed-up of the same task and method (its
  S = 1 iterations over its iterations at S, paper/table2.csv).
- AdaScale's efficiency (speed-up ÷ S) beside what finding (iii) predicts for the same run: T1 over the
  iterations of a gain that follows the noise the table's other runs measured (reports.stats.noise.predict, through
  bench.core.algo.predict: the estimator's moving average and steady gain) — one formula for the panel and the
  finding;
  S·b/B with B the run's late noise scale (reports.stats.noise: per window, τ-weighted, corrected for drawing
  without replacement).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bench.core.algo.rules import ADASCALE
from reports.rundata.collect import Results
from reports.rundata.failedseeds import failed
from reports.speed.scalefree import COLLAPSED_FLAG, WORSE_FLAG
from reports.stats import noise
from reports.stats.noninferiority import table_margin
from reports.tables.paper import load_paper
from reports.tables.table2 import table_runs

SPEEDUP_COLUMNS = ["task", "variant", "method", "scale", "speedup", "n", "ideal", "paper", "S_b_over_B", "predicted"]
SPEEDUP_COLUMNS += ["quality"]


def _fixed(df: pd.DataFrame) -> pd.DataFrame:
    s = pd.to_numeric(df["scale"], errors="coerce")
    return df.assign(S=s)[np.isfinite(s)]


def noise_scales(res: Results) -> pd.DataFrame:
    """The Table 2 AdaScale runs (S ≥ 2, completed) with their noise scale per window (reports.stats.noise.fill),
    `B_late` as `B`, and `predicted`: the speed-up finding (iii) predicts, T1 / predicted iterations."""
    noise.fill(res)
    t = table_runs(res.runs)
    if t.empty:
        return t.assign(B=pd.Series(dtype=float), predicted=pd.Series(dtype=float))
    t = _fixed(t)
    ada = t[(t["method"] == ADASCALE) & (t["S"] >= 2) & (t["status"] == "completed")].copy()
    ada["B"] = pd.to_numeric(ada[noise.WINDOW_COLUMNS[-1]], errors="coerce")
    ada["predicted"] = ada["T1"].astype(float) / pd.to_numeric(ada[noise.PREDICTED], errors="coerce")
    return ada


def _paper_speedups() -> dict[tuple[str, str, float], float]:
    p = load_paper()
    p = p[pd.to_numeric(p["scale"], errors="coerce").notna() & p["iterations"].notna()]
    out = {}
    for (task, method), g in p.groupby(["task", "method"]):
        base = g.loc[g["scale"] == "1", "iterations"]
        for r in g.itertuples():
            if len(base):
                out[(task, method, float(r.scale))] = float(base.iloc[0]) / float(r.iterations)
    return out


def speedups(res: Results, noise: pd.DataFrame | None = None) -> pd.DataFrame:
    """SPEEDUP_COLUMNS per table, Table 2 rule and fixed S; S_b_over_B and `predicted` (finding (iii)'s
    speed-up) from AdaScale's runs; `quality`: the scale-free table's flag (a mean metric worse than S = 1's
    by more than the findings' margin: no success, whatever its speed-up). Computed once per runs frame for
    the report's noise (the figure and speedup.csv read the same table); a copy each time."""
    if noise is not None:
        return _speedups(res, noise)
    return res.per_runs("speedups", lambda: _speedups(res, noise_scales(res)))


def _speedups(res: Results, noise: pd.DataFrame) -> pd.DataFrame:
    t = table_runs(res.runs)
    if t.empty:
        return pd.DataFrame(columns=SPEEDUP_COLUMNS)
    t = _fixed(t)
    margins = _margins(t)
    t = t[t["status"] == "completed"]
    paper = _paper_speedups()
    rows = []
    for (task, variant, method, S), g in t.groupby(["task", "variant", "method", "S"]):
        sp = (g["T1"].astype(float) / g["iterations"].astype(float)).to_numpy()
        same = noise[(noise["task"] == task) & (noise["variant"] == variant) & (noise["S"] == S)]
        nb, pred = same["B"].dropna(), same["predicted"].dropna()
        b = float(g["batch_size"].iloc[0])
        median = float(np.median(nb.dropna())) if len(nb.dropna()) else math.nan
        ratio = S * b / median if median > 0 else math.nan  # a noise scale of 0 (μ² never above its noise): none
        delta, base, higher = margins.get((task, variant), (math.nan, math.nan, True))
        d = (1 if higher else -1) * (float(pd.to_numeric(g["val_metric"], errors="coerce").mean()) - base)
        rows.append(
            {
                "task": task,
                "variant": variant,
                "method": method,
                "scale": S,
                "speedup": float(np.mean(sp)),
                "n": len(sp),
                "ideal": S,
                "paper": paper.get((task, method, S), math.nan),
                "S_b_over_B": ratio,
                "predicted": float(np.mean(pred)) if method == ADASCALE and len(pred) else math.nan,
                "quality": COLLAPSED_FLAG if failed(g).any() else WORSE_FLAG if d < -delta else "",
            }
        )
    return pd.DataFrame(rows, columns=SPEEDUP_COLUMNS)


def _margins(t: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float, bool]]:
    """(Δ, S = 1 mean, higher is better) per (task, variant), from the S = 1 runs
    (reports.stats.noninferiority.table_margin)."""
    out = {}
    for (task, variant), g in t.groupby(["task", "variant"]):
        base = g[(g["S"] == 1) & (g["status"] == "completed")].drop_duplicates("run_dir")
        vals = pd.to_numeric(base["val_metric"], errors="coerce").dropna().to_numpy(float)
        higher = bool(g["higher_is_better"].dropna().iloc[0]) if g["higher_is_better"].notna().any() else True
        preset = str(g["preset"].iloc[0] or "")
        m = table_margin(str(task), preset, higher, vals)
        out[(task, variant)] = (m.delta, float(np.mean(vals)) if len(vals) else math.nan, higher)
    return out
