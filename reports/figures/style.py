"""What every figure shares: the house style, the `Figure` record, file names built from run fields, saving
a PNG, and small axis helpers (thinning, log axes with plain tick labels)."""

from __future__ import annotations

import hashlib
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.ticker import FuncFormatter

from bench.core import safefs

STYLE = {
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "xtick.labelsize": 11,
    "ytick.labelsize": 11,
    "legend.fontsize": 12,  # ≥ 9 px on a 1 280 px page, where a 20-inch figure is drawn at ~0.6 of its pixels
    "figure.titlesize": 15,
    "axes.titley": 1.0,  # not None ("auto"): no tick sits above an axes, and auto asked every axis for its extent
    "axes.grid": True,
    "grid.alpha": 0.3,
    "savefig.dpi": 100,
}
MAX_POINTS = 3000  # training records drawn per line (evenly thinned)


@dataclass
class Figure:
    kind: str
    title: str
    path: Path
    caption: str = ""
    variant: str = ""  # the overrides its variant stands for (the title shows its short name; reports.rundata.variants)


SLUG_MAX = 120  # a file name's part built from run fields: a hand-edited 10 000-character task name stays a name


def _slug(*parts: object) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.+-]+", "_", "_".join(str(p) for p in parts if p not in (None, ""))).strip("_")
    if len(slug) <= SLUG_MAX:
        return slug
    return f"{slug[: SLUG_MAX - 13]}_{hashlib.sha256(slug.encode()).hexdigest()[:12]}"


def _save(fig: plt.Figure, path: Path) -> Path:
    """PNG at 100 dpi, drawn into memory and placed by bench.core.safefs (atomic, no link followed): matplotlib
    opening the path itself would write through a link a colleague planted at it. Every figure is laid out
    by constrained_layout, which already keeps its contents inside the canvas: no bbox_inches="tight",
    which draws the whole figure a second time to measure it."""
    try:
        data = png_bytes(fig)
    finally:
        plt.close(fig)
    safefs.write_bytes(path, data)
    return path


def png_bytes(fig: plt.Figure) -> bytes:
    """The figure as PNG at 100 dpi on white, drawn once. `savefig` lays a constrained layout out in a whole
    draw of its own (with rendering switched off) before the draw it keeps: 14 % of the paper fake's drawing
    CPU. The Agg canvas's own print_png lays it out at the start of its one draw, as the first of those two
    does: the same bytes (tests/reports/test_drawn_once.py). The layout itself is about half of what is left."""
    fig.set_dpi(100)
    fig.patch.set_facecolor("white")
    buf = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buf)
    return buf.getvalue()


def _thin(df: pd.DataFrame) -> pd.DataFrame:
    return df if len(df) <= MAX_POINTS else df.iloc[thin_index(len(df))]


def thin_index(n: int) -> np.ndarray:
    """The rows a line of n records is drawn with: every one up to MAX_POINTS, else every ⌈n/MAX_POINTS⌉-th
    and the last (which may be picked twice)."""
    if n <= MAX_POINTS:
        return np.arange(n)
    return np.append(np.arange(0, n, math.ceil(n / MAX_POINTS)), n - 1)


def _finite(s: pd.Series) -> np.ndarray:
    x = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
    return x[np.isfinite(x)]


def _scale_colors(scales: list[str]) -> dict[str, tuple]:
    cmap = plt.get_cmap("viridis")
    n = max(len(scales) - 1, 1)
    return {s: cmap(0.9 * i / n) for i, s in enumerate(scales)}


def _plot_series(ax, df: pd.DataFrame, y: str, **kw) -> bool:
    if df.empty or "tau" not in df or y not in df:
        return False
    d = df[["tau", y]].apply(pd.to_numeric, errors="coerce").dropna()
    if d.empty:
        return False
    ax.plot(d["tau"], d[y], **kw)
    return True


def _log_if_positive(ax, axis: str = "y") -> None:
    lines = ax.get_lines()
    vals = np.concatenate([np.asarray(ln.get_ydata(), float) for ln in lines]) if lines else np.array([])
    vals = vals[np.isfinite(vals)]
    if len(vals) and (vals > 0).all():
        ax.set_yscale("log")
        _plain_log(ax, "y", vals)


def _plain_log(ax, axis: str, vals: np.ndarray) -> None:
    """Log-axis tick labels as plain numbers (20, not 2×10¹); minor ticks labelled too over a short range."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    target.set_major_formatter(plain)
    vals = np.asarray(vals, float)
    vals = vals[np.isfinite(vals) & (vals > 0)]
    span = vals.max() / vals.min() if len(vals) else math.inf
    keep = (2, 3, 4, 5, 6, 7) if span < 10 else (2, 3, 5) if span < 100 else (2, 5) if span < 1000 else ()

    def minor(v: float, _: object) -> str:  # label minor ticks over short ranges, where majors are few
        if v <= 0:
            return ""
        mantissa = round(v / 10 ** math.floor(math.log10(v) + 1e-9))
        return f"{v:g}" if mantissa in keep else ""

    target.set_minor_formatter(FuncFormatter(minor))
