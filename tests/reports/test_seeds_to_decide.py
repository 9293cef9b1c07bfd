"""Undecided says what decides (issue 55.5): an inconclusive comparison states the seeds a side that would decide
it at the observed spread (reports.stats.noninferiority.seeds_to_decide, the control's power rule), in the rules grid
on the page and in the CSV detail, and in a finding's detail."""

from __future__ import annotations

import csv
from pathlib import Path

from bench.cli import main
from reports.stats.noninferiority import seeds_for, seeds_to_decide

from .test_reports import write_run

S1 = [74.0, 76.0, 72.0]  # sd 2 on each side, a 1-point margin: the interval straddles −Δ
S4 = [73.5, 75.5, 71.5]


def test_seeds_to_decide_is_the_controls_rule_at_the_pooled_spread() -> None:
    assert seeds_to_decide(S4, S1, 1.0) == seeds_for(2.0, 1.0) > 3
    assert seeds_to_decide([1.0], S1, 1.0) is None and seeds_to_decide(S1, S1, 0.0) is None


def test_an_inconclusive_cell_names_the_seeds_that_would_decide(tmp_path: Path) -> None:
    for k, v in enumerate(S1):
        write_run(tmp_path, "cifar10", "adascale", 1, k, val=v)
    for k, v in enumerate(S4):
        write_run(tmp_path, "cifar10", "adascale", 4, k, val=v, T1=100, iterations=30)
    assert main(["report", str(tmp_path)]) == 0
    n = seeds_for(2.0, 1.0)
    said = f"~{n} seeds a side would decide"
    rep = tmp_path / "report"
    with (rep / "rule_verdicts.csv").open() as f:
        row = next(r for r in csv.DictReader(f) if r["scale"] == "4")
    assert row["status"] == "inconclusive" and said in row["decide"] and said in row["detail"], row
    assert said in (rep / "rules.txt").read_text()
    assert said in (rep / "report.html").read_text()
    with (rep / "findings.csv").open() as f:
        finding = next(r for r in csv.DictReader(f) if r["check"] == "i")
    assert finding["status"] == "inconclusive" and said in finding["detail"], finding
