"""Whole runs through the engine: τ bookkeeping, identity at S = 1, elastic S, divergence."""

from __future__ import annotations

import json
import math

import pytest
import torch

from bench.core.algo.gain import b_simple_average
from bench.core.algo.rules import WARMUP_FRACTION
from bench.run.runner import run_spec
from reports.rundata.collect import runs
from reports.tables.table2 import cells, markdown
from tests.helpers import records, spec_for, train

EXP = {"kind": "exponential", "lr0": 0.05, "decay": 0.1}


def summary_batch(root) -> int:
    return json.loads(next(root.rglob("spec.json")).read_text())["batch_size"]


def test_adascale_at_scale_one_is_bit_identical_to_identity(tmp_path) -> None:
    _, a = train(spec_for("logreg", "adascale", 1, T1=100), tmp_path / "a")
    _, b = train(spec_for("logreg", "identity", 1, T1=100), tmp_path / "b")
    for (k, p), (_, q) in zip(a.module.state_dict().items(), b.module.state_dict().items(), strict=True):
        assert torch.equal(p, q), k
    assert all(r["gain"] == 1.0 for r in records(tmp_path / "a"))


def test_lsw_runs_ceil_T1_over_S_with_definition_3_and_the_warmup_ramp(tmp_path) -> None:
    T1, S = 400, 8
    summary, _ = train(spec_for("logreg", "lsw", S, T1=T1, lr_schedule=EXP), tmp_path)
    recs = records(tmp_path)
    n = math.ceil(T1 / S)
    assert summary["iterations"] == len(recs) == n
    wu = WARMUP_FRACTION * n
    for r in recs:
        t = r["iteration"]
        w = 1 / S + (1 - 1 / S) * t / wu if t < wu else 1.0
        assert r["tau"] == S * t
        assert r["lr"] == pytest.approx(S * w * 0.05 * 0.1 ** (S * t / T1), rel=1e-12)
    assert recs[0]["lr"] == pytest.approx(0.05)  # the ramp starts at lr(0) ...
    assert recs[-1]["lr"] == pytest.approx(S * 0.05 * 0.1 ** (S * (n - 1) / T1))  # ... and ends at S·lr(S·t)


def test_adascale_stops_at_the_first_tau_past_T1_and_lsw_plus_matches_its_iterations(tmp_path) -> None:
    T1, S = 300, 4
    summary = run_spec(spec_for("logreg", "adascale", S, T1=T1), tmp_path, progress=False)
    recs = records(tmp_path / "logreg/adascale/s4/seed0,T1=300")
    assert recs[-1]["tau"] < T1 <= recs[-1]["tau"] + recs[-1]["progress"]
    assert summary["tau"] == pytest.approx(recs[-1]["tau"] + recs[-1]["progress"])
    for prev, cur in zip(recs, recs[1:], strict=False):
        assert cur["tau"] == pytest.approx(prev["tau"] + prev["gain"])  # p_t = r_t
        assert cur["lr"] == pytest.approx(cur["gain"] * 0.05)  # m_t = r_t (constant schedule)
    assert 1 < summary["mean_gain"] < S
    # B_simple's training average from the records' own statistics (bench.core.algo.gain, one formula)
    stats = [(r["sum_sq"], r["mean_sq"], r["scale"]) for r in recs]
    assert summary["B_simple"] == pytest.approx(b_simple_average(stats, summary_batch(tmp_path)))
    assert summary["B_simple"] > 0 and summary["noise_scale"] > 0
    plus = run_spec(spec_for("logreg", "lsw+", S, T1=T1), tmp_path, progress=False)
    assert plus["iterations"] == summary["iterations"]
    assert plus["T_AS"] == summary["iterations"]


def test_elastic_schedule_switches_scale_at_a_quarter_and_a_half(tmp_path) -> None:
    T1 = 400
    summary, _ = train(spec_for("logreg", "adascale", "elastic-up", T1=T1), tmp_path)
    recs = records(tmp_path)
    for r in recs:
        expected = 2 if r["tau"] < T1 / 4 else 4 if r["tau"] < T1 / 2 else 8
        assert r["scale"] == expected
    assert {r["scale"] for r in recs} == {2, 4, 8}
    down, _ = train(spec_for("logreg", "lsw", "elastic-down", T1=T1), tmp_path / "down")
    scales = [r["scale"] for r in records(tmp_path / "down")]
    assert scales[0] == 8 and scales[-1] == 2 and scales == sorted(scales, reverse=True)


def test_a_learning_rate_that_blows_up_ends_diverged_and_the_table_says_na(tmp_path) -> None:
    spec = spec_for("logreg", "adascale", 2, T1=50, lr_schedule={"kind": "constant", "lr0": 1e38})
    summary = run_spec(spec, tmp_path, progress=False)
    assert summary["status"] == "diverged"
    assert summary["val_metric"] is None
    assert summary["iterations"] < 25
    run_spec(spec_for("logreg", "lsw", 2, T1=50), tmp_path, progress=False)
    table = markdown(cells(runs(tmp_path)))
    row = next(line for line in table.splitlines() if line.startswith("| s2") or line.startswith("| 2 "))
    assert "N/A" in row
