"""Every `--set` key with a bad value, through the real command line: exit code 2, one line on stderr, no
traceback, nothing trained. And the matrix files' own bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main

BAD = [
    ("T1=abc", "T1='abc'"),
    ("T1=0", "T1=0"),
    ("T1=-5", "T1=-5"),
    ("T1=.nan", "T1=nan"),
    ("batch_size=0", "batch_size=0"),
    ("batch_size=2.5", "batch_size=2.5"),
    ("eval_every=0", "eval_every=0"),
    ("checkpoint_every=-1", "checkpoint_every=-1"),
    ("momentum=abc", "momentum='abc'"),
    ("momentum=1", "momentum=1"),
    ("weight_decay=-0.1", "weight_decay=-0.1"),
    ("train_loss_window=abc", "train_loss_window='abc'"),
    ("train_loss_window=0", "train_loss_window=0"),
    ("train_loss_window=1.5", "train_loss_window=1.5"),
    ("lr_schedule.lr0=-1", "lr_schedule.lr0=-1"),
    ("lr_schedule.decay=-0.5", "lr_schedule.decay=-0.5"),
    ("lr_schedule.lr_0=5.0", "lr_schedule.lr_0: unknown key"),
    ("lr_schedule.kind=cosine", "kind 'cosine'"),
    ("lr_schedule=5", "lr_schedule"),
    (
        "data.verify_md=true",
        "data.verify_md: unknown key; known keys: eval_batch_size, tiny_noise, tiny_test_size, tiny_train_size, "
        "verify_md5",
    ),
    ("data.verify_md5=maybe", "data.verify_md5='maybe'"),
    ("model.width=wide", "model.width='wide'"),
    ("model=3", "model"),
    ("estimator=foo", "estimator='foo'"),
    ("device=tpu", "device='tpu'"),
    ("reduction=tree", "reduction='tree'"),
    ("ranks=0", "ranks"),
    ("accumulation=0", "accumulation=0"),
    ("max_epochs=0", "max_epochs=0"),
    ("target=-1", "target=-1"),
    ("warmup_iterations=0", "warmup_iterations=0"),
    ("T=0", "T=0"),
    ("T_AS=-3", "T_AS=-3"),
    ("threads=0", "threads=0"),
    ("eval_unit=hours", "eval_unit='hours'"),
    ("track_stats=maybe", "track_stats='maybe'"),
    ("num_workers=-1", "num_workers=-1"),
    ("scales=[0]", "scales.0=0"),
    ("elastic.up=[[0, -2]]", "elastic.up"),
    ("nonsense=1", "--set nonsense: unknown key"),
    ("T1", "expected key=value"),
]


@pytest.mark.parametrize(("item", "named"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_set_value_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, item: str, named: str) -> None:
    args = ["run", "--task", "cifar10", "--method", "adascale", "--scale", "2", "--out", str(tmp_path)]
    assert main([*args, "--set", item]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("adascale-bench: error: "), err
    assert "Traceback" not in err and named in err, err
    assert not any(tmp_path.iterdir())  # nothing built, nothing written


def test_every_violation_is_reported_at_once(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = ["run", "--task", "logreg", "--method", "adascale", "--scale", "2", "--out", str(tmp_path)]
    assert main([*args, "--set", "T1=0", "--set", "momentum=abc", "--set", "estimator=foo"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(k in err for k in ("T1=0", "momentum='abc'", "estimator='foo'"))


MATRIX_BAD = [
    ("set: [T1]\n", "set: expected a mapping"),
    ("data_roots: [a]\n", "data_roots: expected a mapping"),
    ("", "decay: expected total decreases in (0, 1]"),
]


@pytest.mark.parametrize(("head", "named"), MATRIX_BAD)
def test_bad_matrix_values_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, head: str, named: str) -> None:
    decay = "[0.1]" if head else "[0, -1]"
    path = tmp_path / "m.yaml"
    path.write_text(
        f"preset: tiny\n{head}experiments:\n"
        f"  - heatmap: {{task: cifar10, scale: 4, lr0: [0.1], decay: {decay}, threshold: 50}}\n"
    )
    assert main(["matrix", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and named in err, err


def test_a_bad_value_in_a_matrix_set_is_one_line_at_submit(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "preset: tiny\nset: {train_loss_window: abc}\n"
        "experiments:\n  - table2: {tasks: [logreg], methods: [adascale], scales: [2]}\n"
    )
    assert main(["submit", str(path), "--executor", "local", "--out", str(tmp_path / "out"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train_loss_window='abc'" in err, err
