"""Evaluation sharded over the W ranks and reduced exactly (docs/design.md §1).

A task that implements `eval_stats(model, evalset, cfg, device, rank, world)` and `metrics_from(stats,
cfg)` is evaluated by every rank on its own shard of the evaluation set (`shard`: contiguous blocks of the
task's evaluation batches, in the set's fixed order, so every batch is the same batch as in one process).
The shards' sufficient statistics are gathered on rank 0 and combined there:

- int: summed as Python ints (exact: correct predictions, examples, word errors, n-gram matches);
- `FloatSum` (a float statistic kept as its terms, one per batch or example): all shards' terms summed
  once with math.fsum, which is exactly rounded and so independent of how the terms were split: W ranks
  report the very bits one process reports (a running float sum per shard would differ in the last bit);
- float: summed with math.fsum (exactly rounded over the shards' already rounded sums);
- list or tuple of numbers: summed element by element, the same way (BLEU's n-gram counts and totals);
- `Concat`: concatenated in rank order (per-image detections for yolo's mAP, which is no sum).

Rank 0 turns the combined statistics into metrics with `metrics_from`; the other ranks get None. A task
without `eval_stats` is evaluated by rank 0 alone with its `evaluate` (the other ranks wait).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from bench.core.engine.distributed import Dist
from bench.core.engine.loopstate import State
from bench.core.engine.task import Task
from bench.core.runspec import RunSpec


class Concat(list):
    """A statistic that is a list of per-item records, concatenated over the shards in rank order."""


class FloatSum(list):
    """A float sum kept as its terms; `combine` gives math.fsum of every shard's terms: the same float
    for any split of the terms into shards."""


_SLICE: int | None = None  # see sliced()


@contextlib.contextmanager
def sliced(batches: int) -> Iterator[None]:
    """Evaluate only the first `batches` evaluation batches of every set (the rehearsal's slice of the
    validation set: the whole code path, a fraction of the time). Every task shards through `shard`."""
    global _SLICE
    before, _SLICE = _SLICE, batches
    try:
        yield
    finally:
        _SLICE = before


def shard(n: int, rank: int, world: int) -> range:
    """Rank `rank`'s contiguous block of n items (batches) out of `world`: sizes differ by at most one,
    blocks are in rank order, so concatenating the shards gives range(n) (of the first `sliced` ones)."""
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} out of {world}")
    if _SLICE is not None:
        n = min(n, _SLICE)
    return range(rank * n // world, (rank + 1) * n // world)


def combine(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The statistics of the whole set from those of its shards (in rank order)."""
    if not parts:
        return {}
    keys = list(parts[0])
    for p in parts[1:]:
        if list(p) != keys:
            raise ValueError(f"shards disagree on their statistics: {keys} vs {list(p)}")
    out: dict[str, Any] = {}
    for k in keys:
        values = [p[k] for p in parts]
        first = values[0]
        if isinstance(first, FloatSum):
            out[k] = math.fsum(float(x) for v in values for x in v)
        elif isinstance(first, Concat):
            out[k] = Concat(x for v in values for x in v)
        elif isinstance(first, list | tuple):
            if len({len(v) for v in values}) != 1:
                raise ValueError(f"statistic {k!r}: shards give lists of different lengths")
            out[k] = [_sum(col) for col in zip(*values, strict=True)]
        else:
            out[k] = _sum(values)
    return out


def _sum(values: Any) -> int | float:
    values = list(values)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return sum(values)
    return math.fsum(float(v) for v in values)


def is_sharded(task: Any) -> bool:
    return callable(getattr(task, "eval_stats", None)) and callable(getattr(task, "metrics_from", None))


def evaluate(task: Task, model: nn.Module, evalset: Any, cfg: RunSpec, dist: Dist) -> dict[str, float] | None:
    """The task's metrics over the whole evaluation set, on rank 0 (None on the other ranks). Every rank
    must call it (collectives) with the model in eval mode, under no_grad."""
    if not is_sharded(task):
        if not dist.is_main:
            return None
        return {k: float(v) for k, v in task.evaluate(model, evalset, cfg, dist.device).items()}
    mine = task.eval_stats(model, evalset, cfg, dist.device, dist.rank, dist.world)
    parts = dist.gather_objects(mine)
    if parts is None:
        return None
    return {k: float(v) for k, v in task.metrics_from(combine(parts), cfg).items()}


def evaluate_sharded_locally(
    task: Task, model: nn.Module, evalset: Any, cfg: RunSpec, world: int, device: torch.device | None = None
) -> dict[str, float]:
    """What W ranks would report, computed in one process shard after shard (for tests and checks)."""
    device = device or torch.device("cpu")
    parts = [task.eval_stats(model, evalset, cfg, device, r, world) for r in range(world)]
    return {k: float(v) for k, v in task.metrics_from(combine(parts), cfg).items()}


def evaluate_run(
    task: Task,
    module: nn.Module,
    evalset: Any,
    cfg: RunSpec,
    dist: Dist,
    state: State,
    epochs: float,
    wall_s: Callable[[], float],
    log: Callable[[dict[str, Any]], None],
    initial: bool = False,
) -> None:
    """A run's evaluation at `state`: its record in metrics.jsonl through `log` (rank 0, flushed), the result in
    state.last_eval, and state.target_epochs where the metric reached the spec's target (every rank learns it).
    `initial`: the untrained model's, at iteration 0, kept as state.initial_eval (a seed that ends no better has
    collapsed: reports.rundata.failedseeds), never a target's stop. `wall_s()`: seconds of the run so far as the
    record is made, resumed runs included (not deterministic: every exact comparison of records leaves it out)."""
    module.eval()
    with torch.no_grad():  # every rank its shard; the metrics on rank 0
        result = evaluate(task, module, evalset, cfg, dist)
    module.train()
    if result is not None and initial:
        state.initial_eval = result
    elif result is not None:
        state.last_eval = result
    if result is not None:
        record = {"eval": True, "iteration": state.iteration, "tau": state.tau, "epochs": epochs}
        log(record | {"wall_time_s": round(wall_s(), 3), "metric": result[task.metric], **result})
        value, target = result[task.metric], cfg.target
        reached = target is not None and (value >= target if task.higher_is_better else value <= target)
        if not initial and reached:
            state.target_epochs = epochs
    state.target_epochs = dist.broadcast(state.target_epochs)
