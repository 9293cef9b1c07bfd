"""A matrix file cannot make `matrix`/`plan` hang or run out of memory: a FIFO or /dev/zero in its place,
a list of 20 000 seeds (2.9 M runs), or a T1 of 1e26 (past the schema's 1e9) are refused in one line naming the
file; the shipped matrices (the control) load as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.cli import main
from bench.experiments import matrix

pytestmark = pytest.mark.timeout(120)

BODY = (
    "experiments:\n  - table2:\n      tasks: [logreg, cifar10]\n      methods: [adascale, lsw]\n      scales: [1, 2]\n"
)


def one_line(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_the_shipped_matrices_load() -> None:
    assert len(matrix.load("paper").runs) > 1000 and matrix.load("smoke").runs


def test_a_fifo_or_device_is_refused(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "m.yaml"
    os.mkfifo(fifo)
    assert main(["matrix", str(fifo)]) == 2
    assert str(fifo) in one_line(capsys)
    assert main(["matrix", "/dev/zero"]) == 2
    assert "/dev/zero" in one_line(capsys)


def test_a_huge_expansion_is_refused(tmp_path: Path, capsys) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(f"seeds: [{', '.join(map(str, range(20_000)))}]\n" + BODY)
    assert main(["plan", str(path)]) == 2
    err = one_line(capsys)
    assert str(path) in err and "at most 1000" in err
    path.write_text(f"seeds: [{', '.join(map(str, range(1000)))}]\n" + BODY.replace("[1, 2]", str(list(range(1, 101)))))
    assert main(["matrix", str(path)]) == 2
    assert "at most 50000 runs" in one_line(capsys)
    path.write_text("seeds: [0, 1]\n" + BODY)  # the control
    assert main(["matrix", str(path)]) == 0


def test_an_absurd_T1_is_refused_not_walked(tmp_path: Path, capsys) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("seeds: [0]\n" + BODY.replace("scales: [1, 2]", "scales: [2]\n      set: {T1: 1e26}"))
    assert main(["plan", str(path)]) == 2
    assert "T1" in one_line(capsys)
