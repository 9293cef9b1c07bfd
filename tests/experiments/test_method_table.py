"""A method is one row of the method table (bench.algo.rules.METHODS): a rule defined there and nowhere
else (square-root scaling, m = √S with τ advancing by S) appears in the matrix expansion, `plan`, a run,
`status` and Table 2, and without its row the matrix refuses it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.algo import rules
from bench.algo.rules import METHODS, Method, iterations_for
from bench.algo.schedules import ScaleSchedule
from bench.errors import UserError
from bench.experiments import matrix, plan
from bench.files import METRICS, read_jsonl
from bench.run.runner import run_spec
from reports.collect import load
from reports.table2 import cells, markdown
from slurm.status import collect, table
from tests.helpers import spec_for

MATRIX = """preset: tiny
seeds: [0]
set: {T1: 60, eval_every: 30}
experiments:
  - table2: {tasks: [logreg], methods: [adascale, sqrt], scales: [1, 4]}
"""


@dataclass(frozen=True)
class SquareRootScaling:
    """m = √S, p = S: the lr grows as the square root of the batch, the clock as the batch."""

    name = "sqrt"

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return math.sqrt(scale), float(scale), 1.0


def _sqrt(scales: ScaleSchedule, T1: float, T_AS: float | None, T: float | None) -> SquareRootScaling:
    return SquareRootScaling()


@pytest.fixture
def sqrt_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(METHODS, "sqrt", Method("sqrt", "√S", "square-root scaling", True, None, _sqrt, "scale"))


def test_without_its_row_a_method_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX)
    with pytest.raises(UserError, match="got 'sqrt'"):
        matrix.load(path)


def test_a_method_only_in_the_table_reaches_matrix_plan_run_status_and_table2(tmp_path: Path, sqrt_row) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX)
    m = matrix.load(path)
    runs = {(r.method, r.scale) for r in m.runs}
    assert runs == {("adascale", 1), ("adascale", 4), ("sqrt", 4)}  # S = 1 is shared: a Table 2 column
    assert "(shared: AS = LSW = LSW+ = √S at S = 1)" in matrix.describe(m)
    assert rules.table2_methods() == ("adascale", "lsw", "lsw+", "sqrt")

    cost = {(c.method, c.scale): c for c in plan.make_plan(m, {}, None)}
    assert cost[("sqrt", 4)].iterations == [iterations_for(ScaleSchedule.constant(4), 60)] * 2  # pace: p = S
    assert cost[("adascale", 4)].iterations == [15, 60]

    out = tmp_path / "out"
    for r in m.runs:
        summary = run_spec(m.spec(r), out, progress=False)
        assert summary["status"] == "completed"
    assert summary["iterations"] == 15
    records = read_jsonl(out / "logreg/sqrt/s4/seed0,T1=60,eval_every=30" / METRICS)
    lr0 = spec_for("logreg")["lr_schedule"]["lr0"]  # a constant schedule
    assert [r["lr"] for r in records if not r.get("eval")] == [pytest.approx(2.0 * lr0)] * 15  # √4 · lr0

    text = table(collect(out))
    assert "logreg  sqrt " in text and "(shared: = lsw = lsw+ = sqrt at S = 1)" in text

    c = cells(load(out).runs)
    row = c[(c["method"] == "sqrt") & (c["scale"] == "4")].iloc[0]
    assert row["n_seeds"] == 1 and row["iterations"] == 15
    header = markdown(c).splitlines()[2]
    assert header.endswith("| iterations AS | iterations LSW | iterations LSW+ | iterations √S |"), header
