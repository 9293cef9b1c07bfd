"""The critical batch fitted to the sweep's steps–examples points (McCandlish et al. 2018), reports/sweep.py."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from reports import figures
from reports.collect import ReportWarning, load
from reports.critical import fit_tradeoff
from reports.sweep import critical_batches, critical_text

from .test_reports import write_run

BATCHES = np.array([32, 64, 128, 256, 512, 1024, 2048, 4096], float)


def steps_of(batch: np.ndarray, s_min: float, b_crit: float) -> np.ndarray:
    """The trade-off S = S_min·(1 + B_crit/B), i.e. (S/S_min − 1)(E/E_min − 1) = 1 with E = S·B."""
    return s_min * (1 + b_crit / batch)


def test_fit_recovers_the_tradeoff() -> None:
    s_min, e_min, rms = fit_tradeoff(BATCHES, steps_of(BATCHES, 40.0, 900.0))
    assert s_min == pytest.approx(40.0, rel=1e-6) and e_min / s_min == pytest.approx(900.0, rel=1e-6)
    assert rms < 1e-8
    noisy = steps_of(BATCHES, 40.0, 900.0) * np.exp(np.random.default_rng(0).normal(0, 0.05, len(BATCHES)))
    s_min, e_min, rms = fit_tradeoff(BATCHES, noisy)
    assert e_min / s_min == pytest.approx(900.0, rel=0.3) and 0.01 < rms < 0.2


def test_fit_needs_three_points() -> None:
    assert all(math.isnan(v) for v in fit_tradeoff(BATCHES[:2], steps_of(BATCHES[:2], 40.0, 900.0)))


def sweep_folder(root: Path, b_crit: float, reach_from: int = 0, method: str = "linear") -> None:
    """Sweep runs of `method` on a trade-off curve (N = 20 000 examples an epoch; b_crit 0: steps flat in
    the batch, as fixed lr); batches below `reach_from` miss the target."""
    for k, B in enumerate(BATCHES.astype(int)):
        steps = int(round(steps_of(float(B), 40.0, b_crit))) if b_crit else 1250
        reached = k >= reach_from
        extra = {"epochs": steps * B / 20_000, "target_epochs": steps * B / 20_000 if reached else None}
        exp = {"kind": "sweep", "batch": int(B), "method": method, "target": 0.25}
        write_run(
            root,
            "logreg",
            "identity",
            1,
            k + (100 if method != "linear" else 0),
            iterations=steps,
            metric="loss",
            batch_size=int(B),
            experiment=exp,
            summary_extra=extra,
            with_metrics=False,
        )


def test_critical_batch_from_sweep_runs_is_printed_and_drawn(tmp_path: Path) -> None:
    sweep_folder(tmp_path, 700.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReportWarning)
        res = load(tmp_path)
    fits = critical_batches(res)
    assert len(fits) == 1 and fits.iloc[0]["B_crit"] == pytest.approx(700.0, rel=0.02)
    assert fits.iloc[0]["epoch_examples"] == pytest.approx(20_000)
    text = critical_text(fits, {"logreg": np.array([650.0])})
    assert f"B_crit = E_min/S_min = {fits.iloc[0]['B_crit']:,.0f}" in text and "B_simple (median of 1" in text
    figs = figures.sweep(res, tmp_path / "figs")
    assert len(figs) == 1 and figs[0].path.read_bytes().startswith(b"\x89PNG")


def test_too_few_reached_points_give_no_fit(tmp_path: Path) -> None:
    sweep_folder(tmp_path, 700.0, reach_from=6)  # only 2 batches reach the target
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReportWarning)
        fits = critical_batches(load(tmp_path))
    assert fits.empty and "no sweep method" in critical_text(fits)


def test_a_degenerate_fit_is_marked_and_not_drawn(tmp_path: Path) -> None:
    """Fixed-lr steps flat in the batch: B_crit below the data, printed as a bound, no line on the figure."""
    sweep_folder(tmp_path, 700.0)
    sweep_folder(tmp_path, 0.0, method="fixed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReportWarning)
        res = load(tmp_path)
    fits = critical_batches(res).set_index("method")
    assert fits.loc["fixed", "degenerate"] == "below the data" and fits.loc["linear", "degenerate"] == ""
    assert "fixed lr]: B_crit below the data (< 32" in critical_text(fits.reset_index())
    (fig,) = figures.sweep(res, tmp_path / "figs")
    assert "fixed lr: B_crit below the data" in fig.caption and "no line drawn" in fig.caption
