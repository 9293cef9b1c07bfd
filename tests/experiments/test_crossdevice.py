"""A run on CUDA owes the CPU's run agreement to rounding (bench.experiments.crossdevice): the bound holds under
changes of rounding on the CPU, fails under another seed, and on a GPU is applied to the real thing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.errors import UserError
from bench.experiments.crossdevice import disagreements, summary

RUN = ["run", "--task", "logreg", "--method", "adascale", "--scale", "4"]  # the calibration run (666 iterations)


def _run(out: Path, *sets: str, seed: int = 0) -> dict:
    argv = [*RUN, "--seed", str(seed), "--out", str(out)]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 0
    (found,) = out.rglob("summary.json")
    return summary(found.parent)


BASE = {"status": "completed", "iterations": 666, "eval": {"loss": 0.25, "accuracy": 89.1}, "mean_gain": 3.0}
BASE["tau"] = 2001.5


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"iterations": 667}, "iterations: 666 vs 667"),
        ({"status": "diverged"}, "status"),
        ({"eval": {"loss": 0.25 * (1 + 2e-4), "accuracy": 89.1}}, "eval.loss"),
        ({"eval": {"loss": math.nan, "accuracy": 89.1}}, "eval.loss"),
        ({"eval": {"accuracy": 89.1}}, "eval.loss"),
        ({"mean_gain": "3.0"}, "mean_gain"),
        ({"mean_gain": True}, "mean_gain"),
        ({"eval": {"loss": 0.25, "accuracy": 50.0}}, "eval.accuracy"),
    ],
)
def test_each_field_can_fail(change: dict, says: str) -> None:
    assert disagreements(BASE, BASE) == []
    assert disagreements(BASE, {**BASE, "eval": {"loss": 0.25 * (1 + 5e-5), "accuracy": 89.3}}) == []
    (line,) = disagreements(BASE, {**BASE, **change})
    assert line.startswith(says)


def test_a_run_folder_without_a_summary_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no summary"):
        summary(tmp_path)
    (tmp_path / "summary.json").write_text("[1, 2]")
    with pytest.raises(UserError, match="summary.json"):
        summary(tmp_path)


def test_the_bound_holds_under_cpu_rounding_and_fails_across_seeds(tmp_path: Path) -> None:
    """The docstring's calibration, rerun: a change of summation order and bf16 autocast agree with the
    float32 run; another seed does not."""
    base = _run(tmp_path / "base")
    assert disagreements(base, _run(tmp_path / "batched", "microbatch_mode=batched")) == []
    assert disagreements(base, _run(tmp_path / "bf16", "amp=bf16")) == []
    other = disagreements(base, _run(tmp_path / "seed", seed=1))
    assert any(line.startswith("iterations") for line in other) and any("eval.loss" in line for line in other)


@pytest.mark.gpu
def test_a_tiny_run_on_cuda_is_the_cpu_run(tmp_path: Path) -> None:  # pragma: no cover - needs a GPU
    cpu = _run(tmp_path / "cpu", "device=cpu")
    cuda = _run(tmp_path / "cuda", "device=cuda")
    keys = ("iterations", "eval", "mean_gain", "tau")
    print(json.dumps({"cpu": {k: cpu[k] for k in keys}, "cuda": {k: cuda[k] for k in keys}}))  # pytest -rP: the log
    assert disagreements(cpu, cuda) == []
