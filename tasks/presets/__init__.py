"""Every task's presets and metric as plain data: what a matrix, a spec, `plan`, `status` and the reports
need to know of a task, without importing torch or the task's model code.

A task adapter (tasks.<name>) takes its card: `card = CARD`. Presets are complete configurations (see
bench.run.spec for the keys every run has); task-specific settings live under "model" and "data".
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from dataclasses import dataclass, field
from typing import Any

from bench.core.algo.gain import theta
from bench.core.errors import UserError
from bench.core.files import finite_number

# docs/design.md §1: elastic S changes at T1/4 and T1/2, 32 -> 64 -> 128 and back (paper §4); tiny presets 2 -> 4 -> 8.
ELASTIC_PAPER = {"up": [[0.0, 32], [0.25, 64], [0.5, 128]], "down": [[0.0, 128], [0.25, 64], [0.5, 32]]}
# The paper presets' gradient reduction: DDP's bucketed all-reduce, which overlaps the backward pass and sends
# ~2 (W−1)/W of the gradient per rank, not the bit-exact pairwise hook (bench.core.engine.reduction), which blocks the
# backward pass for log2 W whole-bucket exchanges. Measured (`adascale-bench comm`, ResNet-50 gradients, gloo,
# 2 shared CPU cores): pairwise / native per forward + backward = 1.34 at W = 2, 1.53 at W = 4, growing with
# log2 W. Tiny presets and tests keep pairwise (the schema's default): there it costs little and runs that
# should be the same run stay bit-identical whatever the split S = W × A.
PAPER_REDUCTION = "native"
ELASTIC_TINY = {"up": [[0.0, 2], [0.25, 4], [0.5, 8]], "down": [[0.0, 8], [0.25, 4], [0.5, 2]]}

# Tiny presets are miniatures of the experiment: even the shortest AdaScale run, at the largest scale S a
# smoke matrix uses, must last several memories of the gain's moving averages, so that the gain estimate
# settles and then follows training (a run shorter than one memory reports the estimator's warm-up, not
# the method). The averages use θ(S) = max(1 − S/1000, 0) (bench.core.algo.gain.theta), a memory of
# 1/(1 − θ) = 1000/S iterations; an AdaScale run at S lasts at least T1/S iterations (gain r_t ≤ S).
# The rule: T1/S ≥ k/(1 − θ(S)), i.e. T1 ≥ 1000·k for every S < 1000, whatever S is.
# k = 2, the least "several": at the end of the run the first memory's iterations weigh ~27 % of the
# estimate (e^-1 − e^-2 over 1 − e^-2), and at least the second half of the run steps with an estimate
# that spans a full memory. k = 3 would halve that weight again but cost 1.5× the smoke's time budget.
TINY_WINDOWS = 2
TINY_MAX_SCALE = 8  # the largest S of every tiny preset's scales ([1, 2, 4, 8]) and of ELASTIC_TINY


def gain_memory(scale: int) -> float:
    """Iterations the gain's moving averages remember at scale S: 1/(1 − θ(S)), one iteration once θ = 0."""
    return 1.0 / (1.0 - theta(scale))


def windows_at(T1: float, scale: int) -> float:
    """How many gain memories the shortest AdaScale run at `scale` lasts: (T1/S) / (1/(1 − θ(S)))."""
    return (T1 / scale) / gain_memory(scale)


def tiny_T1(windows: float, scale: int) -> int:
    """The least T1 whose shortest AdaScale run at `scale` lasts `windows` gain memories (1000·windows
    for S < 1000); rounded before the ceiling so that float error in θ does not add an iteration."""
    return math.ceil(round(windows * scale * gain_memory(scale), 6))


# Every tiny preset's T1 (2000): the rule at k = TINY_WINDOWS for any S up to TINY_MAX_SCALE (and up to 999).
TINY_T1 = tiny_T1(TINY_WINDOWS, TINY_MAX_SCALE)


# The non-inferiority margin Δ of an accuracy-like metric (top-1 %, word accuracy %, BLEU, mAP %), per preset,
# in the metric's points (docs/design.md §5; reports.verdicts.findings). Fixed before any run:
# - paper 0.5: the smallest shortfall the paper's Table 2 shows for a method it reports as degrading (cifar10
#   LSW S = 16: 93.6 vs 94.1; transformer LSW S = 64: 26.7 vs 27.2 BLEU), while AdaScale's largest is 0.2;
# - tiny 1.0: the least whole point a tiny validation set can resolve. One model's score on n examples has a
#   sampling error of 100·sqrt(p(1 − p)/n) points, which must stay below Δ/2: n ≥ 3 300 at p = 0.9 for Δ = 1
#   (the positive control's tiny cifar10 writes 5 000 test images: 0.42), where the paper's 0.5 would need
#   13 000. It misses what the paper's smallest degradations would be at tiny scale (0.5–0.9 points).
ACCURACY_MARGINS: dict[str, float] = {"paper": 0.5, "tiny": 1.0}


@dataclass(frozen=True)
class TaskCard:
    """A task's name, its Table 2 metric (key in evaluate()'s result, label, direction), whether it reads
    a data root, its presets by name (tiny, paper), the k of the tiny-T1 rule its tiny preset follows
    (`tiny_windows`: gain memories in the shortest AdaScale run at the largest smoke scale, see tiny_T1), and
    `differs`: one line per way the paper preset differs from the paper by necessity (a chosen value where
    the supplement is missing, a model variant), `unit`: what the preset's batch_size counts (`plan`'s
    examples: images, utterances, tokens), `paper_metric`: the evaluate() key whose value compares
    with the paper's printed number where that is not `metric` ("" = `metric`), `tiny_data`: the data
    keys its tiny data set is written with, `metric_range`: the values the metric can take (the report
    clips an interval of a mean to it), `requires`: packages beyond the suite's own dependencies that the
    task imports, installed by the pip extra `extra` (`pip install 'adascale-bench[extra]'`), and `margins`
    and `optimum`: what the findings judge non-inferiority against (see the fields)."""

    name: str
    metric: str
    metric_label: str
    higher_is_better: bool
    needs_data: bool
    presets: dict[str, dict[str, Any]]
    tiny_windows: float
    differs: tuple[str, ...] = ()
    unit: str = "examples"
    paper_metric: str = ""
    # `data` keys that shape the tiny data set the task writes on first use (its write_tiny takes them):
    # a value other than the tiny preset's is another data set, so it gets its own default folder
    tiny_data: tuple[str, ...] = ()
    metric_range: tuple[float, float] = (-math.inf, math.inf)
    requires: tuple[str, ...] = ()
    extra: str = ""
    # The most data-parallel ranks `submit` spreads one run of a preset over (a preset not named: as many as
    # the resources allow). A run whose whole training takes seconds gains nothing from more ranks and pays
    # their start and exchange: every tiny preset trains on one. A matrix that fixes `accumulation` asks for
    # W = S/A ranks itself and is not capped.
    # None for a preset: no cap, on purpose (`submit` says so in one line for a preset the card does not name).
    max_ranks: dict[str, int | None] = field(default_factory=lambda: {"tiny": 1})
    # The non-inferiority margin of the metric per preset (reports.verdicts.findings; docs/design.md §5): Δ in the
    # metric's units for an accuracy-like metric (ACCURACY_MARGINS); for a loss a share δ of S = 1's own
    # distance from `optimum` (Δ = δ·(mean S = 1 loss − optimum)), or without an optimum of the drop S = 1
    # makes over its last quarter of τ
    margins: dict[str, float] = field(default_factory=lambda: dict(ACCURACY_MARGINS))
    optimum: float | None = None  # the metric's exact optimum, where it is known (logreg's L*)
    # The metric a model scores by guessing, per preset, in the metric's units: a seed that ends no better than
    # this has collapsed and counts as a failed seed (reports.rundata.failedseeds). Only where it is principled: top-1
    # of
    # a classifier over k balanced classes is 100/k %; a loss, BLEU, WER or mAP has no model-free chance level,
    # so their cards name none (a preset not named: no chance level).
    chance: dict[str, float] = field(default_factory=dict)
    # A preset's AdamW setting (spec `optimizer: adamw`): spec keys as --set writes them (lr_schedule.lr0,
    # weight_decay, betas, eps), applied under AdamW where the run does not set them itself; the paper presets
    # keep the paper's SGD and name none. Each value says how it was tuned (at S = 1, on pilot seeds).
    adamw: dict[str, dict[str, Any]] = field(default_factory=dict)


# The key of an evaluation's size in a task's metrics (examples scored), where the task reports it: the report
# derives how far from the chance level a seed's metric may sit and still be a guess (reports.rundata.failedseeds)
EVAL_EXAMPLES = "examples"


# Cards of the user's own tasks (`package.module:NAME`) known to this process: loaded where the user names the
# task (tasks.load), or read from what a run folder recorded (`recorded_card`: report, status). Never imported here.
_USER_CARDS: dict[str, TaskCard] = {}


def card(name: str) -> TaskCard:
    """The card of a task by name: a built-in task's tasks/presets/<name>.py, or a user's task that this process
    loaded or read from a run folder. The caller checks a built-in name against tasks.available()."""
    if ":" in name:
        found = _USER_CARDS.get(name)
        if found is None:
            raise UserError(
                f"task {name}: a task of yours is imported where you name it (run, matrix, submit, plan, advise)"
            )
        return found
    try:
        module = importlib.import_module(f"tasks.presets.{name}")
    except ModuleNotFoundError:
        raise UserError(
            f"task {name} has no card: a new task adds tasks/presets/{name}.py defining CARD (a TaskCard)"
        ) from None
    found = getattr(module, "CARD", None)
    if not isinstance(found, TaskCard):
        raise UserError(f"task {name}: tasks/presets/{name}.py defines no CARD (a tasks.presets.TaskCard)")
    return found


def remember(c: TaskCard) -> None:
    """Make a user's task's card known to this process under its name (tasks.load calls it)."""
    _USER_CARDS[c.name] = c


def record_card(c: TaskCard) -> dict[str, Any]:
    """A card as JSON facts, for a spec to record (a user's task: its reports never import it). An infinite end
    of metric_range is written as null."""
    facts = dataclasses.asdict(c)
    facts["metric_range"] = [v if math.isfinite(v) else None for v in c.metric_range]
    return facts


def unrecordable(value: Any, at: str) -> str | None:
    """Where in `value` (a card's record_card facts) the first value JSON cannot hold lies, `at.key[i]` and its
    type (a pathlib.Path, an np.float32, a set), or None: a spec records its task's card as JSON, and json's
    'not JSON serializable' names neither the field nor the card."""
    if value is None or isinstance(value, str | bool | int | float):
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{at} (a key {key!r} of type {type(key).__name__}, not a string)"
            found = unrecordable(item, f"{at}.{key}")
            if found:
                return found
        return None
    if isinstance(value, list | tuple):
        return next((f for i, item in enumerate(value) if (f := unrecordable(item, f"{at}[{i}]"))), None)
    return f"{at} (a {type(value).__module__}.{type(value).__qualname__})"


def recorded_card(name: str, facts: Any, where: str = "spec") -> TaskCard:
    """The card a run folder recorded for a user's task (`record_card`), checked field by field: a damaged
    field is one UserError naming `where`. Remembered, so that card(name) finds it afterwards."""
    if not isinstance(facts, dict):
        raise UserError(f"{where}: task {name} is a task of yours, but the spec records no card of it (user_task.card)")
    kinds = {f.name: f.type for f in dataclasses.fields(TaskCard)}
    unknown = sorted(set(facts) - set(kinds))
    if unknown:
        raise UserError(f"{where}: user_task.card.{unknown[0]}: not a field of a task card")
    lo, hi = (list(facts.get("metric_range") or [None, None]) + [None, None])[:2]
    fields = {**facts, "name": name, "metric_range": (-math.inf if lo is None else lo, math.inf if hi is None else hi)}
    for key in ("differs", "tiny_data", "requires"):
        if isinstance(fields.get(key), list):
            fields[key] = tuple(fields[key])
    try:
        c = TaskCard(**fields)
        check_card(c)
    except (TypeError, ValueError) as e:
        raise UserError(f"{where}: user_task.card: {' '.join(str(e).split())[:200]}") from None
    _USER_CARDS.setdefault(name, c)
    return c


def card_of_run(task: object, user_task: object, where: str = "spec") -> TaskCard:
    """The card of a run's task (its spec's `task` and `user_task`), never importing a task of yours: a built-in
    task's card, or the card the spec recorded (`user_task.card`). A run folder is described this way (report,
    status, gain), its spec checked or not yet."""
    name = str(task)
    if ":" not in name:
        return card(name)
    return recorded_card(name, user_task.get("card") if isinstance(user_task, dict) else None, where)


def _number(v: Any) -> bool:
    """A finite number that is not a boolean (NaN and ±inf are no margin, window count or optimum; nor is a recorded
    10**400, where math.isfinite raised OverflowError): bench.core.files.finite_number."""
    return finite_number(v)


def _within(v: float, rng: Any) -> bool:
    """v inside a metric_range, where that range is two numbers (a wrong range is its own field's error)."""
    ok = isinstance(rng, tuple | list) and len(rng) == 2 and all(_number(x) or x in (-math.inf, math.inf) for x in rng)
    return not ok or rng[0] <= v <= rng[1]


def _strings(v: Any) -> bool:
    return isinstance(v, tuple | list) and all(isinstance(x, str) for x in v)


def check_card(c: TaskCard) -> None:
    """The types and ranges a card's fields must have: a task of yours is checked when it is loaded, and a recorded
    card when it is read (it comes from a file someone else may have written, where NaN is a JSON literal);
    ValueError naming the first wrong field, what it holds and what it must hold."""
    rng = c.metric_range
    checks = [
        ("metric", isinstance(c.metric, str) and c.metric != "", "a non-empty str, a key metrics_from returns"),
        ("metric_label", isinstance(c.metric_label, str), "a str"),
        ("higher_is_better", isinstance(c.higher_is_better, bool), "a bool"),
        ("needs_data", isinstance(c.needs_data, bool), "a bool"),
        (
            "presets",
            isinstance(c.presets, dict) and c.presets and all(isinstance(v, dict) for v in c.presets.values()),
            "a non-empty dict of preset name -> dict of spec values",
        ),
        ("tiny_windows", _number(c.tiny_windows) and c.tiny_windows > 0, "a finite number > 0"),
        ("unit", isinstance(c.unit, str), "a str"),
        ("paper_metric", isinstance(c.paper_metric, str), "a str"),
        (
            "metric_range",  # ±inf for an open end, never NaN, the low end first
            isinstance(rng, tuple | list)
            and len(rng) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) and v == v for v in rng)
            and rng[0] < rng[1],
            "a tuple of two numbers (float), the low end first (±math.inf for an open end)",
        ),
        (
            "max_ranks",
            isinstance(c.max_ranks, dict)
            and all(v is None or (_number(v) and isinstance(v, int) and v >= 1) for v in c.max_ranks.values()),
            "a dict of preset name -> int ≥ 1 or None",
        ),
        (
            "margins",
            isinstance(c.margins, dict) and all(_number(v) and v >= 0 for v in c.margins.values()),
            "a dict of preset name -> finite number ≥ 0",
        ),
        ("optimum", c.optimum is None or _number(c.optimum), "None or a finite number"),
        (
            "chance",
            isinstance(c.chance, dict) and all(_number(v) and _within(v, rng) for v in c.chance.values()),
            "a dict of preset name -> finite number inside metric_range",
        ),
        ("differs", _strings(c.differs), "a tuple of str"),
        ("tiny_data", _strings(c.tiny_data), "a tuple of str"),
        ("requires", _strings(c.requires), "a tuple of str"),
        ("extra", isinstance(c.extra, str), "a str"),
    ]
    for name, ok, expected in checks:
        if not ok:
            held = repr(getattr(c, name))
            held = held if len(held) <= 60 else held[:57] + "..."
            raise ValueError(f"field {name} = {held} ({type(getattr(c, name)).__name__}): expected {expected}")
