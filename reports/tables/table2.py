"""Table 2 of the paper from a results folder (docs/design.md §5).

One table per task (and per preset and variant: runs made with different `--set` overrides are never
averaged together). Rows = scales in numeric order, then elastic-up, elastic-down; columns = total batch
(S·b; empty for elastic rows), then validation metric, training loss and total iterations, each for every
Table 2 rule with runs in that table (the method table's `table2` rows, in its order, then users' rules by
name, as their specs recorded them).

A cell is the mean over the seeds of the completed runs, pilot seeds left out (`confirmatory`, said below). It is
- N/A (metric and loss) when any seed diverged; the iterations are the planned count, as the paper
  prints them (a rule whose pace is the scale: ⌈T1/S⌉ on its scale schedule; LSW+: T_AS; AdaScale: – since
  its count is only known once it has run), with the iteration each seed diverged at in a footnote — so that
  a comparison never diffs a divergence point against a plan;
- – when there is no completed run (not run, still running, or failed);
- grey when significantly worse than S = 1 of the same method: see `significance.worse_than`; the metric grey
  too, with a footnote naming the seeds, where a seed collapsed (no better than untrained or chance: a failed
  seed, reports.rundata.failedseeds: its numbers are real and averaged in, but the cell is a failure as a divergence
  is).

At S = 1 every rule that is identity scaling there is one computation, run once as adascale
(bench.experiments.matrix): that run fills the S = 1 cell of each such rule in its table (share_s1).

Which runs: the Table 2 rules' runs from the `table2` and `elastic` experiments and ad-hoc runs (no
experiment); heat-map and sweep runs have their own figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from bench.core.algo.rules import ADASCALE, method_order, shared_runs, shares_s1
from reports.rundata import guards
from reports.rundata.collect import LOSS_RANGE, Results, metric_range, rule_rows, scale_order, task_info
from reports.rundata.failedseeds import failed
from reports.stats.noise import fmt as noise_fmt
from reports.stats.numbers import decimals, fmt_iterations, fmt_value
from reports.stats.significance import ALPHA, worse_than

TABLE_KINDS = ("table2", "elastic")
NO_RUNS = "No Table 2 runs (of a rule that is a Table 2 column) with a summary in this folder."
NA, MISSING = "N/A", "–"
QUANTITIES = ("val_metric", "train_loss", "iterations")
GREY_MARK = "†"
LEGEND = (
    f"{GREY_MARK} grey: significantly worse than S = 1 of the same method (one-sided Welch t-test over the "
    f"seeds, p < {ALPHA:g}; needs ≥ 2 completed seeds on both sides), or a seed collapsed (ended no better "
    "than the untrained model or the task's chance level: a failed seed, as a divergence: [n] names it). "
    "N/A: a seed diverged (its iterations: the planned count, as the paper prints it; [n]: where it diverged). "
    f"{MISSING}: not run (or not finished). n: the seeds a cell averages (N/A: the seeds run); "
    "a 95 % t interval of each mean is in table2.csv and on hover in the HTML (there clipped to the values "
    "the quantity can take: 0–100 % for an accuracy)."
)

CELL_COLUMNS = [
    "table",
    "task",
    "preset",
    "variant",
    "scale",
    "total_batch",
    "method",
    "label",
    "n_seeds",
    "n_runs",
    "n_diverged",
    "n_collapsed",
    "n_running",
    "diverged",
    "val_metric",
    "val_metric_std",
    "train_loss",
    "train_loss_std",
    "iterations",
    "iterations_std",
    "val_metric_ci_lo",
    "val_metric_ci_hi",
    "train_loss_ci_lo",
    "train_loss_ci_hi",
    "iterations_ci_lo",
    "iterations_ci_hi",
    "B_simple",
    "B_simple_n",
    "B_early",
    "B_late",
    "diverged_at",
    "collapsed_at",
    "grey_metric",
    "p_metric",
    "grey_loss",
    "p_loss",
    "metric_label",
    "higher_is_better",
    "pilot_left",  # the table's runs of pilot seeds that no cell averages (confirmatory), one line
]


def table_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The runs that make Table 2, the shared S = 1 run counted under each method (share_s1): Table 2,
    the scale-free comparison, the findings and the curves all see the same runs."""
    if df.empty:
        return df
    kind = df["experiment_kind"] if "experiment_kind" in df else pd.Series(None, index=df.index)
    rows = rule_rows(df)
    keep = df["method"].map(lambda m: rows[str(m)].table2).astype(bool) & (kind.isna() | kind.isin(TABLE_KINDS))
    out = df[keep].copy()
    for col in ("preset", "variant"):
        out[col] = out[col].fillna("") if col in out else ""
    return share_s1(out)


def confirmatory(t: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """A table's runs less those of a pilot seed (reports.rundata.collect.folder_pilots: a seed any pre-registered
    matrix
    in the folder spent on its pilot), and what was left out. The one home: no confirmatory cell — a finding,
    a rule's verdict, a Table 2 cell — is judged on or averaged over a pilot seed."""
    pilot = t["pilot"].fillna(False).astype(bool) if "pilot" in t else pd.Series(False, index=t.index)
    if not pilot.any():
        return t, ""
    left = t[pilot]
    seeds = ", ".join(sorted({str(v) for v in left["seed"]}, key=lambda v: (len(v), v)))
    return t[~pilot], (
        f"left out: {len(left)} run(s) of pilot seed(s) {seeds} (a confirmatory cell is never judged on a pilot seed)"
    )


def table_name(task: str, preset: str, variant: str, several_presets: bool) -> str:
    name = task
    if several_presets and preset:
        name += f" ({preset})"
    if variant:
        name += f" [{variant}]"
    return name


@dataclass(frozen=True)
class Table:
    """One of Table 2's tables: a task at one preset and variant, with its name, its metric and its runs."""

    name: str
    task: str
    preset: str
    variant: str
    metric_label: str
    higher: bool  # whether a higher metric is better
    runs: pd.DataFrame


def tables(df: pd.DataFrame) -> list[Table]:
    """The tables of `table_runs`' runs, in order: the one place a table gets its name and its metric's
    direction (Table 2's cells, the findings and the rule verdicts each read them from here)."""
    if df.empty:
        return []
    presets = df.groupby("task")["preset"].nunique()
    out = []
    for (task, preset, variant), t in df.groupby(["task", "preset", "variant"], sort=True):
        label, higher = task_info(task, next(iter(t["metric"].dropna()), None) if "metric" in t else None, t)
        out.append(Table(table_name(task, preset, variant, presets[task] > 1), task, preset, variant, label, higher, t))
    return out


def _std(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1)) if len(x) > 1 else math.nan


def interval(x: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The t interval of the mean of the seeds (NaN below 2 seeds; the mean itself when they agree)."""
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return math.nan, math.nan
    m, se = float(x.mean()), float(np.std(x, ddof=1)) / math.sqrt(len(x))
    half = float(stats.t.ppf(0.5 + confidence / 2, len(x) - 1)) * se
    return m - half, m + half


def share_s1(df: pd.DataFrame) -> pd.DataFrame:
    """At S = 1 every rule that is identity scaling there (AdaScale's r ≡ 1, LSW's warm-up from 1/S = 1,
    T_AS = T1, √S = 1: the method table's `identity_at_s1`) is one computation, which a matrix runs once as
    adascale: that run also fills the S = 1 cell of each such rule in the tables where the rule has runs and no
    S = 1 run of its own (runs from before the matrix did this keep theirs). A rule that is not identity at
    S = 1 (LEGW warms up there) is never given it."""
    key = ["task", "preset", "variant"]
    shared = shared_runs()  # adascale's S = 1 run, and adamscale's under AdamW (its own variant's tables)
    s1 = df[(df["scale"].astype(str) == "1") & df["method"].isin(shared)]
    if s1.empty:
        return df.assign(shared_s1=False)
    copies = []
    for method, row in rule_rows(df).items():
        if method in shared or not shares_s1(row):
            continue
        mine = df[df["method"] == method]
        present = set(map(tuple, mine[key].to_numpy().tolist()))
        have = set(map(tuple, mine.loc[mine["scale"].astype(str) == "1", key].to_numpy().tolist()))
        take = s1[[tuple(k) in present - have for k in s1[key].to_numpy().tolist()]]
        copies.append(take.assign(method=method, shared_s1=True))
    return pd.concat([df.assign(shared_s1=False), *copies], ignore_index=True)


def place(method: str) -> tuple[int, str]:
    """A method's place in tables: the method table's order, users' rules after it by name."""
    return method_order(method), method


def _quantities(g: pd.DataFrame, done: pd.DataFrame, diverged: bool) -> dict[str, Any]:
    """A cell's mean, std and interval of each quantity over its completed seeds; a diverged cell shows only
    its planned iterations (as the paper prints them), the rest blank."""
    row: dict[str, Any] = {}
    for q in QUANTITIES:
        x = done[q].dropna().to_numpy(dtype=float)
        if diverged and q == "iterations":  # the plan, as the paper prints it
            x = g.loc[g["status"] == "diverged", "planned_iterations"].dropna().to_numpy(dtype=float)
        blank = diverged and q != "iterations"
        row[q] = float(np.mean(x)) if len(x) and not blank else math.nan
        row[f"{q}_std"] = _std(x) if not blank and not diverged else math.nan
        lo, hi = interval(x) if not blank and not diverged else (math.nan, math.nan)
        row[f"{q}_ci_lo"], row[f"{q}_ci_hi"] = lo, hi
    return row


def _noise(done: pd.DataFrame, method: str, scale: str) -> dict[str, Any]:
    """The median noise scale of a fixed-S AdaScale cell's seeds: over training and in the first and last third
    of τ (reports.stats.noise); blank for any other cell."""
    measured = method == ADASCALE and scale_order(scale)[0] == 0
    row: dict[str, Any] = {}
    noise = pd.to_numeric(done["B_simple"], errors="coerce") if "B_simple" in done else pd.Series([])
    noise = noise[noise.notna()] if measured else noise[0:0]
    row["B_simple"] = float(noise.median()) if len(noise) else math.nan
    row["B_simple_n"] = len(noise)
    for col in ("B_early", "B_late"):
        w = pd.to_numeric(done[col], errors="coerce") if col in done else pd.Series([], dtype=float)
        w = w[w.notna()] if measured else w[0:0]
        row[col] = float(w.median()) if len(w) else math.nan
    return row


def cells_of(res: Results) -> pd.DataFrame:
    """Table 2's cells of a report's runs (`cells(res.runs)`), computed once per runs frame: the tables and the
    Table 2 figure read the same cells (~0.5 s each time at the paper matrix's volume). A copy each time."""
    return res.per_runs("cells", lambda: cells(res.runs))


def cells(df: pd.DataFrame) -> pd.DataFrame:
    """Tidy Table 2: one row per table × scale × method, with numbers, seed counts and grey flags."""
    df = table_runs(df)
    if df.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    rules = rule_rows(df)
    rows = []
    for tab in tables(df):
        (t, pilots), higher = confirmatory(tab.runs), tab.higher
        done_vals: dict[tuple[str, str], pd.DataFrame] = {}
        for (scale, method), g in t.groupby(["scale", "method"]):
            done_vals[(scale, method)] = g[g["status"] == "completed"]
        for (scale, method), g in t.groupby(["scale", "method"]):
            done = done_vals[(scale, method)]
            n_div = int((g["status"] == "diverged").sum())
            diverged = n_div > 0
            b = g["batch_size"].dropna()
            total = "" if scale_order(scale)[0] != 0 or b.empty else int(round(float(scale) * float(b.iloc[0])))
            row = {
                "table": tab.name,
                "task": tab.task,
                "preset": tab.preset,
                "variant": tab.variant,
                "scale": scale,
                "total_batch": total,
                "method": method,
                "label": rules[method].label,
                "n_seeds": len(done),
                "n_runs": len(g),
                "n_diverged": n_div,
                "n_running": int(g["status"].isin(("running", "pending")).sum()),
                "diverged": diverged,
                "metric_label": tab.metric_label,
                "higher_is_better": higher,
                "pilot_left": f"{pilots[:1].upper()}{pilots[1:]}; the findings leave them out too." if pilots else "",
            }
            row |= _quantities(g, done, diverged) | _noise(done, method, scale)
            row["n_collapsed"] = int(failed(g).sum()) - n_div
            fell = g.loc[failed(g) & (g["status"] != "diverged"), "seed"]  # collapsed
            row["collapsed_at"] = ", ".join(f"seed {x}" for x in sorted(fell))
            div = g.loc[g["status"] == "diverged", ["seed", "iterations"]].sort_values("seed")  # two columns: the
            row["diverged_at"] = ", ".join(  # runs' 60 through itertuples were most of the cells' cost
                f"seed {seed} at iteration {int(its)}" if math.isfinite(its) else f"seed {seed}"
                for seed, its in zip(div["seed"], div["iterations"], strict=True)
            )
            base = done_vals.get(("1", method))
            for q, flag, hib in (("val_metric", "metric", higher), ("train_loss", "loss", False)):
                grey, p = False, math.nan
                if base is not None and scale != "1" and not diverged:
                    grey, p = worse_than(done[q].dropna().to_numpy(float), base[q].dropna().to_numpy(float), hib)
                row[f"grey_{flag}"], row[f"p_{flag}"] = grey or (flag == "metric" and row["n_collapsed"] > 0), p
            rows.append(row)
    out = pd.DataFrame(rows, columns=CELL_COLUMNS)
    out["_order"] = out["scale"].map(scale_order)
    out["_m"] = out["method"].map(place)
    return out.sort_values(["table", "_order", "_m"], kind="stable").drop(columns=["_order", "_m"])


# ---------------------------------------------------------------- a format-neutral view of the tables


@dataclass
class Cell:
    text: str
    grey: bool = False
    kind: str = "value"  # value | na | missing
    note: str = ""  # a footnote's number ("1"): a diverged cell's planned iterations, a collapsed cell's seeds
    n: int | None = None  # the seeds behind the cell (None for a missing cell)
    hover: str = ""  # the 95 % interval of the mean, where there is one

    @property
    def seeds(self) -> str:
        """'n=3' (every cell that has runs shows how many seeds it stands on)."""
        return "" if self.n is None else f"n={self.n}"


@dataclass
class TableView:
    name: str
    task: str
    preset: str
    metric_label: str
    higher_is_better: bool
    methods: list[tuple[str, str]] = field(default_factory=list)  # its columns: (method, label), in order
    rows: list[tuple[str, str, list[Cell]]] = field(default_factory=list)  # scale, total batch, 3 × methods cells
    notes: list[str] = field(default_factory=list)  # footnote n is notes[n - 1]
    noise: str = ""  # the AdaScale runs' training-average B_simple per S, one line
    pilot: str = ""  # the pilot seeds' runs left out of the table (confirmatory), one line

    @property
    def groups(self) -> list[str]:
        arrow = "↑" if self.higher_is_better else "↓"
        return [f"val. {self.metric_label} {arrow}", "train loss ↓", "iterations"]

    @property
    def short_groups(self) -> list[str]:
        return [self.metric_label, "train loss", "iterations"]


def _text(row: pd.Series, q: str, std: bool, pm: str) -> str:
    f = fmt_iterations if q == "iterations" else fmt_value
    text = f(row[q])
    s = row[f"{q}_std"]
    if std and text != MISSING and s is not None and math.isfinite(s):
        text += f"{pm}{f(s, decimals(row[q]))}"
    return text


def _hover(row: pd.Series, q: str, bounds: tuple[float, float] = (-math.inf, math.inf)) -> str:
    """The 95 % interval of a cell's mean, clipped to the values the quantity can take (`bounds`): a t
    interval is symmetric, so near a bound it can pass it (97.1–101.3 % top-1 over 2 seeds); the hover
    then shows the clipped interval and says so. table2.csv keeps the t interval as computed."""
    lo, hi = row.get(f"{q}_ci_lo", math.nan), row.get(f"{q}_ci_hi", math.nan)
    if not (isinstance(lo, float) and math.isfinite(lo)):
        return f"n={int(row['n_seeds'])}: no interval below 2 seeds"
    f = fmt_iterations if q == "iterations" else fmt_value
    digits = decimals(row[q]) if q != "iterations" else None
    text = f"n={int(row['n_seeds'])}, 95 % interval of the mean [{f(max(lo, bounds[0]), digits)}, "
    text += f"{f(min(hi, bounds[1]), digits)}]"
    if lo < bounds[0] or hi > bounds[1]:
        text += f", clipped to the range it can take (t interval [{f(lo, digits)}, {f(hi, digits)}])"
    return text


def bounds_of(task: str, metric_label: str, q: str) -> tuple[float, float]:
    """What a Table 2 quantity can take: the metric its task card's range, a loss ≥ 0, iterations ≥ 0."""
    if q == "val_metric":
        return metric_range(task, metric_label)
    return LOSS_RANGE if q == "train_loss" else (0.0, math.inf)


def noise_note(t: pd.DataFrame) -> str:
    """'Gradient-noise scale … : S=4 231 → 5,770 (n=3); S=8 …' of AdaScale's rows: the first and the last third
    of τ (reports.stats.noise, the definition the findings read)."""
    if "B_late" not in t:
        return ""
    a = t[(t["method"] == ADASCALE) & t["B_late"].notna()]
    if a.empty:
        return ""
    a = a.assign(_o=a["scale"].map(scale_order)).sort_values("_o")
    parts = [
        f"S = {r.scale} {noise_fmt(float(r.B_early))} → {noise_fmt(float(r.B_late))} (n={int(r.n_seeds)})"
        for r in a.itertuples()
    ]
    return (
        "Gradient-noise scale B = b·σ²/μ² of the AdaScale runs, first → last third of τ (median over seeds; "
        "τ-weighted, corrected for drawing without replacement), in examples: " + "; ".join(parts) + "."
    )


def views(c: pd.DataFrame, std: bool = False, pm: str = " ± ") -> list[TableView]:
    out = []
    for name, t in c.groupby("table", sort=False):
        first = t.iloc[0]
        view = TableView(name, first["task"], first["preset"], first["metric_label"], bool(first["higher_is_better"]))
        view.methods = sorted(dict.fromkeys(zip(t["method"], t["label"], strict=True)), key=lambda m: place(m[0]))
        for scale in sorted(t["scale"].unique(), key=scale_order):
            rows = t[t["scale"] == scale].set_index("method")
            total = next((str(v) for v in rows["total_batch"] if str(v) not in ("", "nan")), "")
            line = []
            for q in QUANTITIES:
                for m, label in view.methods:
                    if m not in rows.index or (rows.loc[m, "n_seeds"] == 0 and not rows.loc[m, "diverged"]):
                        line.append(Cell(MISSING, kind="missing"))
                    elif rows.loc[m, "diverged"] and q != "iterations":
                        line.append(Cell(NA, kind="na", n=int(rows.loc[m, "n_runs"])))
                    elif rows.loc[m, "diverged"]:
                        r = rows.loc[m]
                        plan = "planned" if math.isfinite(r["iterations"]) else "no planned count (AdaScale)"
                        view.notes.append(f"S = {scale} {label}: diverged ({r['diverged_at']}); {plan}")
                        text = fmt_iterations(r["iterations"])
                        kind = "missing" if text == MISSING else "value"
                        line.append(Cell(text, kind=kind, note=str(len(view.notes)), n=int(r["n_runs"])))
                    else:
                        r = rows.loc[m]
                        grey = bool(r["grey_metric"]) if q == "val_metric" else bool(r["grey_loss"])
                        grey = grey and q != "iterations"
                        text = _text(r, q, std, pm)
                        kind = "missing" if text == MISSING else "value"
                        hover = _hover(r, q, bounds_of(view.task, view.metric_label, q))
                        note = ""
                        if q == "val_metric" and r["n_collapsed"] > 0:  # a failed seed, as a divergence is
                            view.notes.append(f"S = {scale} {label}: collapsed ({r['collapsed_at']})")
                            note = str(len(view.notes))
                        line.append(Cell(text, grey, kind, note=note, n=int(r["n_seeds"]), hover=hover))
            view.rows.append((scale, total, line))
        view.noise = noise_note(t)
        view.pilot = first["pilot_left"] if isinstance(first.get("pilot_left"), str) else ""
        out.append(view)
    return out


def markdown(c: pd.DataFrame, std: bool = False) -> str:
    """Table 2 in Markdown, one table per task; grey cells carry a trailing †."""
    if c.empty:
        return f"_{NO_RUNS}_\n"
    parts = []
    for v in views(c, std):
        labels = [label.replace("|", "\\|").replace("\n", " ") for _, label in v.methods]  # a label from disk: one cell
        header = ["S", "total batch"] + [f"{g} {label}" for g in v.short_groups for label in labels]
        lines = [f"### {v.name}", "", "| " + " | ".join(header) + " |", "|" + "---|" * 2 + "---:|" * (len(header) - 2)]
        for scale, total, line in v.rows:
            texts = [
                cell.text
                + (GREY_MARK if cell.grey else "")
                + (f"[{cell.note}]" if cell.note else "")
                + (f" ({cell.seeds})" if cell.seeds else "")
                for cell in line
            ]
            lines.append("| " + " | ".join([scale, total, *texts]) + " |")
        direction = "higher" if v.higher_is_better else "lower"
        lines += ["", f"Validation metric: {v.metric_label} ({direction} is better)."]
        lines += [v.noise] if v.noise else []
        lines += [v.pilot] if v.pilot else []
        lines += [f"[{n}] {note}" for n, note in enumerate(v.notes, 1)]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n\n" + LEGEND + "\n"


def to_csv(c: pd.DataFrame) -> str:
    return guards.csv_safe(c).to_csv(index=False, float_format="%.6g")  # no cell a formula
