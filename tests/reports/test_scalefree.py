"""The scale-free comparison: Δmetric, speed-up T1 / iterations and efficiency T1 / (S · iterations),
from the paper's Table 2 (checked by hand) and from a synthetic results folder."""

from __future__ import annotations

import math

import pytest

from reports.speed.scalefree import DIVERGED_FLAG, WORSE_FLAG, paper_side, scalefree, text, to_csv
from reports.tables.paper import load_paper
from reports.tables.table2 import cells

from .test_reports import quiet_load, seeds, write_run


def row(df, task, method, scale):
    return df[(df["task"] == task) & (df["method"] == method) & (df["scale"] == scale)].iloc[0]


def test_paper_numbers_by_hand():
    p = paper_side(load_paper())
    r = row(p, "cifar10", "adascale", "8")  # 94.1 at 5850 iterations; S = 1: 94.1 at 39100
    assert r["paper_d_metric"] == pytest.approx(94.1 - 94.1)
    assert r["paper_speedup"] == pytest.approx(39100 / 5850)  # 6.68
    assert r["paper_efficiency"] == pytest.approx(39100 / (8 * 5850))  # 0.835
    r = row(p, "imagenet", "lsw", "128")  # 73.3 at 3520; S = 1: 76.4 at 451000
    assert r["paper_d_metric"] == pytest.approx(73.3 - 76.4)
    assert r["paper_speedup"] == pytest.approx(451000 / 3520)
    assert r["paper_efficiency"] == pytest.approx(451000 / (128 * 3520))
    r = row(p, "speech", "lsw", "16")  # diverged: no Δmetric, speed-up from its planned 5300 iterations
    assert r["paper_diverged"] and math.isnan(r["paper_d_metric"])
    assert r["paper_speedup"] == pytest.approx(84800 / 5300) and r["paper_efficiency"] == pytest.approx(1.0)
    e = row(p, "imagenet", "adascale", "elastic-up")  # S varies: speed-up only
    assert e["paper_speedup"] == pytest.approx(451000 / 11600) and math.isnan(e["paper_efficiency"])


def test_ours_from_a_results_folder(tmp_path):
    seeds(tmp_path, "cifar10", "adascale", 1, [80.0, 82.0], iterations=100)
    seeds(tmp_path, "cifar10", "adascale", 8, [77.0, 79.0], iterations=20, T1=100)
    write_run(tmp_path, "cifar10", "lsw", 8, 0, status="diverged", iterations=4, T1=100)
    res = quiet_load(tmp_path)
    sf = scalefree(cells(res.runs), res.runs, load_paper())
    a = row(sf, "cifar10", "adascale", "8")
    assert a["d_metric"] == pytest.approx(78.0 - 81.0)
    assert a["T1"] == 100 and a["speedup"] == pytest.approx(100 / 20)
    assert a["efficiency"] == pytest.approx(100 / (8 * 20))
    assert a["paper_speedup"] == pytest.approx(39100 / 5850)  # the paper's S = 8 beside ours
    lsw = row(sf, "cifar10", "lsw", "8")  # diverged: planned ⌈100 / 8⌉ = 13 iterations, not the 4 it ran
    assert lsw["diverged"] and math.isnan(lsw["d_metric"]) and lsw["iterations"] == 13
    assert lsw["speedup"] == pytest.approx(100 / 13)
    assert math.isnan(row(sf, "cifar10", "adascale", "64")["speedup"])  # the paper's scale, not run here


def test_delta_is_signed_better_positive_and_a_miss_is_flagged(tmp_path):
    """The control's logreg LSW S = 128 collapse (loss 0.255 → 2.70) reads −2.45, flagged, not +2.45; an AdaScale
    run that ends below S = 1's loss reads positive and unflagged; a diverged cell is flagged."""
    kw = {"metric": "loss", "batch_size": 32, "T1": 2000}
    seeds(tmp_path, "logreg", "adascale", 1, [0.2540, 0.2561, 0.2546], iterations=2000, **kw)
    seeds(tmp_path, "logreg", "adascale", 128, [0.2523, 0.2545, 0.2547], iterations=114, **kw)
    seeds(tmp_path, "logreg", "lsw", 128, [2.52, 2.97, 2.61], iterations=16, **kw)
    write_run(tmp_path, "logreg", "lsw+", 128, 0, status="diverged", iterations=10, **kw)
    res = quiet_load(tmp_path)
    sf = scalefree(cells(res.runs), res.runs, load_paper())
    lsw = row(sf, "logreg", "lsw", "128")
    assert lsw["d_metric"] == pytest.approx(-(2.70 - 0.2549), abs=1e-4) and lsw["quality"] == WORSE_FLAG
    ada = row(sf, "logreg", "adascale", "128")
    assert ada["d_metric"] > 0 and ada["quality"] == ""
    assert row(sf, "logreg", "lsw+", "128")["quality"] == DIVERGED_FLAG
    shown = text(sf)
    assert (
        "Δmetric (+ better)" in shown and "✗ worse than S = 1 by more than Δ" in shown and "-2.4451  125.00×" in shown
    )
    csv = to_csv(sf)
    assert "lsw,128,3,False,2000,16,-2.445" in csv and "worse than S = 1 by more than Δ" in csv


def test_an_accuracy_miss_past_the_margin_is_flagged_and_within_is_not(tmp_path):
    seeds(tmp_path, "cifar10", "adascale", 1, [90.0, 90.2, 89.8], iterations=100)
    seeds(tmp_path, "cifar10", "adascale", 8, [89.4, 89.5, 89.3], iterations=20, T1=100)  # −0.6: within Δ = 1
    seeds(tmp_path, "cifar10", "lsw", 8, [88.6, 88.8, 88.7], iterations=13, T1=100)  # −1.3: past it
    res = quiet_load(tmp_path)
    sf = scalefree(cells(res.runs), res.runs, load_paper())
    assert row(sf, "cifar10", "adascale", "8")["quality"] == ""
    assert row(sf, "cifar10", "lsw", "8")["quality"] == WORSE_FLAG
