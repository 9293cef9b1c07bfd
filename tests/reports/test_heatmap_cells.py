"""The heat map is drawn as the paper's Figure 5 is: a cell per grid point coloured by that point's value
(no surface interpolated between points), the threshold along cell edges, diverged points marked ×."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import LineCollection, PathCollection, QuadMesh
from matplotlib.contour import ContourSet

from reports import figures
from reports.figures import heatmap

from .test_reports import quiet_load, write_run

LR0 = (0.02, 0.05, 0.1)  # not evenly spaced in log10: a cell's value is not at its centre
DECAY = (0.01, 0.1, 1.0)


def value(lr0: float, decay: float) -> float:
    return 80 + 10 * math.log10(lr0 / 0.02) + 5 * math.log10(decay / 0.01)


@pytest.fixture
def drawn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    exp = {"kind": "heatmap", "grid": "g", "threshold": 90.0, "panel": "S=1"}
    for k, (lr0, decay) in enumerate((a, b) for a in LR0 for b in DECAY):
        status = "diverged" if (lr0, decay) == (0.1, 0.01) else "completed"
        write_run(
            tmp_path, "cifar10", "adascale", 1, k, val=value(lr0, decay), status=status, lr0=lr0, decay=decay,
            experiment=exp, with_metrics=False,
        )  # fmt: skip
    seen: dict = {}
    real = heatmap._save

    def spy(fig, path):
        (ax,) = [a for a in fig.axes if a.get_title()]
        seen.update(ax=ax, ticks=[t.get_text() for t in ax.get_xticklabels()], caption=None)
        seen["collections"] = list(ax.collections)
        return real(fig, path)

    monkeypatch.setattr(heatmap, "_save", spy)
    (fig,) = figures.heatmaps(quiet_load(tmp_path), tmp_path / "out")
    seen["caption"] = fig.caption
    return seen


def test_each_grid_point_is_one_cell_of_its_own_value(drawn: dict) -> None:
    kinds = {type(c) for c in drawn["collections"]}
    assert QuadMesh in kinds and not any(issubclass(k, ContourSet) for k in kinds)  # cells, no contour fill
    (mesh,) = [c for c in drawn["collections"] if isinstance(c, QuadMesh)]
    z = np.asarray(mesh.get_array()).reshape(len(DECAY), len(LR0))
    worst = min(value(a, b) for a in LR0 for b in DECAY if (a, b) != (0.1, 0.01))
    for i, lr0 in enumerate(LR0):
        for j, decay in enumerate(DECAY):
            expected = worst if (lr0, decay) == (0.1, 0.01) else value(lr0, decay)  # diverged: the worst colour
            assert z[j, i] == pytest.approx(expected)
    marks, best = [c for c in drawn["collections"] if isinstance(c, PathCollection)]
    assert np.allclose(marks.get_offsets(), [[-1.0, -2.0]])  # the × at the diverged point's own lr and decay
    assert np.allclose(best.get_offsets(), [[-1.0, 0.0]])  # the ★ at the best cell (lr 0.1, decay 1), not a diverged
    assert drawn["ticks"] == ["0.02", "0.05", "0.1"]  # the grid's values, not the cells' centres


def test_the_threshold_runs_along_cell_edges(drawn: dict) -> None:
    (lines,) = [c for c in drawn["collections"] if isinstance(c, LineCollection)]
    edges_x = heatmap.edges(np.log10(LR0))
    edges_y = heatmap.edges(np.log10(DECAY))
    for seg in lines.get_segments():
        (x0, y0), (x1, y1) = seg
        assert (x0 == x1 and np.isclose(edges_x, x0).any()) or (y0 == y1 and np.isclose(edges_y, y0).any())
    # reaching 90 (rows: decay 0.01, 0.1, 1; columns: lr 0.02, 0.05, 0.1): F F F(diverged) / F F T / T T T;
    # neighbours on both sides: one edge inside the middle row, and three between rows (one per column)
    assert len(lines.get_segments()) == 4
    assert "between the cells that reach it" in drawn["caption"]


def test_threshold_edges_separate_reached_from_not() -> None:
    xe, ye = np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0])
    z = np.array([[1.0, 3.0]])
    assert heatmap.threshold_edges(xe, ye, z, np.zeros_like(z, bool), lambda v: v >= 2) == [[(1.0, 0.0), (1.0, 1.0)]]
    assert heatmap.threshold_edges(xe, ye, z, np.zeros_like(z, bool), lambda v: v >= 0) == []  # both reach it
    diverged = np.array([[False, True]])  # a diverged cell never reaches it
    assert heatmap.threshold_edges(xe, ye, np.array([[3.0, 3.0]]), diverged, lambda v: v >= 2) == [
        [(1.0, 0.0), (1.0, 1.0)]
    ]
    assert heatmap.threshold_edges(xe, ye, np.array([[3.0, np.nan]]), diverged, lambda v: v >= 2) == []  # no run
