"""The smoke pipeline at the smallest scale: a matrix file run in-process, then the report from disk."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from bench.experiments import matrix
from bench.experiments.pool import run_matrix
from reports.build import build_report, build_sweep
from reports.page import table2_html
from reports.rundata.collect import load
from reports.stats.noise import fill
from reports.tables.table2 import cells

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
    assert counts == {"completed": 15}  # table2: 2 seeds × (S = 1 once + 3 methods at S = 4); elastic 1; sweep 6
    again = run_matrix(m, out, progress=False)  # finished runs are not redone
    assert again == {"completed": 15}
    table, written = build_sweep(out)
    assert out / "sweep.csv" in written and out / "sweep_logreg.png" in written
    sweep = pd.read_csv(out / "sweep.csv")
    assert list(sweep.columns) == ["task", "batch", "method", "epochs_to_target", "reached", "n_seeds"]
    assert len(sweep) == 6 and set(sweep["method"]) == {"fixed", "linear", "adascale"}
    html = build_report(out, ["md", "tex", "html", "csv"])
    assert (html.parent / "sweep.csv").read_text() == (out / "sweep.csv").read_text()  # one sweep table
    text = html.read_text()
    res = load(out)
    fill(res)  # the noise scale in Table 2's notes, as the report computes it
    c = cells(res.runs)  # the page holds Table 2 of these runs, not only a link named "Table 2"
    assert table2_html(c, False, res.variants) in text and "<h3>logreg" in text and "elastic-up" in text
    assert sorted(c.loc[c["n_seeds"] > 0, "scale"].unique()) == ["1", "4", "elastic-up"]
    table = (html.parent / "table2.md").read_text()
    assert "| 4 " in table or "| 4 |" in table
    assert (html.parent / "table2.tex").exists() and (html.parent / "table2.csv").exists()


def test_worker_processes_give_the_same_runs_in_dependency_order(tmp_path: Path) -> None:
    """jobs = 2: every run in a worker process, LSW+ only after its AdaScale run (it reads its
    iteration count), and the same numbers as the runs made in this process."""
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX.replace("seeds: [0, 1]", "seeds: [0]").split("  - elastic")[0])
    m = matrix.load(path)
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    assert run_matrix(m, serial, progress=False) == {"completed": 4}  # S = 1 once, 3 methods at S = 4
    assert run_matrix(m, parallel, progress=False, jobs=2) == {"completed": 4}
    keys = ["status", "val_metric", "train_loss", "iterations", "tau"]
    for summary in serial.glob("**/summary.json"):
        twin = parallel / summary.relative_to(serial)
        a, b = (json.loads(p.read_text()) for p in (summary, twin))
        assert [a[k] for k in keys] == [b[k] for k in keys], summary
    lsw_plus = json.loads(next(parallel.glob("logreg/lsw+/s4/*/summary.json")).read_text())
    adascale = json.loads(next(parallel.glob("logreg/adascale/s4/*/summary.json")).read_text())
    assert lsw_plus["iterations"] == adascale["iterations"]


@pytest.mark.long  # two runs of T1 = 30 000 cut and resumed: ~27 s
def test_sigterm_to_the_parent_checkpoints_the_workers_runs_and_the_same_call_resumes(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "preset: tiny\nseeds: [0, 1]\nexperiments:\n"
        "  - table2: {tasks: [logreg], methods: [adascale], scales: [4], set: {T1: 30000, eval_every: 10000}}\n"
    )
    out = tmp_path / "out"
    code = (
        "from pathlib import Path; from bench.experiments import matrix; "
        "from bench.core.engine.signals import install_signal_handlers; "
        f"from bench.experiments.pool import run_matrix; install_signal_handlers(); \
print(run_matrix(matrix.load(Path({str(path)!r})), Path({str(out)!r}), progress=False, jobs=2))"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(list(out.glob("**/metrics.jsonl"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)  # both runs have started (the log file appears at the first flush or checkpoint)
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "stopped by signal" in err
    assert len(list(out.glob("**/checkpoint.pt"))) == 2 and not list(out.glob("**/summary.json"))
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "{'completed': 2}" in again.stdout and len(list(out.glob("**/summary.json"))) == 2
