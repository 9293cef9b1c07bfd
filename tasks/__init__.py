"""Task adapters, looked up by name. Imports are lazy: a task's heavy dependencies load only when used."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from bench.errors import UserError

if TYPE_CHECKING:  # tasks.base imports torch; the registry and tasks.presets must not
    from .base import Task

_REGISTRY = {
    "logreg": "tasks.logreg:LogReg",
    "cifar10": "tasks.cifar10:Cifar10",
    "imagenet": "tasks.imagenet:ImageNet",
    "speech": "tasks.speech:Speech",
    "transformer": "tasks.transformer:Transformer",
    "yolo": "tasks.yolo:Yolo",
}


def available() -> list[str]:
    """Names of the tasks whose adapter module is present in this checkout."""
    names = []
    for name, target in _REGISTRY.items():
        module = target.split(":")[0]
        if importlib.util.find_spec(module) is not None:
            names.append(name)
    return names


def preparable() -> list[str]:
    """Tasks whose data `adascale-bench prepare` turns from its published form into the layout the task
    reads: those with a tasks/<name>/prepare.py (found on disk, so that --help imports no task)."""
    here = Path(__file__).parent
    return [name for name in available() if (here / name / "prepare.py").is_file()]


def require(name: str) -> None:
    """One line saying how to install what a task needs beyond the suite's own dependencies (its card's
    `requires`, an optional pip extra: ultralytics, AGPL-3.0, for yolo) when that is not installed."""
    from tasks.presets import card

    c = card(name)
    missing = [pkg for pkg in c.requires if importlib.util.find_spec(pkg) is None]
    if missing:
        raise UserError(
            f"the {name} task needs {', '.join(missing)}, which is not installed: it is an optional extra, "
            f"pip install 'adascale-bench[{c.extra}]'"
        )


def get_task(name: str) -> Task:
    if name not in _REGISTRY or name not in available():
        raise UserError(f"unknown task {name!r}; expected one of: {', '.join(available())}")
    require(name)
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)()
