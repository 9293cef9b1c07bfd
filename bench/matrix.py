"""Experiment matrices: YAML files that declare experiments (Table 2 cells, elastic runs), expanded
into runs in an order that respects their dependencies (LSW+ after its AdaScale run).

    preset: tiny            # tiny | paper
    seeds: [0, 1]           # default seeds of every experiment
    data_roots: {cifar10: /data/cifar}   # optional, per task (tiny: written on first use)
    set: {key: value}       # optional spec overrides for every run
    experiments:
      - table2: {tasks: [cifar10], methods: [adascale, lsw, lsw+], scales: [1, 8, 16]}
      - elastic: {tasks: [imagenet], methods: [adascale, lsw], schedules: [elastic-up, elastic-down]}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import UserError
from .rules import METHODS
from .spec import ELASTIC, parse_scale

PRESET_DIR = Path(__file__).parent / "matrices"
KINDS = ("table2", "elastic")


@dataclass(frozen=True)
class RunRequest:
    """One run of a matrix, before its spec is resolved against the task's preset."""

    task: str
    method: str
    scale: int | str
    seed: int
    overrides: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    experiment: str = "table2"

    @property
    def key(self) -> tuple:
        return (self.task, self.method, self.scale, self.seed, tuple(sorted(self.overrides.items())))


@dataclass
class Matrix:
    path: Path
    preset: str
    runs: list[RunRequest]
    data_roots: dict[str, str]
    overrides: dict[str, Any]


def _fail(path: Path, where: str, expected: str) -> UserError:
    return UserError(f"{path}: {where}: expected {expected}")


def _list(path: Path, where: str, value: Any, item: type, allowed: tuple | None = None) -> list:
    if not isinstance(value, list) or not value:
        raise _fail(path, where, f"a non-empty list of {item.__name__}")
    for v in value:
        if not isinstance(v, item) or isinstance(v, bool):
            raise _fail(path, where, f"a list of {item.__name__}, got {v!r}")
        if allowed is not None and v not in allowed:
            raise _fail(path, where, f"values among {', '.join(map(str, allowed))}, got {v!r}")
    return value


def locate(name: str | Path) -> Path:
    """A matrix file path, or the name of a preset shipped in bench/matrices (smoke, paper)."""
    path = Path(name)
    if path.exists():
        return path
    shipped = PRESET_DIR / f"{name}.yaml"
    if shipped.exists():
        return shipped
    names = ", ".join(sorted(p.stem for p in PRESET_DIR.glob("*.yaml")))
    raise UserError(f"matrix {name}: no such file, and not a shipped matrix ({names})")


def load(name: str | Path) -> Matrix:
    from tasks import available

    path = locate(name)
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(doc, dict):
        raise _fail(path, "top level", "a mapping with preset, seeds and experiments")
    unknown = set(doc) - {"preset", "seeds", "experiments", "data_roots", "set"}
    if unknown:
        raise _fail(path, f"key {sorted(unknown)[0]!r}", "one of preset, seeds, experiments, data_roots, set")
    preset = doc.get("preset", "tiny")
    if preset not in ("tiny", "paper"):
        raise _fail(path, "preset", "tiny or paper")
    seeds = _list(path, "seeds", doc.get("seeds", [0]), int)
    tasks = available()
    runs: list[RunRequest] = []
    experiments = doc.get("experiments")
    if not isinstance(experiments, list) or not experiments:
        raise _fail(path, "experiments", "a non-empty list")
    for i, exp in enumerate(experiments):
        where = f"experiments[{i}]"
        if not isinstance(exp, dict) or len(exp) != 1 or next(iter(exp)) not in KINDS:
            raise _fail(path, where, f"a mapping with one key among {', '.join(KINDS)}")
        kind, body = next(iter(exp.items()))
        if not isinstance(body, dict):
            raise _fail(path, f"{where}.{kind}", "a mapping")
        exp_seeds = _list(path, f"{where}.{kind}.seeds", body.get("seeds", seeds), int)
        exp_tasks = _list(path, f"{where}.{kind}.tasks", body.get("tasks"), str, tuple(tasks))
        methods = _list(path, f"{where}.{kind}.methods", body.get("methods"), str, METHODS)
        if kind == "table2":
            scales = _list(path, f"{where}.{kind}.scales", body.get("scales"), int)
            if any(s < 1 for s in scales):
                raise _fail(path, f"{where}.{kind}.scales", "positive integers")
        else:
            scales = _list(path, f"{where}.{kind}.schedules", body.get("schedules", list(ELASTIC)), str, ELASTIC)
        for task in exp_tasks:
            for method in methods:
                for scale in scales:
                    for seed in exp_seeds:
                        runs.append(RunRequest(task, method, parse_scale(scale), seed, experiment=kind))
    return Matrix(path, preset, order(dedupe(runs)), dict(doc.get("data_roots") or {}), dict(doc.get("set") or {}))


def dedupe(runs: list[RunRequest]) -> list[RunRequest]:
    seen, out = set(), []
    for r in runs:
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return out


def order(runs: list[RunRequest]) -> list[RunRequest]:
    """Runs that others depend on first: AdaScale before LSW+ (which needs its iteration count)."""
    return sorted(runs, key=lambda r: r.method == "lsw+")


def depends_on(run: RunRequest, runs: list[RunRequest]) -> list[RunRequest]:
    """The runs that must finish before `run` can start."""
    if run.method != "lsw+":
        return []
    return [
        r
        for r in runs
        if r.method == "adascale"
        and r.task == run.task
        and r.scale == run.scale
        and r.seed == run.seed
        and r.overrides == run.overrides
    ]
