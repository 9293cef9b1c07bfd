"""Bad input: one line naming what is wrong and what was expected, a non-zero exit, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, timeout=300)


BASE = ["run", "--method", "adascale", "--scale", "2", "--seed", "0"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--task", "mnist", "--method", "adascale", "--scale", "2"], "unknown task 'mnist'"),
        (
            ["run", "--task", "logreg", "--method", "adam", "--scale", "2"],
            "unknown method 'adam' (did you mean adamscale?); expected one of: ",
        ),
        (["run", "--task", "logreg", "--method", "../x:R", "--scale", "2"], "package.module:NAME"),
        (["run", "--task", "logreg", "--method", "no_such_pkg.rules:R", "--scale", "2"], "cannot import no_such_pkg"),
        (["run", "--task", "logreg", "--method", "lsw", "--scale", "0"], "scale '0' is not an integer in [1, 8192]"),
        (["run", "--task", "logreg", "--method", "lsw", "--scale", "elastic-sideways"], "elastic-up"),
        (
            ["run", "--task", "logreg", "--method", "lsw", "--scale", "2", "--seed", "-1"],
            "is not an integer in [0, 2**63)",
        ),
        (["run", "--task", "logreg", "--method", "lsw", "--scale", "2", "--set", "T1"], "expected key=value"),
        (["run", "--task", "logreg", "--method", "lsw", "--scale", "2", "--set", "nope=1"], "unknown key"),
        (["run", "--task", "cifar10", "--method", "lsw", "--scale", "2", "--preset", "paper"], "--data-root"),
    ],
)
def test_bad_input_is_one_line(args: list[str], needle: str) -> None:
    res = run(*args)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1, res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr


def test_missing_and_malformed_data_root_name_the_path_and_the_layout(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    res = run(*BASE, "--task", "cifar10", "--preset", "paper", "--data-root", str(missing), "--out", str(tmp_path))
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert str(missing) in res.stderr and "cifar-10-batches-py" in res.stderr
    bad = tmp_path / "bad"
    (bad / "cifar-10-batches-py").mkdir(parents=True)
    (bad / "cifar-10-batches-py" / "data_batch_1").write_bytes(b"garbage")
    res = run(*BASE, "--task", "cifar10", "--preset", "paper", "--data-root", str(bad), "--out", str(tmp_path))
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert str(bad) in res.stderr and "Traceback" not in res.stderr


def test_lsw_plus_without_its_adascale_run_says_what_to_do(tmp_path: Path) -> None:
    res = run("run", "--task", "logreg", "--method", "lsw+", "--scale", "2", "--out", str(tmp_path))
    assert res.returncode == 2 and "run it first" in res.stderr and res.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "module", "options"),
    [
        (["flops", "--task", "logreg", "--preset", "tiny"], "bench.experiments.flops", "FlopsOptions"),
        (["comm", "--ranks", "2", "--model", "resnet18"], "bench.experiments.comm", "CommOptions"),
        (["plan", "smoke"], "bench.experiments.plan", "PlanOptions"),
    ],
)
def test_commands_get_typed_options_not_a_namespace(argv, module, options, monkeypatch) -> None:
    """Below the CLI, options travel as dataclasses (docs/design.md §3): each command's function is handed its
    options class, built from the flags of the same names."""
    import argparse
    import importlib

    from bench.cli import main

    mod = importlib.import_module(module)
    got = []
    monkeypatch.setattr(mod, argv[0], lambda args: got.append(args) or 0)
    assert main(argv) == 0
    (args,) = got
    assert isinstance(args, getattr(mod, options)) and not isinstance(args, argparse.Namespace)
