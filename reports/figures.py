"""The report's figures (matplotlib, Agg backend, PNG), each drawn from the run files only.

Kinds (each function returns the figures it wrote; no data -> an empty list, never an exception):
- `heatmaps`: per heat-map grid, the panels of the paper's Figure 5 side by side (S=1, AdaScale S=16,
  LSW S=16, scaled SGD S=16; whichever exist): filled contours of the validation metric over initial lr
  × total decrease (both log scale), one shared colour scale, grid points marked, the threshold as a
  red contour line, each panel's T (mean iterations) in its title; each panel on its own lr axis when
  the grids differ (scaled SGD searches its own). Diverged points are marked × and take the worst colour.
- `curves`: per task and method, validation metric, training loss (smoothed), lr and gain against τ, per
  scale the mean over seeds with a min–max band: AdaScale's gain starts near 1 and rises — its emergent
  warm-up.
- `elastic`: per task and method, scale, gain, lr and metric against τ for the elastic-up/down runs,
  with the fixed-scale runs as thin dashed lines.
- `gain`: the paper's Figure 2, one panel per run folder that has offline_gain.csv (`adascale-bench
  gain`): the online gain of metrics.jsonl against τ, and the offline estimates at the kept checkpoints.
- `sweep`: per task, data epochs to reach the target against global batch (log–log), one line per
  method; points not reached (by every finished seed) are open markers at the epoch cap; the gradient
  noise scale (median over the sweep's AdaScale runs) is a vertical line: the critical-batch estimate.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import multiprocessing
import re
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib import colors as mcolors  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from bench.algo.rules import title  # noqa: E402
from bench.files import METRICS, OFFLINE_GAIN, atomic_write_bytes  # noqa: E402

from .collect import Results, scale_order, task_info  # noqa: E402
from .findings import WARMUP_RISE, WARMUP_START, WARMUP_WINDOW, run_warmups  # noqa: E402
from .noise import COLUMN, PER_EPOCH, numeric, trajectory  # noqa: E402
from .sweep import SWEEP_METHODS, noise_scales, sweep_points, sweep_runs  # noqa: E402
from .table2 import table_runs  # noqa: E402

STYLE = {
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "xtick.labelsize": 11,
    "ytick.labelsize": 11,
    "legend.fontsize": 10,
    "figure.titlesize": 15,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "savefig.dpi": 100,
}
PANELS = ("S=1", "AdaScale S=16", "LSW S=16", "scaled SGD S=16")
SWEEP_COLORS = {"fixed": "tab:gray", "linear": "tab:orange", "adascale": "tab:blue"}
MAX_POINTS = 3000  # training records drawn per line (evenly thinned)


@dataclass
class Figure:
    kind: str
    title: str
    path: Path
    caption: str = ""


SLUG_MAX = 120  # a file name's part built from run fields: a hand-edited 10 000-character task name stays a name


def _slug(*parts: object) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.+-]+", "_", "_".join(str(p) for p in parts if p not in (None, ""))).strip("_")
    if len(slug) <= SLUG_MAX:
        return slug
    return f"{slug[: SLUG_MAX - 13]}_{hashlib.sha256(slug.encode()).hexdigest()[:12]}"


def _save(fig: plt.Figure, path: Path) -> Path:
    """PNG at 100 dpi. Every figure is laid out by constrained_layout, which already keeps its contents
    inside the canvas: no bbox_inches="tight", which draws the whole figure a second time to measure it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, facecolor="white")
    plt.close(fig)
    return path


def _code() -> str:
    """The identity of the code a figure and its caption come from: the sources of reports/, the method
    table and gain formulas (bench/algo/) and the task cards (tasks/presets/), and matplotlib's version."""
    h = hashlib.sha256(matplotlib.__version__.encode())
    root = Path(__file__).resolve().parent.parent
    for folder in ("reports", "bench/algo", "tasks/presets"):
        for src in sorted((root / folder).glob("*.py")):
            h.update(src.name.encode() + b"\0" + src.read_bytes())
    return h.hexdigest()


# A figure is drawn again when its data or this code changes.
CODE = _code()
INDEX_VERSION = 1


def digest(obj: object) -> str:
    """A content hash of a figure's plan: plain data (dicts, lists, tuples, strings, numbers, None, numpy
    arrays) fed in a canonical form, with the drawing code's hash."""
    h = hashlib.sha256(CODE.encode())

    def feed(o: object) -> None:
        if isinstance(o, np.ndarray):
            a = np.ascontiguousarray(o)
            h.update(f"a{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        elif isinstance(o, dict):
            h.update(f"d{len(o)}".encode())
            for k, v in o.items():  # in order: a plan's order is part of its drawing
                feed(k)
                feed(v)
        elif isinstance(o, list | tuple):
            h.update(f"l{len(o)}".encode())
            for v in o:
                feed(v)
        elif o is None or isinstance(o, str | bool | int | float | np.generic):
            h.update(f"{type(o).__name__}:{o!r};".encode())
        else:
            raise TypeError(f"not plain data: {type(o).__name__}")

    feed(obj)
    return h.hexdigest()


def _draw_job(job: tuple) -> str | None:
    """Draw one figure (in a worker process or here); the error as one line, or None."""
    draw, plan, path = job
    try:
        draw(plan, path)
    except Exception as e:  # one figure failing must not cost the others
        plt.close("all")
        return f"{type(e).__name__}: {e}"
    return None


class Renderer:
    """Where figures are drawn. Outside a report build (the default): at once. Inside `rendering` (what
    `report` uses): handed to parallel processes as they come (collected by `flush`), and skipped for a
    figure whose PNG on disk was drawn from the same plan by the same code, per an index of content hashes
    (report/cache/figures.json, written atomically; a damaged index is ignored with a warning and every
    figure drawn again)."""

    def __init__(self, index_file: Path | None = None, workers: int = 1, warn=None) -> None:
        self.index_file, self.workers, self.warn = index_file, workers, warn or (lambda m: None)
        self.jobs: list[tuple] = []  # to draw here at flush (one worker, or no pool could start)
        self.running: list[tuple] = []  # (job, future) drawing in the pool while the build goes on
        self._pool: ProcessPoolExecutor | None = None
        self.keys: dict[str, str] = {}
        self.index = self._read_index() if index_file is not None else {}
        self.drawn = self.skipped = 0

    def _read_index(self) -> dict:
        try:
            index = json.loads(Path(self.index_file).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            self.warn(f"ignored damaged figure index {self.index_file} ({type(e).__name__}); figures drawn again")
            return {}
        figs = index.get("figures") if isinstance(index, dict) and index.get("version") == INDEX_VERSION else None
        if not isinstance(figs, dict):
            self.warn(f"ignored damaged figure index {self.index_file} (not a figure index); figures drawn again")
            return {}
        return figs

    def submit(self, draw, plan: object, path: Path, inputs: str | None = None, caption: str | None = None) -> Path:
        """Draw `plan` into `path` with `draw(plan, path)`, now or at `flush`; not at all when the PNG there
        was drawn from the same plan. `inputs` (a digest of what the plan was computed from) and the
        figure's `caption` are kept in the index, so that the next build can `reuse` the figure without
        computing its plan."""
        if self.index_file is None:
            draw(plan, path)
            return path
        key = digest((draw.__name__, plan))
        self.keys[str(path)] = {"digest": key, "inputs": inputs, "caption": caption}
        if self._current(path, "digest", key):
            self.skipped += 1
        else:
            self._start((draw, plan, path))
        return path

    def _start(self, job: tuple) -> None:
        """Hand `job` to the pool at once (forked at the first figure), so drawing overlaps the rest of the
        build; or keep it for flush, with one worker or where no pool can start."""
        if self.workers > 1 and self._pool is None:
            try:
                self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"))
            except Exception:  # no fork here: draw in this process
                self.workers = 1
        if self._pool is None:
            self.jobs.append(job)
            return
        try:
            self.running.append((job, self._pool.submit(_draw_job, job)))
        except Exception:  # a broken pool: the rest here
            self.jobs.append(job)

    def reuse(self, path: Path, inputs: str) -> str | None:
        """The caption of the figure at `path` when it was drawn from the same inputs (its PNG unchanged
        since), which then stays as it is; else None (compute the plan and `submit` it)."""
        if self.index_file is None or not self._current(path, "inputs", inputs):
            return None
        entry = self.index[path.name]
        if not isinstance(entry.get("caption"), str):
            return None
        self.keys[str(path)] = {k: entry.get(k) for k in ("digest", "inputs", "caption")}
        self.skipped += 1
        return entry["caption"]

    def _current(self, path: Path, field: str, key: str) -> bool:
        entry = self.index.get(path.name)
        if not isinstance(entry, dict) or entry.get(field) != key:
            return False
        try:
            st = path.stat()
        except OSError:
            return False
        return (entry.get("size"), entry.get("mtime_ns")) == (st.st_size, st.st_mtime_ns)

    def flush(self) -> dict[Path, str]:
        """Draw what was submitted; the figures that failed, with why. Then write the index."""
        jobs, self.jobs = self.jobs, []
        results = []
        for job, future in self.running:
            try:
                results.append((job, future.result()))
            except Exception:  # a worker died: draw it here
                results.append((job, _draw_job(job)))
        self.running = []
        self.close()
        results += [(job, _draw_job(job)) for job in jobs]
        failed = {job[2]: why for job, why in results if why}
        self.drawn += len(results) - len(failed)
        if self.index_file is not None:
            figs = {}
            for path_s, entry in self.keys.items():
                path = Path(path_s)
                if path in failed or not path.exists():
                    continue
                st = path.stat()
                figs[path.name] = entry | {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
            try:
                Path(self.index_file).parent.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(
                    Path(self.index_file), json.dumps({"version": INDEX_VERSION, "figures": figs}).encode()
                )
            except OSError:
                pass  # a read-only results folder: figures are drawn every time
        return failed

    def close(self) -> None:
        """Stop the pool (drawing that has not finished is abandoned: a build that failed before flush)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


_RENDERER = Renderer()


@contextlib.contextmanager
def rendering(index_file: Path, workers: int, warn=None):
    """Figures submitted inside are deferred, content-cached and drawn in parallel (Renderer); the caller
    flushes before it reads any PNG."""
    global _RENDERER
    old, _RENDERER = _RENDERER, Renderer(index_file, workers, warn)
    try:
        yield _RENDERER
    finally:
        _RENDERER.close()
        _RENDERER = old


def _thin(df: pd.DataFrame) -> pd.DataFrame:
    if len(df) <= MAX_POINTS:
        return df
    step = math.ceil(len(df) / MAX_POINTS)
    return pd.concat([df.iloc[::step], df.iloc[[-1]]])


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


# ------------------------------------------------------------------------------------------- curves


def band(series: list[pd.DataFrame], y: str, n: int = 200) -> pd.DataFrame:
    """Mean, min and max over seeds of one quantity against τ: each seed interpolated onto a common τ grid
    that spans only the range every seed covers — a mean is never one seed's value where the others have
    stopped (or not started)."""
    parts = []
    for df in series:
        if df.empty or "tau" not in df or y not in df:
            continue
        d = numeric(df[["tau", y]]).dropna()
        d = d if d["tau"].is_monotonic_increasing else d.sort_values("tau")  # sorted already: the same frame
        d = d.drop_duplicates("tau", keep="last")
        if len(d):
            parts.append(d)
    if not parts:
        return pd.DataFrame(columns=["tau", "mean", "lo", "hi", "n"])
    lo, hi = max(d["tau"].min() for d in parts), min(d["tau"].max() for d in parts)
    if lo > hi:  # the seeds share no stretch of τ
        return pd.DataFrame(columns=["tau", "mean", "lo", "hi", "n"])
    if n <= 0:
        grid = np.unique(np.concatenate([d["tau"].to_numpy(float) for d in parts]))
        grid = grid[(grid >= lo) & (grid <= hi)]
    else:
        grid = np.linspace(lo, hi, n) if hi > lo else np.array([lo])
    ys = np.vstack([np.interp(grid, d["tau"].to_numpy(float), d[y].to_numpy(float)) for d in parts])
    return pd.DataFrame(
        {"tau": grid, "mean": ys.mean(axis=0), "lo": ys.min(axis=0), "hi": ys.max(axis=0), "n": len(parts)}
    )


def eval_band(evals: list[pd.DataFrame], y: str = "metric") -> pd.DataFrame:
    """The evaluations averaged by their index: the k-th evaluation of every seed gives one point (mean τ,
    mean, min and max of the metric), for k up to the fewest evaluations any seed has."""
    seqs = []
    for e in evals:
        if e.empty or "tau" not in e or y not in e:
            continue
        d = numeric(e[["tau", y]]).dropna()
        d = d if d["tau"].is_monotonic_increasing else d.sort_values("tau", kind="stable")
        if len(d):
            seqs.append(d)
    if not seqs:
        return pd.DataFrame(columns=["tau", "mean", "lo", "hi", "n"])
    k = min(len(d) for d in seqs)
    taus = np.vstack([d["tau"].to_numpy(float)[:k] for d in seqs])
    ys = np.vstack([d[y].to_numpy(float)[:k] for d in seqs])
    return pd.DataFrame(
        {"tau": taus.mean(axis=0), "mean": ys.mean(axis=0), "lo": ys.min(axis=0), "hi": ys.max(axis=0), "n": len(seqs)}
    )


def _smooth(train: pd.DataFrame, y: str = "loss") -> pd.DataFrame:
    """The training loss smoothed by a centred rolling mean over ~5 % of the run's records."""
    if train.empty or y not in train:
        return train
    window = max(1, len(train) // 20)
    v = pd.to_numeric(train[y], errors="coerce")
    return train.assign(**{y: v.rolling(window, center=True, min_periods=1).mean()})


def _draw_band(ax, b: pd.DataFrame, color, label: str, marker: str | None = None, **kw) -> bool:
    if b.empty:
        return False
    ax.plot(b["tau"], b["mean"], color=color, lw=kw.pop("lw", 1.8), label=label, marker=marker, ms=3, **kw)
    if (b["n"] > 1).any():
        ax.fill_between(b["tau"], b["lo"], b["hi"], color=color, alpha=0.2, lw=0)
    return True


def warmup_caption(res: Results, g: pd.DataFrame) -> str:
    """What the AdaScale runs' gain did over the first 10 % of τ, per S, written from the data (finding iv),
    and why it cannot say where the data cannot tell."""
    per_scale: dict[str, list] = {}
    why: list[str] = []
    for r, w in run_warmups(res, g):
        if w.holds is not None:
            per_scale.setdefault(r["scale"], []).append(w)
        elif w.why and w.why not in why:
            why.append(w.why)
    if not per_scale:
        return f" Whether the gain warms up cannot be told here ({'; '.join(why) or 'no gain records'}; finding iv)."
    parts = []
    for s, ws in sorted(per_scale.items(), key=lambda kv: scale_order(kv[0])):
        start, end = np.mean([w.start for w in ws]), np.mean([w.end for w in ws])
        held = sum(bool(w.holds) for w in ws)
        verdict = (
            "starts well below where it settles and rises: a warm-up emerges"
            if held == len(ws)
            else "does not start well below where it settles and rise: no emergent warm-up"
            if held == 0
            else f"warms up in {held} of {len(ws)} runs"
        )
        parts.append(f"S={s}: {start:.2f} → {end:.2f} ({verdict})")
    return (
        f" AdaScale's normalised gain (r − 1)/(r̂ − 1), r̂ the steady gain of the run's late noise scale, over the "
        f"first {WARMUP_WINDOW:.0%} of τ, start and end averaged over the seeds — " + "; ".join(parts) + f" (warm-up: "
        f"start ≤ {WARMUP_START:g}, rise ≥ {WARMUP_RISE:g}; finding iv)."
    )


def _noise_band(res: Results, runs: pd.DataFrame) -> pd.DataFrame:
    """B_simple against τ over the seeds of one scale (reports.noise.trajectory of each run)."""
    trajs = []
    for _, r in runs.iterrows():
        m = float(pd.to_numeric(r.get(PER_EPOCH), errors="coerce")) if PER_EPOCH in r else math.inf
        t = trajectory(res.metrics(r["run_dir"])[0], float(r["batch_size"]), m if m == m else math.inf)
        trajs.append(_thin(t.rename(columns={COLUMN: "B"})))
    return band(trajs, "B")


CURVE_PANELS = {  # key: (title, y label); AdaScale alone uses the gain and measures the noise scale
    "metric": ("validation metric", ""),
    "loss": ("training loss (smoothed)", "loss"),
    "lr": ("learning rate", "lr"),
    "gain": ("gain", "gain r"),
    "B_simple": ("gradient-noise scale B_simple = b·σ²/μ²", "B_simple (examples)"),
}


def _band_plan(b: pd.DataFrame) -> dict | None:
    """A band as plain arrays (what a figure's plan holds and its hash covers); None when empty."""
    if b.empty:
        return None
    arrays = {k: b[k].to_numpy(float) for k in ("tau", "mean", "lo", "hi")}
    return arrays | {"band": bool((b["n"] > 1).any())}


def _draw_plan_band(ax, b: dict, color, label: str, marker: str | None = None, **kw) -> None:
    """_draw_band of a band in a plan."""
    ax.plot(b["tau"], b["mean"], color=color, lw=kw.pop("lw", 1.8), label=label, marker=marker, ms=3, **kw)
    if b["band"]:
        ax.fill_between(b["tau"], b["lo"], b["hi"], color=color, alpha=0.2, lw=0)


def curves(res: Results, outdir: Path) -> list[Figure]:
    """Metric, training loss and lr against τ per task and method — for AdaScale also its gain and the
    noise scale B_simple it measured: per fixed scale the mean over seeds with a min–max band. Each
    figure is computed here as a plan of plain data (the bands) and drawn by `_draw_curves` through the
    renderer (skipped when the same plan was drawn before)."""
    df = table_runs(res.runs)
    df = df[df["scale"].map(lambda s: scale_order(s)[0] == 0)] if not df.empty else df
    figs: list[Figure] = []
    if df.empty:
        return figs
    for (task, preset, variant, method), g in df.groupby(["task", "preset", "variant", "method"], dropna=False):
        if g["shared_s1"].all():  # only the shared S = 1 run: the method has no curves of its own
            continue
        name = f"{task}{f' [{variant}]' if variant else ''}: {title(method)}"
        path = outdir / f"curves_{_slug(task, preset, variant, method)}.png"
        inputs = _inputs("curves", g)
        caption = _RENDERER.reuse(path, inputs)
        if caption is not None:  # drawn from these very runs and metrics files before: kept as it is
            figs.append(Figure("curves", name, path, caption))
            continue
        label, higher = task_info(task, next(iter(g["metric"].dropna()), None), g)
        scales = sorted(g["scale"].unique(), key=scale_order)
        picked = []
        for s in scales:
            runs = g[(g["scale"] == s) & g["has_metrics"].astype(bool)]
            if len(runs):
                picked.append((s, [res.metrics(d) for d in runs["run_dir"]], runs))
        if not picked:
            continue
        ada = method == "adascale"
        keys = list(CURVE_PANELS) if ada else ["metric", "loss", "lr"]
        colors = _scale_colors([s for s, _, _ in picked])
        series = []
        for s, metrics, runs in picked:
            n_div = int((runs["status"] == "diverged").sum())
            seeds = f"{len(runs)} seed{'s' if len(runs) > 1 else ''}" + (f", {n_div} diverged" if n_div else "")
            label_s = f"S={s} ({seeds})"
            trains = [_thin(t) for t, _ in metrics]
            bands = {
                "metric": _band_plan(eval_band([e for _, e in metrics])),
                "loss": _band_plan(band([_smooth(t) for t in trains], "loss")),
                "lr": _band_plan(band(trains, "lr")),
            }
            hline = None
            if ada:
                bands["gain"] = _band_plan(band(trains, "gain"))
                bands["B_simple"] = _band_plan(_noise_band(res, runs))
                b = pd.to_numeric(runs["batch_size"], errors="coerce").dropna()
                if bands["B_simple"] is not None and len(b) and float(s) >= 2:
                    hline = float(s) * float(b.iloc[0])
            bands = {k: v for k, v in bands.items() if v is not None}
            series.append((label_s, tuple(float(c) for c in colors[s]), bands, hline))
        if not any(bands for _, _, bands, _ in series):
            continue
        arrow = "higher" if higher else "lower"
        what = "metric, training loss, lr, gain and B_simple" if ada else "metric, training loss and lr"
        plan = {
            "keys": keys,
            "ylabels": {k: f"{label} ({arrow} is better)" if k == "metric" else CURVE_PANELS[k][1] for k in keys},
            "series": series,
            "suptitle": f"{name} — {what} against τ ({preset} preset)",
        }
        caption = (
            "Per scale S: the mean over seeds, with the band from the lowest to the highest seed, drawn only "
            "over the τ every seed reached; the validation metric averaged by evaluation index (the k-th "
            "evaluation of every seed); training loss smoothed (rolling mean over 5 % of the run); log axes "
            "but for the metric."
        )
        if ada:
            caption += (
                " B_simple: b·σ²/μ² of AdaScale's moving averages; the dashed line of each colour is that "
                "run's total batch S·b (LSW degrades in the paper only where S·b is past the noise scale)."
            )
            caption += warmup_caption(res, g)
        else:
            caption += f" No gain panel: {title(method)} does not use the gain."
        _RENDERER.submit(_draw_curves, plan, path, inputs, caption)
        figs.append(Figure("curves", name, path, caption))
    return figs


def _inputs(kind: str, g: pd.DataFrame) -> str:
    """A digest of what a figure of the runs `g` is computed from: their rows (every column, as CSV: floats
    in full) and each run's metrics file as reports.runcache tells it unchanged (size and mtime)."""
    stats = []
    for run_dir in g["run_dir"]:
        try:
            st = (Path(run_dir) / METRICS).stat()
            stats.append((str(run_dir), st.st_size, st.st_mtime_ns))
        except OSError:
            stats.append((str(run_dir), None, None))
    return digest((kind, g.to_csv(index=False), stats))


def _draw_curves(plan: dict, path: Path) -> None:
    """One curves figure from its plan (see `curves`)."""
    keys = plan["keys"]
    with plt.rc_context(STYLE):
        shape, size = ((2, 3), (20, 9)) if len(keys) > 3 else ((1, 3), (20, 5))
        fig, grid = plt.subplots(*shape, figsize=size, constrained_layout=True)
        grid = grid.ravel()
        for ax in grid[len(keys) :]:
            ax.set_visible(False)
        axes = dict(zip(keys, grid, strict=False))
        for name, color, bands, hline in plan["series"]:
            for key, b in bands.items():
                _draw_plan_band(axes[key], b, color, name, "o" if key == "metric" else None)
            if hline is not None:
                axes["B_simple"].axhline(hline, color=color, lw=1, ls="--")
        for key, ax in axes.items():
            ax.set_title(CURVE_PANELS[key][0])
            ax.set_xlabel("scale-invariant iterations τ")
            ax.set_ylabel(plan["ylabels"][key])
            if key != "metric":
                _log_if_positive(ax)
        handles, labels = max((ax.get_legend_handles_labels() for ax in axes.values()), key=lambda hl: len(hl[0]))
        fig.legend(handles, labels, loc="outside right center", title="scale")
        fig.suptitle(plan["suptitle"])
        _save(fig, path)


# ------------------------------------------------------------------------------------------ elastic


def _seed_runs(g: pd.DataFrame) -> pd.DataFrame:
    return g[g["has_metrics"].astype(bool) & g["status"].isin(("completed", "diverged"))]


def elastic(res: Results, outdir: Path) -> list[Figure]:
    """Scale, gain, lr and metric against τ for elastic runs against the fixed-scale runs: each the mean
    over its seeds (band: lowest to highest seed), over the τ every seed reached."""
    df = table_runs(res.runs)
    figs: list[Figure] = []
    if df.empty or not df["scale"].isin(("elastic-up", "elastic-down")).any():
        return figs
    for (task, preset, variant, method), g in df.groupby(["task", "preset", "variant", "method"], dropna=False):
        el = [(s, _seed_runs(g[g["scale"] == s])) for s in ("elastic-up", "elastic-down")]
        el = [(s, r) for s, r in el if len(r)]
        if not el:
            continue
        label, higher = task_info(task, next(iter(g["metric"].dropna()), None), g)
        fixed_scales = sorted((s for s in g["scale"].unique() if scale_order(s)[0] == 0), key=scale_order)
        fixed = [(s, _seed_runs(g[g["scale"] == s])) for s in fixed_scales]
        fixed = [(s, r) for s, r in fixed if len(r)]
        greys = {s: plt.get_cmap("Greys")(0.35 + 0.6 * i / max(len(fixed) - 1, 1)) for i, (s, _) in enumerate(fixed)}
        with plt.rc_context(STYLE):
            fig, axes = plt.subplots(2, 2, figsize=(15, 9), constrained_layout=True)
            axes = axes.ravel()
            keys = (("scale", "scale S"), ("gain", "gain r"), ("lr", "learning rate"), ("metric", label))
            lines = [(s, runs, greys[s], {"lw": 1.2, "ls": "--"}) for s, runs in fixed]
            lines += [(s, runs, "tab:red" if s == "elastic-up" else "tab:blue", {"lw": 2.4}) for s, runs in el]
            for s, runs, color, kw in lines:
                metrics = [res.metrics(d) for d in runs["run_dir"]]
                name = f"{s if s in ('elastic-up', 'elastic-down') else f'S={s}'} (n={len(runs)})"
                trains = [_thin(t) for t, _ in metrics]
                for ax, (k, _) in zip(axes, keys, strict=True):
                    b = eval_band([e for _, e in metrics]) if k == "metric" else band(trains, k)
                    _draw_band(ax, b, color, name, "o" if k == "metric" else None, **kw)
            arrow = "higher" if higher else "lower"
            for ax, (k, ylabel) in zip(axes, keys, strict=True):
                ax.set_title({"metric": "validation metric"}.get(k, k))
                ax.set_xlabel("scale-invariant iterations τ")
                ax.set_ylabel(f"{ylabel} ({arrow} is better)" if k == "metric" else ylabel)
            _log_if_positive(axes[1])
            handles, labels = axes[0].get_legend_handles_labels()
            fig.legend(handles, labels, loc="outside right center", title="runs (seeds)")
            name = f"{task}{f' [{variant}]' if variant else ''}: {title(method)}"
            fig.suptitle(f"{name} — elastic scaling ({preset} preset)")
            path = _save(fig, outdir / f"elastic_{_slug(task, preset, variant, method)}.png")
        figs.append(
            Figure(
                "elastic",
                name,
                path,
                "Elastic-up (red) and elastic-down (blue) against the fixed-scale runs (dashed grey, darker = "
                "larger S): each the mean over its seeds with the band from the lowest to the highest seed, over "
                "the τ every seed reached; the metric averaged by evaluation index.",
            )
        )
    return figs


# ----------------------------------------------------------------------------------------- heat maps


def heatmap_points(g: pd.DataFrame) -> pd.DataFrame:
    """Per (panel, lr0, decay): mean validation metric of the completed seeds and a diverged flag."""
    fin = g[g["status"].isin(("completed", "diverged"))]
    fin = fin[np.isfinite(fin["lr0"].astype(float)) & np.isfinite(fin["decay"].astype(float))]
    fin = fin[(fin["lr0"] > 0) & (fin["decay"] > 0)]
    rows = []
    for (panel, lr0, decay), p in fin.groupby(["panel", "lr0", "decay"], dropna=False):
        done = _finite(p.loc[p["status"] == "completed", "val_metric"])
        diverged = bool((p["status"] == "diverged").any()) or not len(done)
        rows.append(
            {
                "panel": panel,
                "lr0": float(lr0),
                "decay": float(decay),
                "value": math.nan if diverged else float(done.mean()),
                "diverged": diverged,
                "n": len(p),
            }
        )
    return pd.DataFrame(rows, columns=["panel", "lr0", "decay", "value", "diverged", "n"])


def _log_ticks(ax, values: np.ndarray, axis: str) -> None:
    fmt = FuncFormatter(lambda v, _: f"{10**v:.3g}")
    target = ax.xaxis if axis == "x" else ax.yaxis
    u = np.unique(np.round(values, 9))
    if 1 <= len(u) <= 7:  # the grid's own values: a one-value axis gets its one tick, not invented ones
        target.set_ticks(u)
    else:
        target.set_major_locator(MaxNLocator(6))
    target.set_major_formatter(fmt)


def _draw_surface(ax, x, y, z, levels, cmap, norm):
    """Filled contours on a complete regular grid, else on a triangulation; None when neither works."""
    ux, uy = np.unique(x), np.unique(y)
    if len(ux) >= 2 and len(uy) >= 2 and len(ux) * len(uy) == len(x):
        grid = pd.DataFrame({"x": x, "y": y, "z": z}).pivot(index="y", columns="x", values="z")
        if grid.notna().all().all():
            X, Y = np.meshgrid(grid.columns.to_numpy(float), grid.index.to_numpy(float))
            return ax.contourf(X, Y, grid.to_numpy(float), levels=levels, cmap=cmap, norm=norm, extend="both"), (
                X,
                Y,
                grid.to_numpy(float),
            )
    if len(x) >= 3:
        try:
            cs = ax.tricontourf(x, y, z, levels=levels, cmap=cmap, norm=norm, extend="both")
            return cs, (x, y, z)
        except (ValueError, RuntimeError):  # collinear or degenerate points
            pass
    return None, None


def heatmaps(res: Results, outdir: Path) -> list[Figure]:
    df = res.runs
    df = df[df["experiment_kind"] == "heatmap"] if not df.empty else df
    figs: list[Figure] = []
    if df.empty:
        return figs
    for (task, grid), g in df.groupby(["task", df["grid"].fillna("grid")]):
        pts = heatmap_points(g)
        if pts.empty:
            continue
        label, higher = task_info(task, next(iter(g["metric"].dropna()), None), g)
        present = list(pts["panel"].dropna().unique())
        panels = [p for p in PANELS if p in present] + sorted(p for p in present if p not in PANELS)
        values = pts["value"].to_numpy(float)
        finite = values[np.isfinite(values)]
        vmin, vmax = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
        if vmax <= vmin:
            pad = abs(vmin) * 0.05 or 0.5
            vmin, vmax = vmin - pad, vmax + pad
        worst = vmin if higher else vmax
        levels = np.linspace(vmin, vmax, 15)
        cmap = plt.get_cmap("viridis" if higher else "viridis_r")
        norm = mcolors.Normalize(vmin, vmax)
        thr = _finite(g["threshold"])
        threshold = float(thr[0]) if len(thr) else None
        n = len(panels)
        big = {
            "font.size": 15,
            "axes.titlesize": 16,
            "axes.labelsize": 15,
            "xtick.labelsize": 14,
            "ytick.labelsize": 14,
            "legend.fontsize": 14,
            "figure.titlesize": 18,
        }  # four panels get scaled down
        with plt.rc_context({**STYLE, **big, "axes.grid": False}):
            # panels share the lr axis only when their lr0 grids are the same (scaled SGD searches its own)
            grids = {tuple(sorted(set(pts.loc[pts["panel"] == q, "lr0"]))) for q in panels}
            shared = len(grids) == 1
            fig, axes = plt.subplots(
                1, n, figsize=(4.4 * n + 1.8, 5.2), squeeze=False, constrained_layout=True, sharex=shared, sharey=True
            )
            axes = axes[0]
            drew_threshold = False
            for ax, panel in zip(axes, panels, strict=True):
                p = pts[pts["panel"] == panel]
                x, y = np.log10(p["lr0"].to_numpy(float)), np.log10(p["decay"].to_numpy(float))
                z = np.where(p["diverged"].to_numpy(bool), worst, p["value"].to_numpy(float))
                cs, surface = _draw_surface(ax, x, y, z, levels, cmap, norm)
                if cs is None:
                    ax.scatter(x, y, c=z, cmap=cmap, norm=norm, s=400, marker="s")
                elif threshold is not None and vmin < threshold < vmax:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        sx, sy, sz = surface
                        draw = ax.contour if np.ndim(sx) == 2 else ax.tricontour
                        line = draw(sx, sy, sz, levels=[threshold], colors="red", linewidths=2.2)
                        drew_threshold |= bool(line.allsegs and any(len(seg) for seg in line.allsegs[0]))
                ok = ~p["diverged"].to_numpy(bool)
                ax.scatter(x[ok], y[ok], c="black", s=14, zorder=3, clip_on=False)
                if (~ok).any():
                    ax.scatter(x[~ok], y[~ok], c="red", marker="x", s=90, linewidths=2.5, zorder=4, clip_on=False)
                _log_ticks(ax, x, "x")
                _log_ticks(ax, y, "y")
                its = _finite(g.loc[(g["panel"] == panel) & (g["status"] == "completed"), "iterations"])
                t_text = f"T = {its.mean():.0f}" if len(its) else "T = –"
                ax.set_title(f"{panel}\n{t_text}, {len(p)} points")
                ax.set_xlabel("initial lr (log scale)")
            fig.get_layout_engine().set(wspace=0.06)  # room between one panel's last x label and the next's first
            for ax in axes[1:]:
                ax.tick_params(labelleft=False)  # the decay axis is shared
            axes[0].set_ylabel("total decrease (log scale)")
            sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
            fig.colorbar(
                sm, ax=list(axes), label=f"validation {label} ({'higher' if higher else 'lower'} is better)", shrink=0.9
            )
            handles = [Line2D([], [], color="black", marker="o", ls="", label="grid point")]
            if (pts["diverged"]).any():
                handles.append(Line2D([], [], color="red", marker="x", ls="", mew=2, label="diverged (worst colour)"))
            if drew_threshold:  # only a line that is drawn gets a legend entry
                handles.append(Line2D([], [], color="red", lw=2.2, label=f"threshold {threshold:g}"))
            fig.legend(handles=handles, loc="outside lower center", ncols=len(handles))
            fig.suptitle(f"{task} heat map '{grid}': validation {label} over exponential-decay schedules")
            path = _save(fig, outdir / f"heatmap_{_slug(task, grid)}.png")
        figs.append(
            Figure(
                "heatmap",
                f"{task}: {grid}",
                path,
                f"Panels: {', '.join(panels)}; mean over seeds; one colour scale for all panels; T in each title "
                "is the panel's mean iterations"
                + ("." if shared else "; each panel on its own lr axis (scaled SGD searches its own initial lr).")
                + _threshold_note(threshold, drew_threshold),
            )
        )
    return figs


def _threshold_note(threshold: float | None, drawn: bool) -> str:
    if threshold is None:
        return ""
    if drawn:
        return f" Red line: the threshold {threshold:g}."
    return f" Threshold {threshold:g}: no line (no panel's surface crosses it on this grid)."


# ------------------------------------------------------------------------------ gain (paper Figure 2)


def _offline_points(res: Results, run_dir: str) -> pd.DataFrame | None:
    """(iteration, tau, offline_gain, gain_lo, gain_hi, batches) of a run's offline_gain.csv (the interval
    only where it was written); None (with a warning) when unusable."""
    path = Path(run_dir) / OFFLINE_GAIN
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as e:
        res.warn(f"skipped {path}: {type(e).__name__}: {e}")
        return None
    if not {"tau", "offline_gain"} <= set(df.columns):
        res.warn(f"skipped {path}: no tau and offline_gain columns")
        return None
    df[["tau", "offline_gain"]] = df[["tau", "offline_gain"]].apply(pd.to_numeric, errors="coerce")
    df = df.dropna(subset=["tau", "offline_gain"])
    return df if not df.empty else None


def online_at(train: pd.DataFrame, points: pd.DataFrame) -> np.ndarray:
    """The online gain at each offline point: the record of its iteration (or the last before it)."""
    if train.empty or not {"iteration", "gain"} <= set(train.columns) or "iteration" not in points:
        return np.full(len(points), np.nan)
    d = train[["iteration", "gain"]].apply(pd.to_numeric, errors="coerce").dropna().sort_values("iteration")
    its, gains = d["iteration"].to_numpy(float), d["gain"].to_numpy(float)
    idx = np.searchsorted(its, pd.to_numeric(points["iteration"], errors="coerce").to_numpy(float), side="right") - 1
    return np.where(idx >= 0, gains[np.clip(idx, 0, None)] if len(gains) else np.nan, np.nan)


def gap_text(online: np.ndarray, points: pd.DataFrame) -> str:
    """'online − offline: mean −0.42, 3 of 8 outside the offline 95 % interval' (what the gap is: noise,
    where the online gain lies inside the offline interval, or lag/bias where it lies outside)."""
    off = points["offline_gain"].to_numpy(float)
    ok = np.isfinite(online) & np.isfinite(off)
    if not ok.any():
        return "online − offline: –"
    text = f"online − offline: mean {np.mean(online[ok] - off[ok]):+.2f}"
    if {"gain_lo", "gain_hi"} <= set(points.columns):
        lo, hi = (pd.to_numeric(points[c], errors="coerce").to_numpy(float) for c in ("gain_lo", "gain_hi"))
        have = ok & np.isfinite(lo) & np.isfinite(hi)
        if have.any():
            out = int(((online < lo) | (online > hi))[have].sum())
            text += f", {out} of {int(have.sum())} outside the offline 95 % interval"
    return text


def gain(res: Results, outdir: Path) -> list[Figure]:
    """Online gain against τ with the offline estimates (95 % jackknife intervals) at the kept checkpoints,
    one panel per run, the online − offline gap printed in each."""
    df = res.runs
    if df.empty:
        return []
    df = df[[(Path(d) / OFFLINE_GAIN).exists() for d in df["run_dir"]]]
    panels = []
    for _, r in df.sort_values(["task", "method", "seed", "run_dir"]).iterrows():
        points = _offline_points(res, r["run_dir"])
        if points is not None:
            panels.append((r, points))
    if not panels:
        return []
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    gaps, bars = [], False
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 4.6 * rows), squeeze=False, constrained_layout=True)
        for ax in axes.ravel()[len(panels) :]:
            ax.set_visible(False)
        for ax, (r, points) in zip(axes.ravel(), panels, strict=False):
            train, _ = res.metrics(r["run_dir"])
            _plot_series(ax, _thin(train), "gain", color="tab:blue", lw=1.8, label="online (moving averages)")
            n = _finite(points["batches"]) if "batches" in points else np.array([])
            label = f"offline ({int(n[0])} batches)" if len(n) else "offline"
            g = points["offline_gain"].to_numpy(float)
            if {"gain_lo", "gain_hi"} <= set(points.columns):
                lo, hi = (pd.to_numeric(points[c], errors="coerce").to_numpy(float) for c in ("gain_lo", "gain_hi"))
                yerr = np.vstack([np.clip(g - lo, 0, None), np.clip(hi - g, 0, None)])
                yerr = np.where(np.isfinite(yerr), yerr, 0.0)
                bars |= bool(np.isfinite(lo).any())
                label += ", 95 % jackknife interval"
            else:
                yerr = None
            ax.errorbar(points["tau"], g, yerr=yerr, fmt="o", color="tab:red", ms=6, capsize=4, label=label, zorder=3)
            s = pd.to_numeric(pd.Series([r["scale"]]), errors="coerce").iloc[0]
            if np.isfinite(s):
                ax.axhline(s, color="black", lw=0.8, ls=":", label=f"S = {s:g}")
            gap = gap_text(online_at(train, points), points)
            gaps.append(f"{r['task']} seed {r['seed']}: {gap}")
            ax.set_ylim(0, ax.get_ylim()[1] * 1.05)
            ax.set_xlabel("scale-invariant iterations τ")
            ax.set_ylabel("gain r")
            variant = f" [{r['variant']}]" if r["variant"] else ""
            ax.set_title(
                f"{r['task']} {title(r['method'])} S={r['scale']} seed {r['seed']}{variant}\n{gap}", fontsize=11
            )
            ax.legend(loc="lower right")
        fig.suptitle("Online gain against offline estimates at kept checkpoints (paper Figure 2)")
        path = _save(fig, outdir / "gain_online_offline.png")
    caption = (
        "Line: the gain AdaScale used at each iteration, from its moving averages of σ² and μ². Points: the "
        "gain from σ², μ² estimated afresh at the kept checkpoint's weights over independent micro-batches "
        "(adascale-bench gain)"
        + (
            ", with its 95 % delete-one-group jackknife interval over the micro-batches"
            if bars
            else " (no interval: offline_gain.csv written before it had gain_lo / gain_hi)"
        )
        + ". The online estimate averages over about 1000/S past iterations, so it lags while the gain "
        "moves: an online gain outside the offline interval is lag or bias, inside it noise. " + "; ".join(gaps) + "."
    )
    return [Figure("gain", f"{len(panels)} run(s)", path, caption)]


# --------------------------------------------------------------------------------------------- sweep


def _sweep_plot(
    pts: pd.DataFrame, cap: float, noise: np.ndarray, title: str, path: Path, fits: pd.DataFrame | None = None
) -> Path:
    """Epochs to target against global batch (log–log), one line per method; unreached points as open
    markers at the cap; the median noise scale as the predicted critical batch; each fitted steps–examples
    trade-off (reports.sweep.critical_batches) as a dotted curve with its B_crit."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(9.5, 6.2), constrained_layout=True)
        methods = [m for m in SWEEP_METHODS if m in set(pts["method"])]
        methods += sorted(m for m in set(pts["method"]) if m not in SWEEP_METHODS)
        for m in methods:
            p = pts[pts["method"] == m].sort_values("batch")
            name = SWEEP_METHODS.get(m, m)
            color = SWEEP_COLORS.get(m)
            line = ax.plot(p["batch"], p["epochs_to_target"], marker="o", ms=8, lw=2, color=color, label=name)[0]
            miss = p[~p["reached"].astype(bool)]
            if len(miss):
                ax.scatter(
                    miss["batch"],
                    [cap] * len(miss),
                    s=90,
                    facecolors="none",
                    linewidths=2,
                    edgecolors=line.get_color(),
                    zorder=3,
                )
        if (~pts["reached"].astype(bool)).any():
            ax.scatter(
                [],
                [],
                s=90,
                facecolors="none",
                edgecolors="black",
                linewidths=2,
                label=f"target not reached (shown at the {cap:g}-epoch cap)",
            )
            ax.axhline(cap, color="black", lw=0.8, ls=":")
        if len(noise):
            b_crit = float(np.median(noise))
            ax.axvline(
                b_crit,
                color="tab:red",
                ls="--",
                lw=2,
                label=f"gradient-noise scale B_simple ≈ {b_crit:,.0f}\n(median over {len(noise)} "
                "AdaScale runs): predicted critical batch",
            )
        for r in (fits if fits is not None else pd.DataFrame()).itertuples():
            p = pts[(pts["method"] == r.method) & pts["reached"].astype(bool)]
            if p.empty or not r.epoch_examples > 0:
                continue
            grid = np.geomspace(p["batch"].min(), p["batch"].max(), 100)
            color = SWEEP_COLORS.get(r.method)
            ax.plot(grid, r.E_min * (1 + grid / r.B_crit) / r.epoch_examples, color=color, ls=":", lw=1.5)
            ax.axvline(
                r.B_crit,
                color=color,
                ls=":",
                lw=1.5,
                label=f"fit, {SWEEP_METHODS.get(r.method, r.method)}: B_crit = E_min/S_min ≈ {r.B_crit:,.0f}",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log(ax, "x", pts["batch"].to_numpy(float))
        _plain_log(ax, "y", np.append(pts["epochs_to_target"].to_numpy(float), cap))
        ax.set_xlabel("global batch size (examples)")
        ax.set_ylabel("data epochs to reach the target")
        ax.set_title(title)
        ax.legend(loc="best")
        return _save(fig, path)


SWEEP_CAPTION = "Filled markers: mean epochs over seeds that all reached the target; open markers: not reached."


def sweep(res: Results, outdir: Path) -> list[Figure]:
    df = sweep_runs(res)
    figs: list[Figure] = []
    if df.empty:
        return figs
    for task, g in df.groupby("task"):
        pts, cap = sweep_points(g)
        if pts.empty:
            continue
        noise = noise_scales(g)
        targets = _finite(g["sweep_target"])
        tgt = f" (target {targets[0]:g})" if len(targets) else ""
        title = f"{task}: critical-batch sweep — epochs to target vs batch{tgt}"
        from .sweep import fit_points

        fits = fit_points(g, task)
        path = _sweep_plot(pts, cap, noise, title, outdir / f"sweep_{_slug(task)}.png", fits)
        note = "" if len(noise) else " No AdaScale run recorded a noise scale: no critical-batch line."
        figs.append(Figure("sweep", task, path, SWEEP_CAPTION + note))
    return figs


KINDS = {
    "heatmap": (heatmaps, "heat maps", "no heat-map runs (experiment kind 'heatmap') with a summary"),
    "curves": (curves, "metric, lr and gain against τ", "no Table 2 runs with metrics"),
    "elastic": (elastic, "elastic scaling", "no elastic-up/down runs with metrics"),
    "gain": (
        gain,
        "online against offline gain (paper Figure 2)",
        "no run folder with offline_gain.csv (keep_checkpoints_every, then adascale-bench gain RUN_DIR)",
    ),
    "sweep": (sweep, "critical-batch sweep", "no sweep runs (experiment kind 'sweep') with a summary"),
}
