"""A failed seed, one concept with one home (docs/design.md §5): a seed that diverged, or one that completed with
a metric no better than the untrained model's or a guess's (collapsed). Every place a seed is judged — Table 2's
† (reports.tables.table2), the findings' (i), (ii), (v) and the rules grid (reports.verdicts.findings,
reports.page.rulecompare) —
counts both alike: a run that ends where it started, or at chance accuracy, has failed to train whatever its
status says.

Two references, either enough: the untrained model's evaluation (the engine records one at iteration 0, kept in
the summary as `initial_eval`; a run folder written before it has none), and the metric a guess scores for the
run's preset (`TaskCard.chance`; none where no model-free chance level is principled: a loss, BLEU, WER, mAP).
A model's accuracy on n evaluation examples is binomial, with a standard deviation of sqrt(q(1 − q)/n) of the
metric's range (q: the reference level as a share of it). A seed has collapsed when its final metric is not more
than SIGMAS such deviations better than a reference: a model no better than the reference lands past that in
~0.1 % of runs, so a seed that does has learned something, and a seed that does not is indistinguishable from
it. n is the evaluation's size as the task reported it (`tasks.presets.EVAL_EXAMPLES` in its last evaluation);
where it did not, or the metric has no finite range (a loss), the tolerance is 0: only a metric at or below
(for a loss: at or above) the reference itself counts.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from bench.core.errors import UserError
from reports.rundata.specfacts import SpecFacts
from tasks.presets import EVAL_EXAMPLES, card_of_run

SIGMAS = 3.0  # a one-sided 3σ binomial bound: not tuned, the conventional "not a fluke" distance


def chance_tolerance(chance: float, n: float | None, lo: float, hi: float) -> float:
    """SIGMAS binomial standard deviations of the score on n examples of a model whose true level is `chance` (a
    guesser's, or the untrained model's), in the metric's units (its range lo..hi: a percentage spans 100); 0
    where n or the range is unknown."""
    if n is None or not math.isfinite(n) or n < 1 or not (math.isfinite(lo) and math.isfinite(hi)):
        return 0.0
    q = min(max((chance - lo) / (hi - lo), 0.0), 1.0)
    return SIGMAS * (hi - lo) * math.sqrt(q * (1.0 - q) / n)


def _number(v: Any) -> float | None:
    """v as a finite float, or None (a boolean, NaN, a string: no number to judge by)."""
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else None


def collapsed(spec: SpecFacts, summary: dict[str, Any] | None) -> bool:
    """Whether a completed run ended no better than its untrained model or its task's chance level (see the
    module); False where neither reference is known, the card cannot be read, or the run has no final metric."""
    if summary is None or summary.get("status") != "completed":
        return False
    try:
        card = card_of_run(spec.task, spec.user_task)
    except UserError:
        return False
    value, last, first = _number(summary.get("val_metric")), summary.get("eval"), summary.get("initial_eval")
    if value is None:
        return False
    refs = [card.chance.get(spec.preset or ""), first.get(card.metric) if isinstance(first, dict) else None]
    n = _number(last.get(EVAL_EXAMPLES)) if isinstance(last, dict) else None  # a damaged size: none known
    for ref in (r for r in map(_number, refs) if r is not None):
        tol = chance_tolerance(ref, n, *card.metric_range)
        if value <= ref + tol if card.higher_is_better else value >= ref - tol:
            return True
    return False


def failed(g: pd.DataFrame) -> pd.Series:
    """Which runs of a frame are failed seeds: diverged, or collapsed (no better than untrained or chance)."""
    hit = g["collapsed"].fillna(False).astype(bool) if "collapsed" in g else False
    return (g["status"] == "diverged") | hit


def failed_text(g: pd.DataFrame) -> str:
    """How a frame's failed seeds read in a verdict: '2 seed(s) diverged', '2 seed(s) collapsed',
    both joined by 'and'; '' where none failed."""
    n_div = int((g["status"] == "diverged").sum())
    n_col = int(failed(g).sum()) - n_div
    parts = [f"{n_div} seed(s) diverged"] * bool(n_div) + [f"{n_col} seed(s) collapsed"] * bool(n_col)
    return " and ".join(parts)
