"""The positive control: the smoke's control cell (logreg κ = 10 at S = 64, S·b past the noise scale) shows
the paper's pattern — finding (ii) "LSW worse than S = 1" holds — and stops showing it when LSW's rule is
swapped for AdaScale's (the detector detects). Also what the report reads it with: time to target, speed-up,
B_simple, and the shipped control matrix."""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.core.algo import rules
from bench.core.errors import UserError
from bench.experiments import matrix as matrices
from bench.experiments.pool import run_matrix
from reports.build import build_report
from reports.rundata.collect import ReportWarning, load
from reports.speed import speedup, timetotarget
from reports.stats import noise
from reports.stats import noninferiority as NI
from reports.verdicts import findings as FD
from tasks.presets.logreg import OPTIMUM, TARGET_LOSS

CONTROL = "conditioning"  # the control cell's variant names its data.conditioning override


def control_cell() -> matrices.Matrix:
    """The smoke matrix's control cell alone (its Table 2 runs; the gain runs that keep its S = 64's weights for
    (iii) are tests/reports/test_iii_reference.py's)."""
    m = matrices.load("smoke")
    runs = [
        r for r in m.runs if r.overrides.get("data.conditioning", 1.0) != 1.0 and r.experiment.get("kind") == "table2"
    ]
    assert runs, "smoke.yaml lost its control cell"
    return dataclasses.replace(m, runs=runs)


def run_cell(out: Path) -> pd.DataFrame:
    """Run the cell in this process (so a monkeypatched method table applies); its findings rows."""
    counts = run_matrix(control_cell(), out, progress=False, jobs=1)
    assert counts.get("completed") == 9, counts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReportWarning)
        res = load(out)
    f = FD.findings(res)
    return f[f["table"].str.contains(CONTROL)].set_index("check")


@pytest.fixture(scope="module")
def cell_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    out = tmp_path_factory.mktemp("control")
    return out, run_cell(out)


def test_smoke_cell_is_past_the_noise_scale() -> None:
    m = control_cell()
    runs = {(r.method, r.scale, r.seed) for r in m.runs}
    assert {("lsw", 64, s) for s in range(3)} <= runs and {("adascale", 1, s) for s in range(3)} <= runs
    spec = m.spec(next(r for r in m.runs if r.method == "lsw"))
    assert spec.scale * spec.batch_size == 2048 and spec.data["conditioning"] == 10.0


@pytest.mark.slow
def test_control_cell_lsw_worse_than_s1(cell_out: tuple[Path, pd.DataFrame]) -> None:
    _, f = cell_out
    assert f.loc["ii", "status"] == FD.HOLDS, f.loc["ii", "detail"]
    assert f.loc["i", "status"] == FD.HOLDS, f.loc["i", "detail"]


@pytest.mark.slow
def test_swapping_lsw_for_adascale_makes_ii_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug that made LSW run AdaScale's rule would pass every other check: (ii) must catch it."""
    swapped = dataclasses.replace(rules.METHODS["lsw"], build=rules.METHODS["adascale"].build)
    monkeypatch.setitem(rules.METHODS, "lsw", swapped)
    f = run_cell(tmp_path)
    assert f.loc["ii", "status"] == FD.FAILS, f.loc["ii", "detail"]


@pytest.mark.slow
def test_time_to_target_and_speedup_of_the_cell(cell_out: tuple[Path, pd.DataFrame]) -> None:
    out, _ = cell_out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReportWarning)
        res = load(out)
        ttt = timetotarget.time_to_target(res)
    by = ttt.set_index(["scale", "method", "seed"])
    assert by.loc[("1", "adascale", 0), "reached"]  # S = 1 reaches its own final metric within the margin
    assert by.loc[("64", "adascale", 0), "reached"] and by.loc[("64", "adascale", 0), "seconds"] > 0
    assert not by.loc[("64", "lsw", 0), "reached"]  # LSW at S = 64 ends far above the S = 1 loss
    row = by.loc[("64", "adascale", 0)]
    assert row["examples"] == row["iterations"] * 64 * 32
    assert row["target"] == pytest.approx(TARGET_LOSS)  # fixed before the runs (the preset), not their mean
    assert row["resolution"] <= 3 and not row["parallel"]  # evaluated every 50 τ; S = 64 on one process
    assert by.loc[("1", "adascale", 0), "parallel"] and by.loc[("1", "adascale", 0), "resolution"] == 50
    summary = timetotarget.ttt_summary(ttt)
    lsw = summary[(summary["scale"] == "64") & (summary["method"] == "lsw")].iloc[0]
    assert lsw["iterations"] == timetotarget.NOT_REACHED and lsw["reached"] == "0/3" and lsw["fraction"] == 0
    assert lsw["speedup"] == timetotarget.NOT_REACHED
    ada = summary[(summary["scale"] == "64") & (summary["method"] == "adascale")].iloc[0]
    assert ada["seconds"] == timetotarget.SIMULATED and ada["reached"] == "3/3"  # W = 1 < S: no time to compare
    s1 = summary[(summary["scale"] == "1") & (summary["method"] == "adascale")].iloc[0]
    assert isinstance(s1["seconds"], float) and ada["speedup"] == pytest.approx(s1["iterations"] / ada["iterations"])
    noise = speedup.noise_scales(res)
    assert len(noise) == 3 and (noise["B_simple"] > 0).all() and (noise["B_simple"] < 2048).all()
    sp = speedup.speedups(res, noise)
    ada = sp[(sp["method"] == "adascale") & (sp["scale"] == 64)].iloc[0]
    assert 1 < ada["speedup"] < 64 and ada["S_b_over_B"] > 1 and math.isnan(ada["paper"])  # logreg: not in the paper
    report = build_report(out)
    for name in ("time_to_target.csv", "speedup.csv", "b_crit.csv"):
        assert (report.parent / name).stat().st_size > 0
    assert list(report.parent.glob("speedup_logreg*.png"))
    assert "Time to target" in report.read_text()


def test_b_simple_average_uses_the_unbiased_moments() -> None:
    # two micro-batches, g = (1, 3) in one dimension: sum_sq = 10, mean_sq = 4 -> var = 2, sqr = 3
    train = pd.DataFrame({"sum_sq": [10.0, 10.0], "mean_sq": [4.0, 4.0], "scale": [2, 2]})
    assert noise.average(train, 8.0) == pytest.approx(8 * 2 / 3)
    assert math.isnan(noise.average(train.assign(scale=1), 8.0))  # S = 1 measures nothing
    assert noise.average(train.assign(mean_sq=[1.0, 1.0]), 8.0) == math.inf  # Σμ̂² ≤ 0


def test_the_control_matrix_reaches_several_noise_scales() -> None:
    m = matrices.load("control")
    tasks = {r.task for r in m.runs}
    assert tasks == {"logreg", "cifar10"}
    for task, top, methods in (("logreg", 128, set(rules.paper_methods())), ("cifar10", 64, {"adascale", "lsw"})):
        runs = [r for r in m.runs if r.task == task and r.experiment["kind"] == "table2"]
        assert max(r.scale for r in runs) == top
        assert {r.method for r in runs if r.scale == top} == methods  # cifar10's LSW+ is no hypothesis
        assert all(len({r.seed for r in runs if r.scale == top and r.method == mm}) >= 3 for mm in methods)
        # H4: every AdaScale S > 1 of the table has three seeds' twins keeping their weights over all of τ
        gains = [r for r in m.runs if r.task == task and r.experiment["kind"] == "gain"]
        assert {r.scale for r in gains} == {r.scale for r in runs if r.scale > 1 and r.method == "adascale"}
        assert all("keep_checkpoints_until" not in r.overrides for r in gains)
        for scale in {r.scale for r in gains}:
            seeds = {r.seed for r in gains if r.scale == scale}
            assert len(seeds) == 3 and seeds <= seeds_of(m, task, scale)
    assert any(r.experiment["kind"] == "elastic" for r in m.runs)
    cifar = m.spec(next(r for r in m.runs if r.task == "cifar10"))
    assert cifar.data["tiny_noise"] == 3.0 and cifar.data["tiny_test_size"] == 5000
    assert cifar.data_root.endswith("cifar10,tiny_noise=3.0,tiny_test_size=5000")


# The plan's pooled pilot spreads (control.yaml's header; docs/design.md §1): each side's sd and degrees of
# freedom over the distinct pilot seeds; the plan reads them at their 80 % upper confidence limit.
PILOT_SD, PILOT_DF = 1.62, 58  # cifar10 S = 1's top-1 over seeds 0–17 and 100–141
PILOT_SD_64, PILOT_DF_64 = 1.537, 24  # AdaScale S = 64's over seeds 0–8 and 100–116
LOGREG_UPPER = {1: 0.00170, 4: 0.00193, 16: 0.00153, 64: 0.00173, 128: 0.00336}  # final loss, at the upper limit
LOGREG_EXCESS = 0.0078  # S = 1's mean final loss over the optimum, pilot seeds


def seeds_of(m: matrices.Matrix, task: str, scale: int, method: str = "adascale") -> set[int]:
    return {r.seed for r in m.runs if r.task == task and r.scale == scale and r.method == method}


def cifar_power(m: matrices.Matrix, diff: float = 0.0) -> float:
    """(i)'s chance to decide `holds` on the matrix's tiny cifar10 cells at a true difference `diff`: its seeds
    at S = 1 and AdaScale S = 64 with the pilots' pooled spreads at their upper limits, the tiny margin."""
    n1, n64 = len(seeds_of(m, "cifar10", 1)), len(seeds_of(m, "cifar10", 64))
    margin = NI.table_margin("cifar10", "tiny", True, pd.Series(dtype=float).to_numpy()).delta
    hi, hi_base = NI.sd_upper(PILOT_SD_64, PILOT_DF_64), NI.sd_upper(PILOT_SD, PILOT_DF)
    return NI.decision_power(hi, margin, n64, diff, n_base=n1, sd_base=hi_base)


def test_the_control_is_planned_on_the_pilots_upper_spread(tmp_path: Path) -> None:
    """control.yaml's cifar10 seeds give (i) 80 % power at a true difference of 0 with the pilots' pooled spreads
    at their 80 % upper limits (plan_seeds' rule on the summaries); the last round's 17 + 42 seeds, planned on one
    5-seed sd, fall short there; the test set resolves half the margin."""
    m = matrices.load("control")
    assert cifar_power(m) >= 0.8
    n64, n1 = len(seeds_of(m, "cifar10", 64)), len(seeds_of(m, "cifar10", 1))
    assert (n64, n1) == (32, 52)
    hi, hi_base = NI.sd_upper(PILOT_SD_64, PILOT_DF_64), NI.sd_upper(PILOT_SD, PILOT_DF)
    assert NI.decision_power(hi, 1.0, n64 - 1, 0.0, n_base=n1, sd_base=hi_base) < 0.8  # the least that reaches it
    assert NI.decision_power(hi, 1.0, 17, 0.0, n_base=42, sd_base=hi_base) < 0.7
    spec = m.spec(next(r for r in m.runs if r.task == "cifar10"))
    sampling_error = 100 * math.sqrt(0.9 * 0.1 / spec.data["tiny_test_size"])
    assert sampling_error < 0.5 * 1.0 < 100 * math.sqrt(0.9 * 0.1 / 300)


def _all_within(n: int, draws: int = 4000) -> float:
    """All four logreg S within at a true difference of 0: a Monte Carlo of `compare` with the margin's own
    uncertainty and the pilots' spreads at their upper limits."""
    rng = np.random.default_rng(0)
    base_mean = OPTIMUM + LOGREG_EXCESS
    hits = 0
    for _ in range(draws):
        b = rng.normal(base_mean, LOGREG_UPPER[1], n)
        hits += all(
            NI.compare(rng.normal(base_mean, LOGREG_UPPER[s], n), b, False, 0.0, (math.inf, OPTIMUM), 0.25).verdict
            == NI.WITHIN
            for s in (4, 16, 64, 128)
        )
    return hits / draws


def test_the_logreg_control_decides_at_a_true_difference_of_zero() -> None:
    """All four S within at a true 0 with chance ≥ 0.8 at the matrix's seeds; the last round's 12 fall short."""
    m = matrices.load("control")
    n = len(seeds_of(m, "logreg", 1))
    assert all(len(seeds_of(m, "logreg", s)) == n for s in (4, 16, 64, 128))
    assert _all_within(n) >= 0.8 > _all_within(12, draws=1000)


def test_confirmatory_cells_never_use_a_pilot_seed(tmp_path: Path) -> None:
    """The pilot's seeds (spreads, thresholds, the cut's size) are named in control.yaml and disjoint from every
    confirmatory run; a matrix whose cell reuses one does not load."""
    m = matrices.load("control")
    pilot = {r.task: set(r.experiment["pilot_seeds"]) for r in m.runs}
    assert pilot == {"logreg": set(range(10)) | set(range(100, 112)), "cifar10": set(range(18)) | set(range(100, 142))}
    assert all(r.seed not in pilot[r.task] for r in m.runs)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "preset: tiny\nseeds: [5, 100]\npilot_seeds: {logreg: [0, 5]}\nexperiments:\n  - table2:\n"
        "      tasks: [logreg]\n      methods: [adascale]\n      scales: [1]\n"
    )
    with pytest.raises(UserError, match=r"seeds other than logreg's pilot seeds \(seed 5\)"):
        matrices.load(str(bad))


def test_the_control_carries_a_graded_degradation() -> None:
    """H3: AdaScale cut at S = 16 in three grades (≈ 2Δ, 1.5Δ, 1.25Δ on the pilot: 0.69, 0.74, 0.76 of its
    budget), each with as many seeds as S = 1, its S = 1 the shared run (identity there)."""
    from bench.experiments.degraded import GRADES

    m = matrices.load("control")
    assert sorted(size for _, size in GRADES.values()) == [1.25, 1.5, 2.0]
    assert [GRADES[n][0] for n in sorted(GRADES, key=lambda n: GRADES[n][1])] == [0.76, 0.74, 0.69]
    for name in GRADES:
        cut = seeds_of(m, "logreg", 16, name)
        assert len(cut) == len(seeds_of(m, "logreg", 1)) >= 10, name
        assert not seeds_of(m, "logreg", 1, name)  # the shared S = 1 stands for it
