"""Checkpoints are data, never code: every checkpoint and kept weight file loads with weights_only=True, a
crafted one (a pickle whose __reduce__ writes a file) is refused in one line on resume, on `gain` and on
`submit --dry-run`, and runs nothing; kept weights carry their run's identity and `gain` checks it."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
import torch

from bench.cli import main
from bench.core.engine.checkpoint import load_checkpoint, load_weights, plain
from bench.core.errors import UserError
from bench.core.files import CHECKPOINT, KEPT, kept_name
from bench.run.runner import run_dir_of
from tests.helpers import spec_for, train

pytestmark = pytest.mark.usefixtures("one_thread")


class Payload:
    """What an attacker puts in a checkpoint: unpickling it calls open(marker, "w"), creating the marker."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def crafted(path: Path, marker: Path, kept: bool = False) -> None:
    """A file with every key a checkpoint (or kept checkpoint) has, and the payload inside."""
    body = {"model": {}, "iteration": 1, "tau": 0.0, "scale": 2, "evil": Payload(marker)}
    if not kept:
        body |= {"optimizer": {}, "estimator": {}, "state": {"tau": 0.0}}
    buffer = io.BytesIO()
    torch.save(body, buffer)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())


def one_line(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_the_crafted_file_would_run_code_under_a_plain_unpickle(tmp_path: Path) -> None:
    """The control: the payload works (torch.load with weights_only=False creates the marker), so the
    refusals below are the loader's doing, not a dud payload's."""
    marker = tmp_path / "marker"
    crafted(tmp_path / CHECKPOINT, marker)
    torch.load(tmp_path / CHECKPOINT, weights_only=False)
    assert marker.exists()


def test_a_real_checkpoint_and_kept_weights_load_with_weights_only(tmp_path: Path) -> None:
    spec = spec_for("logreg", "adascale", 2, T1=60, keep_checkpoints_every=10, checkpoint_every=10)
    train(spec, tmp_path / "run")
    kept = load_weights(tmp_path / "run" / KEPT / kept_name(10), torch.device("cpu"))
    assert kept["spec"] == spec.to_json() and kept["iteration"] == 10
    with pytest.raises(TypeError, match="weights_only"):
        plain({"state": {"when": object()}})


def test_crafted_checkpoint_is_refused_on_resume_and_runs_nothing(tmp_path: Path, capsys) -> None:
    out, marker = tmp_path / "out", tmp_path / "marker"
    args = ["run", "--task", "logreg", "--method", "adascale", "--scale", "2", "--out", str(out), "--set", "T1=40"]
    run_dir = run_dir_of(out, spec_for("logreg", "adascale", 2, T1=40))
    crafted(run_dir / CHECKPOINT, marker)
    assert main(args) == 2
    err = one_line(capsys)
    assert str(run_dir / CHECKPOINT) in err and "refused" in err and "weights_only" in err
    assert not marker.exists()
    with pytest.raises(Exception, match="refused"):
        load_checkpoint(run_dir / CHECKPOINT, torch.device("cpu"))
    assert not marker.exists()


def test_crafted_kept_checkpoint_is_refused_by_gain(tmp_path: Path, capsys) -> None:
    run_dir, marker = tmp_path / "run", tmp_path / "marker"
    train(spec_for("logreg", "adascale", 2, T1=40, keep_checkpoints_every=10), run_dir)
    crafted(run_dir / KEPT / kept_name(10), marker, kept=True)
    assert main(["gain", str(run_dir), "--batches", "2"]) == 2
    err = one_line(capsys)
    assert str(run_dir / KEPT / kept_name(10)) in err and "refused" in err
    assert not marker.exists()


def test_crafted_checkpoint_is_refused_by_submit_dry_run_with_accumulation(tmp_path: Path, capsys) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "preset: tiny\nseeds: [0]\nset: {T1: 40, accumulation: 1}\n"
        "experiments:\n  - table2: {tasks: [logreg], methods: [adascale], scales: [2]}\n"
    )
    out, marker = tmp_path / "out", tmp_path / "marker"
    submit = ["submit", str(matrix), "--executor", "slurm", "--gpus-per-node", "2", "--out", str(out), "--dry-run"]
    assert main(submit) == 0  # without a checkpoint: fine
    capsys.readouterr()
    run_dir = run_dir_of(out, spec_for("logreg", "adascale", 2, T1=40, accumulation=1))
    crafted(run_dir / CHECKPOINT, marker)
    assert main(submit) == 2
    err = one_line(capsys)
    assert str(run_dir / CHECKPOINT) in err and "refused" in err
    assert not marker.exists()


def test_gain_refuses_kept_weights_of_another_run(tmp_path: Path, capsys) -> None:
    """A kept checkpoint copied from another run (here another seed) would give that run's gains."""
    a, b = tmp_path / "a", tmp_path / "b"
    train(spec_for("logreg", "adascale", 2, T1=40, keep_checkpoints_every=10), a)
    train(spec_for("logreg", "adascale", 2, seed=1, T1=40, keep_checkpoints_every=10), b)
    assert main(["gain", str(a), "--batches", "2"]) == 0  # its own: fine
    capsys.readouterr()
    shutil.copy(b / KEPT / kept_name(10), a / KEPT / kept_name(10))
    assert main(["gain", str(a), "--batches", "2"]) == 2
    err = one_line(capsys)
    assert "belongs to another run" in err and "seed" in err and kept_name(10) in err


def test_gain_refuses_kept_weights_that_do_not_fit_the_model(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    train(spec_for("logreg", "adascale", 2, T1=40, keep_checkpoints_every=10), run_dir)
    path = run_dir / KEPT / kept_name(10)
    kept = torch.load(path, weights_only=True)
    kept["model"] = {"conv.weight": torch.zeros(3)}  # another model's weights under this run's identity
    torch.save(kept, path)
    assert main(["gain", str(run_dir), "--batches", "2"]) == 2
    assert "does not fit this run's model" in one_line(capsys)


def test_a_spec_json_that_is_a_list_is_one_line(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    run_dir = run_dir_of(out, spec_for("logreg", "adascale", 2, T1=40))
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text("[1, 2]")
    args = ["run", "--task", "logreg", "--method", "adascale", "--scale", "2", "--out", str(out), "--set", "T1=40"]
    assert main(args) == 2
    assert "not a spec" in one_line(capsys)


def test_garbage_is_unreadable_and_a_crafted_file_names_its_global(tmp_path: Path) -> None:
    """A kept file of bytes that are no pickle is damaged, not hostile: 'unreadable', not 'refused'; a
    crafted one is refused naming the global it would have called (builtins/io open here)."""
    (tmp_path / "garbage.pt").write_bytes(b"x")
    with pytest.raises(UserError) as e:
        load_checkpoint(tmp_path / "garbage.pt", torch.device("cpu"))
    assert "unreadable" in str(e.value) and "refused" not in str(e.value)
    marker = tmp_path / "marker"
    crafted(tmp_path / CHECKPOINT, marker)
    with pytest.raises(UserError) as e:
        load_checkpoint(tmp_path / CHECKPOINT, torch.device("cpu"))
    assert "refused" in str(e.value) and "open" in str(e.value) and "\n" not in str(e.value)
    assert not marker.exists()
