"""The kinds of experiment a matrix declares, each checked and expanded into its runs (bench.experiments.matrix
reads the file around them), with the checks of a matrix's values that word its errors alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core import methods as registry
from bench.core.algo.rules import ADASCALE, IDENTITY, LSW, SCALED
from bench.core.algo.schedules import ELASTIC
from bench.core.errors import UserError
from bench.core.methods import title
from bench.core.yamlsafe import excerpt
from bench.experiments.runrequest import RunRequest, shared_method
from bench.run.spec import parse_scale

KINDS = ("table2", "elastic", "heatmap", "sweep", "gain")


def _fail(path: Path, where: str, expected: str) -> UserError:
    return UserError(f"{path}: {where}: expected {expected}")


MAX_ITEMS = 1000  # values in one list of a matrix (seeds, scales, lr0s...)


def _list(path: Path, where: str, value: Any, item: type, allowed: tuple | None = None) -> list:
    if not isinstance(value, list) or not value:
        raise _fail(path, where, f"a non-empty list of {item.__name__}")
    if len(value) > MAX_ITEMS:
        raise _fail(path, where, f"at most {MAX_ITEMS} values, got {len(value)}")
    for v in value:
        if not isinstance(v, item) or isinstance(v, bool):
            raise _fail(path, where, f"a list of {item.__name__}, got {excerpt(v)}")
        if allowed is not None and v not in allowed:
            raise _fail(path, where, f"values among {', '.join(map(str, allowed))}, got {excerpt(v)}")
    return value


def _keys(path: Path, where: str, body: dict, allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise _fail(path, f"{where}.{unknown[0]}", f"one of {', '.join(sorted(allowed))}")


def _cells(path: Path, where: str, kind: str, body: dict, seeds: list[int], tasks: tuple, preset: str) -> list:
    scale_key = "scales" if kind == "table2" else "schedules"
    _keys(path, where, body, {"tasks", "methods", scale_key, "seeds", "set"})
    exp_tasks = _list(path, f"{where}.tasks", body.get("tasks"), str, tasks)
    methods = _list(path, f"{where}.methods", body.get("methods"), str)
    for m in methods:
        try:
            registry.method(m)  # a row of the table, or a user's rule (imported: the matrix names it)
        except UserError as e:
            raise _fail(path, f"{where}.methods", f"methods of the method table or package.module:NAME ({e})") from None
    if kind == "table2":
        scales = _list(path, f"{where}.scales", body.get("scales"), int)
        if any(s < 1 for s in scales):
            raise _fail(path, f"{where}.scales", "positive integers")
    else:
        scales = _list(path, f"{where}.schedules", body.get("schedules", list(ELASTIC)), str, ELASTIC)
    return [
        RunRequest(t, shared_method(m, s), parse_scale(s), seed, experiment={"kind": kind})
        for t in exp_tasks
        for m in methods
        for s in scales
        for seed in seeds
    ]


def _number(path: Path, where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(path, where, f"a number, got {excerpt(value)}")
    return float(value)


EXPONENTIAL = {"lr_schedule.kind": "exponential"}


def _heatmap(path: Path, where: str, kind: str, body: dict, seeds: list[int], tasks: tuple, preset: str) -> list:
    from tasks import card_of as card

    _keys(path, where, body, {"name", "task", "scale", "lr0", "scaled_lr0", "decay", "threshold", "seeds", "set"})
    task = body.get("task")
    if task not in tasks:
        raise _fail(path, f"{where}.task", f"one of {', '.join(tasks)}")
    # The grid is one of exponential-decay schedules (lr0 × total decrease) whatever the task's own schedule:
    # a task whose preset decays otherwise (logreg: constant) gets kind = exponential on every grid run.
    kind_over = {} if card(task).presets[preset]["lr_schedule"].get("kind") == "exponential" else EXPONENTIAL
    scale = body.get("scale", 16)
    if not isinstance(scale, int) or isinstance(scale, bool) or scale < 2:
        raise _fail(path, f"{where}.scale", "an integer ≥ 2")
    lr0s = [_number(path, f"{where}.lr0", v) for v in _list(path, f"{where}.lr0", body.get("lr0"), object)]
    decays = [_number(path, f"{where}.decay", v) for v in _list(path, f"{where}.decay", body.get("decay"), object)]
    # scaled SGD takes no lr multiplier, so its panel may search its own lr axis (the paper's: 10⁻¹ … 10²)
    scaled_lr0s = lr0s
    if "scaled_lr0" in body:
        raw = _list(path, f"{where}.scaled_lr0", body["scaled_lr0"], object)
        scaled_lr0s = [_number(path, f"{where}.scaled_lr0", v) for v in raw]
    for key, values in (("lr0", lr0s), ("scaled_lr0", scaled_lr0s)):
        if any(not v > 0 for v in values):
            raise _fail(path, f"{where}.{key}", f"positive learning rates, got {excerpt(body[key])}")
    if any(not 0 < v <= 1 for v in decays):
        raise _fail(path, f"{where}.decay", f"total decreases in (0, 1], got {excerpt(body['decay'])}")
    threshold = _number(path, f"{where}.threshold", body.get("threshold"))
    name = str(body.get("name", f"{task}-grid"))
    runs = []
    for panel, method, s in (
        ("S=1", IDENTITY, 1),
        *((title(m), m, scale) for m in (ADASCALE, LSW, SCALED)),  # the paper's Figure 5 panels
    ):
        label = panel if s == 1 else f"{panel} S={s}"
        for lr0 in scaled_lr0s if method == SCALED else lr0s:
            for decay in decays:
                for seed in seeds:
                    exp = {
                        "kind": "heatmap",
                        "grid": name,
                        "panel": label,
                        "threshold": threshold,
                        "lr0": lr0,
                        "decay": decay,
                    }
                    over = {**kind_over, "lr_schedule.lr0": lr0, "lr_schedule.decay": decay}
                    runs.append(RunRequest(task, method, s, seed, over, exp))
    return runs


SWEEP_BATCHES = [32, 64, 128, 256, 512, 1024, 2048, 4096]
# Epochs between the sweep's evaluations: a run's steps to target are known to within this much data, so an
# eighth of an epoch puts the count within ~6 % at the smallest batch's 2 epochs (one epoch: up to 50 %, the
# points then sat on whole epochs), at ~3 ms an evaluation of logreg's 20 000 examples.
SWEEP_EVAL_EVERY = 0.125


def sweep_runs(batches: list[int], max_epochs: int, seeds: list[int]) -> list[RunRequest]:
    """The critical-batch sweep on logreg (docs/design.md §1): for each global batch B, epochs to the target loss
    under a fixed lr, under linear scaling with the textbook's warm-up, and with AdaScale at S = B/32."""
    from tasks.presets.logreg import REFERENCE_BATCH, REFERENCE_LR, TARGET_LOSS, N

    target = TARGET_LOSS
    common = {"eval_unit": "epochs", "eval_every": SWEEP_EVAL_EVERY, "max_epochs": max_epochs, "target": target}
    runs = []
    for B in batches:
        if B % REFERENCE_BATCH:
            raise UserError(f"sweep batch {B} is not a multiple of {REFERENCE_BATCH}")
        S = B // REFERENCE_BATCH
        iterations = -(-max_epochs * N // B) + 1
        for seed in seeds:

            def exp(method: str, batch: int = B) -> dict[str, Any]:
                return {"kind": "sweep", "batch": batch, "method": method, "target": target}

            # one micro-batch of B examples: the same mean gradient as S micro-batches of 32 (no BatchNorm here)
            runs.append(
                RunRequest("logreg", IDENTITY, 1, seed, {**common, "batch_size": B, "T1": iterations}, exp("fixed"))
            )
            runs.append(
                RunRequest(
                    "logreg",
                    IDENTITY,
                    1,
                    seed,
                    {
                        **common,
                        "batch_size": B,
                        "T1": iterations,
                        "lr_schedule.lr0": REFERENCE_LR * S,
                        "warmup_iterations": 5 * S,
                    },
                    exp("linear"),
                )
            )
            runs.append(
                RunRequest(
                    "logreg",
                    ADASCALE,
                    S,
                    seed,
                    {**common, "T1": max_epochs * N // REFERENCE_BATCH, "microbatch_mode": "batched"},
                    exp(ADASCALE),
                )
            )
    return runs


def _sweep(path: Path, where: str, kind: str, body: dict, seeds: list[int], tasks: tuple, preset: str) -> list:
    _keys(path, where, body, {"task", "batches", "max_epochs", "seeds"})
    if body.get("task", "logreg") != "logreg":
        raise _fail(path, f"{where}.task", "logreg (the sweep is the logreg textbook demonstration)")
    batches = _list(path, f"{where}.batches", body.get("batches", SWEEP_BATCHES), int)
    max_epochs = body.get("max_epochs", 80)
    if not isinstance(max_epochs, int) or max_epochs < 1:
        raise _fail(path, f"{where}.max_epochs", "a positive integer")
    return sweep_runs(batches, max_epochs, seeds)


def _gain(path: Path, where: str, kind: str, body: dict, seeds: list[int], tasks: tuple, preset: str) -> list:
    _keys(path, where, body, {"tasks", "scale", "every", "until", "seeds", "set"})
    exp_tasks = _list(path, f"{where}.tasks", body.get("tasks"), str, tasks)
    until = body.get("until")  # keep weights only over this share of T1 (finding iv's window)
    if until is not None and not (isinstance(until, int | float) and not isinstance(until, bool) and 0 < until <= 1):
        raise _fail(path, f"{where}.until", f"a share of T1 in (0, 1], got {excerpt(until)}")
    keep = {"keep_checkpoints_until": float(until)} if until is not None else {}
    scale = body.get("scale", 8)
    if not isinstance(scale, int) or isinstance(scale, bool) or scale < 2:
        raise _fail(path, f"{where}.scale", "an integer ≥ 2")
    every = body.get("every")
    per_task = every if isinstance(every, dict) else dict.fromkeys(exp_tasks, every)
    runs = []
    for t in exp_tasks:
        k = per_task.get(t)
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise _fail(path, f"{where}.every", f"a positive integer, or one per task (got {excerpt(k)} for {t})")
        runs += [
            RunRequest(t, ADASCALE, scale, seed, {"keep_checkpoints_every": k, **keep}, {"kind": kind})
            for seed in seeds
        ]
    return runs
