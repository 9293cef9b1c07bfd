"""Read a results folder into pandas, from the run files only (docs/design.md §4): spec.json, summary.json and
metrics.jsonl of every run folder under it. Nothing is imported from the training code.

`load(dir)` gives a `Results`: one row per run folder (`runs`), the list of warnings about files it
skipped (each naming the file), and a cached reader of each run's metrics.jsonl.

Run status: the summary's status (completed | diverged | failed); `running` while there is no
summary.json yet (a checkpoint or metrics on disk, or the writer holding the run folder's lock: from the
run's first second), `pending` when there is only spec.json and no writer, and
`unreadable` when summary.json is corrupt, not an object, or lacks its `status` (the run is then left
out of every table, with a warning naming the file).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bench.core.algo.schedules import ELASTIC
from bench.core.errors import UserError
from bench.core.files import METRICS, SPEC, SUMMARY, open_regular
from bench.core.locks import lock_is_held
from bench.core.usercode import is_user_name
from reports.rundata import guards, runcache
from reports.rundata.jsonfields import checked, read_object
from reports.rundata.memo import ReportWarning  # defined where `report` replays warnings (reports.rundata.memo)
from reports.rundata.runrow import RUN_COLUMNS, SUMMARY_FIELDS, _num, _row, scale_str
from reports.rundata.specfacts import read_facts
from reports.rundata.variants import names as variant_names
from tasks.presets import card_of_run

STATUSES = ("completed", "diverged", "failed")
CACHE_DIR = Path("report") / "cache"  # per-run metrics summaries (reports.rundata.runcache), beside the report


def scale_order(scale: Any) -> tuple[int, float]:
    """Numeric scales in order, then elastic-up, elastic-down, then anything else."""
    s = scale_str(scale)
    if s in ELASTIC:
        return (1, float(ELASTIC.index(s)))
    try:
        return (0, float(s))
    except ValueError:
        return (2, 0.0)


def read_metrics(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """(training records, eval records, problem or None) of one metrics.jsonl, every record of it. A torn
    last line is ignored silently (a run being written); other undecodable lines (not JSON, not UTF-8,
    not an object) are skipped and reported."""
    try:
        with open_regular(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return pd.DataFrame(), pd.DataFrame(), f"cannot read ({e.strerror or e})"
    train, evals, _, bad = runcache.read_whole(data[: data.rfind(b"\n") + 1])
    t, e = pd.DataFrame(train), pd.DataFrame(evals)
    t, e = (df.sort_values("tau", kind="stable") if "tau" in df else df for df in (t, e))
    return t, e, _problem(len(train) + len(evals), bad)


def _problem(records: int, bad: int, odd: int = 0) -> str | None:
    """What one warning says of a metrics file: undecodable lines, values that are no finite number where numbers
    stand (reports.rundata.runcache's `odd`: read as absent), no records."""
    said = [f"{bad} undecodable line(s) skipped"] * bool(bad) + [f"{odd} value(s) not a finite number ignored"] * bool(
        odd
    )
    problem = "; ".join(said) or None
    if not records:
        problem = "no records" + (f" ({problem})" if problem else "")
    return problem


@dataclass
class Results:
    """A results folder as read from disk."""

    root: Path
    runs: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    cache_dir: Path | None = None  # where each run's metrics summary is cached (reports.rundata.runcache)
    variants: dict[str, str] = field(default_factory=dict)  # variant → its short name (reports.rundata.variants)
    _metrics: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = field(default_factory=dict, repr=False)
    _warmed: dict[str, tuple] = field(default_factory=dict, repr=False)  # run folder -> `_read_warmed` of its metrics
    memo: dict[Any, Any] = field(default_factory=dict, repr=False)  # what one report derives once per run

    _held: list[str] | None = field(default=None, repr=False)  # warnings held back (`hold_warnings`)

    def warn(self, message: str) -> None:
        if self._held is not None:
            self._held.append(message)
        elif message not in self.warnings:
            self.warnings.append(message)
            warnings.warn(message, ReportWarning, stacklevel=3)

    @contextlib.contextmanager
    def holding(self) -> Iterator[list[str]]:
        """Keep the warnings given inside in the list it yields, not given: the report computes its figures before
        its tables, so that they are drawn while the tables are computed, and gives the figures' warnings after
        the tables', in the order they had when the tables came first."""
        self._held = held = []
        try:
            yield held
        finally:
            self._held = None

    def per_runs(self, key: str, make: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        """make(), computed once per runs frame (Table 2's cells, the speed-ups: the tables and the figures read the
        same table, ~0.5 s each at the paper matrix's volume); a copy each time, so no reader changes another's."""
        got = self.memo.get(key)
        if got is None or got[0] is not self.runs:
            got = self.memo[key] = (self.runs, make())
        return got[1].copy()

    def warm_metrics(self, workers: int) -> None:
        """Bring every run's metrics summary in the cache up to date in `workers` processes (reports.rundata.runcache
        .warm), each worker handing back the run's frames as `metrics` makes them (`_read_warmed`), so that the
        report does not load 1 200 summaries back from the cache; without a cache folder, nothing to do."""
        with self.warming(workers):
            pass

    @contextlib.contextmanager
    def warming(self, workers: int) -> Iterator[None]:
        """`warm_metrics`, its workers scanning while the body of the `with` runs (the report imports its
        libraries meanwhile); their frames are taken at its end."""
        paths = self._metrics_files() if workers > 1 else []
        warming = runcache.Warming(paths, self.cache_dir, workers, self.warn, _read_warmed) if paths else None
        try:
            yield
        except BaseException:
            if warming is not None:
                warming.cancel()
            raise
        if warming is not None:
            self._warmed = {str(path.parent): got for path, got in warming.result().items()}

    def _metrics_files(self) -> list[Path]:
        """Every run's metrics.jsonl, with the cache folder made; none without a cache folder (or a read-only one:
        read one at a time, uncached)."""
        if self.cache_dir is None or self.runs.empty or "run_dir" not in self.runs:
            return []
        paths = [Path(d) / METRICS for d in self.runs["run_dir"] if (Path(d) / METRICS).is_file()]
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError:
            return []
        return paths

    def metrics(self, run_dir: str) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(training records, eval records) of one run: every eval record, and the training curves
        downsampled for a large file (reports.rundata.runcache: `train.attrs` says how many records there are
        and whether the frame is a sample), read once and cached; empty frames (and a warning naming the
        file) when unusable."""
        key = str(run_dir)
        if key not in self._metrics:
            path = Path(run_dir) / METRICS
            warmed = self._warmed.pop(str(Path(run_dir)), None)
            if warmed is not None and runcache.current(path, warmed[2]):  # the file as the worker read it
                train, evals, meta, said = warmed
                for message in said:  # guards' warnings, given when the run is read, as below
                    self.warn(message)
                self._metrics[key] = self._checked(path, train, evals, meta)
            elif not path.exists():
                self.warn(f"skipped {path}: missing (run left out of the figures)")
                self._metrics[key] = (pd.DataFrame(), pd.DataFrame())
            else:
                try:
                    train, evals, meta = runcache.frames(path, self.cache_dir, self.warn)
                except OSError as e:
                    self.warn(f"skipped {path}: cannot read ({e.strerror or e})")
                    self._metrics[key] = (pd.DataFrame(), pd.DataFrame())
                    return self._metrics[key]
                train, evals = guards.frame(train, path, self.warn), guards.frame(evals, path, self.warn)
                self._metrics[key] = self._checked(path, train, evals, meta)
        return self._metrics[key]

    def _checked(self, path: Path, train: pd.DataFrame, evals: pd.DataFrame, meta: dict) -> tuple:
        """(train, evals), with a warning naming the file where records were torn or undecodable."""
        problem = _problem(
            int(meta.get("records") or 0) + len(evals), int(meta.get("bad") or 0), int(meta.get("odd") or 0)
        )
        if problem:
            what = "skipped" if train.empty and evals.empty else "partly read"
            self.warn(f"{what} {path}: {problem}")
        return train, evals


def _read_warmed(path: Path, got: runcache.Summary) -> tuple:
    """In a warm worker (reports.rundata.runcache.warm): a run's frames as `Results.metrics` makes them from its
    summary,
    checked by guards, with the warnings that gave, for the report to give when it reads the run: (train,
    evals, meta, warnings)."""
    said: list[str] = []
    train, evals, meta = runcache.frames_of(got)
    train, evals = guards.frame(train, path, said.append), guards.frame(evals, path, said.append)
    return train, evals, meta, said


def rule_rows(df: pd.DataFrame) -> dict[str, Any]:
    """method name -> its row of the method table (bench.core.algo.rules.Method) as the runs' specs describe it: a
    built-in row by name, a user's rule from the facts its spec recorded (`rule`), never imported."""
    from bench.core.methods import recorded

    if df.empty or "method" not in df:
        return {}
    facts: dict[str, Any] = {}
    raws = df["rule"] if "rule" in df else pd.Series(None, index=df.index)
    for name, raw in zip(df["method"].astype(str), raws, strict=True):
        if facts.get(name) is None and isinstance(raw, str):
            facts[name] = json.loads(raw)  # written by _row with json.dumps
        facts.setdefault(name, None)
    return {name: recorded(name, f) for name, f in facts.items()}


def load(out: Path) -> Results:
    """Every run folder under `out` (a folder holding spec.json), with warnings naming skipped files."""
    root = Path(out)
    res = Results(root, pd.DataFrame(columns=RUN_COLUMNS), cache_dir=root / CACHE_DIR)
    if not root.is_dir():
        res.warn(f"results folder {root} does not exist")
        return res
    rows: list[dict[str, Any]] = []
    codes: list[tuple[int, str, Any]] = []  # (row, task, its user_task record) of every run of a task of yours
    for spec_path in sorted(root.rglob(SPEC)):
        run_dir = spec_path.parent
        spec, why = read_facts(spec_path, res.warn)  # field by field: a damaged one is a warning (specfacts)
        if spec is None:
            res.warn(why)
            continue
        if is_user_name(spec.task):  # a task of yours: its card as recorded (metric, margins), never imported
            try:
                card_of_run(spec.task, spec.user_task, str(spec_path))
            except UserError as e:
                res.warn(f"{e} (its metric is read as the summary names it)")
        summary_path = run_dir / SUMMARY
        summary = None
        if summary_path.exists():
            summary, why = read_object(summary_path)
            if summary is not None:
                summary = checked(summary, SUMMARY_FIELDS, summary_path, res.warn)
                summary, _ = guards.check(summary, guards.SUMMARY_RANGES, summary_path, res.warn)
            if summary is not None and summary.get("status") not in STATUSES:
                status = summary.get("status")
                why = "no status" if status is None else f"unknown status {status!r}"
                summary = None
            if summary is None:
                res.warn(f"skipped {summary_path}: {why} (run left out of the tables)")
        row = _row(run_dir, spec, summary)
        if summary is None:
            if summary_path.exists():
                row["status"] = "unreadable"
            elif row["has_checkpoint"] or row["has_metrics"] or lock_is_held(run_dir):  # the writer's lock:
                row["status"] = "running"  # running from its first second, before any metrics are flushed
                res.warn(f"skipped {run_dir}: in progress (no {SUMMARY} yet; left out of the tables)")
            else:
                row["status"] = "pending"
                res.warn(f"skipped {run_dir}: not started (only {SPEC})")
        elif not row["has_metrics"] and row["experiment_kind"] not in ("heatmap", "sweep"):  # those need none
            res.warn(f"{run_dir / METRICS}: missing (run in the tables, not in the figures)")
        if is_user_name(spec.task):
            codes.append((len(rows), str(spec.task), spec.user_task))
        rows.append(row)
    apart_by_code(rows, codes, res.warn)
    if rows:
        res.runs = pd.DataFrame(rows).reindex(columns=RUN_COLUMNS)
        res.runs["pilot"] = folder_pilots(res.runs, rows)
        res.variants = variant_names(res.runs)
        res.runs["variant_name"] = res.runs["variant"].fillna("").map(res.variants)
    return res


def apart_by_code(rows: list[dict[str, Any]], codes: list[tuple[int, str, Any]], warn: Any) -> None:
    """Runs of one task of yours that recorded two codes (bench.core.identity.code_key: its source's digest and card)
    are two tasks here, `name@key`, each with the card its runs recorded: every cell, table, figure and finding
    keys on the task, so none pools two sources or judges one's runs by the other's card. A folder of one code
    keeps the plain name."""
    from dataclasses import replace

    from bench.core.identity import code_key
    from tasks.presets import recorded_card, remember

    by_name: dict[str, dict[str, list[int]]] = {}
    records: dict[str, Any] = {}
    for i, name, record in codes:
        key = code_key(record)
        by_name.setdefault(name, {}).setdefault(key, []).append(i)
        records[f"{name}@{key}"] = record
    for name, keys in by_name.items():
        if len(keys) < 2:
            continue
        warn(f"task {name}: runs of {len(keys)} codes of it (source.card: {', '.join(sorted(keys))}); shown apart")
        for key, idx in keys.items():
            label = f"{name}@{key}"
            for i in idx:
                rows[i]["task"] = label
            try:
                found = recorded_card(name, (records[label] or {}).get("card"), label)
            except (UserError, AttributeError):
                continue  # a damaged card: warned about above; the metric as the summary names it
            remember(replace(found, name=label))


def folder_pilots(runs: pd.DataFrame, rows: list[dict[str, Any]]) -> pd.Series:
    """Which runs are of a pilot seed by the folder's rule: a (task, seed) that any run in the folder declares
    pilot (its matrix's `pilot_seeds`, recorded in each run's spec) is a pilot seed for every run of it there —
    also one made by another matrix or a plain `run`, which declares nothing — so that no confirmatory cell
    is ever judged on a seed some pre-registration spent on its pilot."""
    declared = {(row["task"], s) for row in rows for s in row.pop("_pilot_seeds", ())}
    return pd.Series(
        [(t, s) in declared for t, s in zip(runs["task"], runs["seed"], strict=True)], index=runs.index, dtype=bool
    )


def runs(out: Path) -> pd.DataFrame:
    """One row per run folder (see `load`); the warnings are also in `df.attrs["warnings"]`."""
    res = load(out)
    df = res.runs
    df.attrs["warnings"] = list(res.warnings)
    return df


def task_info(task: str, metric_key: str | None = None, runs: pd.DataFrame | None = None) -> tuple[str, bool]:
    """(metric label, higher is better) as the runs' summary.json files record them; for runs written
    before summaries carried them, the task's card (plain data, tasks.presets); else a guess from the
    metric's key: losses and error rates are lower-is-better, anything else higher."""
    if runs is not None and "higher_is_better" in runs:
        recorded = runs.dropna(subset=["higher_is_better", "metric_label"])
        if len(recorded):
            return str(recorded["metric_label"].iloc[0]), bool(recorded["higher_is_better"].iloc[0])
    return _card_info(task, metric_key)


@functools.cache
def paper_metric(task: str) -> str | None:
    """The eval key that compares with the paper's printed metric where it is not the Table 2 metric
    (the transformer's `bleu_tok`; the task card's `paper_metric`); None otherwise or for unknown tasks."""
    try:
        from tasks.presets import card

        return card(task).paper_metric or None
    except Exception:  # an unknown task: compare the Table 2 metric
        return None


def eval_value(eval_json: Any, key: str) -> float:
    """One key of a run's last evaluation (summary.json `eval`, as `_row` keeps it), NaN when absent."""
    try:
        return _num(json.loads(eval_json).get(key)) if isinstance(eval_json, str) else math.nan
    except (ValueError, AttributeError):
        return math.nan


@functools.cache
def _card_info(task: str, metric_key: str | None) -> tuple[str, bool]:
    try:
        from tasks.presets import card

        c = card(task)
        return c.metric_label, c.higher_is_better
    except Exception:  # an unknown task: the report still renders
        key = metric_key or "metric"
        lower = any(w in key.lower() for w in ("loss", "err", "wer", "perplexity", "ppl"))
        return key, not lower


LOSS_RANGE = (0.0, math.inf)  # every task's training loss is a sum of non-negative terms (cross-entropy, CTC, box)


@functools.cache
def metric_range(task: str, metric_label: str) -> tuple[float, float]:
    """The values a task's validation metric can take (its card's `metric_range`), when `metric_label` is
    the card's metric; else unbounded (an unknown task, or runs that recorded another metric)."""
    try:
        from tasks.presets import card

        c = card(task)
    except Exception:  # an unknown task: nothing known of its metric
        return (-math.inf, math.inf)
    return c.metric_range if c.metric_label == metric_label else (-math.inf, math.inf)
