"""The paper's Table 2 beside ours on one axis where the S differ (reports/figures/table2_efficiency.py): the
scaling efficiency of each rule against S, ours at S = 1, 4, 8 and the paper's at its own S, its degraded and
diverged cells crossed; no figure for a task the paper has no rows for."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from reports import figures
from reports.build import build
from reports.figures import shared_axis as T
from reports.tables.paper import load_paper

from .test_reports import PNG, quiet_load, write_run


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cifar10 and speech (in the paper's Table 2) at S = 1, 4, 8, logreg (not in it); AdaScale and LSW, 2 seeds."""
    root = tmp_path_factory.mktemp("efficiency")
    for task, metric in (("cifar10", "top1"), ("speech", "top1"), ("logreg", "loss")):
        for method in ("adascale", "lsw"):
            for scale in (1, 4, 8) if method == "adascale" else (4, 8):
                for seed in range(2):
                    its = 100 // scale if method == "lsw" else 200 // scale + 5 * seed  # AdaScale: half efficient
                    write_run(root, task, method, scale, seed, metric=metric, iterations=its, T1=100)
    return root


@pytest.fixture()
def plans(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list, dict]:
    """The figures written and the plan each was drawn from, by task."""
    seen: dict[str, dict] = {}
    real = T._draw

    def spy(plan: dict, path: Path) -> None:
        seen.update({panel["name"]: panel for panel in plan["panels"]})  # one figure, a panel per table
        real(plan, path)

    monkeypatch.setattr(T, "_draw", spy)
    figs = figures.table2_efficiency(quiet_load(folder), tmp_path / "out")
    return figs, seen


def _rule(plan: dict, title: str) -> dict:
    return next(r for r in plan["rules"] if r["title"] == title)


def test_the_figure_holds_the_papers_points_for_a_task_and_none_for_a_task_the_paper_lacks(plans) -> None:
    figs, seen = plans
    assert sorted(seen) == ["cifar10", "speech"]  # logreg: not in the paper's Table 2, no panel
    assert len(figs) == 1  # small multiples: one figure, a panel per table
    for f in figs:
        assert f.path.name == "table2_efficiency.png" and f.path.read_bytes().startswith(PNG)
        assert f.kind == "table2_efficiency" and f.caption.startswith(T.CAPTION)
    paper = load_paper()
    ada = _rule(seen["cifar10"], "AdaScale")
    p = paper[(paper["task"] == "cifar10") & (paper["method"] == "adascale")]
    T1 = float(p.loc[p["scale"] == "1", "iterations"].iloc[0])
    assert ada["paper"]["x"] == [1.0, 8.0, 16.0, 32.0, 64.0]  # the paper's own S, not ours
    assert ada["paper"]["y"] == pytest.approx(
        [T1 / (float(s) * i) for s, i in zip(p["scale"], p["iterations"], strict=True)]
    )
    assert ada["ours"]["x"] == [1.0, 4.0, 8.0]
    assert ada["ours"]["y"][1:] == pytest.approx([0.5, 0.5], abs=0.06)  # ~200/S iterations at T1 = 100
    for y, lo, hi in zip(ada["ours"]["y"], ada["ours"]["lo"], ada["ours"]["hi"], strict=True):
        assert lo <= y <= hi  # the seeds' range around the mean
    assert ada["ours"]["lo"][1] < ada["ours"]["hi"][1]  # two seeds, two iteration counts


def test_the_papers_degraded_and_diverged_cells_are_crossed_and_labelled_as_the_table_prints_them(plans) -> None:
    _, seen = plans
    lsw = _rule(seen["cifar10"], "LSW")["paper"]
    crossed = {x: text for x, bad, text in zip(lsw["x"], lsw["bad"], lsw["text"], strict=True) if bad}
    assert crossed == {32.0: "-1.30", 64.0: "-17.50"}  # below −Δ = −0.5; S = 16's −0.50 is not
    assert not any(_rule(seen["cifar10"], "AdaScale")["paper"]["bad"])
    speech = _rule(seen["speech"], "LSW")["paper"]
    assert {x: t for x, b, t in zip(speech["x"], speech["bad"], speech["text"], strict=True) if b} == {
        16.0: "N/A",
        32.0: "N/A",
    }


def test_crosses_and_the_legend_are_drawn(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = {}
    real = T._save

    def spy(fig, path):
        drawn[path.name] = ([ln.get_marker() for ln in fig.axes[0].get_lines()], fig.legends, fig)
        return real(fig, path)

    monkeypatch.setattr(T, "_save", spy)
    figures.table2_efficiency(quiet_load(folder), tmp_path)
    markers, legends, fig = drawn["table2_efficiency.png"]
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == ["cifar10", "speech"]  # one panel each
    assert markers.count("x") == 3  # the paper's LSW S = 32, 64 and LSW+ S = 64 (drawn though we ran no LSW+)
    assert {T.OURS, T.OURS_LOST}.isdisjoint({T.PAPER, T.PAPER_LOST})  # ours and the paper's marked apart
    assert len(legends) == 1  # one compact legend for every panel
    labels = [t.get_text() for t in legends[0].get_texts()]
    assert "paper, lost quality (its Δmetric)" in labels and "paper (Table 2)" in labels and "AdaScale" in labels
    width, height = fig.get_size_inches()
    assert width <= 9 and height <= 4.5  # two panels side by side, the legend above: no wide legend column


def test_the_page_shows_it_under_the_scale_free_table_and_keeps_the_first_screen(folder: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        page = (build(folder, ["html"]).folder / "report.html").read_text()
    scalefree = page[page.index('id="scalefree"') : page.index('id="paper"')]
    assert 'id="fig-table2_efficiency"' in scalefree and "table2_efficiency_cifar10_tiny.png" not in scalefree
    assert scalefree.count("Scaling efficiency T1 / (S · iterations) against S") == 1  # the family's caption once
    grey = re.findall(r'<td class="grey num"[^>]*>([^<]*)</td>', scalefree)
    assert "-17.50" in grey and "-1.30" in grey  # the same cells, in the same format, as the figure labels
    assert 'id="fig-table2_efficiency"' not in page[page.index('id="figures"') :]
    assert page.index('<table class="grid">') < page.index('id="scalefree"')  # the first screen: the grid, as before
