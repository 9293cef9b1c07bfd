"""A report derives each run's noise profile and (iii)'s predictions once, however many findings and
figures ask (`noise.fill` is called per table): at paper volume the predictions were redone 14 times, because
a run whose training average stays NaN (no gradient statistics) counted as still to read on every call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.core.files import METRICS
from reports.rundata.collect import load
from reports.rundata.fakeruns import write_run
from reports.stats import noise


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for scale in (2, 4, 8):
        write_run(tmp_path, "cifar10", "adascale", scale, 0, 400)
    bare = write_run(tmp_path, "cifar10", "adascale", 16, 0, 400)  # no statistics: its average stays NaN
    lines = [json.loads(line) for line in (bare / METRICS).read_text().splitlines()]
    for r in lines:
        for key in ("sum_sq", "mean_sq", "var", "sqr"):
            r.pop(key, None)
    (bare / METRICS).write_text("".join(json.dumps(r) + "\n" for r in lines))
    return tmp_path


def test_fill_reads_and_predicts_once_per_report(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"predict": 0, "metrics": 0}
    real_predict = noise.predict

    def counting_predict(runs, workers=1):
        calls["predict"] += 1
        return real_predict(runs, workers)

    monkeypatch.setattr(noise, "predict", counting_predict)
    res = load(folder)
    real_metrics = res.metrics

    def counting_metrics(run_dir):
        calls["metrics"] += 1
        return real_metrics(run_dir)

    monkeypatch.setattr(res, "metrics", counting_metrics)
    first = noise.fill(res).copy()
    for _ in range(5):
        noise.fill(res)
    assert calls == {"predict": 1, "metrics": 4}
    assert res.runs[noise.PREDICTED].notna().sum() == 3  # S = 2, 4, 8 predicted from the others; S = 16 has none
    assert res.runs[noise.PREDICTED].equals(first[noise.PREDICTED])
    # a frame put in its place (a caller's copy without the columns) is read afresh, not taken as read
    res.runs = load(folder).runs
    noise.fill(res)
    assert calls["metrics"] == 8 and res.runs[noise.PREDICTED].notna().sum() == 3


def test_predictions_made_side_by_side_are_the_ones_made_alone(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`predict` steps every donor of a (S, T1) side by side (bench.core.algo.predict.iterations_following_each), here
    or in forked processes where there are many: the same numbers as predicting each donor alone, and nothing
    is predicted one by one afterwards."""
    monkeypatch.setattr(noise, "_PREDICTIONS", {})
    monkeypatch.setattr(noise, "_precompute", lambda keys, workers=1: None)  # each one alone, through `_cached`
    alone = noise.fill(load(folder))[list(noise.PREDICTION_COLUMNS)]
    monkeypatch.undo()
    monkeypatch.setattr(noise, "_PREDICTIONS", {})
    monkeypatch.setattr(noise, "iterations_following", _recording)  # a prediction made one by one records
    together = noise.fill(load(folder))[list(noise.PREDICTION_COLUMNS)]
    assert alone.equals(together) and together[noise.PREDICTED].notna().sum() == 3
    assert HANDED == []  # every one came from the side-by-side pass
    assert len(noise._PREDICTIONS) >= 6  # every donor at every other S
    monkeypatch.setattr(noise, "_PREDICTIONS", {})
    monkeypatch.setattr(noise, "PARALLEL_FROM", 1)  # in forked processes: a call there never records here
    there = noise.fill(load(folder), workers=2)[list(noise.PREDICTION_COLUMNS)]
    assert alone.equals(there) and HANDED == [] and len(noise._PREDICTIONS) >= 6


HANDED: list[object] = []
_REAL = noise.iterations_following


def _recording(*key: object) -> float:
    HANDED.append(key)
    return _REAL(*key)
