"""The paper's findings as checks that can fail: for each of (i)–(v) a synthetic results folder where it
holds and one where it does not (plus the inconclusive and not-testable cases)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from reports import figures
from reports.findings import (
    FAILS,
    FEW,
    HOLDS,
    INCONCLUSIVE,
    NOT_RUN,
    NOT_TESTABLE,
    STRADDLES,
    WITHIN,
    WORSE,
    compare,
    findings,
    text,
)

from .test_reports import quiet_load, seeds, write_run

S1 = [74.0, 74.1, 73.9]  # the S = 1 seeds


def status(tmp_path, check: str) -> tuple[str, str]:
    f = findings(quiet_load(tmp_path))
    r = f[f["check"] == check].iloc[0]
    return r["status"], r["detail"]


# ---------------------------------------------------------------------------- the interval and margin


def test_the_interval_against_the_margin():
    base = np.array(S1)
    assert compare(np.array([74.1, 73.9, 74.0]), base, True).verdict == WITHIN
    assert compare(np.array([60.0, 61.0, 59.0]), base, True).verdict == WORSE
    assert compare(np.array([73.0, 75.0, 72.5]), base, True).verdict == STRADDLES  # too wide to tell
    two = compare(np.array([73.5, 73.5]), np.array([74.0, 74.0]), True)  # a 0.5 drop, 2 seeds: never "holds"
    assert two.verdict == FEW and two.diff == pytest.approx(-0.5)
    c = compare(np.array([74.1, 73.9, 74.0]), base, True)
    assert c.lo < c.diff < c.hi and c.margin == 0.5


def test_losses_are_lower_is_better_with_a_relative_margin():
    base = np.array([0.250, 0.251, 0.249])
    c = compare(np.array([0.2505, 0.2495, 0.2500]), base, False)
    assert c.verdict == WITHIN and c.margin == pytest.approx(0.005)  # 2 % of 0.25
    assert compare(np.array([0.30, 0.31, 0.29]), base, False).verdict == WORSE  # a higher loss is worse
    assert compare(np.array([0.20, 0.21, 0.19]), base, False).diff > 0  # a lower loss is better


# ------------------------------------------------------------------------------------- (i) and (v)


def test_i_and_v_hold_when_within_the_margin(tmp_path):
    seeds(tmp_path, "cifar10", "adascale", 1, S1)
    seeds(tmp_path, "cifar10", "adascale", 8, [74.1, 73.8, 74.2], T1=100, iterations=20)
    seeds(tmp_path, "cifar10", "adascale", "elastic-up", [74.0, 73.9, 74.2], T1=100, iterations=30)
    st, detail = status(tmp_path, "i")
    assert st == HOLDS and "S=8: 74.03 ± 0.21 (n=3) vs 74.00 ± 0.10 (n=3): +0.03 [" in detail
    assert "vs −Δ = -0.50 (within)" in detail
    st, detail = status(tmp_path, "v")
    assert st == HOLDS and "elastic-up vs S=1" in detail


def test_i_and_v_fail_when_worse_than_the_margin(tmp_path):
    seeds(tmp_path, "cifar10", "adascale", 1, S1)
    seeds(tmp_path, "cifar10", "adascale", 4, [60.0, 61.0, 59.0], T1=100, iterations=30)
    seeds(tmp_path, "cifar10", "adascale", "elastic-up", [50.0, 51.0, 50.5], T1=100, iterations=30)
    st, detail = status(tmp_path, "i")
    assert st == FAILS and "(worse)" in detail
    assert status(tmp_path, "v")[0] == FAILS


def test_i_is_inconclusive_with_two_seeds_and_fails_on_a_divergence(tmp_path):
    """The reviewer's case: a 0.5-point drop with 2 seeds used to 'hold' (Welch could not reject)."""
    seeds(tmp_path, "cifar10", "adascale", 1, [99.0, 99.2])
    seeds(tmp_path, "cifar10", "adascale", 4, [98.5, 98.7], T1=100, iterations=30)
    st, detail = status(tmp_path, "i")
    assert st == INCONCLUSIVE and "(too few seeds)" in detail
    write_run(tmp_path, "cifar10", "adascale", 2, 0, status="diverged", iterations=5, T1=100)
    st, detail = status(tmp_path, "i")
    assert st == FAILS and "S=2: 1 seed(s) diverged" in detail


def test_v_compares_with_s1_not_the_fixed_run_at_the_largest_s(tmp_path):
    seeds(tmp_path, "cifar10", "adascale", 1, S1)
    seeds(tmp_path, "cifar10", "adascale", 4, [60.0, 60.1, 59.9], T1=100, iterations=30)  # a bad fixed S = 4
    seeds(tmp_path, "cifar10", "adascale", "elastic-up", [60.0, 60.1, 59.9], T1=100, iterations=30)
    st, detail = status(tmp_path, "v")  # as bad as S = 4 but far below S = 1: does not hold
    assert st == FAILS and "elastic-up vs S=1" in detail


# ------------------------------------------------------------------------------------------- (ii)


def lsw_folder(tmp_path, lsw_vals, noise: float, **kw):
    """b = 16, LSW at S = 8 (S·b = 128); AdaScale S = 8 runs measuring a noise scale `noise`."""
    seeds(tmp_path, "cifar10", "adascale", 1, S1)
    seeds(tmp_path, "cifar10", "adascale", 8, [74.1, 73.8, 74.2], T1=100, iterations=20, b_simple=noise)
    seeds(tmp_path, "cifar10", "lsw", 8, lsw_vals, T1=100, iterations=13, **kw)


def test_ii_holds_where_lsw_is_worse_past_the_noise_scale(tmp_path):
    lsw_folder(tmp_path, [60.3, 61.5, 59.1], noise=50.0)
    st, detail = status(tmp_path, "ii")
    assert st == HOLDS and "S·b = 128 vs B_simple = 50 (median of 3 AdaScale run(s))" in detail


def test_ii_fails_where_lsw_keeps_its_metric_past_the_noise_scale(tmp_path):
    lsw_folder(tmp_path, [74.1, 73.9, 74.0], noise=50.0)
    assert status(tmp_path, "ii")[0] == FAILS


def test_ii_is_not_testable_below_the_noise_scale(tmp_path):
    """LSW keeps its metric, but S·b = 128 is below B_simple = 1000: the paper expects no degradation."""
    lsw_folder(tmp_path, [74.1, 73.9, 74.0], noise=1000.0)
    st, detail = status(tmp_path, "ii")
    assert st == NOT_TESTABLE and "S·b = 128 vs B_simple = 1,000" in detail and "(within)" in detail


def test_ii_holds_on_a_divergence_and_is_not_testable_without_a_noise_scale(tmp_path):
    seeds(tmp_path, "cifar10", "adascale", 1, S1)
    write_run(tmp_path, "cifar10", "lsw", 8, 0, status="diverged", iterations=5, T1=100)
    st, detail = status(tmp_path, "ii")  # the shared S = 1 run is LSW's baseline; no AdaScale S ≥ 2
    assert st == NOT_TESTABLE and "no noise scale measured" in detail
    write_run(tmp_path, "cifar10", "adascale", 8, 0, T1=100, iterations=20, b_simple=50.0)
    st, detail = status(tmp_path, "ii")
    assert st == HOLDS and "1 seed(s) diverged" in detail


# ------------------------------------------------------------------------------------------ (iii)


def test_iii_holds_where_the_iterations_follow_the_noise_scale(tmp_path):
    # S·b = 128 ≪ B = 10 000: r̂ = 8·(625 + 1)/(625 + 8) = 7.91, ≈ 126 iterations of T1 = 1000
    write_run(tmp_path, "cifar10", "adascale", 8, 0, T1=1000, iterations=130, b_simple=10_000.0)
    # S·b = 128 ≫ B = 1.6: r̂ = 8·1.1/8.1 = 1.086, ≈ 920 iterations
    write_run(tmp_path, "cifar10", "adascale", 8, 1, T1=1000, iterations=950, b_simple=1.6)
    st, detail = status(tmp_path, "iii")
    assert st == HOLDS
    assert "S=8 seed 0: 130 its (u 0.96) vs 126 predicted at B_simple 10,000, S·b/B = 0.013 (û 0.99)" in detail


def test_iii_fails_where_the_gain_ignores_the_noise_scale(tmp_path):
    """Within [T1/S, T1] (the old check's bound) but far from what the noise scale predicts."""
    write_run(tmp_path, "cifar10", "adascale", 8, 0, T1=1000, iterations=900, b_simple=10_000.0)
    st, detail = status(tmp_path, "iii")
    assert st == FAILS and "✗" in detail
    write_run(tmp_path, "cifar10", "adascale", 8, 1, T1=1000, iterations=130, b_simple=10_000.0)
    assert status(tmp_path, "iii")[0] == INCONCLUSIVE  # one seed follows, one does not


def test_iii_is_not_testable_without_statistics(tmp_path):
    write_run(tmp_path, "cifar10", "adascale", 8, 0, T1=1000, iterations=130)  # sum_sq null: statistics off
    st, detail = status(tmp_path, "iii")
    assert st == NOT_TESTABLE and "no noise scale" in detail


def test_b_simple_comes_from_the_summary_or_the_metrics(tmp_path):
    run = write_run(tmp_path, "cifar10", "adascale", 8, 0, T1=1000, iterations=130, b_simple=400.0)
    f = findings(quiet_load(tmp_path))
    assert f["B_simple"].iloc[0] == pytest.approx(400.0)  # from metrics.jsonl (old runs: no B_simple)
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "B_simple": 123.0}))
    f = findings(quiet_load(tmp_path))
    assert f["B_simple"].iloc[0] == 123.0  # the summary's own value first
    assert "cifar10: B_simple 123 (median of 1 AdaScale run(s) with S ≥ 2); largest S·b 128" in text(f)


# ------------------------------------------------------------------------------------------- (iv)


def with_gains(run, gains, T1: float = 1000.0, stats: dict | None = None):
    """Replace a run's training records: one per unit of τ, the given gains first (then the last one);
    `stats`: the sum_sq, mean_sq (and scale) each record carries."""
    lines = []
    for i in range(int(T1 * 0.2)):
        g = gains[i] if i < len(gains) else gains[-1]
        lines.append(
            {"iteration": i, "tau": float(i), "scale": 4, "gain": g, "lr": 0.1 * g, "loss": 1.0, **(stats or {})}
        )
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


RISING = [1.2 + 2.6 * (1 - math.exp(-i / 30)) for i in range(100)]  # S = 4: 1.2 → 3.7 in the first 10 %
FALLING = [3.52 - 0.78 * min(i, 20) / 20 + 0.6 * max(i - 20, 0) / 80 for i in range(100)]  # the reviewer's run


def test_iv_holds_where_the_gain_starts_low_and_rises(tmp_path):
    for seed in (0, 1):
        with_gains(write_run(tmp_path, "cifar10", "adascale", 4, seed, T1=1000, iterations=400), RISING)
    st, detail = status(tmp_path, "iv")
    assert st == HOLDS and "S=4 seed 0: 0.30 → 0.89" in detail


def test_iv_fails_where_the_gain_starts_at_s(tmp_path):
    """Tiny cifar10 S = 4 in the smoke: 3.52 at the start, 2.74 by iteration 20, up again after."""
    for seed in (0, 1):
        with_gains(write_run(tmp_path, "cifar10", "adascale", 4, seed, T1=1000, iterations=400), FALLING)
    st, detail = status(tmp_path, "iv")
    assert st == FAILS and "✗" in detail
    with_gains(write_run(tmp_path, "cifar10", "adascale", 4, 2, T1=1000, iterations=400), RISING)
    assert status(tmp_path, "iv")[0] == INCONCLUSIVE  # the seeds disagree


SETTLING = [3.5 + 7.5 * (1 - math.exp(-i / 30)) for i in range(100)]  # S = 64 past the noise scale: 3.5 → ~11


def test_iv_judges_the_rise_against_the_gain_the_noise_scale_allows(tmp_path):
    """S = 64, b = 32, B_simple = 473 (the smoke's control cell): the gain settles near r̂ ≈ 12.8, not S. It
    starts at 3.5 and climbs to ~11: a warm-up that a range of [1, S] would call 0.04 → 0.16, "does not hold",
    whatever the run did."""
    S, b, B = 64, 32, 473.0
    var, mean_sq = B / b, 1.0 + B / b / S  # σ² = B/b and μ² = mean_sq − σ²/S = 1 (the unbiased moments)
    stats = {"scale": S, "sum_sq": var * (S - 1) + S * mean_sq, "mean_sq": mean_sq}
    for seed in (0, 1):
        run = write_run(tmp_path, "logreg", "adascale", S, seed, T1=1000, iterations=100, batch_size=b)
        with_gains(run, SETTLING, stats=stats)
    st, detail = status(tmp_path, "iv")
    assert st == HOLDS and "(r̂ 12.8)" in detail
    for seed in (0, 1):  # at r̂ from the start: no warm-up
        with_gains(tmp_path / "logreg" / "adascale" / "s64" / f"seed{seed}", [11.0] * 100, stats=stats)
    assert status(tmp_path, "iv")[0] == FAILS


def test_iv_is_not_testable_without_records_in_the_window(tmp_path):
    write_run(tmp_path, "cifar10", "adascale", 8, 0, T1=100, iterations=20)  # τ steps of 6.4: 2 records ≤ 10
    st, detail = status(tmp_path, "iv")
    assert st == NOT_TESTABLE and "2 record(s) in the first 10 % of τ" in detail


def test_nothing_to_check_is_not_run(tmp_path):
    write_run(tmp_path, "cifar10", "lsw", 4, 0)
    f = findings(quiet_load(tmp_path))
    assert set(f["status"]) == {NOT_RUN}


def test_the_curves_caption_is_written_from_the_gain(tmp_path):
    """No hard-coded "gain starts low and rises": the caption says what the runs' gain did."""
    for seed in (0, 1):
        with_gains(write_run(tmp_path / "up", "cifar10", "adascale", 4, seed, T1=1000, iterations=400), RISING)
        with_gains(write_run(tmp_path / "down", "cifar10", "adascale", 4, seed, T1=1000, iterations=400), FALLING)
    write_run(tmp_path / "down", "cifar10", "lsw", 4, 0, b_simple=50.0)
    (up,) = figures.curves(quiet_load(tmp_path / "up"), tmp_path / "out")
    assert "S=4: 0.30 → 0.89 (starts well below S and rises: a warm-up emerges)" in up.caption
    down = {f.title: f.caption for f in figures.curves(quiet_load(tmp_path / "down"), tmp_path / "out")}
    assert "(does not start well below S and rise: no emergent warm-up)" in down["cifar10: AdaScale"]
    assert "starts low" not in down["cifar10: AdaScale"]
    assert "No gain panel: LSW does not use the gain." in down["cifar10: LSW"]
