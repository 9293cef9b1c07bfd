"""Work a report used to do twice: Table 2's cells (the tables and the Table 2 figure both need them) and each
figure's drawing (savefig lays a constrained layout out in a whole draw of its own)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.figure import Figure as MplFigure

from reports.figures.style import png_bytes  # (reports.figures selects the Agg backend)
from reports.rundata.collect import load
from reports.rundata.fakeruns import write_run
from reports.tables import table2


def _figure() -> MplFigure:
    fig, grid = plt.subplots(1, 2, figsize=(8, 3), constrained_layout=True)
    for ax in grid:
        ax.plot([1, 10, 100], [3, 1, 2], label="a line")
        ax.set_yscale("log")
        ax.set_title("a title that needs room")
    fig.legend(*grid[0].get_legend_handles_labels(), loc="outside right center")
    return fig


def test_a_figure_is_drawn_once_into_the_bytes_savefig_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    draws: list[int] = []
    real = MplFigure.draw
    monkeypatch.setattr(MplFigure, "draw", lambda self, renderer: (draws.append(1), real(self, renderer))[1])
    fig = _figure()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, facecolor="white")
    plt.close(fig)
    assert len(draws) == 2  # savefig: the layout's draw, then the one it keeps
    draws.clear()
    fig = _figure()
    got = png_bytes(fig)
    plt.close(fig)
    assert len(draws) == 1
    assert got == buf.getvalue()  # the same layout, the same pixels, the same file


def test_table2_cells_are_computed_once_per_runs_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for scale in (1, 2, 4):
        write_run(tmp_path, "cifar10", "adascale", scale, 0, 200)
    res = load(tmp_path)
    calls: list[int] = []
    real = table2.cells
    monkeypatch.setattr(table2, "cells", lambda df: (calls.append(1), real(df))[1])
    first = table2.cells_of(res)
    first.loc[:, "task"] = "changed by a caller"  # a copy: the next caller does not see it
    second = table2.cells_of(res)
    assert len(calls) == 1
    pd.testing.assert_frame_equal(second, real(res.runs))
    res.runs = res.runs.iloc[:-1]  # another frame: computed again, from it
    third = table2.cells_of(res)
    assert len(calls) == 2 and len(third) != len(second)
