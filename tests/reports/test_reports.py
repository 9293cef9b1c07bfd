"""The report generator (reports/): tables, grey rule, paper comparison, figures and robustness, on tiny
synthetic results folders written by `write_run` (spec.json / summary.json / metrics.jsonl)."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.core.algo.rules import METHODS
from reports import figures
from reports.build import build_report
from reports.figures import heatmap
from reports.rundata.collect import ReportWarning, load, task_info
from reports.speed.sweep import sweep_table
from reports.stats.noise import fill as fill_noise
from reports.stats.numbers import fmt_value
from reports.stats.significance import worse_than
from reports.tables.latex import latex
from reports.tables.paper import compare, header_note, load_paper
from reports.tables.table2 import cells, markdown

PNG = b"\x89PNG\r\n\x1a\n"


def write_run(
    root: Path,
    task: str,
    method: str,
    scale: int | str,
    seed: int,
    *,
    val: float | None = 90.0,
    loss: float | None = 0.5,
    iterations: int = 100,
    status: str | None = "completed",
    metric: str = "top1",
    batch_size: int = 16,
    experiment: dict | None = None,
    lr0: float = 0.1,
    decay: float = 0.1,
    preset: str = "tiny",
    summary_extra: dict | None = None,
    with_metrics: bool = True,
    checkpoint: bool = False,
    n_records: int = 20,
    T1: int | None = None,
    gain_rises: bool = True,
    b_simple: float | None = None,
) -> Path:
    """One run folder as the engine writes it. status=None: no summary.json (a run in progress)."""
    label = scale if isinstance(scale, str) else f"s{scale}"
    run = root / task / method / label / f"seed{seed}"
    run.mkdir(parents=True)
    spec = {
        "task": task,
        "method": method,
        "scale": scale,
        "seed": seed,
        "preset": preset,
        "T1": iterations if T1 is None else T1,
        "batch_size": batch_size,
        "lr_schedule": {"kind": "exponential", "lr0": lr0, "decay": decay},
        "momentum": 0.9,
        "elastic": {"up": [[0.0, 2], [0.5, 4]], "down": [[0.0, 4], [0.5, 2]]},
        "overrides": {},
        "max_epochs": None,
        "experiment": experiment,
    }
    (run / "spec.json").write_text(json.dumps(spec))
    s = 8 if isinstance(scale, str) else scale
    # statistics of a noise scale b_simple (σ² = B/b, μ² = 1: sum_sq, mean_sq as the engine records them)
    var = None if b_simple is None else b_simple / batch_size
    mean_sq = 1.0 if var is None else 1.0 + var / s
    sum_sq = None if var is None else var * (s - 1) + s * mean_sq  # None: statistics off
    if with_metrics:
        lines = []
        for i in range(n_records):
            tau = i * s * 0.8
            gain = 1 + (s - 1) * (1 - math.exp(-i / 5))  # small first, rising: the emergent warm-up
            gain = gain if gain_rises else s + 1 - gain  # large first, falling
            lines.append(
                {
                    "iteration": i,
                    "tau": tau,
                    "scale": s,
                    "gain": gain,
                    "lr": lr0 * gain * 0.9**i,
                    "loss": 1 / (i + 1),
                    "sum_sq": sum_sq,
                    "mean_sq": mean_sq,
                    "progress": 1.0,
                    "warmup": 1.0,
                    "var": var,
                    "sqr": None if var is None else 1.0,
                }
            )
            if i % 5 == 4:
                lines.append({"eval": True, "iteration": i, "tau": tau, "epochs": i / 10, "metric": 50 + i})
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    if checkpoint:
        (run / "checkpoint.pt").write_bytes(b"\0")
    if status is not None:
        summary = {
            "task": task,
            "method": method,
            "scale": scale,
            "seed": seed,
            "preset": preset,
            "status": status,
            "metric": metric,
            "val_metric": val if status == "completed" else None,
            "train_loss": loss if status == "completed" else None,
            "iterations": iterations,
            "tau": iterations * s,
            "wall_time_s": 1.0,
            # statistics written for a noise scale b_simple are those of independent draws: no data size, so the
            # report's correction for drawing without replacement (reports.stats.noise) leaves them as they are
            "epochs": 2.0 if b_simple is None else None,
            "target_epochs": None,
            "mean_gain": 2.0,
            "noise_scale": None,
            "versions": {"python": "3.11", "torch": "2.x"},
            "git_commit": "abc1234",
            **(summary_extra or {}),
        }
        (run / "summary.json").write_text(json.dumps(summary))
    return run


def seeds(root: Path, task: str, method: str, scale, vals, losses=None, **kw) -> None:
    for k, v in enumerate(vals):
        write_run(root, task, method, scale, k, val=v, loss=(losses[k] if losses else 0.5), **kw)


def cell(c: pd.DataFrame, task: str, scale: str, method: str) -> pd.Series:
    return c[(c["task"] == task) & (c["scale"] == scale) & (c["method"] == method)].iloc[0]


def quiet_load(root: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReportWarning)
        return load(root)


# ------------------------------------------------------------------------------------ the grey rule


def test_worse_than_edge_cases():
    assert worse_than([80, 81, 79], [90, 91, 89], higher_is_better=True)[0]
    assert not worse_than([80, 81, 79], [90, 91, 89], higher_is_better=False)[0]  # better when lower is better
    assert worse_than([0.9, 1.0, 1.1], [0.2, 0.3, 0.25], higher_is_better=False)[0]
    grey, p = worse_than([80.0], [90, 91, 89], higher_is_better=True)  # one seed: no test
    assert not grey and math.isnan(p)
    assert worse_than([80, 80], [90, 90], True) == (True, 0.0)  # zero variance both sides: the gap is certain
    assert worse_than([90, 90], [90, 90], True) == (False, 1.0)
    assert worse_than([80, 80], [90, 91, 89], True)[0]  # zero variance on one side: Welch still defined


def test_values_keep_a_few_digits_and_blown_up_losses_stay_narrow():
    assert [fmt_value(v) for v in (123.45, 94.123, 1.07612, 0.25641)] == ["123.5", "94.12", "1.076", "0.2564"]
    assert fmt_value(4855250400.0) == "4.86e+09"  # a loss that exploded without reaching inf
    assert fmt_value(float("nan")) == "–"


def test_grey_rule_higher_is_better(tmp_path):
    seeds(tmp_path, "cifar10", "adascale", 1, [90.0, 90.5, 89.5], [0.30, 0.31, 0.29])
    seeds(tmp_path, "cifar10", "adascale", 8, [80.0, 80.6, 79.4], [0.60, 0.62, 0.58])  # clearly worse
    seeds(tmp_path, "cifar10", "adascale", 2, [90.1, 90.4, 89.6], [0.30, 0.32, 0.29])  # equal
    c = cells(quiet_load(tmp_path).runs)
    assert cell(c, "cifar10", "8", "adascale")["grey_metric"]
    assert cell(c, "cifar10", "8", "adascale")["grey_loss"]  # training loss: higher is worse
    assert not cell(c, "cifar10", "2", "adascale")["grey_metric"]
    assert not cell(c, "cifar10", "2", "adascale")["grey_loss"]
    assert not cell(c, "cifar10", "1", "adascale")["grey_metric"]
    assert cell(c, "cifar10", "8", "adascale")["val_metric"] == pytest.approx(80.0)
    assert cell(c, "cifar10", "8", "adascale")["n_seeds"] == 3
    md = markdown(c)
    assert "80.00†" in md and "90.00†" not in md and "†" in md.splitlines()[-1]


def test_grey_rule_respects_lower_is_better(tmp_path):
    kw = {"metric": "loss"}
    assert task_info("logreg") == ("full loss", False)
    seeds(tmp_path, "logreg", "lsw", 1, [0.250, 0.252, 0.248], **kw)
    seeds(tmp_path, "logreg", "lsw", 4, [0.350, 0.352, 0.348], **kw)  # higher loss: worse
    seeds(tmp_path, "logreg", "lsw", 2, [0.150, 0.152, 0.148], **kw)  # lower loss: better, never grey
    c = cells(quiet_load(tmp_path).runs)
    assert cell(c, "logreg", "4", "lsw")["grey_metric"]
    assert not cell(c, "logreg", "2", "lsw")["grey_metric"]
    assert cell(c, "logreg", "4", "lsw")["p_metric"] < 0.05 < cell(c, "logreg", "2", "lsw")["p_metric"]


def test_unknown_task_falls_back_on_the_metric_key():
    assert task_info("no-such-task", "loss") == ("loss", False)
    assert task_info("no-such-task", "top1") == ("top1", True)


# ------------------------------------------------------------------------------- N/A and – in every format


@pytest.fixture
def na_folder(tmp_path):
    seeds(tmp_path, "cifar10", "adascale", 1, [90.0, 90.5, 89.5])
    seeds(tmp_path, "cifar10", "lsw", 1, [90.0, 90.5, 89.5])
    seeds(tmp_path, "cifar10", "lsw", 8, [60.0, 61.0, 59.0])  # grey
    write_run(tmp_path, "cifar10", "adascale", 8, 0, val=88.0)
    write_run(tmp_path, "cifar10", "adascale", 8, 1, status="diverged", iterations=77)
    return tmp_path


def test_na_and_missing_cells_in_markdown(na_folder):
    c = cells(quiet_load(na_folder).runs)
    row = cell(c, "cifar10", "8", "adascale")
    # AdaScale's count is only known once it has run: no plan to show, the divergence point in a footnote
    assert row["diverged"] and math.isnan(row["val_metric"]) and math.isnan(row["iterations"])
    assert row["diverged_at"] == "seed 1 at iteration 77"
    md = markdown(c)
    lines = md.splitlines()
    header = [h.strip() for h in next(x for x in lines if x.startswith("| S |")).strip("|").split("|")]
    # a column per rule with runs in the table (AS, LSW: this folder has no other), for each quantity
    assert header == ["S", "total batch"] + [
        f"{q} {m}" for q in ("top-1 %", "train loss", "iterations") for m in ("AS", "LSW")
    ]
    parts = [p.strip() for p in next(x for x in lines if x.startswith("| 8 |")).strip("|").split("|")]
    row = dict(zip(header, parts, strict=True))
    assert (row["S"], row["total batch"]) == ("8", "128")
    # every cell with runs shows its seeds (N/A: the seeds run)
    assert row["top-1 % AS"] == "N/A (n=2)" and row["top-1 % LSW"] == "60.00† (n=3)"
    assert row["train loss AS"] == "N/A (n=2)"
    assert row["iterations AS"] == "–[1] (n=2)"  # no planned count for AdaScale; footnote 1
    assert "[1] S = 8 AS: diverged (seed 1 at iteration 77); no planned count (AdaScale)" in md
    one = next(x for x in lines if x.startswith("| 1 |"))
    s1 = dict(zip(header, [p.strip() for p in one.strip("|").split("|")], strict=True))
    assert s1["top-1 % LSW"] == "90.00 (n=3)"  # LSW's own S = 1 runs


def test_diverged_lsw_and_lsw_plus_show_the_planned_iterations(tmp_path):
    write_run(tmp_path, "cifar10", "lsw", 8, 0, status="diverged", iterations=5, T1=100)  # plan: ⌈100/8⌉
    run = write_run(tmp_path, "cifar10", "lsw+", 8, 0, status="diverged", iterations=3, T1=100)
    spec = json.loads((run / "spec.json").read_text())
    (run / "spec.json").write_text(json.dumps({**spec, "T_AS": 21}))
    c = cells(quiet_load(tmp_path).runs)
    assert cell(c, "cifar10", "8", "lsw")["iterations"] == 13
    assert cell(c, "cifar10", "8", "lsw+")["iterations"] == 21
    md = markdown(c)
    assert "| 13[1] (n=1) | 21[2] (n=1) |" in md and "[1] S = 8 LSW: diverged (seed 0 at iteration 5); planned" in md


def test_na_and_missing_cells_in_latex(na_folder):
    tex = latex(cells(quiet_load(na_folder).runs))
    assert "\\usepackage{booktabs}" in tex and "xcolor" in tex  # the packages it needs, in a comment
    assert tex.count("\\begin{tabular}") == tex.count("\\end{tabular}") == 1
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
    assert "\\cellcolor{gray!25}60.00" in tex
    row = next(x for x in tex.splitlines() if x.startswith("8 &"))
    assert "N/A\\,{\\scriptsize(n=2)}" in row
    assert row.count("&") == 1 + 3 * 2 and row.endswith("\\\\")  # S, total, 3 quantities × 2 rules (AS, LSW)
    assert "$S$ & total batch & AS & LSW & AS & LSW & AS & LSW" in tex
    assert "top-1 \\%" in tex  # % escaped
    body = re.sub(r"\\[{}%]", "", tex)
    assert body.count("{") == body.count("}")


def test_na_missing_and_grey_cells_in_html(na_folder):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReportWarning)  # nothing to warn about here
        report = build_report(na_folder, ["md", "tex", "html", "csv"])
    text = report.read_text()
    assert '<td class="na">N/A <small class="n">n=2</small></td>' in text
    assert '<td class="missing">–</td>' in text
    grey = re.search(r'<td class="grey num" title="([^"]*)">60\.00 <small class="n">n=3</small></td>', text)
    assert grey and "significantly worse than S = 1; n=3, 95 % interval of the mean [57.52, 62.48]" in grey[1]
    assert "td.grey { background" in text
    csv = pd.read_csv(report.parent / "table2.csv")
    assert {"task", "scale", "method", "n_seeds", "grey_metric", "grey_loss", "val_metric"} <= set(csv.columns)
    lsw8 = csv[(csv["scale"].astype(str) == "8") & (csv["method"] == "lsw")].iloc[0]
    assert (lsw8["val_metric_ci_lo"], lsw8["val_metric_ci_hi"]) == pytest.approx((57.516, 62.484), abs=1e-3)
    assert len(csv) == 4  # one row per task × scale × rule that has runs (LSW has its own S = 1 runs)
    assert list(csv["label"]) == ["AS", "LSW", "AS", "LSW"]
    assert (report.parent / "table2.md").exists() and (report.parent / "table2.tex").exists()


# -------------------------------------------------------------------------------------- paper comparison


def test_paper_comparison_reads_table2_and_computes_differences(tmp_path):
    paper = load_paper()
    assert paper.loc[(paper.task == "speech") & (paper.scale == "16") & (paper.method == "lsw"), "diverged"].all()
    assert len(paper) == 79 and set(paper["task"]) == {"cifar10", "imagenet", "speech", "transformer", "yolo"}
    seeds(tmp_path, "cifar10", "adascale", 1, [94.5, 94.7], [0.20, 0.20], iterations=39000, batch_size=128)
    seeds(tmp_path, "cifar10", "lsw", 8, [93.0, 93.2], [0.16, 0.17], iterations=4880, batch_size=128)
    seeds(tmp_path, "speech", "lsw", 16, [70.0, 71.0], metric="wacc", batch_size=32, iterations=5000)
    comp = compare(cells(quiet_load(tmp_path).runs), paper)
    a = comp[(comp.task == "cifar10") & (comp.scale == "1") & (comp.method == "adascale")].iloc[0]
    assert a.metric_paper == pytest.approx(94.1) and a.metric_diff == pytest.approx(94.6 - 94.1)
    assert a.loss_diff == pytest.approx(0.20 - 0.157) and a.iterations_diff == pytest.approx(39000 - 39100)
    assert a.total_batch_ours == 128 and a.total_batch_paper == 128
    b = comp[(comp.task == "cifar10") & (comp.scale == "8") & (comp.method == "lsw")].iloc[0]
    assert b.metric_diff == pytest.approx(93.1 - 94.0)
    sp = comp[(comp.task == "speech") & (comp.scale == "16") & (comp.method == "lsw")].iloc[0]
    assert sp.status_paper == "na" and math.isnan(sp.metric_paper) and math.isnan(sp.metric_diff)
    assert sp.iterations_paper == 5300 and sp.iterations_diff == -300
    missing = comp[(comp.task == "cifar10") & (comp.scale == "64") & (comp.method == "lsw")].iloc[0]
    assert missing.status_ours == "missing" and missing.metric_paper == pytest.approx(76.6)
    assert "not comparable" in header_note(comp).lower()
    report = build_report(tmp_path, ["csv", "html"])
    html = report.read_text()
    # tiny runs: no absolute comparison in the page (said why), only the scale-free one; the CSV keeps all
    assert "tiny preset are left out here" in html and "+0.50" not in html
    assert "Scale-free comparison with the paper" in html
    assert len(pd.read_csv(report.parent / "paper_comparison.csv")) == len(comp)


def test_absolute_comparison_for_paper_preset_runs(tmp_path):
    kw = {"iterations": 39000, "batch_size": 128, "preset": "paper"}
    seeds(tmp_path, "cifar10", "adascale", 1, [94.5, 94.7], [0.20, 0.20], **kw)
    html = build_report(tmp_path, ["html"]).read_text()
    assert "+0.50" in html and "left out here" not in html  # 94.6 − 94.1


# ----------------------------------------------------------------------------------------- robustness


def test_broken_partial_and_running_runs_still_give_a_report(tmp_path):
    seeds(tmp_path, "cifar10", "adascale", 1, [90.0, 91.0])
    corrupt = write_run(tmp_path, "cifar10", "adascale", 2, 0)
    (corrupt / "summary.json").write_text('{"task": "cifar10", "status": "compl')  # torn write
    partial = write_run(tmp_path, "cifar10", "adascale", 2, 1)
    (partial / "summary.json").write_text(json.dumps({"task": "cifar10", "method": "adascale"}))  # no status
    running = write_run(tmp_path, "cifar10", "adascale", 4, 0, status=None, checkpoint=True)
    with open(running / "metrics.jsonl", "a") as f:
        f.write('{"iteration": 99, "ta')  # torn last line: ignored
    no_metrics = write_run(tmp_path, "cifar10", "adascale", 8, 0, with_metrics=False)
    with pytest.warns(ReportWarning) as record:
        report = build_report(tmp_path, ["md", "tex", "html", "csv"])
    messages = "\n".join(str(w.message) for w in record)
    for path in (corrupt / "summary.json", partial / "summary.json", running, no_metrics / "metrics.jsonl"):
        assert str(path) in messages
    html = report.read_text()
    for path in (corrupt / "summary.json", partial / "summary.json", running, no_metrics / "metrics.jsonl"):
        assert str(path.relative_to(tmp_path)) in html  # named under the folder: no machine path on the page
    assert str(tmp_path) not in html
    runs = quiet_load(tmp_path).runs.set_index("run_dir")["status"]
    assert runs[str(corrupt)] == "unreadable" and runs[str(running)] == "running"
    md = (report.parent / "table2.md").read_text()
    assert "| 8 | 128 | 90.00 (n=1) |" in md  # the run without metrics is still in the table
    assert "| 4 | 64 | – |" in md  # the running one is not


def test_empty_folder_gives_a_report(tmp_path):
    report = build_report(tmp_path, ["md", "tex", "html", "csv"])
    html = report.read_text()
    assert "No Table 2 runs" in html and "Omitted" in html


# --------------------------------------------------------------------------------------------- figures


def test_heatmap_panels_render(tmp_path):
    exp = {"kind": "heatmap", "grid": "g3", "threshold": 85.0}
    k = 0
    for panel, shift in (("S=1", 0.0), ("AdaScale S=16", -1.0), ("LSW S=16", -6.0)):
        for lr0 in (0.01, 0.1, 1.0):
            for decay in (1.0, 10.0, 100.0):
                status = "diverged" if panel == "LSW S=16" and lr0 == 1.0 and decay == 1.0 else "completed"
                val = 90 + shift - 3 * abs(math.log10(lr0) + 1) - 2 * abs(math.log10(decay) - 1)
                write_run(
                    tmp_path,
                    "cifar10",
                    "scaled" if "LSW" in panel else "adascale",
                    16,
                    k,
                    val=val,
                    status=status,
                    lr0=lr0,
                    decay=decay,
                    experiment={**exp, "panel": panel},
                    with_metrics=False,
                )
                k += 1
    res = quiet_load(tmp_path)
    pts = figures.heatmap_points(res.runs)
    assert len(pts) == 27 and pts["diverged"].sum() == 1
    figs = figures.heatmaps(res, tmp_path / "out")
    assert len(figs) == 1 and figs[0].path.read_bytes().startswith(PNG)
    assert "S=1, AdaScale S=16, LSW S=16" in figs[0].caption
    assert "Red line: the threshold 85, between the cells that reach it" in figs[0].caption
    assert figures.sweep(res, tmp_path / "out") == []  # no sweep runs: no sweep figure, no crash


def test_heatmap_with_one_lr_has_its_one_tick_and_no_threshold_without_a_line(tmp_path):
    """The smoke's 1 × 2 grid: lr 0.05 only; the threshold 90 is above every point (no line drawn)."""
    exp = {"kind": "heatmap", "grid": "one", "threshold": 90.0, "panel": "S=1"}
    for k, decay in enumerate((0.01, 1.0)):
        write_run(tmp_path, "cifar10", "adascale", 1, k, val=80 + k, lr0=0.05, decay=decay, experiment=exp)
    (fig,) = figures.heatmaps(quiet_load(tmp_path), tmp_path / "out")
    assert "Threshold 90: no line" in fig.caption and "Red line" not in fig.caption
    ax = heatmap.plt.figure().add_subplot()
    heatmap._log_ticks(ax, np.log10([0.05, 0.05]), "x")
    ax.figure.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.05"]  # not invented ticks like 0.0501
    heatmap.plt.close(ax.figure)


def test_sweep_figure_renders(tmp_path):
    k = 0
    for method, base in (("fixed", 4.0), ("linear", 3.0), ("adascale", 2.0)):
        for batch in (32, 128, 512, 2048):
            reached = not (method == "fixed" and batch >= 512)
            write_run(
                tmp_path,
                "logreg",
                "adascale" if method == "adascale" else "identity",
                batch // 32,
                k,
                metric="loss",
                batch_size=32,
                with_metrics=False,
                experiment={"kind": "sweep", "batch": batch, "method": method, "target": 0.3},
                summary_extra={
                    "target_epochs": base * (1 + batch / 256) if reached else None,
                    "noise_scale": 300.0 + batch if method == "adascale" else None,
                    "epochs": base * (1 + batch / 256) if reached else 80.0,
                },
            )
            k += 1
    res = quiet_load(tmp_path)
    table = sweep_table(res)
    assert len(table) == 12 and (~table["reached"]).sum() == 2
    figs = figures.sweep(res, tmp_path / "out")
    assert len(figs) == 1 and figs[0].path.read_bytes().startswith(PNG)
    assert "recorded a noise scale" not in figs[0].caption  # the B_simple line is drawn
    report = build_report(tmp_path, ["csv", "html"])
    assert (report.parent / "sweep_logreg.png").exists()
    csv = pd.read_csv(report.parent / "sweep.csv")
    assert {"batch", "method", "epochs_to_target"} <= set(csv.columns)
    assert np.isnan(csv.loc[(csv.method == "fixed") & (csv.batch == 2048), "epochs_to_target"]).all()


def test_report_is_self_contained_with_curves_and_elastic(tmp_path):
    for scale in (1, 4, "elastic-up", "elastic-down"):
        seeds(tmp_path, "cifar10", "adascale", scale, [90.0, 90.2])
    report = build_report(tmp_path, ["html"])
    html = report.read_text()
    names = sorted(p.name for p in report.parent.glob("*.png"))
    assert names == [
        "curves_cifar10_tiny_adascale.png",
        "elastic_cifar10_tiny_adascale.png",
        "speedup_cifar10.png",
        "table2_efficiency.png",  # cifar10 is in the paper's Table 2: its cells beside ours
    ]
    srcs = re.findall(r'src="([^"]*)"', html)
    assert len(srcs) == 4 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', html))
    assert "<link" not in html and "<script" not in html and "url(" not in html


@pytest.mark.latex
def test_latex_fragment_compiles(na_folder, tmp_path):
    assert shutil.which("pdflatex"), "needs pdflatex: apt install texlive-latex-base texlive-latex-recommended"
    (tmp_path / "t.tex").write_text(latex(cells(quiet_load(na_folder).runs), std=True))
    doc = "\\documentclass{article}\\usepackage{booktabs}\\usepackage[table]{xcolor}\\begin{document}"
    (tmp_path / "doc.tex").write_text(doc + "\\input{t.tex}\\end{document}\n")
    run = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path, capture_output=True
    )
    assert run.returncode == 0, run.stdout.decode(errors="replace")[-2000:]


def test_std_cells_and_command_line(na_folder, capsys):
    from reports.build import main

    assert main([str(na_folder), "--format", "md", "--std"]) == 0
    assert capsys.readouterr().out.strip().endswith("table2.md")
    md = (na_folder / "report" / "table2.md").read_text()
    assert "90.00 ± 0.50" in md and "60.00 ± 1.00†" in md


def test_a_sweep_point_counts_as_reached_only_when_every_seed_reached_it(tmp_path):
    for seed, epochs in ((0, 3.0), (1, None)):
        write_run(
            tmp_path,
            "logreg",
            "identity",
            1,
            seed,
            metric="loss",
            batch_size=32,
            with_metrics=False,
            experiment={"kind": "sweep", "batch": 64, "method": "linear", "target": 0.3},
            summary_extra={"target_epochs": epochs, "epochs": 3.0 if epochs else 80.0},
        )
    table = sweep_table(quiet_load(tmp_path))
    assert len(table) == 1 and not table["reached"].iloc[0] and np.isnan(table["epochs_to_target"].iloc[0])
    assert table["n_seeds"].iloc[0] == 2


def test_heatmap_panels_on_their_own_lr_axes_with_T_in_titles(tmp_path, monkeypatch):
    exp = {"kind": "heatmap", "grid": "g", "threshold": 60.0}
    k = 0
    for panel, method, lr0s in (("S=1", "identity", (0.01, 0.1, 1.0)), ("scaled SGD S=16", "scaled", (0.1, 1, 10))):
        for lr0 in lr0s:
            for decay in (0.01, 0.1, 1.0):
                write_run(
                    tmp_path,
                    "cifar10",
                    method,
                    1 if method == "identity" else 16,
                    k,
                    val=50 + 10 * math.log10(lr0 * 100) + 5 * math.log10(decay * 100),
                    lr0=lr0,
                    decay=decay,
                    iterations=40 if method == "identity" else 7,
                    experiment={**exp, "panel": panel},
                    with_metrics=False,
                )
                k += 1
    captured = {}
    real_save = heatmap._save

    def spy(fig, path):
        captured["axes"] = [(ax.get_title(), ax.get_xlim()) for ax in fig.axes if ax.get_title()]
        return real_save(fig, path)

    monkeypatch.setattr(heatmap, "_save", spy)
    figs = figures.heatmaps(quiet_load(tmp_path), tmp_path / "out")
    assert len(figs) == 1 and "its own lr axis" in figs[0].caption
    (t1, x1), (t2, x2) = captured["axes"]
    assert "T = 40" in t1 and "T = 7" in t2  # each panel's mean iterations
    assert x1 == pytest.approx((-2.5, 0.5)) and x2 == pytest.approx((-1.5, 1.5))  # log10 lr, cell edges: own axes


def test_curves_draw_mean_and_band_over_seeds():
    a = pd.DataFrame({"tau": [0.0, 1.0, 2.0], "loss": [3.0, 2.0, 1.0]})
    b = pd.DataFrame({"tau": [0.0, 1.0, 2.0], "loss": [1.0, 2.0, 3.0]})
    band = figures.band([a, b], "loss", n=3)
    assert band["mean"].tolist() == [2.0, 2.0, 2.0]
    assert band["lo"].tolist() == [1.0, 2.0, 1.0] and band["hi"].tolist() == [3.0, 2.0, 3.0]
    short = pd.DataFrame({"tau": [0.0, 1.0], "loss": [5.0, 5.0]})  # a seed that stopped early
    band = figures.band([a, short], "loss", n=3)  # only where both seeds have a value: τ ≤ 1
    assert band["tau"].tolist() == [0.0, 0.5, 1.0] and band["mean"].tolist() == [4.0, 3.75, 3.5]
    assert (band["n"] == 2).all()


def test_evaluations_are_averaged_by_index_only_where_every_seed_has_one():
    """The reviewer's case: a seed's last evaluation alone at τ = 500 made a jump 91.67 → 93.2."""
    a = pd.DataFrame({"tau": [100.0, 300.0, 500.0], "metric": [80.0, 90.0, 93.2]})
    b = pd.DataFrame({"tau": [110.0, 290.0], "metric": [82.0, 91.0]})
    band = figures.eval_band([a, b])
    assert band["tau"].tolist() == [105.0, 295.0] and band["mean"].tolist() == [81.0, 90.5]
    assert band["lo"].tolist() == [80.0, 90.0] and band["hi"].tolist() == [82.0, 91.0]


def test_gain_figure_renders_online_against_offline(tmp_path):
    run = write_run(tmp_path, "logreg", "adascale", 8, 0, metric="loss", experiment={"kind": "gain"})
    write_run(tmp_path, "cifar10", "adascale", 8, 0)  # no offline_gain.csv: no panel
    (run / "offline_gain.csv").write_text(
        "iteration,tau,offline_gain,gain_lo,gain_hi,var,sqr,batches,scale\n"
        "5,32.0,5.5,5.0,6.0,0.1,0.01,256,8\n10,64.0,6.8,6.5,7.0,0.1,0.004,256,8\n"
    )
    res = quiet_load(tmp_path)
    figs = figures.gain(res, tmp_path / "out")
    assert len(figs) == 1 and figs[0].title == "1 run(s)"
    # online gain at iterations 5 and 10 of write_run: 1 + 7(1 − e^{−i/5}) = 5.42, 7.05; the second outside
    assert "with its 95 % delete-one-group jackknife interval" in figs[0].caption
    assert "logreg seed 0: online − offline: mean +0.09, 1 of 2 outside the offline 95 % interval" in figs[0].caption
    assert figs[0].path.read_bytes()[:8] == PNG
    html = build_report(tmp_path, ["html"]).read_text()
    assert "figure2_gain_online_offline.png" not in html and "paper Figure 2" in html  # a caption, not a file
    (run / "offline_gain.csv").write_text("not,a,gain,table\n")  # unusable: no panel, a warning
    res = quiet_load(tmp_path)
    with pytest.warns(ReportWarning, match="offline_gain.csv"):
        assert figures.gain(res, tmp_path / "out") == []
    assert any("offline_gain.csv" in w for w in res.warnings)


def test_the_shared_scale_one_run_fills_the_columns_of_the_rules_identity_there(tmp_path):
    """At S = 1 a matrix runs adascale once for every Table 2 rule that is identity scaling there (the method
    table's identity_at_s1): its value shows in each such rule's column, and not in LEGW's (a warm-up at S = 1)."""
    write_run(tmp_path, "cifar10", "adascale", 1, 0, val=93.5, loss=0.25, iterations=100)
    rules = [m for m, row in METHODS.items() if row.table2 and "sgd" in row.optimizers]  # SGD's S = 1 run
    for method in rules:
        write_run(tmp_path, "cifar10", method, 4, 0, val=90.0, loss=0.3, iterations=25)
    c = cells(quiet_load(tmp_path).runs)
    shared = [m for m in rules if METHODS[m].identity_at_s1]
    assert "legw" in rules and "legw" not in shared and "sqrt" in shared
    for method in shared:
        row = cell(c, "cifar10", "1", method)
        assert (row["val_metric"], row["train_loss"], row["iterations"]) == (93.5, 0.25, 100)
    assert c[(c["scale"] == "1") & (c["method"] == "legw")].empty
    md = markdown(c).splitlines()
    header = next(ln for ln in md if ln.startswith("| S |"))
    assert header.count(" iterations ") == len(rules)  # a column per rule with runs
    row = next(ln for ln in md if ln.startswith("| 1 |"))
    assert (
        row.count("93.50") == len(shared) and row.count("0.2500") == len(shared) and row.count(" 100 ") == len(shared)
    )


def test_table2_notes_give_adascales_noise_scale(tmp_path):
    write_run(tmp_path, "cifar10", "adascale", 1, 0)
    for seed, noise in enumerate((300.0, 500.0)):  # from metrics.jsonl: these runs' summaries have no B_simple
        write_run(tmp_path, "cifar10", "adascale", 8, seed, b_simple=noise, T1=100)
    res = quiet_load(tmp_path)
    fill_noise(res)
    c = cells(res.runs)
    assert cell(c, "cifar10", "8", "adascale")["B_simple"] == pytest.approx(400.0)  # the training average
    assert cell(c, "cifar10", "8", "adascale")["B_late"] == pytest.approx(400.0)
    assert "drawing without replacement), in examples: S = 8 400 → 400 (n=2)." in markdown(c)
    assert r"S = 8 400 $\rightarrow$ 400 (n=2)" in latex(c) and r"of $\tau$" in latex(c)


def test_the_transformers_absolute_comparison_uses_bleu_tok(tmp_path):
    """The paper's ~27 BLEU is tokenised BLEU: ours is eval.bleu_tok there, not Table 2's detokenised bleu."""
    for seed, (bleu, tok) in enumerate(((25.0, 26.0), (25.4, 26.6))):
        extra = {"eval": {"bleu": bleu, "bleu_tok": tok}}
        write_run(
            tmp_path, "transformer", "adascale", 1, seed, val=bleu, metric="bleu", preset="paper", summary_extra=extra
        )
    res = quiet_load(tmp_path)
    comp = compare(cells(res.runs), load_paper(), res.runs)
    row = comp[(comp["scale"] == "1") & (comp["method"] == "adascale")].iloc[0]
    assert row["metric_key"] == "bleu_tok" and row["metric_ours"] == pytest.approx(26.3)
    assert row["metric_diff"] == pytest.approx(26.3 - 27.2)
    assert cells(res.runs)["val_metric"].iloc[0] == pytest.approx(25.2)  # Table 2 keeps bleu


def test_the_sweep_line_is_the_training_average_b_simple_else_the_final_noise_scale():
    from reports.speed.sweep import noise_scales

    g = pd.DataFrame(
        {
            "sweep_method": ["adascale", "adascale", "linear"],
            "method": ["adascale", "adascale", "lsw"],
            "noise_scale": [900.0, 800.0, 5.0],
            "B_simple": [400.0, math.nan, math.nan],
        }
    )
    assert noise_scales(g).tolist() == [400.0, 800.0]  # an old run keeps its summary's noise_scale
