"""The scale-free comparison: Δmetric, speed-up T1 / iterations and efficiency T1 / (S · iterations),
from the paper's Table 2 (checked by hand) and from a synthetic results folder."""

from __future__ import annotations

import math

import pytest

from reports.paper import load_paper
from reports.scalefree import paper_side, scalefree
from reports.table2 import cells

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
