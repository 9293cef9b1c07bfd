"""The report as a reader sees it in a browser: every section in the nav bar, variants by a short name
(the overrides on hover and listed), intervals within the metric's range, and a findings table that
wraps inside the page instead of widening it."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pandas as pd
import pytest

from reports.build import build_report
from reports.rundata import variants
from reports.tables.table2 import _hover, cells

from .test_reports import quiet_load, write_run

LONG = {"data.conditioning": 10.0, "lr_schedule.lr0": 1.0, "lr_schedule.decay": 0.01, "microbatch_mode": "batched"}
# the overrides as the run identity writes them: numbers in one form (10.0 is 10)
LONG_RAW = 'data.conditioning=10,lr_schedule.decay=0.01,lr_schedule.lr0=1,microbatch_mode="batched"'


def run_with(root: Path, overrides: dict, label: str | None = None, **kw) -> Path:
    """A run made with `--set` overrides (and, from a matrix, a variant name)."""
    run = write_run(root, **kw)
    spec = json.loads((run / "spec.json").read_text())
    spec["overrides"] = overrides
    if label is not None:
        spec["experiment"] = {"kind": "table2", "variant": label}
    (run / "spec.json").write_text(json.dumps(spec))
    return run


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("variants")
    for sub, overrides, label in (("plain", {}, None), ("long", LONG, None), ("short", {"T1": 50}, None)):
        for scale in (1, 4):
            for seed in (0, 1):
                run_with(
                    tmp_path / sub, overrides, label, task="logreg", method="adascale", scale=scale, seed=seed,
                    metric="loss", val=0.25 + 0.01 * seed,
                )  # fmt: skip
    for scale in (1, 4):
        run_with(tmp_path / "named", {"data.tiny_noise": 4.0}, "noisy", task="cifar10", method="adascale", scale=scale,
                 seed=0)  # fmt: skip
    return tmp_path


@pytest.fixture(scope="module")
def page(folder: Path) -> str:
    """The folder's report.html, built once for the tests that read it."""
    return html_of(folder)


def html_of(out: Path) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_report(out, ["html"]).read_text()


def test_the_nav_bar_links_every_section(page: str) -> None:
    html = page
    nav = re.search(r"<nav>(.*?)</nav>", html, re.S).group(1)
    links = re.findall(r'href="#([^"]+)"', nav)
    sections = re.findall(r'<h2 id="([^"]+)"', html)
    assert links == sections and "ttt" in links  # every section, in page order; none missing (time to target)
    ids = set(re.findall(r' id="([^"]+)"', html))
    assert set(links) <= ids


def test_variants_are_shown_by_a_short_name_with_the_overrides_on_hover(folder: Path, page: str) -> None:
    html = page
    heads = re.findall(r"<h3>(.*?)</h3>", html)
    shown = {re.sub(r"<[^>]+>", "", h).split(" — ")[0] for h in heads}
    assert {"logreg", "logreg [conditioning 10, decay 0.01 + 2 more]", "logreg [T1 50]", "cifar10 [noisy]"} <= shown
    esc = LONG_RAW.replace('"', "&quot;")
    assert f'[<span class="variant" title="{esc}">conditioning 10, decay 0.01 + 2 more</span>]' in html
    assert not any(LONG_RAW.replace('"', "&quot;") in re.sub(r'title="[^"]*"', "", h) for h in heads)
    listed = html[html.index("Variants (runs with other overrides") :]
    assert f"<b>conditioning 10, decay 0.01 + 2 more</b>: <code>{esc}</code>" in listed and "<b>noisy</b>" in listed
    findings = html[html.index('<table class="findings"') : html.index("</table>", html.index('class="findings"'))]
    assert "conditioning 10, decay 0.01 + 2 more</span>]" in findings and "rowspan" not in findings
    assert "logreg [conditioning 10, decay 0.01 + 2 more]: AdaScale" in html  # a figure's title too
    table2 = (folder / "report").glob("*.csv")
    assert not list(table2)  # html only: no CSV written here


def test_short_names_from_a_label_the_overrides_or_a_number() -> None:
    rows = [
        {"variant": "", "variant_label": "", "overrides": "{}", "experiment_kind": "table2"},
        {"variant": "a=1", "variant_label": "", "overrides": json.dumps({"a": 1}), "experiment_kind": "table2"},
        {"variant": "x.long_key=1", "variant_label": "mine", "overrides": "{}", "experiment_kind": "table2"},
        {"variant": "x.long_key=2", "variant_label": "mine", "overrides": "{}", "experiment_kind": "elastic"},
        {"variant": "z=9", "variant_label": "", "overrides": json.dumps({"z" * 30: 9}), "experiment_kind": None},
        {"variant": "lr=3", "variant_label": "", "overrides": json.dumps({"lr": 3}), "experiment_kind": "heatmap"},
    ]
    names = variants.names(pd.DataFrame(rows))
    assert names == {"": "", "a=1": "a 1", "x.long_key=1": "mine", "x.long_key=2": "mine (2)", "z=9": "z" * 30 + " 9"}
    longer = variants.names(pd.DataFrame([{**rows[1], "variant": "y=1", "overrides": json.dumps({"y" * 40: 1})}]))
    assert longer["y=1"] == "y" * 35 + "…"  # cut, never a number standing for it
    kept = {"keep_checkpoints_every": 12, "keep_checkpoints_until": 0.1}  # the smoke's Figure 2 runs, in words
    kept = variants.names(pd.DataFrame([{**rows[1], "variant": "k=12", "overrides": json.dumps(kept)}]))
    assert kept["k=12"] == "checkpoints every 12, until 0.1·T1"
    assert variants.display("logreg [a=1]", {"a=1": "A"}) == ("logreg [A]", "a=1")
    assert variants.display("logreg", names) == ("logreg", "")


def test_intervals_are_clipped_to_the_metric_range_in_the_html_only(tmp_path: Path) -> None:
    for seed, val in enumerate((99.9, 97.0)):  # a t interval over 2 seeds: 98.45 ± 18.4
        write_run(tmp_path, "cifar10", "adascale", 1, seed, val=val)
    c = cells(quiet_load(tmp_path).runs)
    row = c.iloc[0]
    assert row["val_metric_ci_hi"] > 100 and row["val_metric_ci_lo"] < 97  # the CSV keeps the t interval
    html = html_of(tmp_path)
    hovers = re.findall(r'title="(n=2, 95 % interval[^"]*)"', html)
    metric = next(h for h in hovers if "100.00]" in h)
    assert metric.startswith("n=2, 95 % interval of the mean [80.03, 100.00], clipped to the range it can take")
    assert metric.endswith("(t interval [80.03, 116.87])")  # and says from what
    unclipped = _hover(row, "iterations", (0.0, math.inf))
    assert "clipped" not in unclipped  # an interval inside the range is shown as it is
    assert "clipped" in _hover(row, "val_metric", (0.0, 100.0))
    assert "clipped" not in _hover(row, "val_metric", (-math.inf, math.inf))  # an unknown metric: as computed


def test_the_findings_table_wraps_within_the_page(page: str) -> None:
    html = page
    assert ".findings { width: 100%; table-layout: fixed; }" in html.replace("table.findings", ".findings")
    assert '<col style="width: 27%">' in html


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
MEASURE = """<script>
document.title = "W=" + document.documentElement.scrollWidth + ",F=" +
  Math.round(document.querySelector("table.findings").getBoundingClientRect().right);
</script></body>"""


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (the layout is checked without it above)")
def test_in_a_browser_the_page_fits_1024_px(page: str, tmp_path: Path) -> None:
    """A real browser lays the page out at 1 024 px: nothing is wider than the window."""
    measured = tmp_path / "measured.html"
    measured.write_text(page.replace("</body>", MEASURE))
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1024,800", "--dump-dom",
         f"file://{measured}"],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    width, right = (int(v) for v in re.search(r"<title>W=(\d+),F=(\d+)</title>", dom).groups())
    assert width <= 1024 and right <= 1024, (width, right)


def test_one_label_on_two_tasks_names_both_tables_alike_and_one_task_with_two_override_sets_gets_a_suffix(
    tmp_path: Path,
) -> None:
    """The control matrix says `variant: control` on logreg's overrides and on cifar10's: its tables are
    `logreg [control]` and `cifar10 [control]` (the report said `control (2)`); two override sets of one task
    under one label still get two names."""
    logreg, cifar = {"data.conditioning": 10.0}, {"data.tiny_noise": 3.0}
    for task, overrides in (("logreg", logreg), ("cifar10", cifar)):
        for scale in (1, 4):
            run_with(tmp_path, overrides, "control", task=task, method="adascale", scale=scale, seed=0)
    res = quiet_load(tmp_path)
    assert sorted(res.variants.values()) == ["", "control", "control"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        page = build_report(tmp_path, ["html"]).read_text()
    assert "(2)" not in page and 'logreg [<span class="variant"' in page and 'cifar10 [<span class="variant"' in page
    assert "<b>control (cifar10)</b>: <code>data.tiny_noise=3</code>" in page  # the list of variants: whose is whose
    for scale in (1, 4):  # logreg again under the same label, other overrides: a real collision
        run_with(tmp_path, logreg | {"lr_schedule.lr0": 1.0}, "control", task="logreg", method="adascale",
                 scale=scale, seed=1)  # fmt: skip
    named = quiet_load(tmp_path).variants
    assert sorted(named.values()) == ["", "control", "control", "control (2)"]
    assert named["data.tiny_noise=3"] == "control"  # cifar10's own stays as the matrix named it


def test_a_name_collides_only_within_a_task() -> None:
    rows = [
        {"task": "logreg", "variant": "a=1", "variant_label": "ctl", "overrides": "{}", "experiment_kind": "table2"},
        {"task": "cifar10", "variant": "b=1", "variant_label": "ctl", "overrides": "{}", "experiment_kind": "table2"},
        {"task": "cifar10", "variant": "c=1", "variant_label": "ctl", "overrides": "{}", "experiment_kind": "table2"},
        {"task": "logreg", "variant": "c=1", "variant_label": "ctl", "overrides": "{}", "experiment_kind": "table2"},
    ]
    # a=1 (logreg) ctl; b=1 (cifar10) ctl; c=1 shares a task with both: ctl (2)
    assert variants.names(pd.DataFrame(rows)) == {"": "", "a=1": "ctl", "b=1": "ctl", "c=1": "ctl (2)"}
