"""`submit --rehearse` on this machine (debug executor, in this process): the table and CSV of a tiny
configuration, nothing in the real run folders, and a resume that is not exact is reported as such."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.engine.loop import Engine

MATRIX = """preset: tiny
seeds: [0, 1]
experiments:
  - table2: {tasks: [logreg], methods: [adascale], scales: [2]}
"""


def rehearse(tmp_path: Path) -> tuple[int, list[dict[str, str]], Path]:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX)
    out = tmp_path / "runs"
    rc = main(["submit", str(matrix), "--executor", "debug", "--rehearse", "--iterations", "3", "--out", str(out)])
    return rc, list(csv.DictReader((out / "rehearsal" / "rehearsal.csv").open())), out


def test_rehearsal_row_and_nothing_left(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, rows, out = rehearse(tmp_path)
    assert rc == 0
    (row,) = rows  # two seeds, one configuration
    assert (row["task"], row["scale"], row["ranks"], row["accumulation"], row["iterations"]) == (
        "logreg",
        "2",
        "1",
        "2",
        "3",
    )
    assert row["resume"] == "exact" and float(row["host_syncs_per_iteration"]) == 1
    assert float(row["flops_per_iteration"]) > 0 and float(row["s_per_iteration"]) > 0 and row["eval_metric"]
    assert sorted(p.name for p in out.iterdir()) == ["rehearsal"]
    assert "scratch" not in {p.name for p in (out / "rehearsal").iterdir()}
    assert "resume" in capsys.readouterr().out


def test_a_resume_that_forgets_the_gain_averages_is_not_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    restore = Engine._restore

    def forgetful(self: Engine):  # the checkpoint's gain estimator state dropped on resume
        state = restore(self)
        type(self.estimator).__init__(self.estimator)
        return state

    monkeypatch.setattr(Engine, "_restore", forgetful)
    rc, rows, _ = rehearse(tmp_path)
    assert rc == 1 and rows[0]["resume"].startswith("differs by")
