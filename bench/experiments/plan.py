"""`adascale-bench plan MATRIX [--gpus N] [--throughput CSV]`: what a matrix costs before it is submitted.

Per cell (experiment × task × method × S) and in total: runs, iterations per run, examples processed and
GPU-hours. Iterations follow each method's pace in the method table (bench.core.algo.rules.METHODS): S = 1 and
identity runs take T1; LSW takes exactly `iterations_for` (τ advances by S_t); AdaScale's gain r_t lies in
[1, S_t], so it takes between LSW's count (r = S: ⌈T1/S⌉ at a constant S) and T1 (r = 1); LSW+ runs T_AS
iterations and the heat map's scaled SGD the mean of its grid's AdaScale runs, so both have AdaScale's
range. Examples: Σ over iterations of S_t · b (b in the task's unit, its card's `unit`: tokens for the
transformer). GPU-hours: examples / the task's examples/s at S = 1 on one GPU (the throughput table),
i.e. an iteration at scale S costs S micro-batches' worth of GPU time, whatever the number of GPUs that
share it (no communication overhead). Where the table has no examples/s, GPU-hours come from counted
work instead: examples / b micro-batches × the FLOPs of one micro-batch (flops.csv, counted by
`adascale-bench flops`, see bench.experiments.flops) / (the device's dense peak at the chosen precision ×
the assumed model-FLOPs utilisation, `--device`, `--precision`, `--mfu`); every figure names its basis.
Runs stopped by `max_epochs` (the logreg sweep) are capped there;
stopping at a target metric is not foreseen, so those are upper bounds.

Reads the tasks' cards (tasks.presets, plain data): no torch, well under a second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.algo import rules
from bench.core.errors import UserError
from bench.core.methods import shared_note
from bench.experiments import matrix as matrices
from bench.experiments.costbasis import BASES, DEVICE_NAMES, PUBLISHED, read_published
from bench.experiments.costtables import FLOPS, THROUGHPUT, read_flops, read_throughput
from bench.experiments.costtables import write_throughput as write_throughput  # re-exported: read as plan.X
from bench.experiments.plancells import DEFAULT_MFU, Cell, Peak, _unit, make_plan
from bench.experiments.plancells import walk as walk  # re-exported: read as plan.X

FILL_HINT = "adascale-bench perf --device cuda --preset paper --scales 1 --write-throughput {path}"


def _mfu(mfu: float | None) -> float:
    mfu = DEFAULT_MFU if mfu is None else float(mfu)
    if not 0 < mfu <= 1:
        raise UserError(f"--mfu {mfu}: expected a fraction of the peak in (0, 1]")
    return mfu


def _fmt_si(x: float) -> str:
    for div, suffix in ((1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.3g}"


def _range(lo: float, hi: float, f: Any) -> str:
    return f(lo) if f(lo) == f(hi) else f"{f(lo)}–{f(hi)}"


def _hours(h: float) -> str:
    return f"{h:,.0f}" if h >= 100 else f"{h:.3g}"


def frame(cells: list[Cell], gpus: int | None, methods: tuple[str, ...] | None = None) -> Any:
    """The plan's table; `methods`: the rules the matrix names (what its shared S = 1 run stands for)."""
    import pandas as pd

    rows = []
    for c in cells:
        at = c.at_paper()
        row = {
            "kind": c.kind,
            "task": c.task,
            "method": c.method + ("*" if matrices.is_shared(c.method, c.scale, c.kind) else ""),  # * see the note
            "S": str(c.scale),
            "runs": c.runs,
            "iterations/run": _range(c.iterations[0], c.iterations[1], lambda x: f"{x:,}"),
            "paper its": f"{c.paper_iterations:,.0f}" if c.paper_iterations is not None else "-",
            "examples": _range(c.examples[0], c.examples[1], _fmt_si),
            "GPU-hours": _range(c.hours[0], c.hours[1], _hours) if c.hours else "unknown",
            "@paper": _hours(at) if at is not None else "-",
        }
        if gpus:
            row[f"wall h @{gpus}"] = (
                _range(max(c.hours[0] / gpus, c.longest[0]), max(c.hours[1] / gpus, c.longest[1]), _hours)
                if c.hours and c.longest
                else "unknown"
            )
        rows.append(row)
    return pd.DataFrame(rows)


def totals(cells: list[Cell], gpus: int | None) -> dict[str, str]:
    runs = sum(c.runs for c in cells)
    known = all(c.hours for c in cells)
    out = {"runs": f"{runs:,}"}
    units = sorted({_unit(c.task) for c in cells})
    out["examples"] = "; ".join(
        _range(
            sum(c.examples[0] for c in cells if _unit(c.task) == u),
            sum(c.examples[1] for c in cells if _unit(c.task) == u),
            _fmt_si,
        )
        + f" {u}"
        for u in units
    )
    if all(c.flops for c in cells):
        out["FLOPs"] = _range(sum(c.flops[0] for c in cells), sum(c.flops[1] for c in cells), _fmt_si)  # type: ignore[index]
    if known:
        lo, hi = sum(c.hours[0] for c in cells), sum(c.hours[1] for c in cells)  # type: ignore[index]
        out["GPU-hours"] = _range(lo, hi, _hours)
        if gpus:
            chain = [max(c.longest[i] for c in cells) for i in (0, 1)]  # type: ignore[index]
            out[f"wall h @{gpus} GPUs"] = _range(max(lo / gpus, chain[0]), max(hi / gpus, chain[1]), _hours)
    else:
        out["GPU-hours"] = "unknown"
        if gpus:
            out[f"wall h @{gpus} GPUs"] = "unknown"
    return out


def pace_note() -> str:
    """How each method's iterations are counted, from the method table's paces."""
    by = {p: ", ".join(m.title for m in rules.METHODS.values() if m.pace == p) for p in rules.PACES}
    return (
        f"iterations: {by['gain']} (pace gain: AdaScale's r_t, or as many as its runs) between ⌈T1/S⌉ (gain S) "
        f"and T1 (gain 1); {by['scale']} exact (τ advances by S); {by['one']} and S = 1: T1. "
        "An iteration at S costs S micro-batches of GPU time."
    )


def sources(cells: list[Cell]) -> list[str]:
    """One line per task and rate: where its examples/s come from (bench.experiments.costbasis)."""
    import textwrap

    seen = dict.fromkeys((c.task, c.basis, c.note) for c in cells if c.note)
    return [
        textwrap.fill(f"  {task:<12} {basis}: {note}", 120, subsequent_indent=" " * 15, break_on_hyphens=False)
        for task, basis, note in sorted(seen)
    ]


def _task_hours(mine: list[Cell]) -> str:
    if not all(c.hours for c in mine):
        return "GPU-hours unknown"
    hours = _range(sum(c.hours[0] for c in mine), sum(c.hours[1] for c in mine), _hours)  # type: ignore[index]
    return hours + f" GPU-hours ({'/'.join(sorted({c.basis for c in mine}))})"


def per_task(cells: list[Cell], beside: list[Cell] | None = None) -> list[str]:
    """One line per task: its FLOPs and GPU-hours with their basis (the matrix's cost by task); a task priced
    from measured throughput also shows what `beside` (the same plan without it) prices it at, where that knows."""
    lines = []
    for task in sorted({c.task for c in cells}):
        mine = [c for c in cells if c.task == task]
        others = [c for c in beside or [] if c.task == task]
        fl = (
            _range(sum(c.flops[0] for c in mine), sum(c.flops[1] for c in mine), _fmt_si) + " FLOPs"  # type: ignore[index]
            if all(c.flops for c in mine)
            else "FLOPs not counted"
        )
        hours = _task_hours(mine)
        if others and all(c.hours for c in others) and any(c.basis == "measured" for c in mine):
            hours += f"; without the measurement: {_task_hours(others)}"
        lines.append(f"  {task:<12} {fl}, {hours}")
    return lines


@dataclass(frozen=True)
class PlanOptions:
    """`adascale-bench plan`'s options, typed."""

    matrix: str
    gpus: int | None = None  # also the wall-clock hours on this many GPUs
    throughput: str | None = None  # the throughput table (default: the shipped one)
    flops: str | None = None  # the FLOPs table (default: the shipped one)
    device: str = "a100"  # the GPU priced: its published rows, or its peak for counted FLOPs
    precision: str = "bf16"  # which of its dense peaks (FLOPs basis)
    mfu: float = DEFAULT_MFU  # the assumed fraction of that peak (FLOPs basis)
    basis: str = "published"  # published throughput (bench.experiments.costbasis), or counted FLOPs
    published: str | None = None  # the published throughput table (default: the shipped one)
    json: bool = False  # every cell and the totals as JSON instead of the table


def _wrap(text: str) -> str:
    """A note in lines of at most 120 characters."""
    import textwrap

    return "\n".join(textwrap.wrap(text, 120, break_on_hyphens=False))


def as_json(m: matrices.Matrix, cells: list[Cell], total: dict[str, str]) -> str:
    """`plan --json`: every cell (its ranges as [fewest, most], the paper's count and the hours at it) and the
    totals as printed."""
    import dataclasses
    import json

    def cell(c: Cell) -> dict[str, Any]:
        return dataclasses.asdict(c) | {"scale": str(c.scale), "unit": _unit(c.task), "hours_at_paper": c.at_paper()}

    doc = {"matrix": str(m.path), "preset": m.preset, "runs": len(m.runs), "cells": [cell(c) for c in cells]}
    return json.dumps(doc | {"total": total}, indent=2, default=lambda x: None if x == math.inf else str(x))


def _notes(
    cells: list[Cell],
    bases: list[str],
    flops_path: Path,
    path: Path,
    published_path: Path,
    peak: Peak,
    gpus: int | None,
    preset: str,
) -> None:
    """What the plan's numbers rest on, one note per basis it used, each wrapped at 120 characters."""

    def say(text: str) -> None:
        print(_wrap(text))

    say(pace_note())
    say(
        f"FLOPs: examples × the counted FLOPs of forward + backward per example (one micro-batch's ÷ the b it was "
        f"counted at, from {flops_path}: matmuls, convolutions, attention; elementwise work and the optimizer not "
        "counted)."
    )
    if "measured" in bases:
        say(f"GPU-hours, basis `measured`: examples ÷ examples/s at S = 1 on one GPU (from {path}).")
    if {"published", "proxy"} & set(bases):
        say(
            "GPU-hours, basis `published`: examples ÷ a public source's training throughput of the task's model on "
            f"one {DEVICE_NAMES[peak.device]} at the run's precision (from {published_path}); `proxy`: another "
            "model's published throughput on that GPU, scaled by counted FLOPs (no public figure for the task's "
            "model). `amp: none` reads the tf32 rows: PyTorch runs convolutions and cuDNN's recurrent layers in TF32 "
            "by default but matmuls in FP32, so a tf32 figure is optimistic for the transformer. Measured "
            "throughput (`--write-throughput`) supersedes both; `--basis flops` prices counted FLOPs at a stated "
            "utilisation instead."
        )
    if "FLOPs" in bases:
        say(
            f"GPU-hours, basis `FLOPs`: FLOPs ÷ ({peak.label()}) = FLOPs ÷ {peak.flops_per_s / 1e12:g} TFLOP/s; "
            "an assumption, not a measurement: replace it with measured examples/s (`submit MATRIX --rehearse "
            "--write-throughput` on the cluster) or change --device/--precision/--mfu."
        )
    if gpus:
        say(
            f"wall-clock at {gpus} GPUs: GPU-hours / {gpus}, perfectly packed, but a run uses at most S GPUs "
            "(one micro-batch each) and LSW+ / scaled SGD start after their AdaScale runs: never less than "
            "the longest such chain."
        )
    missing = sorted({(c.task, preset) for c in cells if not c.hours})
    if missing:
        names = ", ".join(f"{t} ({p})" for t, p in missing)
        say(
            f"GPU-hours unknown: no examples/s for {names} in {path} and no FLOPs in {flops_path}. "
            "Count them (`adascale-bench flops --task T --preset P --write CSV`, then `plan --flops CSV`; a task "
            "without synthetic data, as a task of yours, is counted on its data: --data-root D), or measure them "
            "on the GPU the runs will use: "
            + FILL_HINT.format(path=path)
            + " (or fill the examples_per_s column by hand and pass --throughput CSV)"
        )


def plan(args: PlanOptions) -> int:
    import pandas as pd

    m = matrices.load(args.matrix)
    path = Path(args.throughput) if args.throughput else THROUGHPUT
    throughput = read_throughput(path)
    gpus = args.gpus
    flops_path = Path(args.flops or FLOPS)
    peak = Peak(args.device, args.precision, _mfu(args.mfu))
    if args.basis not in BASES:
        raise UserError(f"--basis {args.basis!r}: expected one of {', '.join(BASES)}")
    published_path = Path(args.published or PUBLISHED)
    published = read_published(published_path) if args.basis == "published" else {}
    cells = make_plan(m, throughput, gpus, read_flops(flops_path), peak, published)
    df = frame(cells, gpus, m.methods)
    total = totals(cells, gpus)
    bases = sorted({c.basis for c in cells if c.basis})
    total["basis"] = " + ".join(bases) if bases else "-"
    if args.json:
        print(as_json(m, cells, total))
        return 0
    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 200):
        print(f"matrix {m.path} ({m.preset}): {len(m.runs)} runs")
        print(df.to_string(index=False))
    print(f"* {shared_note(m.methods)}; paper its: the paper's Table 2 count; @paper: the GPU-hours at it")
    print(f"total examples {total.pop('examples')}")  # per unit: its own line (the cells' FLOPs: per task, --json)
    wall = {k: total.pop(k) for k in [k for k in total if k.startswith("wall h")]}  # a line of its own
    print("total: " + ", ".join(f"{k} {v}" for k, v in total.items()))
    print("".join(f"total {k} {v}\n" for k, v in wall.items()), end="")
    # a measured basis is printed beside what the published (or FLOPs) basis would price the same tasks at
    beside = make_plan(m, {}, gpus, read_flops(flops_path), peak, published) if "measured" in bases else []
    print("per task:")
    print("\n".join(per_task(cells, beside)))
    print(f"per task, examples/s on one GPU ({DEVICE_NAMES[peak.device]} unless measured):")
    measured = {c.task for c in cells if c.basis == "measured"}
    print("\n".join(sources(cells + [c for c in beside if c.task in measured])))
    _notes(cells, bases, flops_path, path, published_path, peak, gpus, m.preset)
    return 0
