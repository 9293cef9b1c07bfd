"""`report --format F` writes what F asks for and nothing else (besides its caches under report/cache/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main

from .test_reports import write_run

ALL = {
    "md": {"table2.md"},
    "tex": {"table2.tex"},
    "txt": {"findings.txt", "rules.txt"},
    "csv": {"table2.csv", "paper_comparison.csv", "findings.csv", "scalefree.csv", "time_to_target.csv", "speedup.csv"}
    | {"time_to_target_cells.csv"}
    | {"rule_verdicts.csv", "rules_at_a_glance.csv", "b_crit.csv"},
}


def written(out: Path) -> set[str]:
    return {p.name for p in (out / "report").iterdir() if p.name != "cache"}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    for scale in (1, 4):
        write_run(tmp_path, "cifar10", "adascale", scale, 0, val=90.0 - scale / 4)
    return tmp_path


@pytest.mark.parametrize("fmt", ["md", "tex", "txt", "csv", "md,csv"])
def test_each_format_writes_only_its_files(results: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(results), "--format", fmt]) == 0
    expected = set().union(*(ALL[f] for f in fmt.split(",")))
    assert written(results) == expected
    out = capsys.readouterr().out
    assert "claims" in out and "(iii)" in out  # the verdict grid is printed whatever is written
    full = "AdaScale non-inferior to S = 1" in out  # the findings in full: only with txt (findings.txt)
    assert full == ("txt" in fmt.split(","))
    assert "report.html" not in out and f"{results / 'report' / sorted(expected)[0]}" in out


def test_html_writes_the_page_and_its_figures(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(results), "--format", "html"]) == 0
    names = written(results)
    assert "report.html" in names and any(n.endswith(".png") for n in names)
    assert not names & set().union(*ALL.values())
    assert capsys.readouterr().out.strip().endswith("report.html")


def test_default_writes_every_format(results: Path) -> None:
    assert main(["report", str(results)]) == 0
    assert written(results) >= set().union(*ALL.values()) | {"report.html"}
