"""Task names, presets and module constants read from the task modules' source, without importing them.

Importing a task adapter imports torch (1-3 s), which `plan` and `matrix` do not need: they only read the
presets. This reads the literal assignments of a task module (`_PAPER = {...}`, `N, D = 20_000, 30`,
`"T1": 80 * N // REFERENCE_BATCH`, `{**_COMMON, ...}`) and its class's `presets = {...}` with a small
evaluator of literals, names and arithmetic; a non-literal value inside a mapping is an `Unread` marker
(imagenet's tiny `num_classes: len(tiny.CLASSES)`), any other non-literal assignment is left out.
tests/test_plan.py checks that the result equals `tasks.get_task(name).presets` for every task.
(A bridge: once the presets live in pure-data modules, import those instead.)
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import operator
from pathlib import Path
from typing import Any

from bench.errors import UserError

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


class _NotLiteral(Exception):
    pass


class Unread:
    """A value inside a preset that is not literal (e.g. `len(tiny.CLASSES)`): its source text."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __repr__(self) -> str:
        return f"<not read: {self.source}>"


def _value(node: ast.AST, env: dict[str, Any]) -> Any:
    """A dict or list element: its value, or Unread when it is not literal (the rest is still read)."""
    try:
        return _eval(node, env)
    except _NotLiteral:
        return Unread(ast.unparse(node))


def _eval(node: ast.AST, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise _NotLiteral(node.id)
        return env[node.id]
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:  # {**other}
                out.update(_eval(v, env))
            else:
                out[_eval(k, env)] = _value(v, env)
        return out
    if isinstance(node, ast.List):
        return [_eval(e, env) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e, env) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _eval(node.operand, env)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    raise _NotLiteral(type(node).__name__)


def _assign(stmt: ast.stmt, env: dict[str, Any]) -> None:
    """Bind the names of one literal assignment; leave anything else out."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target, value = stmt.target, stmt.value
    else:
        return
    try:
        result = _eval(value, env)
    except (_NotLiteral, TypeError, ValueError, ArithmeticError):
        return
    if isinstance(target, ast.Name):
        env[target.id] = result
    elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
        if isinstance(result, tuple) and len(result) == len(target.elts):
            for e, v in zip(target.elts, result, strict=True):
                env[e.id] = v  # type: ignore[attr-defined]


def _tasks_dir() -> Path:
    spec = importlib.util.find_spec("tasks")  # a top-level find_spec does not import the package
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the tasks package is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def registry() -> dict[str, tuple[Path, str]]:
    """Task name -> (module source file, adapter class name), for the modules present in this checkout."""
    root = _tasks_dir()
    env: dict[str, Any] = {}
    for stmt in ast.parse((root / "__init__.py").read_text()).body:
        _assign(stmt, env)
    out = {}
    for name, target in env.get("_REGISTRY", {}).items():
        module, cls = target.split(":")
        rel = Path(*module.split(".")[1:])
        for path in (root / rel / "__init__.py", root / rel.with_suffix(".py")):
            if path.exists():
                out[name] = (path, cls)
                break
    return out


def available() -> list[str]:
    """Names of the tasks whose adapter module is present (as tasks.available(), without importing them)."""
    return list(registry())


@functools.cache
def _module(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(module-level literal constants, the adapter class's literal attributes) of a task module."""
    if name not in registry():
        raise UserError(f"unknown task {name!r}; expected one of: {', '.join(available())}")
    path, cls = registry()[name]
    env: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    for stmt in ast.parse(path.read_text()).body:
        _assign(stmt, env)
        if isinstance(stmt, ast.ClassDef) and stmt.name == cls:
            for inner in stmt.body:
                local = dict(env)
                _assign(inner, local)
                attrs.update({k: v for k, v in local.items() if k not in env or local[k] is not env[k]})
    return env, attrs


def presets(name: str) -> dict[str, dict[str, Any]]:
    """The task's presets, as `tasks.get_task(name).presets` holds them."""
    found = _module(name)[1].get("presets")
    if not isinstance(found, dict):
        raise UserError(f"task {name}: its presets are not literal data in {registry()[name][0]}")
    return found


def constant(name: str, key: str) -> Any:
    """A module-level literal constant of a task module (e.g. logreg's N)."""
    env = _module(name)[0]
    if key not in env:
        raise UserError(f"task {name}: no literal constant {key} in {registry()[name][0]}")
    return env[key]
