"""The report's numeric guards: the one home (issue 42) for the range every number read from a run folder
must lie in before a formula sees it.

Each field of spec.json, summary.json and each metrics.jsonl column is checked once, where collect reads
it: a value of the right type but not finite or not in range (a noise scale of -3, T1 of 0, an
iteration count of 1e400, a NaN gain) is data, not a crash: the field is dropped as if absent, with one
warning naming the file, the field and the range; a record's column gets NaN with one warning per file
and column. A spec whose identity numbers (scale, T1, batch_size) are out of range leaves its run out
of the tables. Formulas downstream then meet NaN (shown "n/a" or "not testable"), never a division by 0
or an int() of infinity. `finite_or_none` turns what a JSON writer would print as Infinity/NaN into null.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from bench.core.algo.schedules import ELASTIC
from bench.core.files import finite_number

T = TypeVar("T")

Rule = tuple[Callable[[Any], Any], str]  # the test works on a float and, elementwise, on an array
POSITIVE: Rule = (lambda v: v > 0, "> 0")
AT_LEAST_ONE: Rule = (lambda v: v >= 1, ">= 1")
NON_NEGATIVE: Rule = (lambda v: v >= 0, ">= 0")
ANY: Rule = (lambda v: v == v, "finite")
MAX_COUNT = 1e15  # iterations, epochs, T1: past it a typo or a forged file (the paper's longest T1 is 1.55 M)
COUNT: Rule = (lambda v: (v >= 0) & (v <= MAX_COUNT), f"in [0, {MAX_COUNT:g}]")
POSITIVE_COUNT: Rule = (lambda v: (v > 0) & (v <= MAX_COUNT), f"in (0, {MAX_COUNT:g}]")

# spec.json: a run whose identity number is out of range is left out of the tables (IDENTITY)
SPEC_RANGES: dict[str, Rule] = {
    "scale": (lambda v: (v >= 1) & (v <= 1 << 20) & (np.floor(v) == v), "an integer in [1, 2^20]"),
    "batch_size": POSITIVE_COUNT,
    "T1": POSITIVE_COUNT,
    "T_AS": POSITIVE_COUNT,
    "T": POSITIVE_COUNT,
    "max_epochs": POSITIVE_COUNT,
    "ttt_target": ANY,
    "seed": COUNT,
    "ranks": AT_LEAST_ONE,
    "accumulation": AT_LEAST_ONE,
}
IDENTITY = ("scale", "batch_size", "T1")
SUMMARY_RANGES: dict[str, Rule] = {
    "val_metric": ANY,
    "train_loss": ANY,
    "iterations": POSITIVE_COUNT,
    "tau": COUNT,
    "wall_time_s": NON_NEGATIVE,
    "epochs": COUNT,
    "target_epochs": COUNT,
    "mean_gain": (lambda v: (v > 0) & (v <= 1 << 20), "in (0, 2^20]"),
    "noise_scale": NON_NEGATIVE,
    "B_simple": NON_NEGATIVE,
    "T_AS": POSITIVE_COUNT,
}
METRICS_RANGES: dict[str, Rule] = {
    "scale": SPEC_RANGES["scale"],
    "gain": (lambda v: v > 0, "> 0"),
    "tau": COUNT,
    "iteration": COUNT,
    "var": NON_NEGATIVE,
    "sqr": NON_NEGATIVE,
    "sum_sq": NON_NEGATIVE,
    "mean_sq": NON_NEGATIVE,
    "lr": ANY,
    "loss": ANY,
    "progress": NON_NEGATIVE,
    "epochs": COUNT,
}
OFFLINE_RANGES: dict[str, Rule] = {  # offline_gain.csv (bench.run.offline_gain writes it)
    "iteration": COUNT,
    "tau": COUNT,
    "offline_gain": POSITIVE,
    "gain_lo": ANY,
    "gain_hi": ANY,
    "var": NON_NEGATIVE,
    "sqr": ANY,  # the unbiased estimate of μ² (moments: mean_sq − σ²/n), below 0 where μ² is under its noise
    "batches": AT_LEAST_ONE,
    "scale": SPEC_RANGES["scale"],
    "batch_size": POSITIVE_COUNT,
    "exact_gain": POSITIVE,
    "exact_var": NON_NEGATIVE,
    "exact_sqr": NON_NEGATIVE,
    "ref_var": NON_NEGATIVE,  # finding (iii)'s reference (bench.run.independent)
    "ref_sqr": ANY,  # the offline estimate of μ² can dip below 0; the drawn exact one is ‖G_R‖² − tr Σ_R/|R|
    "ref_var_se": NON_NEGATIVE,
    "ref_sqr_se": NON_NEGATIVE,
    "ref_trace_sq": NON_NEGATIVE,
    "ref_spread": NON_NEGATIVE,
    "ref_drawn": (lambda v: (v == 0) | (v == 1), "0 or 1"),
}


def ok(value: Any, rule: Rule) -> bool:
    """Whether a number (not a bool) is finite and passes `rule`."""
    return finite_number(value) and bool(rule[0](float(value)))  # (an int past a float's range: not finite)


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# The strings a numeric field may hold instead of a number: an elastic schedule's name for a scale. Any other
# string there (a 5 000-digit "scale", "sixteen") is damage, not a label: every reader would parse it.
LABELS: dict[str, tuple[str, ...]] = {"scale": ELASTIC}


def check(obj: dict, ranges: dict[str, Rule], path: object, warn: Callable[[str], None]) -> tuple[dict, list[str]]:
    """(`obj` less its numbers out of range and its strings that are no label of the field, the fields dropped),
    each named in one warning."""
    out, dropped = dict(obj), []
    for key, rule in ranges.items():
        value = out.get(key)
        if isinstance(value, str) and key in LABELS and value not in LABELS[key]:
            warn(f"{path}: field {key!r} is {shown(value)}, not {rule[1]} nor one of {', '.join(LABELS[key])}; ignored")
            del out[key]
            dropped.append(key)
            continue
        if value is None or isinstance(value, str | dict | list):  # absent, or a label (elastic scales)
            continue
        if not ok(value, rule):
            warn(f"{path}: field {key!r} is {shown(value)}, not {rule[1]}; ignored")
            del out[key]
            dropped.append(key)
    return out, dropped


def frame(
    df: pd.DataFrame, path: object, warn: Callable[[str], None], ranges: dict[str, Rule] | None = None
) -> pd.DataFrame:
    """`df` (metrics records; offline_gain.csv's rows with OFFLINE_RANGES) with each value of a column out of
    range set to NaN, one warning per column naming the file; the frame is copied only when something changed."""
    rules = METRICS_RANGES if ranges is None else ranges
    if _all_in_range(df, rules):
        return df
    changed = None
    for col, rule in rules.items():
        if col not in df or df.empty:
            continue
        column = df[col]
        if column.dtype == np.float64:  # the metrics cache's columns: NaN is absent, nothing to convert
            values = column.to_numpy()
            present = ~np.isnan(values)
        else:
            values = numeric(column).to_numpy(dtype=float, na_value=np.nan)
            present = ~pd.isna(column).to_numpy()
        with np.errstate(invalid="ignore"):
            good = np.isfinite(values) & np.asarray(rule[0](values), dtype=bool)
        bad = ~good & present
        if bad.any():
            first = df[col].to_numpy()[bad.argmax()]
            warn(f"{path}: field {col!r} is {shown(first)} in {int(bad.sum())} record(s), not {rule[1]}; ignored")
            changed = df.copy() if changed is None else changed
            changed[col] = np.where(bad, np.nan, values)
    return df if changed is None else changed


def _all_in_range(df: pd.DataFrame, rules: dict[str, Rule]) -> bool:
    """Whether `frame` would leave `df` as it is because every column it checks is float64 (the metrics cache's
    training frames) and in range or NaN: one look at the frame's float block instead of a column lookup per rule,
    which was most of `frame`'s cost over the paper matrix's 1 200 runs. False sends `frame` the long way."""
    if df.empty or not all(dtype == np.float64 for dtype in df.dtypes):
        return df.empty
    values, where = df.to_numpy(), {col: j for j, col in enumerate(df.columns)}
    with np.errstate(invalid="ignore"):
        for col, (test, _) in rules.items():
            if col in where:
                v = values[:, where[col]]
                if (~(np.isfinite(v) & np.asarray(test(v), dtype=bool)) & ~np.isnan(v)).any():
                    return False
    return True


def per_frame(fn: Callable[[pd.DataFrame], T]) -> Callable[[pd.DataFrame], T]:
    """fn(frame), computed once per frame object while it lives: a run's metrics frames are read by the figures,
    the noise statistics and the findings, and never changed once read. Keyed by identity (a weak reference:
    a frame that dies takes its entry with it), never by contents."""
    memo: dict[int, tuple[weakref.ref, T]] = {}

    @functools.wraps(fn)
    def once(df: pd.DataFrame) -> T:
        key = id(df)
        hit = memo.get(key)
        if hit is not None and hit[0]() is df:
            return hit[1]
        value = fn(df)
        memo[key] = (weakref.ref(df, lambda _: memo.pop(key, None)), value)
        return value

    return once


@per_frame
def float_columns(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """Every column of `df` as `floats` reads it, read-only: for an all-float64 frame (the metrics cache's) views
    of its one block, without the ~10 µs a column lookup costs; else a column at a time."""
    if df.columns.is_unique and all(dtype == np.float64 for dtype in df.dtypes):
        block = df.to_numpy()
        out = {c: block[:, j] for j, c in enumerate(df.columns)}
    else:
        out = {c: floats(df[c]) for c in dict.fromkeys(df.columns) if isinstance(df[c], pd.Series)}
    for v in out.values():
        v.flags.writeable = False
    return out


def floats(column: pd.Series) -> np.ndarray:
    """A column as float64 (anything not a number NaN, as pd.to_numeric(errors="coerce") reads it), without a
    frame around it: the bands, the noise statistics and the warm-up each read a few columns of hundreds of runs.
    """
    if pd.api.types.is_numeric_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column.dtype):
        return column.to_numpy(np.float64)
    return numeric(column).to_numpy(np.float64)


def numeric(column: pd.Series) -> pd.Series:
    """pd.to_numeric(column, errors="coerce"), where a value past float's range (an int of 400 digits, its text in
    a CSV) is NaN: pandas raises OverflowError there, whatever `errors` says."""
    try:
        return pd.to_numeric(column, errors="coerce")
    except OverflowError:
        return pd.Series([_number(v) for v in column], index=column.index, dtype=np.float64)


def _number(value: Any) -> float:
    """One value as pd.to_numeric(errors="coerce") reads it, NaN past float's range."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        return float(value)
    except OverflowError:
        return math.nan


def finite_or_none(obj: Any) -> Any:
    """`obj` with every non-finite float (and int past a float) replaced by None: what strict JSON holds."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_or_none(v) for v in obj]
    return obj


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a string starting with = + - @ (a rule label
    `=HYPERLINK(…)`, a run name) gets a leading ' (OWASP's escape), unless it is a number or a lone "-"."""
    if not isinstance(value, str) or not value.startswith(_FORMULA) or value == "-":
        return value
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value


def csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with its text cells (and column names) escaped by `cell`: every CSV the report writes goes
    through this, so no cell from a run folder becomes a formula."""
    text = [c for c in df.columns if df[c].dtype == object or pd.api.types.is_string_dtype(df[c].dtype)]
    out = df.copy() if text else df
    for c in text:
        out[c] = df[c].map(cell)
    return out.rename(columns=lambda c: cell(c) if isinstance(c, str) else c)
