"""advise's interval: the probe's sampling joined with the model's error away from its S, calibrated on measured
runs (reports/stats/prediction_errors.csv) and checked on runs it was not fitted on (docs/design.md §4: one row of
its held-out table recomputed here, through the CLI)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.cli import main
from bench.core.algo import transfer as T
from bench.core.algo.predict import iterations_following
from reports import advice as A

PROFILE = tuple((1.0, 1.0 / 40 * (1 - 0.09 * j)) for j in range(10))  # B/b from 40 rising to 110 over τ
T1 = 2000.0


def test_model_error_is_the_rms_per_octave_of_the_calibration_file() -> None:
    """MODEL_ERROR recomputed from the file: √(Σ log² c / Σ d²) over the chains of probes (the folder's largest S, S/4
    and S/16) and the other S, d the distance in octaves from the nearer probe, log c what is left past the transfer.
    The κ = 3 runs the design's held-out table reads are not in it (else that table would check the fit on its own
    data)."""
    e = pd.read_csv(A.ERRORS)
    used = e[e["distance"] != 0]
    squares = float((used["log_c"].clip(-T.REACH, T.REACH) ** 2).sum())
    expected = math.sqrt(squares / float((used["distance"] ** 2).sum()))
    per_octave, pairs, settings = A.model_error()
    assert math.isclose(per_octave, expected, rel_tol=1e-12) and pairs == len(used) > 50
    assert not any("κ 3" in s for s in set(e["setting"])) and "κ 3" not in settings
    for chain in set(e["probe_scales"]):  # advise's default probes, S, S/4 and S/16
        scales = tuple(int(s) for s in chain.split("/"))
        assert scales == T.probe_scales(scales[0]) and len(scales) == 3, chain
    assert (e["distance"] == 0).any()  # the other seeds at a probe's S: measured, not fitted (no distance)


def test_multiplier_meets_the_count_and_stops_at_its_reach() -> None:
    """log c solved from a count gives that count again (a count is an integer: c is known to within its step);
    a count no c reaches is ±REACH, not NaN."""
    for c, S in ((1.7, 16), (0.6, 64), (1.0, 4)):
        measured = iterations_following(T.scaled(PROFILE, c), S, T1)
        solved = T.multiplier(PROFILE, S, T1, measured)
        assert abs(iterations_following(T.scaled(PROFILE, math.exp(solved)), S, T1) - measured) <= 1, (c, S)
        assert abs(solved - math.log(c)) < 0.05, (c, S, solved)
    assert T.multiplier(PROFILE, 16, T1, 10.0) == T.REACH  # fewer iterations than T1/S: past any noise scale
    assert T.multiplier(PROFILE, 16, T1, 1999.0) == -T.REACH


def test_interval_is_the_jackknife_at_the_probe_and_widens_with_distance() -> None:
    """At S_p the interval is the jackknife's alone; away from it the model's error joins it, wider the farther
    (in the count's own sensitivity: where S·b ≪ B a noise scale off changes the count little); the seeds' standard
    error widens it at every S."""
    outs = [iterations_following(T.scaled(PROFILE, 1 + 0.01 * g), 16, T1) for g in range(-3, 4)]
    its = iterations_following(PROFILE, 16, T1)

    def at(S: int):  # the prediction at S with σ² × c
        return lambda c: iterations_following(T.scaled(PROFILE, c), S, T1)

    assert A.interval(at(16), its, outs, 16, 16) == pytest.approx(A.jackknife_interval(its, outs))
    lo, hi = A.interval(at(16), its, outs, 16, 16, seed_error=5.0)
    assert (its - lo) ** 2 == pytest.approx((its - A.jackknife_interval(its, outs)[0]) ** 2 + (1.96 * 5) ** 2)
    widths = []
    for S in (32, 64, 128):
        est = iterations_following(PROFILE, S, T1)
        lo, hi = A.interval(at(S), est, [est * (1 + 0.001 * g) for g in range(-3, 4)], S, 16)
        assert lo < est < hi
        widths.append(math.log(hi / lo))
    assert widths[0] < widths[1] < widths[2], widths


@pytest.mark.usefixtures("one_thread")
@pytest.mark.timeout(900)
def test_a_held_out_row_of_the_design_table(tmp_path: Path) -> None:
    """docs/design.md §4, logreg κ = 3 (held out of the calibration), S = 64, an octave from two probes: advise with its
    default probes (S = 128, 32 and 8, seeds 1000 and 1001) predicts 110 [90, 138]; the three runs' mean (112.1
    over 8 seeds there) lies inside and within 10 %."""
    out = tmp_path / "k3"
    sets = ["--set", "data.conditioning=3", "--set", "lr_schedule.lr0=1", "--set", "microbatch_mode=batched"]
    args = ["--task", "logreg", *sets, "--scales", "1,64,128", "--seeds", "3"]
    assert main(["advise", *args, "--verify-scales", "64", "--out", str(out)]) == 0
    row = pd.read_csv(out / "advice.csv").set_index("S").loc[64]
    assert round(row["iterations"]) == 110 and round(row["iterations_lo"]) == 90 and round(row["iterations_hi"]) == 138
    assert main(["submit", str(out / "verify.yaml"), "--executor", "local", "--out", str(out)]) == 0
    its = [
        float(pd.read_json(p, typ="series")["iterations"])
        for p in out.glob("logreg/adascale/s64/seed[0-2],*/summary.json")
    ]
    assert len(its) == 3
    mean = float(np.mean(its))
    assert row["iterations_lo"] <= mean <= row["iterations_hi"] and abs(row["iterations"] / mean - 1) <= 0.10


def test_no_count_is_no_multiplier_and_a_damaged_calibration_pair_is_left_out(tmp_path: Path, monkeypatch) -> None:
    """A measured count of 0, a negative one, NaN or inf gives log c NaN (no division, no log of 0); the fit leaves
    such a pair out rather than reading NaN into every interval, and a file with none usable is refused."""
    for bad in (0.0, -5.0, math.nan, math.inf):
        assert math.isnan(T.multiplier(PROFILE, 16, T1, bad)), bad
    e = pd.read_csv(A.ERRORS)
    whole = A.model_error()
    try:
        damaged = tmp_path / "errors.csv"
        pd.concat([e, e.iloc[[-1]].assign(distance=2.0, log_c=math.nan)]).to_csv(damaged, index=False)
        monkeypatch.setattr(A, "ERRORS", damaged)
        A.model_error.cache_clear()
        assert A.model_error()[:2] == whole[:2]
        e.assign(log_c=math.nan).to_csv(damaged, index=False)
        A.model_error.cache_clear()
        with pytest.raises(RuntimeError, match="no usable calibration pairs"):
            A.model_error()
        e.drop(columns=["distance"]).to_csv(damaged, index=False)  # the old file's columns: one line, not a KeyError
        A.model_error.cache_clear()
        with pytest.raises(RuntimeError, match="no distance, log_c and setting columns"):
            A.model_error()
    finally:
        monkeypatch.undo()
        A.model_error.cache_clear()
