"""A structural bound on everything parsed from disk (issue 42, bench.core.safefs.check_shape): JSON nested 980
deep, or a checkpoint whose spec nests a shared list nine deep (3 kB on disk, 10⁹ values once walked),
is a one-line refusal naming the file, never a RecursionError or MemoryError later in `report`,
`status`, `gain` or a resumed `run`."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from bench.cli import main
from bench.core import safefs
from bench.core.files import CHECKPOINT, KEPT, SPEC, SUMMARY, kept_name
from bench.run.runner import run_dir_of
from tests.helpers import spec_for
from tests.run.test_reliability import stopped_run

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(180)]
SETS = {"T1": 40, "eval_every": 10, "checkpoint_every": 10, "keep_checkpoints_every": 10}


def shared(levels: int, width: int = 10) -> list:
    value: list = [0] * width
    for _ in range(levels - 1):
        value = [value] * width
    return value


def deep(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


def test_check_shape_bounds_depth_and_shared_references() -> None:
    assert safefs.check_shape({"a": [1, 2, {"b": shared(3)}]}, "x") is not None
    with pytest.raises(safefs.Refused, match="shared references"):
        safefs.check_shape({"spec": shared(9)}, "x")
    with pytest.raises(safefs.Refused, match="deeper than"):
        safefs.check_shape(deep(980), "x")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bounds") / "out"
    argv = ["run", "--task", "logreg", "--method", "adascale", "--scale", "2", "--out", str(out)]
    for k, v in SETS.items():
        argv += ["--set", f"{k}={v}"]
    assert main(argv) == 0
    return out


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err[-3000:]
    return err


@pytest.mark.parametrize("name", [SUMMARY, SPEC])
def test_json_980_deep_is_a_warning_in_report_and_status(finished: Path, tmp_path: Path, capsys, name) -> None:
    import shutil

    out = tmp_path / "out"
    shutil.copytree(finished, out)
    run = run_dir_of(out, spec_for("logreg", "adascale", 2, **SETS))
    doc = json.loads((run / name).read_text())
    doc["deep"] = "@@"
    (run / name).write_text(json.dumps(doc).replace('"@@"', "[" * 980 + "]" * 980))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert main(["report", str(out), "--format", "md,csv"]) in (0, 1)
    err = one_line(capsys) + "".join(f"\n{w.message}" for w in said)
    assert str(run / name) in err
    assert main(["status", str(out), "--json"]) in (0, 1)
    one_line(capsys)


def test_a_kept_checkpoint_nesting_a_shared_list_is_refused_by_gain(finished: Path, tmp_path: Path, capsys) -> None:
    import shutil

    out = tmp_path / "out"
    shutil.copytree(finished, out)
    run = run_dir_of(out, spec_for("logreg", "adascale", 2, **SETS))
    kept = run / KEPT / kept_name(10)
    state = torch.load(kept, weights_only=True)
    state["spec"]["overrides"]["x"] = shared(9)
    torch.save(state, kept)
    assert kept.stat().st_size < 1 << 20
    assert main(["gain", str(run), "--batches", "2"]) == 2
    err = one_line(capsys)
    assert str(kept) in err and "shared references" in err and len(err.strip().splitlines()) == 1


def test_a_checkpoint_nesting_too_deep_is_refused_on_resume(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    spec = spec_for("logreg", "adascale", 2, T1=100)
    run = run_dir_of(out, spec)
    stopped_run(run)
    ckpt = torch.load(run / CHECKPOINT, weights_only=True)
    ckpt["state"]["deep"] = deep(200)
    torch.save(ckpt, run / CHECKPOINT)
    argv = ["run", "--task", "logreg", "--method", "adascale", "--scale", "2", "--set", "T1=100", "--out", str(out)]
    assert main(argv) == 2
    err = one_line(capsys)
    assert str(run / CHECKPOINT) in err and "deeper than" in err


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [("scale", 0, "scale"), ("scale", -8, "scale"), ("scale", 1e30, "scale"), ("iteration", -50, "iteration"),
     ("tau", float("nan"), "tau"), ("tau", 10**400, "tau"), ("scale", 10**400, "scale"), ("copy", None, "iteration")],
)  # fmt: skip
def test_a_kept_checkpoints_numbers_are_checked_where_gain_reads_them(
    finished: Path, tmp_path: Path, capsys, field: str, value: object, said: str
) -> None:
    """Degenerate numbers in kept weights (issue 42): a scale of 0 gave a gain of 1.000 beside the S = 2 rows,
    and iterABC.pt (a copy) duplicated iteration 10; each is now one line naming the file and the field."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(finished, out)
    run = run_dir_of(out, spec_for("logreg", "adascale", 2, **SETS))
    kept = run / KEPT / kept_name(10)
    if field == "copy":
        shutil.copy(kept, kept.with_name("iterABC.pt"))
        kept = kept.with_name("iterABC.pt")
    else:
        state = torch.load(kept, weights_only=True)
        state[field] = value
        torch.save(state, kept)
    assert main(["gain", str(run), "--batches", "2"]) == 2
    err = one_line(capsys)
    assert str(kept) in err and said in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    ("ema", "said"),
    [({"theta_prod": 1.0}, "theta_prod 1.0 after 1 updates"), ({"theta_prod": 1.5}, "theta_prod 1.5"),
     ({"updates": -3}, "after -3 updates"), ({"raw": [1.0]}, "1 moving averages, not 2"),
     ({"raw": [float("inf"), 0.0]}, "not finite"), ({"theta_prod": 10**400}, "not finite"),
     ({"raw": [-(10**400), 0.0]}, "not finite")],
)  # fmt: skip
def test_a_checkpoints_gain_estimator_state_is_checked_on_resume(tmp_path: Path, capsys, ema: dict, said: str) -> None:
    """A resumed run divides by 1 − Π θ of the saved estimator: Π θ = 1 after an update was a ZeroDivisionError
    traceback, a short list of averages an IndexError; each is now the one line of a checkpoint that does not
    fit (a non-finite number already was: the last case)."""
    out = tmp_path / "out"
    run = run_dir_of(out, spec_for("logreg", "adascale", 2, T1=100))
    stopped_run(run)
    ckpt = torch.load(run / CHECKPOINT, weights_only=True)
    assert ckpt["estimator"]["ema"]["updates"] == 1  # (the real state: one update folded in)
    ckpt["estimator"]["ema"].update(ema)
    torch.save(ckpt, run / CHECKPOINT)
    argv = ["run", "--task", "logreg", "--method", "adascale", "--scale", "2", "--set", "T1=100", "--out", str(out)]
    assert main(argv) == 2
    err = one_line(capsys)
    assert CHECKPOINT in err and "does not fit this run" in err and said in err
