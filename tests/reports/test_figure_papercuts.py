"""Figures that hid their own data: the sweep's legend sat over the fixed-lr line, and the elastic panel drew
elastic-down exactly over elastic-up where AdaScale makes the curves coincide (the metric against τ)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from reports import figures
from reports.figures import batch_sweep, elastic_scaling

from .test_reports import quiet_load, seeds, write_run


def _spy(module, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The figures a module saves, by file name, drawn (so that their artists have their extents)."""
    seen = {}
    real = module._save

    def spy(fig, path):
        fig.canvas.draw()
        seen[path.name] = fig
        return real(fig, path)

    monkeypatch.setattr(module, "_save", spy)
    return seen


def test_the_sweep_legend_sits_beside_the_axes_over_no_line(tmp_path: Path, monkeypatch) -> None:
    k = 0
    for method, base in (("fixed", 4.0), ("linear", 3.0), ("adascale", 2.0)):
        for batch in (32, 128, 512, 2048):
            write_run(
                tmp_path, "logreg", "adascale" if method == "adascale" else "identity", batch // 32, k,
                metric="loss", batch_size=32, with_metrics=False,
                experiment={"kind": "sweep", "batch": batch, "method": method, "target": 0.3},
                summary_extra={"target_epochs": base * (1 + batch / 256), "epochs": base * (1 + batch / 256),
                               "noise_scale": 300.0 + batch if method == "adascale" else None},
            )  # fmt: skip
            k += 1
    seen = _spy(batch_sweep, monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no metrics files: the sweep reads its summaries
        figures.sweep(quiet_load(tmp_path), tmp_path / "out")
    fig = seen["sweep_logreg.png"]
    (ax,) = fig.axes
    assert ax.get_legend() is None and len(fig.legends) == 1
    legend, box = fig.legends[0].get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= box.x1  # right of the axes: it covers no line
    assert "fixed lr" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_elastic_up_is_drawn_dashed_over_elastic_down_and_the_fixed_runs_thin_on_top(
    tmp_path: Path, monkeypatch
) -> None:
    for scale in (1, 4, "elastic-up", "elastic-down"):
        seeds(tmp_path, "cifar10", "adascale", scale, [90.0, 90.2])
    seen = _spy(elastic_scaling, monkeypatch)
    figures.elastic(quiet_load(tmp_path), tmp_path / "out")
    metric = seen["elastic_cifar10_tiny_adascale.png"].axes[3]
    lines = {ln.get_label().split(" (")[0]: ln for ln in metric.get_lines()}
    up, down, fixed = lines["elastic-up"], lines["elastic-down"], lines["S=4"]
    assert up.get_xydata().tolist() == down.get_xydata().tolist()  # the same curve: one would hide the other …
    assert up.get_linestyle() == "--" and up.get_zorder() > down.get_zorder()  # … but up is dashed, over it
    assert down.get_linewidth() > up.get_linewidth() > fixed.get_linewidth()  # down shows around it
    assert fixed.get_zorder() > up.get_zorder() and fixed.get_marker() in (None, "None", "")


def test_elastic_up_alone_is_solid(tmp_path: Path, monkeypatch) -> None:
    for scale in (1, "elastic-up"):
        seeds(tmp_path, "cifar10", "adascale", scale, [90.0, 90.2])
    seen = _spy(elastic_scaling, monkeypatch)
    figures.elastic(quiet_load(tmp_path), tmp_path / "out")
    metric = seen["elastic_cifar10_tiny_adascale.png"].axes[3]
    up = next(ln for ln in metric.get_lines() if ln.get_label().startswith("elastic-up"))
    assert up.get_linestyle() == "-"  # nothing beneath it to show through
