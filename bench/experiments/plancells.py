"""What a matrix's runs cost, cell by cell: each run's iterations and examples from its method's pace, summed per
cell and priced in GPU-hours (bench.experiments.costbasis), apart from how `plan` prints them; no torch."""

from __future__ import annotations

import csv
import functools
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.core import methods as registry
from bench.core.algo.rules import advance, method_order
from bench.core.algo.schedules import ScaleSchedule, scale_schedule
from bench.core.runspec import RunSpec
from bench.experiments import matrix as matrices
from bench.experiments.costbasis import DEVICE_NAMES, PEAKS, Published, rate_for

DEFAULT_MFU = 0.4  # assumed model-FLOPs utilisation: ~40 % is what well-tuned CNN/transformer training reaches


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
    walking the loop gives, computed per constant-S stretch of the schedule (bench.core.algo.rules.advance), so a
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
    row = registry.method(method)
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


# the paper's Table 2, as data
PAPER_TABLE = Path(__file__).resolve().parents[2] / "reports" / "tables" / "paper_table2.csv"


def paper_iterations(path: Path = PAPER_TABLE) -> dict[tuple[str, str, str], float]:
    """(task, S, method) -> the iterations the paper's Table 2 prints ({} when the table is not there)."""
    try:
        rows = csv.DictReader(io.StringIO(path.read_text()))
        return {(r["task"], r["scale"], r["method"]): float(r["iterations"]) for r in rows if r.get("iterations")}
    except (OSError, ValueError, KeyError):
        return {}
