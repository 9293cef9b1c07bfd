"""Short names for variants: runs made with other `--set` overrides form their own tables (`runrow.variant_of`
writes those overrides as the variant, `data.conditioning=10.0,lr_schedule.lr0=1.0,...`), and a name that
long widens every table and figure title it is in. The report shows each variant by a short name instead,
with the overrides on hover and in a list under Table 2:

- the name a matrix gave its experiment (`variant: NAME` beside `set`, kept in the run's spec.json);
- else the overrides in words (the last part of each key and its value: `tiny_noise 4`; a few keys by a
  phrase, `checkpoints every 10`: bench.experiments.names), cut to the first pieces that fit and how many
  more (`conditioning 10, decay 0.01 + 2 more`); never a number standing for them.

Two variants of one task never share a name (a repeated one gets ` (2)`); variants of different tasks may,
since every table and figure is named `task [name]`. Only the variants of Table 2, elastic and gain runs
(and ad-hoc runs) are named: a heat map's or sweep's runs differ by the lr, decay or batch their figure plots.
The CSVs keep the full overrides (in their `variant` column); every other file names a variant by its short
name (its PNGs too).
"""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd

from bench.experiments.matrix import VARIANT_NAME
from bench.experiments.names import label_of, number, short_form

SHORT = 36  # the longest automatic name written from the overrides (checkpoints every 12, until 0.1·T1)
SHOWN = ("table2", "elastic", "gain")  # the experiment kinds whose variants the report names (and ad-hoc runs)
LABEL = VARIANT_NAME  # what a matrix may call a variant (bench.experiments.matrix)


__all__ = ["display", "label_of", "named", "names", "number", "short_form"]  # the names: bench.experiments.names


def names(runs: pd.DataFrame) -> dict[str, str]:
    """{variant (the overrides as runrow.variant_of writes them): its short name} of every variant in
    `runs` (columns variant, variant_label, overrides); "" stays ""."""
    if runs.empty or "variant" not in runs:
        return {}
    if "experiment_kind" in runs:  # heat-map and sweep runs vary lr, decay, batch: their figures say how
        runs = runs[runs["experiment_kind"].isna() | runs["experiment_kind"].isin(SHOWN)]
    out: dict[str, str] = {}
    unnamed = []
    for variant, g in runs.groupby(runs["variant"].fillna(""), sort=True):
        if not variant:
            continue
        labels = Counter(lb for lb in g.get("variant_label", pd.Series(dtype=str)).fillna("") if lb)
        if labels:  # the most common name (ties: the first in order)
            out[variant] = sorted(labels.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
            continue
        try:
            overrides = json.loads(g["overrides"].dropna().iloc[0]) if "overrides" in g else {}
        except (IndexError, ValueError):
            overrides = {}
        short = short_form(overrides if isinstance(overrides, dict) else {})
        if short:
            out[variant] = shortened(short)
        else:
            unnamed.append(variant)
    for k, variant in enumerate(unnamed, 1):
        out[variant] = f"overrides {k}"
    tasks = {v: set(g["task"].fillna("")) if "task" in g else {""} for v, g in runs.groupby(runs["variant"].fillna(""))}
    return {"": "", **_apart(out, tasks)}


def shortened(short: str) -> str:
    """A variant's overrides in words, cut to SHORT characters: `conditioning 10, lr0 1 + 2 more` (the first
    pieces that fit, then how many more), never a number standing for them."""
    if len(short) <= SHORT:
        return short
    pieces = short.split(", ")
    for k in range(len(pieces) - 1, 0, -1):
        head = ", ".join(pieces[:k]) + f" + {len(pieces) - k} more"
        if len(head) <= SHORT:
            return head
    first = pieces[0]
    tail = f" + {len(pieces) - 1} more" if len(pieces) > 1 else ""
    return first[: SHORT - 1] + "…" + tail


def _apart(out: dict[str, str], tasks: dict[str, set[str]]) -> dict[str, str]:
    """`out` with a suffix (` (2)`, ` (3)`, …) on a name that another variant of the same task already has:
    a table is named `task [name]`, so one matrix label on different tasks' overrides (the control's
    `variant: control` on logreg and on cifar10) names no two tables alike and needs none."""
    taken: dict[str, list[tuple[set[str], int]]] = {}
    for variant in sorted(out):
        base, mine = out[variant], tasks.get(variant, {""})
        used = {k for theirs, k in taken.get(base, []) if theirs & mine}
        k = next(k for k in range(1, len(out) + 2) if k not in used)
        taken.setdefault(base, []).append((mine, k))
        if k > 1:
            out[variant] = f"{base} ({k})"
    return out


def display(name: str, variants: dict[str, str]) -> tuple[str, str]:
    """(the name shown, the overrides for a tooltip) of a table or figure named `task [variant]`."""
    for variant, short in variants.items():
        if variant and name.endswith(f" [{variant}]"):
            return f"{name[: -len(variant) - 2]}[{short}]", variant
    return name, ""


def named(df: pd.DataFrame, variants: dict[str, str], keep: bool = False) -> pd.DataFrame:
    """`df` with its `table` column (`task [overrides]`) naming each variant by its short name; `keep`: the
    overrides in a `variant` column of their own where there is none (a CSV's column meant for them)."""
    if df.empty or "table" not in df:
        return df
    out = df.copy()
    shown = out["table"].map(lambda n: display(str(n), variants))
    out["table"] = shown.map(lambda d: d[0])
    if keep and "variant" not in out:
        out.insert(out.columns.get_loc("table") + 1, "variant", shown.map(lambda d: d[1]))
    return out
