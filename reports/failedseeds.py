"""A failed seed, one concept with one home (docs/design.md §5): a seed that diverged, or one that completed with
a metric no better than a guess (collapsed). Every place a seed is judged — Table 2's † (reports.table2), the
findings' (i), (ii), (v) and the rules grid (reports.findings, reports.rulecompare) — counts both alike: a run
that ends at chance accuracy has failed to train whatever its status says.

"No better than chance": the task's card names the metric a guess scores for the run's preset
(`TaskCard.chance`; none where no model-free chance level is principled: a loss, BLEU, WER, mAP). A guesser's
accuracy on n evaluation examples is binomial, with a standard deviation of sqrt(q(1 − q)/n) of the metric's
range (q: the chance level as a share of it). A seed has collapsed when its final metric is not more than
SIGMAS such deviations better than chance: a guess lands past that in ~0.1 % of runs, so a seed that does has
learned something, and a seed that does not is indistinguishable from a guess. n is the evaluation's size as
the task reported it (`tasks.presets.EVAL_EXAMPLES` in its last evaluation); where it did not, the tolerance
is 0 (only a metric at or below chance itself counts). The untrained model's evaluation is not recorded by the
engine, so chance is the only reference.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from bench.errors import UserError
from bench.identity import SpecDocument
from tasks.presets import EVAL_EXAMPLES, card_of_run

SIGMAS = 3.0  # a one-sided 3σ binomial bound: not tuned, the conventional "not a fluke" distance


def chance_tolerance(chance: float, n: float | None, lo: float, hi: float) -> float:
    """SIGMAS binomial standard deviations of a guesser's score on n examples, in the metric's units (its range
    lo..hi: a percentage spans 100); 0 where n or the range is unknown."""
    if n is None or not math.isfinite(n) or n < 1 or not (math.isfinite(lo) and math.isfinite(hi)):
        return 0.0
    q = min(max((chance - lo) / (hi - lo), 0.0), 1.0)
    return SIGMAS * (hi - lo) * math.sqrt(q * (1.0 - q) / n)


def collapsed(spec: SpecDocument, summary: dict[str, Any] | None) -> bool:
    """Whether a completed run ended no better than its task's chance level (see the module); False where the
    card names no chance level for its preset, the card cannot be read, or the run has no final metric."""
    if summary is None or summary.get("status") != "completed":
        return False
    try:
        card = card_of_run(spec.get("task"), spec.get("user_task"))
    except UserError:
        return False
    chance = card.chance.get(str(spec.get("preset") or ""))
    value, last = summary.get("val_metric"), summary.get("eval")
    if chance is None or not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return False
    n = last.get(EVAL_EXAMPLES) if isinstance(last, dict) else None
    n = n if isinstance(n, int | float) and not isinstance(n, bool) else None  # a damaged size: none known
    tol = chance_tolerance(chance, n, *card.metric_range)
    return value <= chance + tol if card.higher_is_better else value >= chance - tol


def failed(g: pd.DataFrame) -> pd.Series:
    """Which runs of a frame are failed seeds: diverged, or collapsed to chance."""
    hit = g["collapsed"].fillna(False).astype(bool) if "collapsed" in g else False
    return (g["status"] == "diverged") | hit


def failed_text(g: pd.DataFrame) -> str:
    """How a frame's failed seeds read in a verdict: '2 seed(s) diverged', '2 seed(s) collapsed to chance',
    both joined by 'and'; '' where none failed."""
    n_div = int((g["status"] == "diverged").sum())
    n_col = int(failed(g).sum()) - n_div
    parts = [f"{n_div} seed(s) diverged"] * bool(n_div) + [f"{n_col} seed(s) collapsed to chance"] * bool(n_col)
    return " and ".join(parts)
