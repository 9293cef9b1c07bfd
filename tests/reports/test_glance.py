"""The report as a researcher reads it first: the verdict grid (task × claim, rule × S) at the top of the page
and of findings.txt / rules.txt, one vocabulary per kind of verdict, and every per-rule behaviour read from the
method row a run recorded (a user's gain-using rule gets its gain panel and its title)."""

from __future__ import annotations

import html
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from reports.build import build
from reports.page import glance

from .test_reports import quiet_load, write_run


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cifar10 S = 1, 4, 8 for AdaScale, LSW and LSW+, 3 seeds: LSW loses 5 points at S = 8 and is fastest."""
    root = tmp_path_factory.mktemp("glance")
    for method in ("adascale", "lsw", "lsw+"):
        for scale in (1, 4, 8):
            if scale == 1 and method != "adascale":
                continue
            for seed in range(3):
                worse = 5.0 if method == "lsw" and scale == 8 else 0.0
                its = 100 // (scale if method == "lsw" else max(1, scale // 2))
                write_run(root, "cifar10", method, scale, seed, val=90.0 - worse + 0.1 * seed, iterations=its, T1=100)
    return root


@pytest.fixture(scope="module")
def built(folder: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build(folder, ["html", "txt"])


def test_the_page_opens_on_the_banner_and_the_grid(built) -> None:
    page = (built.folder / "report.html").read_text()
    first = page.index('<table class="grid">')
    assert page.index('class="banner"') < first < page.index('<table class="meta">')  # before any detail
    assert first < page.index('<table class="findings"')
    grid = page[first : page.index("</table>", first)]
    assert "(ii)" in grid and "LSW worse at the largest S" in grid
    assert re.search(r'class="v (ok|bad|open|none)"', grid)  # every word coloured
    assert "3 seeds" in grid  # the seeds under the word


def test_rules_say_keeps_or_worse_and_the_best_rule_at_each_S(built) -> None:
    page = (built.folder / "report.html").read_text()
    rules = page[page.index("The rules against S = 1, at each S") :]
    rules = rules[: rules.index("</table>")]
    s8 = rules[rules.index("S = 8") :]
    s8 = s8[: s8.index("</tr>")]
    assert ">worse<" in s8 and ">keeps<" in s8  # LSW loses quality at S = 8, AdaScale and LSW+ keep it
    assert "AdaScale 4.00×" in s8  # the best rule that keeps quality, not the fastest (LSW 8.33×, worse)
    assert "LSW 4.00×" in rules[: rules.index("S = 8")]  # at S = 4 LSW keeps it and is fastest
    assert "does not hold" not in rules  # the rules' own vocabulary, not the findings'


def test_findings_and_rules_txt_open_on_a_compact_grid(built) -> None:
    findings = (built.folder / "findings.txt").read_text().splitlines()
    assert findings[0].startswith("This folder is a ")
    head = next(k for k, line in enumerate(findings) if line.startswith("claims"))
    assert "(i)" in findings[head] and findings[head + 1].startswith("cifar10") and "holds" in findings[head + 1]
    rules = (built.folder / "rules.txt").read_text().splitlines()
    assert rules[0].startswith("rules against S = 1") and "cifar10 S = 8:" in rules[2] and "best AdaScale" in rules[2]
    assert all(len(line) <= 120 for line in findings[: head + 3] + rules[:3])


def test_the_folder_kind_comes_from_the_presets_and_variant_names(folder: Path, tmp_path: Path) -> None:
    how, kind = glance.folder_kind(quiet_load(folder))
    assert kind.name == "set of tiny runs" and "tiny" in how
    for seed in range(2):
        write_run(tmp_path, "cifar10", "adascale", 1, seed, preset="paper")
    assert glance.folder_kind(quiet_load(tmp_path))[1].name == "paper matrix"
    (tmp_path / "matrix.json").write_text('{"matrices": ["/x/control.yaml"], "runs": {}}')
    assert glance.folder_kind(quiet_load(tmp_path))[1].name == "positive control"


GAIN_RULE = """from bench.core.algo.rules import AdaScale


class MINE(AdaScale):
    label, title, paper = "mine", "my gain rule", False
"""


def test_a_user_rule_that_uses_the_gain_gets_its_gain_panel_and_its_title(tmp_path: Path) -> None:
    """The curves read the method row the run recorded (uses_gain, title), not `method == "adascale"`: the
    report runs in a process that never imports the rule."""
    (tmp_path / "my_gain_rule.py").write_text(GAIN_RULE)
    out = tmp_path / "out"
    script = (
        "import sys; from bench.cli import main\n"
        "for method, scale in (('my_gain_rule:MINE', '4'), ('adascale', '1')):\n"
        "    argv = ['run', '--task', 'logreg', '--method', method, '--scale', scale, '--out', sys.argv[1]]\n"
        "    assert main([*argv, '--set', 'T1=60', '--set', 'eval_every=30']) == 0\n"
    )
    res = subprocess.run([sys.executable, "-c", script, str(out)], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        page = (build(out, ["html"]).folder / "report.html").read_text()
    assert "my_gain_rule" not in sys.modules
    assert re.search(r": my gain rule(?:</span>)?\.</b>", page), "the curves figure is titled by the recorded title"
    assert "No gain panel" not in page and "B_simple" in page  # both rules' figures have the gain panels


OVERRIDES = {"data.conditioning": 10.0, "lr_schedule.lr0": 1.0, "lr_schedule.decay": 0.01, "microbatch_mode": "batched"}
KEYS = re.compile(r"(?:conditioning|lr0|decay|microbatch_mode|tiny_noise|T1)=")  # an override string's pieces


def _visible(text: str) -> str:
    """A page less what is meant to hold the overrides: its tooltips and its list of variants."""
    text = re.sub(r'title="[^"]*"', "", text)
    return re.sub(r"<li><b>[^<]*</b>: <code>[^<]*</code></li>", "", text)


def test_no_file_the_report_writes_nor_status_nor_matrix_names_a_variant_by_its_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A variant is named by its short name everywhere; its overrides only in a tooltip, the page's list of
    variants, or a CSV's `variant` / `overrides` column."""
    import json

    import pandas as pd

    from bench.cli import main

    out = tmp_path / "out"
    for overrides in ({}, OVERRIDES, {"data.tiny_noise": 4.0}):
        for scale in (1, 4):
            for seed in (0, 1):
                run = write_run(out / str(len(overrides)), "logreg", "adascale", scale, seed, metric="loss", val=0.25)
                spec = json.loads((run / "spec.json").read_text())
                (run / "spec.json").write_text(json.dumps(spec | {"overrides": overrides}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        done = build(out)
    assert any(p.suffix == ".png" for p in done.written)
    for path in done.written:
        assert "=" not in path.name and len(path.name) < 100, path.name  # the short name, never the overrides
        if path.suffix == ".csv":
            df = pd.read_csv(path, dtype=str).fillna("")
            for col in set(df.columns) - {"variant", "overrides"}:
                assert not df[col].str.contains(KEYS).any(), (path.name, col)
        elif path.suffix in (".html", ".md", ".tex", ".txt"):
            assert not KEYS.search(_visible(path.read_text())), (path.name, KEYS.search(_visible(path.read_text())))
    page = (done.folder / "report.html").read_text()
    assert "tiny_noise 4" in page and "conditioning=10" in page  # the short name shown, the overrides on hover
    assert main(["status", str(out / "1")]) == 0 and main(["status", str(out / "4")]) == 0
    printed = capsys.readouterr().out
    assert "tiny_noise 4" in printed and "conditioning 10, decay 0.01" in printed and not KEYS.search(printed)
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "preset: tiny\nseeds: [0]\nexperiments:\n  - table2: {tasks: [logreg], methods: [adascale], scales: [4]"
        ", set: {data.conditioning: 10.0, lr_schedule.decay: 1.0}}\n"
    )
    assert main(["matrix", str(matrix)]) == 0
    printed = capsys.readouterr().out
    assert "[conditioning 10, decay 1]" in printed and not KEYS.search(printed)  # and 1.0 written as 1


def test_what_differs_from_the_paper_describes_the_presets_that_ran(built) -> None:
    page = (built.folder / "report.html").read_text()
    differs = page[page.index('id="differs"') : page.index('id="figures"')]
    assert "cifar10 — the tiny preset" in differs and "batch b 8 (paper 128)" in differs
    assert "He et al." not in differs  # the paper preset's own lines: only where it ran
    # our S are the ones the folder ran (a smoke's imagenet at 16), not the preset's list (1, 2, 4, 8)
    assert "ours 1, 4, 8, the paper's 1, 8, 16, 32, 64 (in common: S = 8)" in html.unescape(differs)


def test_the_papers_own_degraded_cells_are_marked_in_the_scale_free_table(built) -> None:
    page = (built.folder / "report.html").read_text()
    scalefree = page[page.index('id="scalefree"') : page.index('id="paper"')]
    marked = re.findall(r'<td class="grey num" title="the paper\'s own degraded cell[^"]*">([^<]*)</td>', scalefree)
    assert marked and all(float(v.replace("−", "-")) < -0.5 for v in marked)  # cifar10's LSW cells past S = 16
