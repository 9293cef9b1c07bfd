"""`report` computes its figures first and hands them to the drawing processes, then computes its tables while
they draw (reports.assemble._figures); the warnings keep the order they had when the tables came first: every
table's, then every figure's, then the drawing failures'."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from reports import build as B
from reports import figures as F
from reports.verdicts import findings as FD

from .test_reports import write_run


@pytest.fixture
def results(tmp_path: Path) -> Path:
    for scale in (1, 4):
        write_run(tmp_path, "cifar10", "adascale", scale, 0, val=90.0 - scale / 4)
    return tmp_path


def _warning_from(kind: str, then=None):
    def fn(res, dest):
        res.warn(f"said by {kind}")
        return then(res, dest) if then else []

    return fn


def test_the_figures_warnings_come_after_the_tables_as_when_the_tables_came_first(
    results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    findings = FD.findings

    def findings_saying(res):
        order.append("tables")
        res.warn("said by the findings")
        return findings(res)

    curves, _, _ = F.KINDS["curves"]

    def curves_first(res, dest):
        order.append("figures")
        return _warning_from("curves", curves)(res, dest)

    monkeypatch.setattr(FD, "findings", findings_saying)
    monkeypatch.setitem(F.KINDS, "curves", (curves_first, *F.KINDS["curves"][1:]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built = B.build(results)
    said = [str(w.message) for w in caught if str(w.message).startswith("said by")]
    assert order == ["figures", "tables"]  # computed first, so that they are drawn meanwhile
    assert said == ["said by the findings", "said by curves"]  # given in the tables-first order
    assert any(p.name.startswith("curves_") for p in built.written)  # and drawn


def test_a_failing_figure_kind_is_a_warning_after_the_tables_and_costs_no_other_figure(
    results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(res, dest):
        raise RuntimeError("no plan")

    findings = FD.findings

    def findings_saying(res):
        res.warn("said by the findings")
        return findings(res)

    monkeypatch.setattr(FD, "findings", findings_saying)
    monkeypatch.setitem(F.KINDS, "heatmap", (broken, *F.KINDS["heatmap"][1:]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built = B.build(results)
    said = [str(w.message) for w in caught]
    failed = next(i for i, m in enumerate(said) if m.startswith("figure kind 'heatmap' failed: RuntimeError: no plan"))
    assert said.index("said by the findings") < failed
    assert any(p.name.startswith("curves_") for p in built.written)
    assert "drawing failed (RuntimeError: no plan)" in (results / "report" / "report.html").read_text()
