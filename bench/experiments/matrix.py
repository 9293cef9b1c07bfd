"""Experiment matrices: YAML files that declare experiments (Table 2 cells, elastic runs), expanded
into runs in an order that respects their dependencies (LSW+ after its AdaScale run).

    preset: tiny            # tiny | paper
    seeds: [0, 1]           # default seeds of every experiment
    data_roots: {cifar10: /data/cifar}   # optional, per task (tiny: written on first use)
    set: {key: value}       # optional spec overrides for every run
    experiments:
      - table2: {tasks: [cifar10], methods: [adascale, lsw, sqrt, mine.rules:HALF], scales: [1, 8, 16]}
        # methods: rows of the method table (bench.core.algo.rules.METHODS) or a rule of yours, package.module:NAME
      - elastic: {tasks: [imagenet], methods: [adascale, lsw], schedules: [elastic-up, elastic-down]}
      - heatmap: {name: cifar10-grid, task: cifar10, scale: 16, lr0: [...], decay: [...], threshold: 94.0}
        # optional `scaled_lr0: [...]`: the scaled-SGD panel's own lr0 list (default: lr0)
        # any experiment may carry `set: {key: value}`: spec overrides for its runs only, and with it
        # `variant: NAME`, the short name the report gives those runs' tables and figures (reports.rundata.variants)
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

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core import methods as registry
from bench.core import safefs
from bench.core.algo import rules
from bench.core.errors import UserError, did_you_mean
from bench.core.files import open_regular
from bench.core.methods import shared_note
from bench.core.runspec import RunSpec
from bench.core.usercode import USER_NAME, is_user_name
from bench.core.yamlsafe import excerpt, load_yaml
from bench.experiments import names
from bench.experiments.kinds import KINDS, _cells, _fail, _gain, _heatmap, _list, _sweep
from bench.experiments.kinds import SWEEP_BATCHES as SWEEP_BATCHES  # re-exported: the sweep reads matrix.X
from bench.experiments.kinds import sweep_runs as sweep_runs  # re-exported: the sweep reads matrix.X
from bench.experiments.runrequest import RunRequest, dedupe, is_shared, order, shared_method
from bench.experiments.runrequest import depends_on as depends_on  # re-exported: the pool, the submitter

PRESET_DIR = Path(__file__).parent / "matrices"


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


def with_data_roots(m: Matrix, items: Sequence[str]) -> Matrix:
    """The matrix with `--data-root TASK=PATH` (submit, matrix; repeatable) over its `data_roots`: a data folder
    given on the command line, for a matrix written elsewhere (advise's verify.yaml, a colleague's file)."""
    roots = dict(m.data_roots)
    tasks = sorted({r.task for r in m.runs})
    for item in items:
        task, sep, path = (part.strip() for part in str(item).partition("="))
        if not sep or not task or not path:
            raise UserError(f"--data-root {excerpt(item)}: expected TASK=PATH (a task of the matrix, its data folder)")
        if task not in tasks:
            raise UserError(f"--data-root {excerpt(item)}: {m.path} has no task {excerpt(task)} ({', '.join(tasks)})")
        roots[task] = str(Path(path).expanduser().resolve())
    return dataclasses.replace(m, data_roots=roots)


MAX_BYTES = 4 << 20  # a matrix file (the paper's is a few kB)
MAX_RUNS = 50_000  # runs a matrix expands to (the paper's is ~1 200): past it, a typo, not a plan


def locate(name: str | Path) -> Path:
    """A matrix file path, or the name of a preset shipped in bench/experiments/matrices (smoke, paper)."""
    path = Path(name)
    if path.exists():
        return path
    shipped = PRESET_DIR / f"{name}.yaml"
    if shipped.exists():
        return shipped
    stems = sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))
    hint = did_you_mean(str(name), stems)
    raise UserError(f"matrix {name}: no such file, and not a shipped matrix{hint} ({', '.join(stems)})")


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
    runs = _expand(path, doc.get("experiments"), seeds, tasks, preset, pilot, dict(doc.get("set") or {}))
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
    bounded (bench.core.yamlsafe)."""
    try:
        with open_regular(path, "rb") as f:
            data = safefs.read_upto(f, MAX_BYTES)
        if len(data) > MAX_BYTES:
            raise UserError(f"{path}: larger than {MAX_BYTES >> 20} MB; not a matrix")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: unreadable ({e.__class__.__name__})") from None
    return load_yaml(text, str(path))


def _expand(
    path: Path,
    experiments: Any,
    seeds: list[int],
    tasks: TaskNames,
    preset: str,
    pilot: dict[str, list[int]],
    top: dict[str, Any],
) -> list[RunRequest]:
    """Every run of the file's experiments, each with its variant, its `set` and its task's pilot seeds; a
    shared S = 1 cell runs the shared method of its optimizer (the file's `set`, then the experiment's)."""
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
            method = r.method
            if is_shared(method, r.scale, kind):  # adamscale under AdamW
                method = shared_method(method, r.scale, str({**top, **extra}.get("optimizer", "sgd")))
            runs.append(RunRequest(r.task, method, r.scale, r.seed, {**r.overrides, **extra}, exp))
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
    pilot seed placed in the folder (reports.verdicts.findings)."""
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


WAITS = {"T_AS": " (after its AdaScale run)", "T": " (after the grid's AdaScale runs)"}  # by `needs`


def describe(m: Matrix) -> str:
    """The expansion of a matrix: one line per run, in submission order, and the counts."""
    lines = [f"{m.path}: preset {m.preset}, {len(m.runs)} runs"]
    counts: dict[str, int] = {}
    for r in m.runs:
        counts[r.experiment["kind"]] = counts.get(r.experiment["kind"], 0) + 1
    lines.append("  " + ", ".join(f"{k}: {v}" for k, v in counts.items()))
    if m.data_roots:
        lines.append("  data roots: " + ", ".join(f"{k} = {excerpt(v)}" for k, v in sorted(m.data_roots.items())))
    for r in m.runs:
        extra = names.label_of(r.experiment) or names.short_form(r.overrides, every=True)  # a variant, named
        method = r.method
        if r.experiment["kind"] == "sweep":  # its rule and batch say which run it is; the rest is the sweep's
            method, extra = str(r.experiment.get("method", method)), f"batch {r.experiment.get('batch', '?')}"
        extra = f"[{extra}]" if extra else ""
        after = WAITS.get(registry.method(r.method).needs or "", "")
        after = f" ({shared_note(m.methods)})" if is_shared(r.method, r.scale, r.experiment["kind"]) else after
        lines.append(
            f"  {r.experiment['kind']:8s} {r.task:12s} {method:9s} {str(r.scale):13s} seed{r.seed}"
            f"{' ' + extra if extra else ''}{after}"
        )
    lines.append(f"{len(m.runs)} runs")
    return "\n".join(lines)
