"""The speed-up figure shows AdaScale where LSW+ coincides with it (LSW+ runs AdaScale's iterations, so
their speed-ups are one line): LSW+ wide and pale underneath, AdaScale drawn over it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from reports.figures import speedup

from .test_reports import quiet_load, write_run


def test_adascale_is_drawn_over_the_lsw_plus_line_it_coincides_with(tmp_path: Path, monkeypatch) -> None:
    for method, scale, its in (("adascale", 1, 100), ("adascale", 4, 40), ("lsw+", 4, 40)):
        write_run(tmp_path, "cifar10", method, scale, 0, iterations=its, T1=100)
    seen = {}
    real = speedup._save

    def spy(fig, path):
        ax = fig.axes[0]
        seen.update({ln.get_label(): ln for ln in ax.get_lines()})
        return real(fig, path)

    monkeypatch.setattr(speedup, "_save", spy)
    (fig,) = speedup.speedup_figures(quiet_load(tmp_path), tmp_path / "out")
    ada = seen["AdaScale"]
    plus = next(ln for label, ln in seen.items() if label.startswith("LSW+"))
    assert np.allclose(ada.get_ydata(), plus.get_ydata())  # the same speed-ups: one line over the other
    assert ada.get_zorder() > plus.get_zorder()  # AdaScale on top …
    assert plus.get_linewidth() > 2 * ada.get_linewidth() and plus.get_markersize() > ada.get_markersize()
    assert plus.get_alpha() == pytest.approx(0.45)  # … of a wide, pale LSW+ that shows around it
    paper = {label: ln for label, ln in seen.items() if label.startswith("paper") and "cifar10" in label}
    assert paper["paper AdaScale, cifar10"].get_zorder() > paper["paper LSW+, cifar10"].get_zorder()
    assert "drawn wide and pale under AdaScale" in fig.caption


def test_a_rule_is_drawn_pale_only_where_it_coincides_with_one_drawn_over_it() -> None:
    """LSW+ on AdaScale's points is drawn wide and pale beneath; LSW, off them but for S = 1 (where every rule
    is at 1), is drawn plainly."""
    import pandas as pd

    from reports.figures.speedup import _covered

    ada = pd.DataFrame({"scale": [1.0, 4.0, 8.0], "speedup": [1.0, 3.0, 4.7]})
    assert _covered(pd.DataFrame({"scale": [1.0, 4.0, 8.0], "speedup": [1.0, 3.02, 4.71]}), ada)
    assert not _covered(pd.DataFrame({"scale": [1.0, 4.0, 8.0], "speedup": [1.0, 4.0, 8.0]}), ada)
