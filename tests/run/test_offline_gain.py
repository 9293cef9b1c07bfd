"""The offline gain (paper Figure 2): kept checkpoints, the estimate against a computation by hand, the
agreement with the online gain on logreg, and the `gain` command."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from bench.cli import main
from bench.core.algo.gain import clamp, gain_from, moments
from bench.core.engine.checkpoint import load_weights
from bench.core.files import CHECKPOINT, KEPT, OFFLINE_GAIN, SPEC, kept_name, write_json
from bench.run.offline_gain import COLUMNS, jackknife, measure, microbatches, offline_gains, online_gains
from tasks import get_task
from tests.helpers import records, spec_for, train

KEEP = 100


@pytest.fixture(scope="module")
def logreg_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny logreg AdaScale run at S = 8 (303 iterations, ~2 s), weights kept every 100 iterations
    and a resume checkpoint every 40."""
    run_dir = tmp_path_factory.mktemp("offline") / "run"
    spec = spec_for("logreg", "adascale", 8, T1=1250, keep_checkpoints_every=KEEP, checkpoint_every=40)
    train(spec, run_dir)
    return run_dir


def test_kept_checkpoints_stay_and_the_resume_checkpoint_goes(logreg_run: Path) -> None:
    recs = records(logreg_run)
    iterations = len(recs)
    assert iterations > 2 * KEEP
    names = sorted(p.name for p in (logreg_run / KEPT).iterdir())
    assert names == [kept_name(k) for k in range(KEEP, iterations + 1, KEEP)]
    assert names[0] == "iter0000100.pt"
    assert not (logreg_run / CHECKPOINT).exists()  # the resume checkpoint is still dropped at the end
    kept = load_weights(logreg_run / KEPT / names[1], torch.device("cpu"))
    assert kept["iteration"] == 2 * KEEP and kept["scale"] == 8
    assert set(kept["model"]) == {"weight"} and "optimizer" not in kept  # weights only
    assert kept["tau"] == pytest.approx(recs[2 * KEEP]["tau"])  # τ before iteration N = the record of N


def test_kept_checkpoints_stop_at_their_window(tmp_path: Path) -> None:
    """keep_checkpoints_until: weights kept only while τ ≤ that share of T1 (finding iv's first 10 %), so a gain
    run pays the offline measurement only where (iv) reads it."""
    run_dir = tmp_path / "run"
    train(spec_for("logreg", "adascale", 8, T1=1250, keep_checkpoints_every=5, keep_checkpoints_until=0.1), run_dir)
    taus = [load_weights(p, torch.device("cpu"))["tau"] for p in sorted((run_dir / KEPT).iterdir())]
    assert len(taus) >= 2 and max(taus) <= 125 and len(records(run_dir)) > 5 * len(taus) + 5


def _logreg_model(seed: int = 3) -> nn.Module:
    torch.manual_seed(seed)
    model = get_task("logreg").build_model({})
    with torch.no_grad():
        model.weight.normal_(0, 0.3)  # away from zero: μ² and σ² both matter
    return model


def test_offline_gain_matches_a_computation_by_hand() -> None:
    """Logistic regression's batch gradient in closed form, X^T(σ(Xw) − y)/b in float64, over the very
    micro-batches the estimate draws; σ² and μ² from their textbook definitions."""
    task = get_task("logreg")
    spec = spec_for("logreg", "adascale", 8)
    model = _logreg_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainset = task.train_set(spec, Path())
    n, seed, S = 12, 1234, 8
    batches = list(microbatches(task, trainset, spec, n, seed))
    assert len(batches) == n and all(len(x) == spec.batch_size for x, _ in batches)
    est = measure(task, model, iter(batches), seed, S, torch.device("cpu"), batch_size=32)

    w = model.weight.detach().double().numpy().ravel()
    grads = []
    for x, y in batches:
        X, Y = x.double().numpy(), y.double().numpy()
        p = 1 / (1 + np.exp(-(X @ w)))
        grads.append(X.T @ (p - Y) / len(Y))
    G = np.stack(grads)
    mean = G.mean(axis=0)
    var = ((G - mean) ** 2).sum() / (n - 1)  # E||g_i − ḡ||², unbiased
    sqr = mean @ mean - var / n  # E||ḡ||² = μ² + σ²/n
    assert est["batches"] == n
    assert est["var"] == pytest.approx(var, rel=1e-4)
    assert est["sqr"] == pytest.approx(sqr, rel=1e-4)
    assert est["offline_gain"] == pytest.approx((var + sqr) / (var / S + sqr), rel=1e-4)
    assert est["offline_B"] == pytest.approx(32 * var / sqr, rel=1e-4)
    assert est["B_lo"] < est["offline_B"] < est["B_hi"]
    assert 1 < est["offline_gain"] < S
    assert est["gain_lo"] < est["offline_gain"] < est["gain_hi"]  # the jackknife interval around it
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # the model is untouched
    assert model.weight.grad is None


def test_jackknife_over_groups() -> None:
    """Identical groups: leaving any out changes nothing, so the interval is the point; groups that differ
    give an interval around the gain of their sum, each leave-one-out value as computed by hand."""
    S = 8
    t = torch.tensor([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0]], dtype=torch.float64)  # 4 groups of 3
    q = torch.full((4,), 3 * 6.0, dtype=torch.float64)  # Σ||g_i||²: ||g_i||² = 6 each
    sizes = torch.full((4,), 3.0, dtype=torch.float64)
    point = gain_from(*clamp(*moments(72.0, float((t.sum(0) / 12).pow(2).sum()), 12)), S)
    lo, hi = jackknife(q, t @ t.T, sizes, S)
    assert lo == pytest.approx(point) and hi == pytest.approx(point)
    t2 = torch.tensor([[1.0, 2.0], [3.0, -1.0], [0.5, 2.5], [2.0, 0.0]], dtype=torch.float64)
    q2 = torch.tensor([9.0, 20.0, 12.0, 8.0], dtype=torch.float64)
    point = gain_from(*clamp(*moments(49.0, float((t2.sum(0) / 12).pow(2).sum()), 12)), S)
    loo = [
        gain_from(*clamp(*moments(49.0 - float(q2[k]), float((t2.sum(0) - t2[k]).div(9).pow(2).sum()), 9)), S)
        for k in range(4)
    ]
    se = math.sqrt(3 / 4 * sum((v - sum(loo) / 4) ** 2 for v in loo))
    lo, hi = jackknife(q2, t2 @ t2.T, sizes, S)
    assert (lo, hi) == pytest.approx((max(1.0, point - 1.96 * se), min(S, point + 1.96 * se)))
    assert lo < point < hi


def test_offline_draws_are_their_own() -> None:
    """Different seeds draw different micro-batches (independent of the run's own stream)."""
    task = get_task("logreg")
    spec = spec_for("logreg", "adascale", 8)
    trainset = task.train_set(spec, Path())
    a = [x for x, _ in microbatches(task, trainset, spec, 3, 1)]
    b = [x for x, _ in microbatches(task, trainset, spec, 3, 2)]
    assert not any(torch.equal(u, v) for u, v in zip(a, b, strict=True))


class _BatchNormTask:
    """A tiny task with BatchNorm: its statistics must not change in the caller's model."""

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.mse_loss(model(x).squeeze(-1), y)


def test_batchnorm_statistics_and_mode_are_left_alone() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 1))
    model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batches = [(torch.randn(8, 4), torch.randn(8)) for _ in range(5)]
    est = measure(_BatchNormTask(), model, iter(batches), 0, 4, torch.device("cpu"))
    assert np.isfinite(est["var"]) and 1 <= est["offline_gain"] <= 4
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert not model.training


def test_online_and_offline_gain_agree_late_in_training(logreg_run: Path) -> None:
    """Same order of magnitude at the last kept checkpoint (the online moving averages lag the true gain
    while it rises, so no tight tolerance); also checks what offline_gain.csv holds."""
    rows = offline_gains(logreg_run, batches=200, progress=False)
    assert [r["iteration"] for r in rows] == [0, KEEP, 2 * KEEP, 3 * KEEP]  # the initial weights, then the kept
    assert rows[0]["tau"] == 0.0 and rows[0]["scale"] == 8
    last = rows[-1]
    online = online_gains(logreg_run)
    on = online[max(k for k in online if k <= last["iteration"])]
    assert 1 < last["offline_gain"] <= 8 and 1 < on <= 8
    assert 0.5 < last["offline_gain"] / on < 2.0
    with open(logreg_run / OFFLINE_GAIN) as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0]) == COLUMNS and len(table) == 4
    assert float(table[-1]["offline_gain"]) == pytest.approx(last["offline_gain"])
    assert int(table[-1]["batches"]) == 200


def test_gain_command_prints_the_table(logreg_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gain", str(logreg_run), "--batches", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    head = ["iteration", "tau", "S", "online", "offline", "95", "%", "interval", "gap", "B", "95", "%", "interval"]
    assert out[0].split() == [*head, "exact", "exact", "B"]  # logreg has an exact oracle
    assert [line.split()[0] for line in out[1:5]] == ["0", "100", "200", "300"]
    assert out[-1] == f"offline gain: {logreg_run / OFFLINE_GAIN}"


def test_gain_command_without_kept_checkpoints_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_json(tmp_path / SPEC, spec_for("logreg", "adascale", 8).to_json())
    assert main(["gain", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no kept checkpoints" in err and "keep_checkpoints_every" in err
    assert main(["gain", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a run folder" in err
