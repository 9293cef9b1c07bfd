"""`adascale-bench perf`: what AdaScale and the engine cost over plain training (docs/design.md §4).

Per task and scale S, three variants train the same model from the same initial weights, with the same
optimizer settings (the preset's), on the same pre-fetched micro-batches:

- `adascale`: the real engine (Engine.setup, then Engine.step, as Engine.run drives it) with the
  AdaScale rule, the gradient hooks at S > 1 and the metrics log, exactly as a run uses them;
- `identity`: the same engine with identity scaling and statistics off (track_stats=False);
- `bare`: a hand-written PyTorch loop with the identity engine's arithmetic: per micro-batch the same
  dropout seed, forward and backward; the accumulated gradient divided by A; torch.optim.SGD's step at
  the same lr; the mean loss read once per iteration (every real loop watches its loss). At S ≤ 2 it
  ends with the identity engine's weights bit for bit; at larger S the engine's pairwise reduction sums
  the micro-batch gradients in another order (see bench.core.engine.reduction), which is part of what it costs.

A fourth variant, `big`, answers the issue's goal question: is simulating a batch of S·b by S
micro-batches (the engine) nearly as fast as training that one batch of S·b outright? `big` is the bare
loop with one forward and backward per iteration over a single batch of the same S·b examples (the
TrainSet's collate over the S micro-batches' items), with the engine's CUDA layout (channels-last,
bench.core.engine.amp.cuda_speed_knobs). simulated_over_big_batch = examples/s of `adascale` / examples/s of
`big` (batched_over_big_batch: of the batched engine, when timed). It is meaningless for tasks whose
items are whole batches (speech, transformer: items_per_microbatch = 1, S batches are not one batch of
S·b examples): there `big` is not built, a one-line notice says so, and the columns stay empty; nor when
the big batch does not fit in memory (dropped at its first step, with a notice).

adascale_over_identity is the price of AdaScale (hooks, statistics, gain); engine_over_bare the price of the
engine itself. They run in one process, interleaved in rounds, so whatever else the machine does hits all
three alike and cancels in the ratios, which are medians of per-round ratios. The rounds' orders are balanced
for carryover (`round_order`) and each timed block follows an untimed iteration of its own variant: a variant
is timed as a run runs, after itself (interleaved after `big` in 3 rounds of 4, as a rotation had it, AdaScale
looked 3 % dearer on tiny cifar10 than it is). Data loading is not compared: the micro-batches are loaded and
moved to the device once, before timing. A timed sample is a block of iterations of about 50 ms (tiny models
iterate in well under a millisecond). On a CPU with one torch thread the clock is the process's CPU time (see
`clock_for`); wall-clock ratios are reported too. The metrics log is serialised when it is flushed, every 1000
iterations (as in Engine.run), so the medians leave that out; `flush_us_per_iteration` reports it.
peak_memory_mb is the peak over every variant of the cell, `big` included (on a GPU the big batch's
activations usually set it).

`--synthetic`: every task trains on random data of its preset's real shapes (tasks.synthetic),
so the paper models can be timed on a machine without their datasets.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from bench.core.algo.rules import ADASCALE, IDENTITY, gain_rule
from bench.core.engine.allocator import retain_freed_memory
from bench.core.engine.distributed import Dist, pick_device
from bench.core.errors import UserError
from bench.core.files import write_csv_rows
from bench.experiments import stepchecks
from bench.experiments.perfloops import BIG, EXTRA_VARIANTS, VARIANTS, EngineLoop, Setup, build

WARMUP = 3  # untimed iterations per variant: lazy allocations, optimizer state, first-call caches
SAMPLE_S = 0.05  # target duration of one timed sample (a block of iterations)
MAX_BLOCK = 200
COLUMNS = [
    "task",
    "scale",
    "optimizer",  # every variant's (sgd, adamw)
    "rule",  # what the `adascale` variant runs: AdaScale under SGD, AdamScale under AdamW
    "examples_per_iteration",
    *(f"examples_per_s_{v}" for v in VARIANTS),
    *(f"ms_{v}" for v in VARIANTS),
    *(f"iqr_ms_{v}" for v in VARIANTS),
    "adascale_over_identity",
    "engine_over_bare",
    "adascale_over_bare",
    "adascale_over_identity_low",
    "adascale_over_identity_high",
    "engine_over_bare_low",
    "engine_over_bare_high",
    "adascale_over_bare_low",
    "adascale_over_bare_high",
    *(f"wall_ms_{v}" for v in VARIANTS),
    "adascale_over_identity_wall",
    "engine_over_bare_wall",
    "flush_us_per_iteration",
    *(f"examples_per_s_{v}" for v in EXTRA_VARIANTS),
    *(f"ms_{v}" for v in EXTRA_VARIANTS),
    *(f"{v}_over_adascale" for v in EXTRA_VARIANTS),
    f"examples_per_s_{BIG}",
    f"ms_{BIG}",
    "simulated_over_big_batch",
    "batched_over_big_batch",
    "peak_memory_mb",
    "peak_memory_kind",
    *stepchecks.COLUMNS,
    "device_name",
    "synthetic",
    "clock",
    "iterations_per_sample",
    "samples",
    "device",
    "threads",
    "load_1min",
]


def peak_memory(device: torch.device) -> tuple[float, str]:
    """(MiB, what it is): the CUDA caching allocator's peak since the last reset on a GPU; the process's
    peak resident set (ru_maxrss, never reset: the largest cell so far) on a CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_allocated"
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "cpu_maxrss_process"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return platform.processor() or platform.machine() or "cpu"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def clock_for(device: torch.device) -> str:
    """`cpu`: the process's CPU time, on a CPU run with one torch thread: on a shared machine wall time
    also counts the slices other processes take, which is noise, not cost (it can vary 2x under load).
    `wall` otherwise (a GPU computes asynchronously; several CPU threads' times would add up)."""
    return "cpu" if device.type == "cpu" and torch.get_num_threads() == 1 else "wall"


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval for the median of `values`: the order statistics
    x_(k) and x_(n+1-k), k the largest with P(Binomial(n, 1/2) < k) <= (1 - level)/2 (for n = 30 at
    95 %: the 10th and the 21st). It says whether a ratio's distance from a goal is more than the
    machine's noise, without assuming how per-round ratios are distributed. NaN when n is too small."""
    xs, n = sorted(values), len(values)
    tail, below, k = (1 - level) / 2, 0.0, 0
    while k < n and below + math.comb(n, k) / 2**n <= tail:
        below += math.comb(n, k) / 2**n
        k += 1
    return (xs[k - 1], xs[n - k]) if k > 0 else (math.nan, math.nan)


def round_order(n: int, r: int) -> list[int]:
    """The order of n variants in round r: a Williams design, the Latin square balanced for carryover. Over
    n rounds (2n when n is odd) every variant takes every place equally often and comes directly after every
    other variant equally often, so what one variant leaves behind (a big batch evicts a tiny model's code and
    data from the caches) is charged to none in particular. (Rotating a b c d, b c d a, … keeps the cyclic
    order: there a would follow d in every round but one.)"""
    if n < 1:
        raise ValueError(f"round_order: {n} variants")
    first, lo, hi = [0], 1, n - 1
    while lo <= hi:  # 0, 1, n − 1, 2, n − 2, …
        first.append(lo)
        lo += 1
        if lo <= hi:
            first.append(hi)
            hi -= 1
    k = r % (n if n % 2 == 0 else 2 * n)
    row = [(x + k) % n for x in first]
    return row if k < n else row[::-1]


def _warm_up(setup: Setup, device: torch.device) -> dict[str, float]:
    """WARMUP untimed iterations of each variant; the seconds of each one's last. Drops `big` where one batch
    of S·b examples does not fit in memory."""
    last: dict[str, float] = {}
    for _ in range(WARMUP):
        for v in tuple(setup.loops):
            _sync(device)
            start = time.perf_counter()
            try:
                setup.step(v, 0)
            except torch.OutOfMemoryError:
                if v != BIG:
                    raise
                setup.drop_big(f"`{BIG}`: one batch of {setup.examples} examples does not fit in memory; dropped")
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                continue
            _sync(device)
            last[v] = time.perf_counter() - start
    return last


def measure(
    setup: Setup, repeats: int, device: torch.device, tick: Callable[[], None] = lambda: None
) -> dict[str, Any]:
    """Interleaved timings of the variants: median ms per iteration, IQR, paired ratios (on the
    clock of `clock_for`, and on wall time as well). Each timed block follows one untimed iteration of its
    own variant, so that it is timed as a run runs it, after itself, not cold after another variant."""
    clock = clock_for(device)
    now = time.process_time if clock == "cpu" else time.perf_counter
    last = _warm_up(setup, device)
    variants = tuple(setup.loops)
    block = max(1, min(MAX_BLOCK, math.ceil(SAMPLE_S / max(statistics.median(last.values()), 1e-9))))
    times: dict[str, list[float]] = {v: [] for v in variants}
    walls: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(repeats):
        for v in (variants[j] for j in round_order(len(variants), r)):
            setup.step(v, block)  # the lead-in, untimed
            _sync(device)
            start, wall = now(), time.perf_counter()
            for i in range(block):
                setup.step(v, i)
            _sync(device)
            times[v].append((now() - start) / block)
            walls[v].append((time.perf_counter() - wall) / block)
        tick()
    row: dict[str, Any] = {"examples_per_iteration": setup.examples, "iterations_per_sample": block, "clock": clock}
    for v in variants:
        ms = sorted(t * 1e3 for t in times[v])
        median = statistics.median(ms)
        q1, q3 = (statistics.quantiles(ms, n=4)[i] for i in (0, 2)) if len(ms) > 1 else (median, median)
        row[f"ms_{v}"] = median
        row[f"iqr_ms_{v}"] = q3 - q1
        row[f"examples_per_s_{v}"] = setup.examples / (median / 1e3)
        row[f"wall_ms_{v}"] = statistics.median(walls[v]) * 1e3

    def per_round(t: dict[str, list[float]], a: str, b: str) -> list[float]:
        return [x / y for x, y in zip(t[a], t[b], strict=True)]

    def paired(t: dict[str, list[float]], a: str, b: str) -> float:
        return statistics.median(per_round(t, a, b))

    row["adascale_over_identity"] = paired(times, ADASCALE, IDENTITY)
    row["engine_over_bare"] = paired(times, IDENTITY, "bare")
    row["adascale_over_bare"] = paired(times, ADASCALE, "bare")
    for name, (a, b) in {
        "adascale_over_identity": (ADASCALE, IDENTITY),
        "engine_over_bare": (IDENTITY, "bare"),
        "adascale_over_bare": (ADASCALE, "bare"),  # the goal's own ratio: whether ≤ 1.04 is shown, not guessed
    }.items():
        row[f"{name}_low"], row[f"{name}_high"] = median_interval(per_round(times, a, b))
    row["adascale_over_identity_wall"] = paired(walls, ADASCALE, IDENTITY)
    row["engine_over_bare_wall"] = paired(walls, IDENTITY, "bare")
    for v in variants:
        if v in EXTRA_VARIANTS:
            row[f"{v}_over_adascale"] = paired(times, v, ADASCALE)
    if BIG in variants:  # examples/s ratio = time ratio (both take S·b examples per iteration)
        row["simulated_over_big_batch"] = paired(times, BIG, ADASCALE)
        if "batched" in variants:
            row["batched_over_big_batch"] = paired(times, BIG, "batched")
    row["samples"] = repeats
    return row


def parse_scales(text: str) -> list[int]:
    try:
        scales = [int(s) for s in str(text).split(",") if s.strip()]
    except ValueError:
        scales = []
    if not scales or any(s < 1 for s in scales):
        raise UserError(f"--scales {text!r}: expected comma-separated positive integers, e.g. 1,4,16")
    return scales


def _data_root(args: PerfOptions, name: str, several: bool) -> str | None:
    """--data-root is the task's root for one task, and a folder of <task>/ roots for several."""
    if args.data_root is None:
        return None
    return str(Path(args.data_root) / name) if several else args.data_root


def table(rows: list[dict[str, Any]]) -> str:
    """The measured table: median ms per iteration (± IQR) and examples/s per variant, and the ratios."""
    head = (
        f"{'task':<12}{'S':>4}  {'ms adascale':>16}  {'ms identity':>16}  {'ms bare':>16}"
        f"  {'ex/s adascale':>13}  {'ex/s identity':>13}  {'ex/s bare':>10}  {'as/identity (95 %)':>21}"
        f"  {'engine/bare (95 %)':>21}  {'as/bare (95 %)':>21}"
        f"  {'ex/s big':>10}  {'sim/big':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        ms = "".join(f"  {r[f'ms_{v}']:>9.3f} ±{r[f'iqr_ms_{v}']:>5.2g}" for v in VARIANTS)
        eps = "".join(f"  {r[f'examples_per_s_{v}']:>{w}.0f}" for v, w in zip(VARIANTS, (13, 13, 10), strict=True))
        ratios = "".join(
            f"  {r[k]:>6.3f} [{r[f'{k}_low']:.3f}, {r[f'{k}_high']:.3f}]"
            for k in ("adascale_over_identity", "engine_over_bare", "adascale_over_bare")
        )
        big = (
            f"  {r[f'examples_per_s_{BIG}']:>10.0f}  {r['simulated_over_big_batch']:>8.3f}"
            if "simulated_over_big_batch" in r
            else f"  {'-':>10}  {'-':>8}"
        )
        lines.append(f"{r['task']:<12}{r['scale']:>4}{ms}{eps}{ratios}{big}")
    return "\n".join(lines)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    write_csv_rows(path, COLUMNS, rows)


@dataclass
class PerfOptions:
    """`adascale-bench perf`'s options, typed (the CLI's flags; the defaults are its defaults)."""

    task: list[str] | None = None  # default: every task
    device: str = "cpu"
    preset: str = "tiny"
    scales: str = "1,4,16"
    repeats: int = 20
    data_root: str | None = None
    out: str = "runs/perf"
    write_throughput: str | None = None
    synthetic: bool | None = None  # None: on for the paper preset without a data root
    microbatch_mode: str = "sequential"  # both: also time microbatch_mode=batched
    amp: str = "none"  # both: also time amp=bf16
    optimizer: str = "sgd"  # every variant's; adamw: the `adascale` variant runs AdamScale, the bare loop AdamW
    check: bool = False  # exit 1 where an engine variant's iteration fails bench.experiments.stepchecks


def _cell(
    task: Any,
    s: int,
    args: PerfOptions,
    root: str | None,
    dist: Dist,
    tmp: Path,
    extras: tuple[str, ...],
    synthetic: bool,
    bar: Any,
    said: set[str],
) -> dict[str, Any]:
    """One task at one S: build its variants, time them interleaved, and print its line (each ratio against the
    bare loop timed in this process, so that a regression shows in the benchmark's output)."""
    bar.set_description(f"{task.name} S={s} (setting up)")
    if dist.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dist.device)
    setup = build(task, s, args.preset, root, dist, tmp, extras, synthetic, args.optimizer)
    bar.set_description(f"{task.name} S={s}")
    try:
        row = measure(setup, int(args.repeats), dist.device, lambda: bar.update(1))
        adascale = setup.loops[ADASCALE]
        assert isinstance(adascale, EngineLoop)
        row["flush_us_per_iteration"] = adascale.flush_us_per_iteration()
        row["peak_memory_mb"], row["peak_memory_kind"] = peak_memory(dist.device)
        row.update(stepchecks.observe(setup))  # after the peak: its profiler's own allocations are not the loop's
    finally:
        setup.close()
    row.update(
        task=task.name,
        scale=s,
        optimizer=args.optimizer,
        rule=gain_rule(args.optimizer),
        device=str(dist.device),
        device_name=device_name(dist.device),
        synthetic=synthetic,
        threads=torch.get_num_threads(),
        load_1min=round(os.getloadavg()[0], 2),
    )
    for notice in setup.notices:
        if notice not in said:  # once per task, not once per scale
            said.add(notice)
            tqdm.write(notice)
    extra = "".join(
        f", {v}: {row[f'examples_per_s_{v}']:.0f} ex/s (time {row[f'{v}_over_adascale']:.3f}x adascale)"
        for v in extras
        if f"{v}_over_adascale" in row
    )
    extra += "".join(f", {k} {row[k]:.3f}" for k in ("simulated_over_big_batch", "batched_over_big_batch") if k in row)
    tqdm.write(
        f"{task.name} S={s}{'' if args.optimizer == 'sgd' else ', ' + args.optimizer}: "
        f"{row['rule']}/identity {row['adascale_over_identity']:.3f}, "
        f"engine/bare {row['engine_over_bare']:.3f}, adascale/bare {row['adascale_over_bare']:.3f} "
        f"(against the bare loop timed in this process), "
        f"adascale {row['examples_per_s_adascale']:.0f} ex/s{extra}, "
        f"peak {row['peak_memory_mb']:.0f} MiB; {stepchecks.line(row)}"
    )
    return row


def _report(rows: list[dict[str, Any]], out: Path, device: torch.device, repeats: int, args: PerfOptions) -> None:
    """perf.csv, the table, how it was measured, and the throughput table when asked for."""
    path = out / "perf.csv"
    write_csv(path, rows)
    print(table(rows))
    clock = rows[0]["clock"] if rows else clock_for(device)
    print(
        f"device {device}, {rows[0]['threads'] if rows else '?'} torch thread(s), clock: "
        f"{'process CPU time' if clock == 'cpu' else 'wall time'}; load average now "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}. Medians (± IQR) over {repeats} interleaved samples; "
        "ratios: medians of per-round ratios [95 % distribution-free interval]. Micro-batches pre-fetched: "
        "data loading is not compared."
        + (
            f" Optimizer {args.optimizer}: the `adascale` columns time {gain_rule(args.optimizer)}."
            if args.optimizer != "sgd"
            else ""
        )
    )
    print(f"perf: {path}")
    if args.write_throughput:
        from bench.experiments.costtables import write_throughput

        name = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
        measured = {(r["task"], args.preset): (r["examples_per_s_bare"], name, "none") for r in rows if r["scale"] == 1}
        write_throughput(Path(args.write_throughput), measured)
        print(f"throughput (examples/s at S = 1, bare loop, {name}): {args.write_throughput}")


def perf(args: PerfOptions) -> int:
    """Run the benchmark for every requested task and scale; print the table and write perf.csv."""
    from tasks import available, get_task

    retain_freed_memory()  # as every run does (Engine._build): all three variants get the same allocator
    names = list(args.task) if args.task else available()
    tasks = [get_task(n) for n in names]
    scales = parse_scales(args.scales)
    if args.write_throughput and 1 not in scales:
        raise UserError("--write-throughput records examples/s at S = 1: include 1 in --scales")
    repeats = int(args.repeats)
    extras = tuple(
        v
        for v, opt in (
            ("batched", args.microbatch_mode),
            ("bf16", args.amp),
        )
        if opt == "both"
    )
    synthetic = args.synthetic
    if synthetic is None:  # default: on for the paper preset without a data root
        synthetic = args.preset == "paper" and args.data_root is None
    device = pick_device(args.device)
    dist = Dist(device=device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    said: set[str] = set()
    threads_before = torch.get_num_threads()
    bar = tqdm(total=len(tasks) * len(scales) * repeats, unit="round", dynamic_ncols=True, leave=False)
    try:
        with tempfile.TemporaryDirectory(prefix="perf-", dir=out) as tmp:
            for task in tasks:
                root = _data_root(args, task.name, len(tasks) > 1)
                for s in scales:
                    rows.append(_cell(task, s, args, root, dist, Path(tmp), extras, synthetic, bar, said))
    finally:
        bar.close()
        torch.set_num_threads(threads_before)
    _report(rows, out, device, repeats, args)
    return _judged(rows) if args.check else 0


def _judged(rows: list[dict[str, Any]]) -> int:
    """`--check`: each failed check on stderr, one line each, and exit 1; else one line saying what held."""
    failed = [line for r in rows for line in stepchecks.breaches(r)]
    for line in failed:
        print(f"perf --check: {line}", file=sys.stderr)
    if failed:
        return 1
    print(
        f"perf --check: {len(rows)} cell(s): every engine variant's loss finite, gain in [1, S], "
        f"host synchronisations per iteration ≤ {stepchecks.MAX_SYNCS:g}"
    )
    return 0
