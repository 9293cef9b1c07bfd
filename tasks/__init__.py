"""Task adapters, looked up by name. Imports are lazy: a task's heavy dependencies load only when used."""

from __future__ import annotations

import importlib
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


def get_task(name: str) -> Task:
    if name not in _REGISTRY or name not in available():
        raise UserError(f"unknown task {name!r}; expected one of: {', '.join(available())}")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)()
