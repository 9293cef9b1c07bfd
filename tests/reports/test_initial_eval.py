"""The untrained model's evaluation at τ = 0 (issue 55.4) changes nothing a report derives from the evaluations
beyond what it is for: the last quarter's drop (a loss's margin without an optimum) never starts from it, and the
curves' evaluation band pairs the k-th evaluations of seeds with and without it (a folder written before it)."""

from __future__ import annotations

import math

import pandas as pd

from reports.figures.bands import eval_band
from reports.stats.noninferiority import last_quarter_drop


def evals(taus: list[float], values: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"tau": taus, "metric": values})


def test_the_last_quarter_drop_never_starts_at_the_untrained_model() -> None:
    assert math.isnan(last_quarter_drop([evals([0.0, 100.0], [5.0, 1.0])], 100.0))  # only the end: no quarter
    assert last_quarter_drop([evals([0.0, 75.0, 100.0], [5.0, 1.5, 1.0])], 100.0) == 0.5


def test_the_band_pairs_seeds_with_and_without_the_evaluation_at_zero() -> None:
    new, old = evals([0.0, 50.0, 100.0], [10.0, 60.0, 80.0]), evals([50.0, 100.0], [62.0, 82.0])
    band = eval_band([new, old])
    assert list(band["tau"]) == [50.0, 100.0] and list(band["mean"]) == [61.0, 81.0]
    assert list(eval_band([new, new])["tau"]) == [0.0, 50.0, 100.0]  # every seed has it: drawn from τ = 0
