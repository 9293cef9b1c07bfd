"""Experiment matrices: YAML files that declare experiments (Table 2 cells, elastic runs), expanded
into runs in an order that respects their dependencies (LSW+ after its AdaScale run).

    preset: tiny            # tiny | paper
    seeds: [0, 1]           # default seeds of every experiment
    data_roots: {cifar10: /data/cifar}   # optional, per task (tiny: written on first use)
    set: {key: value}       # optional spec overrides for every run
    experiments:
      - table2: {tasks: [cifar10], methods: [adascale, lsw, sqrt, mine.rules:HALF], scales: [1, 8, 16]}
        # methods: rows of the method table (bench.algo.rules.METHODS) or a rule of yours, package.module:NAME
      - elastic: {tasks: [imagenet], methods: [adascale, lsw], schedules: [elastic-up, elastic-down]}
      - heatmap: {name: cifar10-grid, task: cifar10, scale: 16, lr0: [...], decay: [...], threshold: 94.0}
        # optional `scaled_lr0: [...]`: the scaled-SGD panel's own lr0 list (default: lr0)
        # any experiment may carry `set: {key: value}`: spec overrides for its runs only, and with it
        # `variant: NAME`, the short name the report gives those runs' tables and figures (reports.variants)
      - sweep: {task: logreg, batches: [32, 64, ..., 4096], max_epochs: 80}
      - gain: {tasks: [logreg, cifar10], scale: 8, every: {logreg: 25, cifar10: 5}}

At S = 1 every Table 2 rule that equals identity scaling there (its row's `identity_at_s1`: AdaScale's r ≡ 1,
LSW's warm-up from 1/S = 1, T_AS = T1, √S = 1) is one computation: a table2 cell at scale 1 is one run per task
and seed, method adascale, which the reports show under each of those rules. A rule that is not identity at
S = 1 (LEGW warms up there) runs its own.

A heat map is the paper's Figure 5: a grid of exponential-decay schedules (initial lr × total decrease),
four panels: S = 1, AdaScale at S, LSW at S, and scaled SGD at S whose T is the mean iteration count of
the grid's AdaScale runs that reach the threshold. The sweep is the textbook's critical-batch
demonstration on logreg: epochs-to-target under a fixed lr, linear scaling with warm-up, and AdaScale.
A gain experiment is the paper's Figure 2: AdaScale runs at S that keep their weights every `every`
iterations (spec keep_checkpoints_every; one number, or one per task), for `adascale-bench gain` to
measure the offline gain at; its runs stay out of Table 2.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.algo import rules
from bench.algo.rules import ADASCALE, IDENTITY, LSW, SCALED, SHARED_AT_S1, shared_note, title
from bench.algo.schedules import ELASTIC
from bench.errors import UserError
from bench.experiments import names
from bench.files import open_regular
from bench.run.spec import parse_scale
from bench.run.yamlread import excerpt, load_yaml
from bench.runspec import RunSpec
from bench.usercode import USER_NAME, is_user_name

PRESET_DIR = Path(__file__).parent / "matrices"
KINDS = ("table2", "elastic", "heatmap", "sweep", "gain")


@dataclass(frozen=True)
class RunRequest:
    """One run of a matrix, before its spec is resolved against the task's preset."""

    task: str
    method: str
    scale: int | str
    seed: int
    overrides: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    experiment: dict[str, Any] = field(default_factory=lambda: {"kind": "table2"}, hash=False, compare=False)

    @property
    def key(self) -> tuple:
        """Hashable even when an override is a list or mapping (an experiment-level `set`)."""
        overrides = json.dumps(self.overrides, sort_keys=True, default=str)
        return (self.task, self.method, self.scale, self.seed, overrides)


@dataclass
class Matrix:
    path: Path
    preset: str
    runs: list[RunRequest]
    data_roots: dict[str, str]
    overrides: dict[str, Any]
    methods: tuple[str, ...] = ()  # the methods its table2 and elastic experiments name, in the table's order

    def spec(self, req: RunRequest) -> RunSpec:
        """The resolved spec of one of this matrix's runs."""
        from bench.run.spec import resolve
        from tasks import card_of as card

        root = self.data_roots.get(req.task)
        if root is not None and not isinstance(root, str):
            raise UserError(f"{self.path}: data_roots.{req.task} = {excerpt(root)}: expected a folder")
        if root is not None:
            root = os.path.expandvars(str(root))
            if "$" in root:
                raise UserError(
                    f"{self.path}: data_roots.{req.task} = {excerpt(root)}: set the environment variable it names"
                )
        overrides = {**self.overrides, **req.overrides}
        return resolve(
            card(req.task), req.method, req.scale, req.seed, self.preset, root, overrides, None, req.experiment
        )


def _fail(path: Path, where: str, expected: str) -> UserError:
    return UserError(f"{path}: {where}: expected {expected}")


MAX_BYTES = 4 << 20  # a matrix file (the paper's is a few kB)
MAX_ITEMS = 1000  # values in one list of a matrix (seeds, scales, lr0s...)
MAX_RUNS = 50_000  # runs a matrix expands to (the paper's is ~1 200): past it, a typo, not a plan


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


def locate(name: str | Path) -> Path:
    """A matrix file path, or the name of a preset shipped in bench/experiments/matrices (smoke, paper)."""
    path = Path(name)
    if path.exists():
        return path
    shipped = PRESET_DIR / f"{name}.yaml"
    if shipped.exists():
        return shipped
    names = ", ".join(sorted(p.stem for p in PRESET_DIR.glob("*.yaml")))
    raise UserError(f"matrix {name}: no such file, and not a shipped matrix ({names})")


TOP_KEYS = ("preset", "seeds", "experiments", "data_roots", "set", "pilot_seeds")


def load(name: str | Path) -> Matrix:
    """The matrix with its runs expanded and ordered. Reads the tasks' cards (plain data): no torch."""
    path = locate(name)
    doc = _read(path)
    if not isinstance(doc, dict):
        raise _fail(path, "top level", "a mapping with preset, seeds and experiments")
    unknown = set(doc) - {"preset", "seeds", "experiments", "data_roots", "set", "pilot_seeds"}
    if unknown:
        raise _fail(
            path,
            f"key {excerpt(sorted(unknown)[0])}",
            "one of preset, seeds, experiments, data_roots, set, pilot_seeds",
        )
    preset = doc.get("preset", "tiny")
    if preset not in ("tiny", "paper"):
        raise _fail(path, "preset", "tiny or paper")
    seeds = _list(path, "seeds", doc.get("seeds", [0]), int)
    if not isinstance(doc.get("set") or {}, dict):
        raise _fail(path, "set", f"a mapping of spec keys to values, got {excerpt(doc['set'])}")
    if not isinstance(doc.get("data_roots") or {}, dict):
        raise _fail(path, "data_roots", f"a mapping of task names to folders, got {excerpt(doc['data_roots'])}")
    tasks = task_names()
    pilot = _pilot_seeds(path, doc.get("pilot_seeds"), tasks)
    runs = _expand(path, doc.get("experiments"), seeds, tasks, preset, pilot)
    _load_user_tasks(path, runs)
    named = sorted(cell_methods(doc), key=lambda name: (rules.method_order(name), name))
    return Matrix(
        path,
        preset,
        order(dedupe(runs)),
        dict(doc.get("data_roots") or {}),
        dict(doc.get("set") or {}),
        tuple(named),
    )


def _read(path: Path) -> Any:
    """A matrix file's YAML: a regular file (a FIFO would block, /dev/zero never end), bounded, UTF-8, aliases
    bounded (bench.run.yamlread)."""
    try:
        with open_regular(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise UserError(f"{path}: larger than {MAX_BYTES >> 20} MB; not a matrix")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: unreadable ({e.__class__.__name__})") from None
    return load_yaml(text, str(path))


def _expand(
    path: Path, experiments: Any, seeds: list[int], tasks: TaskNames, preset: str, pilot: dict[str, list[int]]
) -> list[RunRequest]:
    """Every run of the file's experiments, each with its variant, its `set` and its task's pilot seeds."""
    runs: list[RunRequest] = []
    if not isinstance(experiments, list) or not experiments:
        raise _fail(path, "experiments", "a non-empty list")
    for i, exp in enumerate(experiments):
        where = f"experiments[{i}]"
        if not isinstance(exp, dict) or len(exp) != 1 or next(iter(exp)) not in KINDS:
            raise _fail(path, where, f"a mapping with one key among {', '.join(KINDS)}")
        kind, body = next(iter(exp.items()))
        where = f"{where}.{kind}"
        if not isinstance(body, dict):
            raise _fail(path, where, "a mapping")
        exp_seeds = _list(path, f"{where}.seeds", body.get("seeds", seeds), int)
        expand = {"table2": _cells, "elastic": _cells, "heatmap": _heatmap, "sweep": _sweep, "gain": _gain}[kind]
        extra = body.pop("set", None) or {}
        if not isinstance(extra, dict):
            raise _fail(path, f"{where}.set", "a mapping of spec keys to values")
        named = _variant(path, where, body.pop("variant", None), extra)
        for r in expand(path, where, kind, body, exp_seeds, tasks, preset):
            exp = {**r.experiment, "variant": named} if named else r.experiment
            if r.task in pilot:
                if r.seed in pilot[r.task]:
                    raise _fail(path, f"{where}.seeds", f"seeds other than {r.task}'s pilot seeds (seed {r.seed})")
                exp = {**exp, "pilot_seeds": pilot[r.task]}
            runs.append(RunRequest(r.task, r.method, r.scale, r.seed, {**r.overrides, **extra}, exp))
        if len(runs) > MAX_RUNS:
            raise _fail(path, where, f"at most {MAX_RUNS} runs in all; the matrix reaches {len(runs)} here")
    return runs


class TaskNames(tuple):
    """The task names a matrix may use: the built-in tasks present here, and any task of yours
    (`package.module:NAME`, imported when the matrix's runs are resolved: `_load_user_tasks`)."""

    def __contains__(self, name: object) -> bool:
        return tuple.__contains__(self, name) or bool(is_user_name(name) and USER_NAME.fullmatch(str(name)))


def task_names() -> TaskNames:
    from tasks import available

    return TaskNames([*available(), "package.module:NAME"])


def _load_user_tasks(path: Path, runs: list[RunRequest]) -> None:
    """Import each task of yours the matrix names, now (one line naming the file if it cannot be loaded), not
    at its first run: the matrix names it, as it names a rule of yours."""
    from tasks import card_of

    for name in dict.fromkeys(r.task for r in runs if is_user_name(r.task)):
        try:
            card_of(name)
        except UserError as e:
            raise _fail(path, "tasks", f"tasks that load ({e})") from None


def _pilot_seeds(path: Path, value: Any, tasks: Any) -> dict[str, list[int]]:
    """`pilot_seeds: {task: [seeds]}`: the seeds a pre-registered matrix's pilot used (to measure spreads and
    fix thresholds) for each task. Its confirmatory runs must use other seeds — a pilot run never sits inside
    the test it planned — and each run records its task's pilot seeds, so that the report refuses a run of a
    pilot seed placed in the folder (reports.findings)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(path, "pilot_seeds", f"a mapping of task names to lists of seeds, got {excerpt(value)}")
    out = {}
    for task, seeds in value.items():
        if task not in tasks:
            raise _fail(path, f"pilot_seeds.{excerpt(task)}", f"a task among {', '.join(tasks)}")
        out[task] = sorted(set(_list(path, f"pilot_seeds.{task}", seeds, int)))
    return out


def cell_methods(doc: dict) -> set[str]:
    """The methods the table2 and elastic experiments of a (checked) matrix document name."""
    out: set[str] = set()
    for exp in doc.get("experiments") or []:
        for kind in ("table2", "elastic"):
            body = exp.get(kind) if isinstance(exp, dict) else None
            if isinstance(body, dict) and isinstance(body.get("methods"), list):
                out |= {m for m in body["methods"] if isinstance(m, str)}
    return out


VARIANT_NAME = names.VARIANT_NAME  # what `variant:` may say (bench.experiments.names)


def _variant(path: Path, where: str, name: Any, extra: dict) -> str:
    """An experiment's `variant` name: a short plain name, and only beside the `set` it names."""
    if name is None:
        return ""
    if not isinstance(name, str) or not VARIANT_NAME.fullmatch(name):
        raise _fail(path, f"{where}.variant", f"a name of 1–32 letters, digits, spaces or _.+-, got {excerpt(name)}")
    if not extra:
        raise _fail(path, f"{where}.variant", "a `set` beside it: a variant names the overrides of its runs")
    return name


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
            rules.method(m)  # a row of the table, or a user's rule (imported: the matrix names it)
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


def shared_method(method: str, scale: int | str) -> str:
    """The method a Table 2 cell runs: at S = 1 every Table 2 rule that is identity scaling there is the same
    computation (bench.algo.rules.shares_s1), run once as adascale; any other rule runs its own."""
    return SHARED_AT_S1 if scale == 1 and rules.shares_s1(rules.method(method)) else method


def is_shared(method: str, scale: int | str, kind: str | None) -> bool:
    """Whether a run stands for every Table 2 rule that shares S = 1 (the S = 1 adascale run of a table2 cell)."""
    return method == SHARED_AT_S1 and str(scale) == "1" and kind in (None, "table2")


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


WAITS = {"T_AS": " (after its AdaScale run)", "T": " (after the grid's AdaScale runs)"}  # by `needs`


def describe(m: Matrix) -> str:
    """The expansion of a matrix: one line per run, in submission order, and the counts."""
    lines = [f"{m.path}: preset {m.preset}, {len(m.runs)} runs"]
    counts: dict[str, int] = {}
    for r in m.runs:
        counts[r.experiment["kind"]] = counts.get(r.experiment["kind"], 0) + 1
    lines.append("  " + ", ".join(f"{k}: {v}" for k, v in counts.items()))
    for r in m.runs:
        extra = names.label_of(r.experiment) or names.short_form(r.overrides, every=True)  # a variant, named
        method = r.method
        if r.experiment["kind"] == "sweep":  # its rule and batch say which run it is; the rest is the sweep's
            method, extra = str(r.experiment.get("method", method)), f"batch {r.experiment.get('batch', '?')}"
        extra = f"[{extra}]" if extra else ""
        after = WAITS.get(rules.method(r.method).needs or "", "")
        after = f" ({shared_note(m.methods)})" if is_shared(r.method, r.scale, r.experiment["kind"]) else after
        lines.append(
            f"  {r.experiment['kind']:8s} {r.task:12s} {method:9s} {str(r.scale):13s} seed{r.seed}"
            f"{' ' + extra if extra else ''}{after}"
        )
    lines.append(f"{len(m.runs)} runs")
    return "\n".join(lines)


def dedupe(runs: list[RunRequest]) -> list[RunRequest]:
    seen, out = set(), []
    for r in runs:
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return out


def order(runs: list[RunRequest]) -> list[RunRequest]:
    """Runs that others depend on first: AdaScale before LSW+ (which needs its iteration count) and before
    the heat map's scaled SGD (whose T is their mean iteration count)."""
    return sorted(runs, key=lambda r: rules.method(r.method).needs is not None)


def depends_on(run: RunRequest, runs: list[RunRequest]) -> list[RunRequest]:
    """The runs that must finish before `run` can start: what its method needs (the method table's
    `needs`): T = its grid's AdaScale runs (a heat map's), T_AS = its AdaScale twin."""
    needs = rules.method(run.method).needs
    if needs == "T" and run.experiment.get("kind") == "heatmap":
        return [r for r in runs if r.method == ADASCALE and r.experiment.get("grid") == run.experiment["grid"]]
    if needs != "T_AS":
        return []
    return [
        r
        for r in runs
        if r.method == ADASCALE
        and r.task == run.task
        and r.scale == run.scale
        and r.seed == run.seed
        and r.overrides == run.overrides
    ]
