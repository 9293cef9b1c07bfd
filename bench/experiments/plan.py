"""`adascale-bench plan MATRIX [--gpus N] [--throughput CSV]`: what a matrix costs before it is submitted.

Per cell (experiment × task × method × S) and in total: runs, iterations per run, examples processed and
GPU-hours. Iterations follow each method's pace in the method table (bench.algo.rules.METHODS): S = 1 and
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

import csv
import functools
import io
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench import safefs
from bench.algo import rules
from bench.algo.rules import advance, method_order, shared_note
from bench.algo.schedules import ScaleSchedule, scale_schedule
from bench.errors import UserError
from bench.experiments import matrix as matrices
from bench.experiments.costbasis import (
    BASES,
    DEVICE_NAMES,
    PEAKS,
    PUBLISHED,
    Published,
    positive_number,
    rate_for,
    read_published,
)
from bench.files import atomic_write_bytes
from bench.runspec import RunSpec

THROUGHPUT = Path(__file__).with_name("throughput.csv")
THROUGHPUT_COLUMNS = ["task", "preset", "examples_per_s", "device", "measured"]
FLOPS = Path(__file__).with_name("flops.csv")
FLOPS_COLUMNS = ["task", "preset", "batch_size", "flops_per_microbatch", "params", "counted", "torch"]
DEFAULT_MFU = 0.4  # assumed model-FLOPs utilisation: ~40 % is what well-tuned CNN/transformer training reaches
FILL_HINT = "adascale-bench perf --device cuda --preset paper --scales 1 --write-throughput {path}"


TABLE_BYTES = 16 << 20  # a throughput or FLOPs table: a few kB


# -- the throughput table ---------------------------------------------------------------------------------------
def read_throughput(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(task, preset) -> {examples_per_s: float | None, device, measured}; an empty examples_per_s is unknown."""
    try:
        text = safefs.read_text(path, TABLE_BYTES)  # a FIFO or a huge file: one line, not a hang
    except OSError as e:
        raise UserError(f"throughput table {path}: {e.strerror or e}") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in ("task", "preset", "examples_per_s") if c not in (reader.fieldnames or [])]
    if missing:
        raise UserError(f"throughput table {path}: no column {missing[0]} (expected {','.join(THROUGHPUT_COLUMNS)})")
    out = {}
    for i, row in enumerate(reader, 2):
        value = positive_number(row.get("examples_per_s"), "examples_per_s", f"throughput table {path}, line {i}", True)
        key = (row["task"].strip(), row["preset"].strip())
        out[key] = {"examples_per_s": value, "device": row.get("device") or "", "measured": row.get("measured") or ""}
    return out


def write_throughput(path: Path, measured: dict[tuple[str, str], tuple[float, str]]) -> None:
    """Add or update the rows of (task, preset) -> (examples/s at S = 1 on one device, device), keeping the
    other rows and their order."""
    path = Path(path)
    rows: list[dict[str, str]] = []
    if path.exists():
        rows = [
            {k: r.get(k) or "" for k in THROUGHPUT_COLUMNS}
            for r in csv.DictReader(io.StringIO(safefs.read_text(path, TABLE_BYTES)))
        ]
    today = time.strftime("%Y-%m-%d")
    for (task, preset), (eps, device) in measured.items():
        new = {"task": task, "preset": preset, "examples_per_s": f"{eps:.6g}", "device": device, "measured": today}
        for r in rows:
            if (r["task"], r["preset"]) == (task, preset):
                r.update(new)
                break
        else:
            rows.append(new)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=THROUGHPUT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_bytes(path, buf.getvalue().encode())


def read_flops(path: Path) -> dict[tuple[str, str], float]:
    """(task, preset) -> counted FLOPs of forward + backward per example (bench.experiments.flops): the
    table's micro-batch divided by the batch size it was counted at, so that a run at another b (the
    critical-batch sweep's) is priced per example, not per micro-batch of another size."""
    try:
        text = safefs.read_text(path, TABLE_BYTES)  # a FIFO or a huge file: one line, not a hang
    except OSError as e:
        raise UserError(f"FLOPs table {path}: {e.strerror or e}") from None
    reader = csv.DictReader(io.StringIO(text))
    if not {"task", "batch_size", "flops_per_microbatch"} <= set(reader.fieldnames or []):
        raise UserError(f"FLOPs table {path}: expected columns {','.join(FLOPS_COLUMNS)}")
    out = {}
    for i, row in enumerate(reader, 2):
        where = f"FLOPs table {path}, line {i}"
        per_micro = positive_number(row.get("flops_per_microbatch"), "flops_per_microbatch", where)
        b = positive_number(row.get("batch_size"), "batch_size", where)
        out[(row["task"].strip(), (row.get("preset") or "").strip())] = per_micro / b  # type: ignore[operator]
    return out


@dataclass(frozen=True)
class Peak:
    """The FLOP/s a GPU-hour is assumed to deliver when only FLOPs are known: peak × utilisation."""

    device: str = "a100"
    precision: str = "bf16"
    mfu: float = DEFAULT_MFU

    @property
    def flops_per_s(self) -> float:
        return PEAKS[self.device][self.precision] * self.mfu

    def label(self) -> str:
        peak = PEAKS[self.device][self.precision] / 1e12
        name = DEVICE_NAMES[self.device]
        return f"counted FLOPs at {self.mfu:.0%} of {name} dense {self.precision} ({peak:g} TFLOP/s)"


# -- iterations and examples of one run -------------------------------------------------------------------------
@functools.cache
def walk(scales: ScaleSchedule, T1: float, gain_is_scale: bool) -> tuple[int, int]:
    """(iterations, Σ S_t) of a run whose τ advances by S_t per iteration (gain_is_scale: LSW, AdaScale's
    fastest; the iterations are `iterations_for`'s) or by 1 (AdaScale's slowest, identity: τ_t = t): what
    walking the loop gives, computed per constant-S stretch of the schedule (bench.algo.rules.advance), so a
    T1 of 1e9 costs what a T1 of 100 does."""
    t, _, total = advance(scales, T1, None if gain_is_scale else 1.0)
    return t, total


@dataclass
class RunCost:
    iterations: tuple[int, int]  # (fewest, most)
    examples: tuple[float, float]
    max_scale: int
    waits: bool  # starts after another run of the same length (LSW+ after AdaScale, scaled SGD after its grid)


def run_cost(spec: RunSpec, logreg_n: int) -> RunCost:
    """The iterations and examples of one resolved run (see the module docstring)."""
    scales = scale_schedule(spec.scale, spec.elastic, spec.T1)
    T1, b, method = float(spec.T1), int(spec.batch_size), spec.method
    fast, slow = walk(scales, T1, True), walk(scales, T1, False)
    row = rules.method(method)
    lo, hi = {"scale": (fast, fast), "gain": (fast, slow), "one": (slow, slow)}[row.pace]
    its, sums = [lo[0], hi[0]], [lo[1], hi[1]]
    if spec.max_epochs and spec.task == "logreg":  # the sweep: stopped after max_epochs of data
        cap_examples = spec.max_epochs * logreg_n
        for i in range(2):
            if sums[i] * b > cap_examples:
                per = sums[i] / its[i]
                its[i] = math.ceil(cap_examples / (per * b) - 1e-12)
                sums[i] = its[i] * per
    return RunCost((its[0], its[1]), (sums[0] * b, sums[1] * b), scales.max_scale(), row.needs is not None)


def _mfu(mfu: float | None) -> float:
    mfu = DEFAULT_MFU if mfu is None else float(mfu)
    if not 0 < mfu <= 1:
        raise UserError(f"--mfu {mfu}: expected a fraction of the peak in (0, 1]")
    return mfu


# -- the plan ---------------------------------------------------------------------------------------------------
@dataclass
class Cell:
    kind: str
    task: str
    preset: str
    method: str
    scale: int | str
    runs: int = 0
    iterations: list[int] = field(default_factory=lambda: [math.inf, 0])  # type: ignore[list-item]
    examples: list[float] = field(default_factory=lambda: [0.0, 0.0])
    hours: list[float] | None = None  # GPU-hours (fewest, most); None: neither throughput nor FLOPs known
    flops: list[float] | None = None  # counted FLOPs (fewest, most); None: not counted for this task
    basis: str = ""  # what the GPU-hours come from: measured, published, proxy or FLOPs (bench.experiments.costbasis)
    note: str = ""  # that rate and its source, in a line
    longest: list[float] | None = None  # the longest chain of runs, in hours on min(S, N) GPUs
    paper_iterations: float | None = None  # the paper's own count for this cell (Table 2), where it has one

    def at_paper(self) -> float | None:
        """The cell's GPU-hours at the paper's own iteration count: linear between the range's ends (at a fixed
        S, examples and hours grow with the iterations); None without the paper's count, the hours or a range."""
        its, h, p = self.iterations, self.hours, self.paper_iterations
        if p is None or h is None or self.preset != "paper":
            return None
        if its[1] <= its[0]:
            return h[0]
        share = min(max((p - its[0]) / (its[1] - its[0]), 0.0), 1.0)
        return h[0] + share * (h[1] - h[0])


def _unit(task: str) -> str:
    """What the task's batch_size counts (its card's `unit`)."""
    from tasks import card_of as card

    return card(task).unit


def _fmt_si(x: float) -> str:
    for div, suffix in ((1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.3g}"


def _range(lo: float, hi: float, f: Any) -> str:
    return f(lo) if f(lo) == f(hi) else f"{f(lo)}–{f(hi)}"


def _hours(h: float) -> str:
    return f"{h:,.0f}" if h >= 100 else f"{h:.3g}"


def make_plan(
    m: matrices.Matrix,
    throughput: dict[tuple[str, str], dict[str, Any]],
    gpus: int | None,
    flops: dict[tuple[str, str], float] | None = None,
    peak: Peak | None = None,
    published: dict[tuple[str, str, str, str], Published] | None = None,
) -> list[Cell]:
    from bench.run.spec import resolve
    from tasks import card_of as card
    from tasks.presets.logreg import N as logreg_n

    adapters: dict[str, Any] = {}
    cells: dict[tuple, Cell] = {}
    for req in m.runs:
        if req.task not in adapters:  # resolve() only reads these: no task module, no torch
            adapters[req.task] = SimpleNamespace(name=req.task, presets=card(req.task).presets, needs_data=False)
        spec = resolve(
            adapters[req.task], req.method, req.scale, req.seed, m.preset, None, {**m.overrides, **req.overrides}
        )
        cost = run_cost(spec, logreg_n)
        key = (req.experiment.get("kind", "table2"), req.task, req.method, req.scale)
        cell = cells.setdefault(key, Cell(key[0], req.task, m.preset, req.method, req.scale))
        cell.runs += 1
        cell.iterations = [min(cell.iterations[0], cost.iterations[0]), max(cell.iterations[1], cost.iterations[1])]
        cell.examples = [cell.examples[0] + cost.examples[0], cell.examples[1] + cost.examples[1]]
        per_example = (flops or {}).get((req.task, m.preset))
        if per_example:
            run_flops = [e * per_example for e in cost.examples]
            cell.flops = [a + f for a, f in zip(cell.flops or [0.0, 0.0], run_flops, strict=True)]
        # examples/s on one GPU: measured, else published (or a proxy), else counted FLOPs at the peak
        rate = rate_for(req.task, m.preset, spec, throughput, published or {}, flops or {}, peak, _unit(req.task))
        if rate is not None:
            run_hours, cell.basis, cell.note = (
                [e / rate.examples_per_s / 3600 for e in cost.examples],
                rate.basis,
                rate.note,
            )
            cell.hours = [a + h for a, h in zip(cell.hours or [0.0, 0.0], run_hours, strict=True)]
            width = min(cost.max_scale, gpus or cost.max_scale)
            chain = [h / width * (2 if cost.waits else 1) for h in run_hours]
            cell.longest = [max(a, c) for a, c in zip(cell.longest or [0.0, 0.0], chain, strict=True)]
    kinds = list(matrices.KINDS)

    def order(c: Cell) -> tuple:
        scale = (0, c.scale, "") if isinstance(c.scale, int) else (1, 0, c.scale)
        return (kinds.index(c.kind) if c.kind in kinds else 9, c.task, method_order(c.method), scale)

    paper = paper_iterations() if m.preset == "paper" else {}  # a tiny run's count says nothing of the paper's
    for c in cells.values():
        c.paper_iterations = paper.get((c.task, str(c.scale), c.method))
    return sorted(cells.values(), key=order)


PAPER_TABLE = Path(__file__).resolve().parents[2] / "reports" / "paper_table2.csv"  # the paper's Table 2, as data


def paper_iterations(path: Path = PAPER_TABLE) -> dict[tuple[str, str, str], float]:
    """(task, S, method) -> the iterations the paper's Table 2 prints ({} when the table is not there)."""
    try:
        rows = csv.DictReader(io.StringIO(path.read_text()))
        return {(r["task"], r["scale"], r["method"]): float(r["iterations"]) for r in rows if r.get("iterations")}
    except (OSError, ValueError, KeyError):
        return {}


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


def per_task(cells: list[Cell]) -> list[str]:
    """One line per task: its FLOPs and GPU-hours with their basis (the matrix's cost by task)."""
    lines = []
    for task in sorted({c.task for c in cells}):
        mine = [c for c in cells if c.task == task]
        fl = (
            _range(sum(c.flops[0] for c in mine), sum(c.flops[1] for c in mine), _fmt_si) + " FLOPs"  # type: ignore[index]
            if all(c.flops for c in mine)
            else "FLOPs not counted"
        )
        if all(c.hours for c in mine):
            hours = _range(sum(c.hours[0] for c in mine), sum(c.hours[1] for c in mine), _hours)  # type: ignore[index]
            hours += f" GPU-hours ({'/'.join(sorted({c.basis for c in mine}))})"
        else:
            hours = "GPU-hours unknown"
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
    print("per task:")
    print("\n".join(per_task(cells)))
    print(f"per task, examples/s on one GPU ({DEVICE_NAMES[peak.device]} unless measured):")
    print("\n".join(sources(cells)))
    _notes(cells, bases, flops_path, path, published_path, peak, gpus, m.preset)
    return 0
