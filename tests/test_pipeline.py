"""The smoke pipeline at the smallest scale: a matrix file run in-process, then the report from disk."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench import matrix
from bench.smoke import run_matrix
from bench.sweep import sweep_table, write_sweep_csv
from reports.build import build_report

MATRIX = """
preset: tiny
seeds: [0, 1]
experiments:
  - table2: {tasks: [logreg], methods: [adascale, lsw, lsw+], scales: [1, 4], set: {T1: 120, eval_every: 40}}
  - elastic: {tasks: [logreg], methods: [adascale], schedules: [elastic-up], seeds: [0], set: {T1: 120}}
  - sweep: {task: logreg, batches: [32, 256], max_epochs: 3, seeds: [0]}
"""


def test_matrix_runs_then_report(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX)
    m = matrix.load(path)
    out = tmp_path / "out"
    counts = run_matrix(m, out, progress=False)
    assert counts == {"completed": 19}
    again = run_matrix(m, out, progress=False)  # finished runs are not redone
    assert again == {"completed": 19}
    write_sweep_csv(sweep_table(m, out), out / "sweep.csv")
    sweep = pd.read_csv(out / "sweep.csv")
    assert list(sweep.columns) == ["batch", "method", "epochs_to_target"]
    assert len(sweep) == 6 and set(sweep["method"]) == {"fixed", "linear", "adascale"}
    html = build_report(out, ["md", "tex", "html", "csv"])
    text = html.read_text()
    assert "Table 2" in text and "logreg" in text and "elastic-up" in text
    table = (html.parent / "table2.md").read_text()
    assert "| 4 " in table or "| 4 |" in table
    assert (html.parent / "table2.tex").exists() and (html.parent / "table2.csv").exists()
