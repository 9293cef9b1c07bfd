"""A task's card checked against the task itself, before any training (issue 55.6): the card names the metric the
findings judge (`metric`, and `paper_metric` where set), and only the task's `metrics_from` says what it returns.
A card whose metric the task does not return trained until its first evaluation, then raised a KeyError.

The check: the untrained model, in eval mode under no_grad, on the first evaluation batch alone
(bench.core.engine.evaluation.sliced), its `eval_stats` combined and turned into metrics by `metrics_from`; a metric
name of the card that is not among them, or a value that is no number, is one line naming the card's field, the
file the card comes from and what was expected. One small batch: its cost is one evaluation batch's forward.
The global RNG is left as it was (a run seeds its own before building its model anyway).

Called where a task meets its data root: every run, by its engine on its own model and evaluation set once built,
before any training (bench.run.runner hands it `check_built`: `run`, `advise`'s probe, a matrix's runs), and `submit`'s
data check before it sends a job (`check_task`; `submit --dry-run` too: slurm.datacheck), for built-in tasks and
tasks of yours alike.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core.errors import UserError
from bench.core.usercode import is_user_name

if TYPE_CHECKING:  # torch is imported by the check itself: importing this module (submit's) costs nothing
    import torch

    from bench.core.runspec import RunSpec


def card_file(task: Any) -> str:
    """Where the task's card is written: a task of yours, its module's file; a built-in one, tasks/presets/<name>.py."""
    name = str(task.card.name)
    if is_user_name(name):
        from tasks import source_file

        return source_file(type(task))
    try:  # a card module made in memory (no __spec__) has no file to name
        found = importlib.util.find_spec(f"tasks.presets.{name}")
    except (ImportError, ValueError):
        found = None
    return str(found.origin) if found is not None and found.origin else f"tasks/presets/{name}.py"


def one_batch_metrics(task: Any, model: Any, evalset: Any, spec: RunSpec, device: torch.device) -> Any:
    """What `metrics_from` returns for `model` on the first batch of `evalset` (eval mode, no_grad; the model's mode
    and the RNG left as they were)."""
    import torch

    from bench.core.engine.evaluation import combine, sliced

    cuda = [device.index or 0] if device.type == "cuda" else []
    was = model.training
    with torch.random.fork_rng(devices=cuda), torch.no_grad(), sliced(1):
        model.eval()
        try:
            return task.metrics_from(combine([task.eval_stats(model, evalset, spec, device, 0, 1)]), spec)
        finally:
            model.train(was)


def check_metrics(task: Any, metrics: Any) -> None:
    """The card's metric names among `metrics` (what metrics_from returned), every value a number; else one line."""
    where = f"task {task.card.name}: {card_file(task)}"
    if not isinstance(metrics, dict):
        raise UserError(
            f"{where}: metrics_from returned a {type(metrics).__name__}; expected a dict of metric name -> number"
        )
    keys = ", ".join(map(repr, sorted(map(str, metrics)))) or "nothing"
    for field in ("metric", "paper_metric"):
        name = getattr(task.card, field)
        if (field == "metric" or name) and name not in metrics:
            raise UserError(
                f"{where}: the card's {field} {name!r} is not among what metrics_from returns ({keys}); "
                f"expected one of those"
            )
    for key, value in metrics.items():
        try:
            float(value)
        except (TypeError, ValueError):
            raise UserError(
                f"{where}: metrics_from's {key!r} is a {type(value).__name__}; expected a number (int or float)"
            ) from None


def check_task(task: Any, root: Path, spec: RunSpec, device: torch.device | None = None) -> None:
    """The card against the task on the first evaluation batch of an untrained model built for it (submit's check,
    before any job: see the module)."""
    import torch

    device = device or torch.device("cpu")
    check_metrics(
        task, one_batch_metrics(task, task.build_model(spec).to(device), task.eval_set(spec, root), spec, device)
    )


def check_built(task: Any, spec: RunSpec, dist: Any, model: Any, evalset: Any) -> None:
    """The check a run's engine makes on its own model and evaluation set once built, before any training (no second
    model, no second read of the set's index; bench.run.runner hands the engine it with the first three bound): on
    rank 0, its one line raised on every rank, so that no rank goes on to wait for one that stopped."""
    why = None
    if dist.is_main:
        try:
            check_metrics(task, one_batch_metrics(task, model, evalset, spec, dist.device))
        except UserError as e:
            why = str(e)
    why = dist.broadcast(why)
    if why:
        raise UserError(why)
