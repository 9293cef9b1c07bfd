"""Task adapters, looked up by name. Imports are lazy: a task's heavy dependencies load only when used."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core import usercode
from bench.core.errors import UserError
from bench.core.usercode import is_user_name

if TYPE_CHECKING:  # tasks.base imports torch, bench.core.runspec pydantic; the registry and tasks.presets must not
    from bench.core.runspec import RunSpec

    from .base import Task
    from .presets import TaskCard

_REGISTRY = {
    "logreg": "tasks.logreg:LogReg",
    "cifar10": "tasks.cifar10:Cifar10",
    "imagenet": "tasks.imagenet:ImageNet",
    "speech": "tasks.speech:Speech",
    "transformer": "tasks.transformer:Transformer",
    "yolo": "tasks.yolo:Yolo",
}
_LOADED: dict[str, type[Task]] = {}  # tasks of yours loaded by this process, by their `package.module:NAME`
_DIGESTS: dict[str, str] = {}  # the sha256 of each loaded task's module source


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
    if missing and not c.extra:
        raise UserError(f"the {name} task needs {', '.join(missing)}, which is not installed (its card's requires)")
    if missing:
        raise UserError(
            f"the {name} task needs {', '.join(missing)}, which is not installed: it is an optional extra, "
            f"pip install 'adascale-bench[{c.extra}]'"
        )


def known(name: str) -> bool:
    """Whether a name can be a task here: a built-in task present in this checkout, or a task of yours
    (`package.module:NAME`, imported where you name it: `load`)."""
    return is_user_name(name) or name in available()


def names_hint() -> str:
    return f"expected one of: {', '.join(available())}, or a task of yours as package.module:NAME"


def unknown_task(name: str) -> str:
    """The one line for a task name that is none: 'unknown task 'logre' (did you mean logreg?); expected ...'."""
    from bench.core.errors import did_you_mean

    return f"unknown task {name!r}{did_you_mean(name, available())}; {names_hint()}"


def card_of(name: str) -> TaskCard:
    """The card of a task the user names (matrix, plan, submit, advise): a built-in task's, or a task of yours,
    imported (`load`). What reads run folders uses tasks.presets.card_of_run instead, which imports nothing."""
    from tasks.presets import card

    if is_user_name(name):
        return load(name).card
    if name not in available():
        raise UserError(unknown_task(name))
    return card(name)


def get_task(name: str) -> Task:
    """The adapter of a task by name: a built-in one from the registry, or a task of yours (`load`)."""
    if is_user_name(name):
        cls = load(name)
        require(name)
        return cls()
    if name not in _REGISTRY or name not in available():
        raise UserError(unknown_task(name))
    require(name)
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)()


def load(name: str) -> type[Task]:
    """The class of a task of yours, `package.module:NAME`: a subclass of tasks.base.Task with a `card`
    (tasks.presets.TaskCard), imported by bench.core.usercode's policy. Its card's name becomes the given string (the
    name its runs are filed under) and is remembered (tasks.presets.card finds it). A class missing one of the
    protocol's methods is refused here, in one line naming them, not after its first evaluation. Called only
    where the user names the task (run, matrix, submit, plan, flops, advise and the runs they start)."""
    if name in _LOADED:
        return _LOADED[name]
    from dataclasses import replace

    from tasks.base import Task
    from tasks.presets import TaskCard, check_card, record_card, remember, unrecordable

    cls, digest = usercode.import_named("task", name)
    where = name.replace(":", ".")
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise UserError(f"task {name}: {where} is a {type(cls).__name__}; expected a subclass of tasks.base.Task")
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise UserError(f"task {name}: {where} does not define {', '.join(missing)} (tasks.base.Task's protocol)")
    c = getattr(cls, "card", None)
    if not isinstance(c, TaskCard):
        raise UserError(f"task {name}: {where} has no card (card = tasks.presets.TaskCard(...): metric, presets, ...)")
    try:
        check_card(c)
    except ValueError as e:  # the field, what it holds and what it must hold, in the file the user edits
        raise UserError(f"task {name}: {source_file(cls)}: its card's {e}") from None
    if "tiny" not in c.presets:
        raise UserError(f"task {name}: its card has no tiny preset (the one smoke, tests and advise run)")
    odd = unrecordable(record_card(c), "card")  # a spec records the card as JSON
    if odd:
        source = getattr(sys.modules.get(cls.__module__), "__file__", None) or cls.__module__
        raise UserError(
            f"task {name}: {odd} in {source} is no JSON value (strings, numbers, booleans, None, lists and dicts: "
            "a run's spec records its card)"
        )
    named = type(cls.__name__, (cls,), {"card": replace(c, name=name), "__module__": cls.__module__})
    remember(named.card)
    _LOADED[name], _DIGESTS[name] = named, digest
    return named


def source_file(cls: type) -> str:
    """The file of a task of yours' module (where its card is written), for a one-line error to name."""
    import inspect

    try:
        return inspect.getsourcefile(cls) or cls.__module__
    except TypeError:
        return cls.__module__


def is_loaded(name: str) -> bool:
    """Whether this process has imported the task of yours `name` (because the user named it)."""
    return name in _LOADED


def record(name: str) -> dict[str, Any] | None:
    """What a spec records of its task: None for a built-in task; for a task of yours its name, the sha256 of its
    module's source (part of the run's identity: a changed source is another run) and its card's facts (so that
    report and status never import it)."""
    if not is_user_name(name):
        return None
    from tasks.presets import record_card

    cls = load(name)
    return {"name": name, "sha256": _DIGESTS[name], "card": record_card(cls.card)}


def check_recorded(spec: RunSpec) -> None:
    """A run of a task of yours goes on only with the source its spec recorded (one line otherwise)."""
    if is_user_name(spec.task):
        load(spec.task)
        usercode.check_recorded("task", spec.task, spec.user_task, _DIGESTS.get(spec.task))
