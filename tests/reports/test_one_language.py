"""One language from the first screen to the CSVs (issue 56): one word and one colour per meaning
(reports.page.words), one number per quantity (reports.stats.numbers), and human names, through the real `report`."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from bench.cli import main
from reports.page import words as W

from .test_reports import write_run

T1 = 120


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cifar10, 3 seeds: AdaScale S = 1 and S = 4 (its seeds take 20, 30 and 40 iterations: the mean of the
    ratios, 4.33, is not T1 / the mean iterations, 4.00), LSW S = 4 five points worse than S = 1."""
    root = tmp_path_factory.mktemp("language")
    for seed in range(3):
        write_run(root, "cifar10", "adascale", 1, seed, val=90.0 + 0.1 * seed, iterations=T1, T1=T1)
        write_run(root, "cifar10", "adascale", 4, seed, val=90.0 + 0.1 * seed, iterations=20 + 10 * seed, T1=T1)
        write_run(root, "cifar10", "lsw", 4, seed, val=85.0 + 0.1 * seed, iterations=T1 // 4, T1=T1)
    assert main(["report", str(root)]) == 0
    return root / "report"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_the_csvs_carry_the_pages_words(report: Path) -> None:
    rule_words = {w.word for w in W.RULE.values()}
    for name in ("rule_verdicts.csv", "rules_at_a_glance.csv"):
        said = {r["status"].split(" (")[0] for r in _rows(report / name)}
        assert said <= rule_words and "worse" in said and "keeps" in said, (name, said)
    claims = {r["check"]: r["status"] for r in _rows(report / "findings.csv")}
    assert claims["ii"] == "holds" and set(claims.values()) <= {w.word for w in W.CLAIM.values()} | {
        f"{W.NOT_TESTABLE_WORD} ({why})" for _, why in W.REASONS
    }
    assert "not testable here" not in (report / "findings.csv").read_text()
    status = [ln for ln in (report / "findings.txt").read_text().splitlines() if ln.startswith("  (")]
    assert status and not any("not testable here" in ln for ln in status)  # the text file speaks the page's words


def test_one_fact_reads_one_colour_in_both_grids(report: Path) -> None:
    """LSW worse at S = 4: claim (ii) holds, the rule is worse — the same red, and the claim's cell says so."""
    page = (report / "report.html").read_text()
    grids = re.findall(r'<table class="grid">.*?</table>', page, re.S)
    claim = re.search(r'<td class="v (\w+)"[^>]*>LSW worse — as the paper says', grids[0])
    rule = re.findall(r'<td class="v (\w+)"[^>]*>worse<', grids[1])
    assert claim and rule and {claim.group(1)} == set(rule) == {W.RULE[W.FD.FAILS].colour}
    assert "holds / keeps" not in page and "td.holds" not in page  # one palette, from reports.page.words
    for cls, colour in W.COLOURS.items():
        assert f"td.v.{cls}, .sw.{cls} {{ background: {colour}; }}" in page


def test_a_cells_speed_up_is_one_number_wherever_it_appears(report: Path) -> None:
    page = (report / "report.html").read_text()
    rules = (report / "rules.txt").read_text()
    sf = next(r for r in _rows(report / "scalefree.csv") if r["method"] == "adascale" and r["scale"] == "4")
    verdict = next(r for r in _rows(report / "rule_verdicts.csv") if r["method"] == "adascale")
    assert float(sf["speedup"]) == pytest.approx(4.0) and float(verdict["speedup"]) == pytest.approx(4.0)
    assert "AdaScale 4.00×" in rules and "4.00×" in page
    assert "4.33" not in page and "4.33" not in rules  # the mean of the seeds' ratios: a second number


def test_the_glossary_names_every_word_with_its_colour() -> None:
    table = W.glossary_markdown()
    for word in ("holds", "does not hold", "keeps", "worse", "inconclusive", "not testable", "not run"):
        assert f"| {word} |" in table
    assert "saturated" in table and "| LSW worse — as the paper says | red |" in table


def test_human_names_and_no_machine_path_on_the_page(report: Path) -> None:
    page = (report / "report.html").read_text()
    visible = re.sub(r"<[^>]+>", " ", re.sub(r'(title|src|alt)="[^"]*"', "", page))
    assert str(report.parent.resolve()) not in page and f"<code>{report.parent.name}</code>" in page
    assert not re.findall(r"<figcaption>[^<]*(?:<[^>]+>[^<]*)*?\.png", page)  # captions, not file names
    assert "<th>table</th>" not in page and not re.search(r">\s*(adascale|lsw\+?)\s*<", page)
    assert "AdaScale" in visible
    differs = page[page.index('id="differs"') : page.index('id="figures"')]
    assert differs.count("<li>") <= 3 and "model." not in differs and "by necessity" not in differs
    assert "<b>S</b>: ours" in differs and "<b>learning rate" in differs
