"""`advise`: the prediction from one AdaScale probe, held to logreg's exact noise scale along the probe's own
trajectory (tasks.logreg.exact_moments at its kept weights), and its verification matrix run and judged by
the report's finding (iii) with the same numbers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.cli import main
from bench.core.algo.predict import iterations_following
from bench.experiments import matrix as matrices
from reports import advice as A
from reports.verdicts import reference

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(600)]
PROBE = ["--task", "logreg", "--scales", "1,2,4,8,16", "--probe-scale", "8", "--seeds", "2"]


@pytest.fixture(scope="module")
def advised(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """advise on tiny logreg, its probe keeping weights every 4 iterations, and `gain` on them (the exact
    moments at each kept iterate)."""
    out = tmp_path_factory.mktemp("advise") / "out"
    assert main(["advise", *PROBE, "--set", "keep_checkpoints_every=4", "--out", str(out)]) == 0
    probe = next(p.parent for p in out.rglob("summary.json"))
    assert main(["gain", str(probe), "--batches", "2"]) == 0
    return out


def exact_points(probe: Path) -> reference.Points:
    """logreg's exact moments at the probe's kept iterates (offline_gain.csv's ref_* columns, with tr C² and GᵀCG:
    the clamp the engine applies at each S is computable from them), as finding (iii)'s reference reads them."""
    d = pd.read_csv(probe / "offline_gain.csv").sort_values("tau")
    values = d[list(reference.REF)].to_numpy(float, copy=True)
    per_epoch = 1000 / 32  # tiny logreg: N = 1 000 items, b = 32
    values[:, 1] += np.where(d[reference.DRAWN] == 1, values[:, 0] / per_epoch, 0.0)
    return reference.Points(d["tau"].to_numpy(float), values, "exact")


def test_the_prediction_holds_to_the_exact_noise_scale(advised: Path) -> None:
    """The iterations an engine run would take following logreg's exact moments along the probe (the clamp and
    the draw order at each S modelled: reference.predict) lie in advise's interval at every S; the same check
    fails where the noise scale is off by 2× per octave from the probe, 2× at the probe and next to it (the
    interval is not too wide to fail: its model error is 1.96 × MODEL_ERROR ≈ 0.3 in log c per octave) — on the
    side the count can tell: where AdaScale's steady gain is within 1 % of S (S·b ≪ B), a larger noise scale
    moves no gain (the count sits near T1/S whatever B is), so there only a smaller one is a failure."""
    table = pd.read_csv(advised / "advice.csv")
    probe = next(p.parent for p in advised.rglob("offline_gain.csv"))
    points, T1, per_epoch = exact_points(probe), 2000.0, 1000 / 32
    for r in table[table["S"] > 1].itertuples():
        truth = math.exp(reference.predict(points, int(r.S), T1, per_epoch).logs[0])
        assert r.iterations_lo <= truth <= r.iterations_hi, (r.S, truth, r.iterations_lo, r.iterations_hi)
        off = 2.0 ** max(1.0, abs(math.log2(r.S / 8)))
        for c in (1 / off, off) if r.adascale_steady_gain < 0.99 * r.S else (1 / off,):
            wrong = math.exp(reference.predict(points, int(r.S), T1, per_epoch, c=c).logs[0])
            assert not r.iterations_lo <= wrong <= r.iterations_hi, (r.S, c, wrong)


def test_advice_files_and_a_verification_matrix_with_the_probe_a_pilot(advised: Path) -> None:
    for name in ("advice.md", "advice.csv", "advice.png", "verify.yaml"):
        assert (advised / name).is_file(), name
    table = pd.read_csv(advised / "advice.csv")
    assert list(table["S"]) == [1, 2, 4, 8, 16]
    assert (np.diff(table["iterations"]) < 0).all() and table["efficiency"].iloc[0] == 1.0
    m = matrices.load(advised / "verify.yaml")
    assert {r.seed for r in m.runs} == {0, 1} and all(r.experiment["pilot_seeds"] == [1000, 1001] for r in m.runs)
    verified = A.verify_scales([A.Row(**row) for row in _rows(table)], [1, 2, 4, 8, 16])
    assert {r.scale for r in m.runs} == set(verified) and {r.method for r in m.runs} == {"adascale", "lsw"}


def test_advice_states_the_probes_own_iterations_beside_its_own_prediction(advised: Path) -> None:
    """Self-consistency, stated: the probe's iterations (its summary) and the prediction from its own profile at its
    own S (bench.core.algo.predict), with the signed error."""
    probe_dir = next(p.parent for p in advised.glob("logreg/adascale/s8/seed1000,*/summary.json"))
    probe = A.read_probe(advised, probe_dir)
    own = iterations_following(probe.folded, 8, probe.T1)
    assert abs(own / probe.iterations - 1) <= 0.02  # what its engine folded reproduces its count (FOLDED_PARTS)
    line = next(x for x in (advised / "advice.md").read_text().splitlines() if x.startswith("Self-consistency"))
    assert f"the probe took {probe.iterations:,.0f} iterations at S = 8" in line, line
    assert f"is {own:,.0f} ({own / probe.iterations - 1:+.1%})" in line, line


def test_adascales_gain_in_the_rule_advice_is_the_probes_own(advised: Path) -> None:
    """The rule advice reads AdaScale's gain at τ off the prediction's path (reports.verdicts.ruleadvice.gain_at):
    at the probe's S it is the gain the probe logged, record by record (median miss ≤ 0.5 %), so the lr judged
    against the stability bound there is the lr the probe ran at."""
    from reports.verdicts.ruleadvice import gain_at

    probe_dir = next(p.parent for p in advised.glob("logreg/adascale/s8/seed1000,*/summary.json"))
    probe = A.read_probe(advised, probe_dir)
    gain = gain_at(probe.folded, 8, probe.T1)
    t = pd.read_json(probe_dir / "metrics.jsonl", lines=True).dropna(subset=["gain"])
    miss = np.abs([gain(tau) / g - 1 for tau, g in zip(t["tau"], t["gain"], strict=True)])
    assert len(miss) > 100 and float(np.median(miss)) <= 0.005, np.median(miss)
    assert probe.ran and max(lr for _, lr in probe.ran) > 0.0  # the probe completed, not collapsed: its lr is evidence


def _rows(table: pd.DataFrame) -> list[dict]:
    names = {
        "S": "scale", "iterations": "iterations", "iterations_lo": "lo", "iterations_hi": "hi", "speedup": "speedup",
        "efficiency": "efficiency", "efficiency_lo": "efficiency_lo", "efficiency_hi": "efficiency_hi",
        "adascale_steady_gain": "steady_gain", "lsw_past_gain": "lsw_past_gain", "gpu_hours": "gpu_hours",
    }  # fmt: skip
    return [{names[k]: v for k, v in row.items()} for row in table.to_dict("records")]


@pytest.mark.long  # advise, its verification matrix and the report
def test_the_verification_runs_and_the_report_judges_it_from_the_probe(advised: Path, capsys) -> None:
    """submit verify.yaml into the same folder, then report: (iii) prints the chosen S's AdaScale runs' prediction
    from the probe (another S of the same table) — the numbers advice.csv printed — as evidence (the runs keep no
    weights: no reference independent of the engine, so not testable)."""
    assert main(["submit", str(advised / "verify.yaml"), "--executor", "local", "--out", str(advised)]) == 0
    capsys.readouterr()
    assert main(["report", str(advised), "--format", "csv,txt", "--quiet"]) == 0
    # the probe's offline μ² estimates below 0 late in training (μ² under its noise) are data, not damage
    assert "field 'sqr'" not in capsys.readouterr().err
    findings = pd.read_csv(advised / "report" / "findings.csv")
    iii = findings[findings["check"] == "iii"].iloc[0]  # no kept weights: the probe's prediction is evidence only
    assert str(iii["status"]).startswith("not testable") and "no reference independent" in str(iii["detail"]), iii[
        "detail"
    ]
    assert "other runs' noise (pilot runs at S = 2, 8) predicts" in str(iii["detail"]), iii["detail"]
    from reports.rundata.collect import load
    from reports.stats import noise

    res = load(advised)
    runs = noise.fill(res)
    table = pd.read_csv(advised / "advice.csv").set_index("S")
    judged = runs[(runs["method"] == "adascale") & runs[noise.PREDICTED].notna() & ~runs["pilot"].astype(bool)]
    assert len(judged) >= 2
    for r in judged.itertuples():
        # advice.csv's 6 significant digits: the mean of the probes' seeds is no integer count
        assert math.isclose(getattr(r, noise.PREDICTED), table.at[int(r.scale), "iterations"], rel_tol=1e-5)
    _rule_advice_holds(advised, res.runs)


def _rule_advice_holds(advised: Path, runs: pd.DataFrame) -> None:
    """The rule advice against the verification's runs (the textbook lr0 0.05): where LSW's mean loss keeps
    S = 1's quality (the card's margin on the excess over the optimum), advise did not call it unsafe; where it
    lost it, at risk or unsafe (tests/reports/test_rule_advice_runs.py holds the side where LSW fails)."""
    from tasks.presets.logreg import LOSS_MARGIN, OPTIMUM

    done = runs[(runs["status"] == "completed") & ~runs["pilot"].astype(bool)]
    S = pd.to_numeric(done["scale"], errors="coerce").astype(int)  # a label column ("8"): the number
    loss = pd.to_numeric(done["val_metric"], errors="coerce").groupby([done["method"], S]).mean()
    verdicts = pd.read_csv(advised / "rule_advice.csv").set_index(["rule", "scale"])
    base = loss[("adascale", 1)]
    checked = 0
    for (method, S), value in loss.items():
        if method != "lsw" or int(S) < 2:
            continue
        v = verdicts.loc[("lsw", int(S)), "verdict"]
        keeps = value - OPTIMUM <= (1 + LOSS_MARGIN) * (base - OPTIMUM)
        assert (v != "unsafe") if keeps else (v in ("unsafe", "at risk")), (S, value, base, v)
        checked += 1
    assert checked >= 2


def test_largest_efficient_and_the_jackknife() -> None:
    row = lambda S, e, lo: A.Row(S, 1.0, 1.0, 1.0, 1.0, e, lo, e, 1.0, False, math.nan)  # noqa: E731
    rows = [row(1, 1.0, 1.0), row(2, 0.9, 0.8), row(4, 0.6, 0.45), row(8, 0.4, 0.3), row(16, 0.55, 0.5)]
    assert A.largest_efficient(rows) == 4  # 16's 0.55 lies past a gap: not advised
    assert A.largest_efficient(rows, "efficiency_lo") == 2
    assert A.largest_efficient([row(1, 0.4, 0.4)]) is None
    lo, hi = A.jackknife_interval(10.0, [9.0, 11.0, 10.0, 10.0])
    assert hi - lo == pytest.approx(2 * 1.96 * math.sqrt(3 / 4 * 2.0))
    assert all(math.isnan(v) for v in A.jackknife_interval(10.0, [9.0]))


def test_seeds_are_enough_where_their_mean_count_is_pinned() -> None:
    """One more probe seed while 1.96 × the standard error of the high probes' mean count exceeds 5 % of it: tiny
    cifar10's 84 and 88 at S = 128 are enough, the user's GRU's 111 and 128 are not, nor with 117 and 132 added (its
    luck then still ±7.9 %: advise stops at --most-probe-seeds); one seed, a failed one or none never is."""
    assert A.seeds_enough([84, 88]) and A.seeds_enough([100, 100, 100])
    assert not A.seeds_enough([111, 128]) and not A.seeds_enough([111, 128, 117, 132])
    d = 100.0 * A.SEED_PRECISION / 1.96  # 100 ± d: standard error d, so z·SE is 5 % of the mean 100 exactly
    assert A.seeds_enough([100.0 - 0.99 * d, 100.0 + 0.99 * d]) and not A.seeds_enough([100 - 1.01 * d, 100 + 1.01 * d])
    assert not A.seeds_enough([100.0]) and not A.seeds_enough([])
    assert not A.seeds_enough([100.0, math.nan]) and not A.seeds_enough([100.0, 0.0])


def test_a_probe_count_from_a_damaged_summary_is_no_count() -> None:
    """advise's seed loop reads each high probe's summary.json (someone else's folder may hold it): a count that is no
    positive finite number — past float's range, negative, 0, a bool, text, absent — is NaN (the loop stops and
    read_probes says why in one line), never an OverflowError or a count that plans seeds."""
    from bench.cli.advise import _count

    assert _count({"iterations": 84}) == 84.0
    for bad in (10**400, -3, 0, True, "84", None, math.inf):
        assert math.isnan(_count({"iterations": bad})), bad
    assert math.isnan(_count(None)) and math.isnan(_count({}))


def test_a_middle_probe_is_asked_between_the_others(tmp_path: Path, capsys) -> None:
    """--mid-probe-scale outside the two probes, or with no low probe, is one line before anything trains."""
    o = str(tmp_path / "o")
    assert main(["advise", "--task", "logreg", "--probe-scale", "64", "--mid-probe-scale", "64", "--out", o]) == 2
    assert "--mid-probe-scale 64: between the low probe's S = 4" in capsys.readouterr().err
    args = ["--probe-scale", "64", "--low-probe-scale", "0", "--mid-probe-scale", "16"]
    assert main(["advise", "--task", "logreg", *args, "--out", o]) == 2
    assert "a middle probe needs a low one" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_advise_refuses_a_probe_that_cannot_measure_noise(tmp_path: Path, capsys) -> None:
    assert main(["advise", "--task", "logreg", "--probe-scale", "1", "--out", str(tmp_path / "o")]) == 2
    assert "--probe-scale" in capsys.readouterr().err
    assert main(["advise", "--task", "logreg", "--scales", "0,x", "--out", str(tmp_path / "o")]) == 2


def test_a_collapsed_probe_is_no_evidence_for_the_rule_advice(advised: Path, tmp_path: Path) -> None:
    """The probe's lr counts against the stability bound only where it ended neither diverged nor collapsed: the same
    probe with its final loss set above its untrained model's (0.693: collapsed) gives no `ran` at all."""
    import json
    import shutil

    probe_dir = next(p.parent for p in advised.glob("logreg/adascale/s8/seed1000,*/summary.json"))
    copy = tmp_path / "out" / probe_dir.relative_to(advised)
    shutil.copytree(probe_dir, copy)
    assert A.read_probe(tmp_path / "out", copy).ran
    summary = json.loads((copy / "summary.json").read_text())
    (copy / "summary.json").write_text(json.dumps({**summary, "val_metric": 0.9}))
    assert A.read_probe(tmp_path / "out", copy).ran == ()
