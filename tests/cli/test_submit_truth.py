"""`submit` tells the truth at the end (issue 55.2, 59): a failed run of the local executor reads as failed in
the closing table (never "running"), submit exits 1 and prints the first failure's line; each run's time is its
own. `--data-root TASK=PATH` (submit, matrix) over the matrix's data_roots, one line for a bad value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.cli import main

DIVERGES = """\
preset: tiny
seeds: [0]
set: {T1: 6, lr_schedule.lr0: 1.0e+12}
experiments:
  - table2: {tasks: [cifar10], methods: [adascale, lsw+], scales: [2]}
"""


def test_submit_local_counts_a_failed_run_failed_and_exits_non_zero(tmp_path: Path, capsys) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(DIVERGES)
    assert main(["submit", str(path), "--executor", "local", "--out", str(tmp_path / "o")]) == 1
    out, err = capsys.readouterr()
    table = out[out.rindex("RUN") if "RUN" in out else 0 :]
    assert "running" not in table.split("[2/2]")[-1], out
    assert re.search(r"1 of 2 runs failed; the first, cifar10/lsw\+/s2/\S+: .*AdaScale run", err), err
    assert re.search(r"cifar10 +lsw\+ +2 .* failed", table), table
    times = [int(t) for t in re.findall(r"\[\d/2\] .* \((\d+) s\)", out)]
    assert len(times) == 2


def test_data_root_over_the_matrix_and_its_one_line_errors(tmp_path: Path, capsys) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(DIVERGES)
    data = tmp_path / "data"
    assert main(["matrix", str(path), "--data-root", f"cifar10={data}"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "data roots:" in x)
    assert line.startswith("  data roots: cifar10 = ") and line.endswith("/data'"), line
    for bad, says in (("cifar10", "expected TASK=PATH"), ("logreg=/x", "has no task 'logreg'")):
        for cmd in (["matrix", str(path)], ["submit", str(path), "--executor", "debug", "--out", str(tmp_path / "o")]):
            assert main([*cmd, "--data-root", bad]) == 2
            err = capsys.readouterr().err
            assert says in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("executor", ["debug"])
def test_submit_reads_the_data_root_given(tmp_path: Path, executor: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(DIVERGES.replace("adascale, lsw+", "adascale").replace(", lr_schedule.lr0: 1.0e+12", ""))
    data = tmp_path / "mydata"
    out = tmp_path / "o"
    main(["submit", str(path), "--executor", executor, "--out", str(out), "--data-root", f"cifar10={data}"])
    spec = next(out.rglob("spec.json")).read_text()
    assert str(data.resolve()) in spec
