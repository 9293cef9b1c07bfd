"""A method's name is written in the method table (bench/core/algo/rules.py: its rows, and the names the suite itself
reasons about, ADASCALE, LSW, …), in the matrix YAMLs and in tests: nowhere else. Code that needs a method
reads its row (bench.core.methods.method, recorded, its fields) or one of those names, so that a rule's behaviour has
one home and a renamed or added rule touches only the table."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench.core.algo.rules import METHODS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bench", "reports", "slurm", "tasks")
TABLE = ROOT / "bench" / "core" / "algo" / "rules.py"


def literals(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every string constant of the source that is exactly a method's name, docstrings aside."""
    tree = ast.parse(source)
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in docs
    ]


def test_no_method_name_is_written_outside_the_method_table() -> None:
    names = set(METHODS)
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name!r}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != TABLE
        for line, name in literals(path.read_text(), names)
    ]
    assert not found, "method names written outside bench/core/algo/rules.py (use its row or its names):\n" + "\n".join(
        found
    )


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ('x = method == "lsw"\n', [(1, "lsw")]),
        ('def f():\n    """About adascale."""\n    return {"sqrt": 1}\n', [(3, "sqrt")]),
        ('"""adascale"""\nNAME = "adascale-ish"\n', []),  # a docstring, a longer string: not a name
    ],
)
def test_the_check_catches_a_literal_and_only_a_literal(source: str, caught: list[tuple[int, str]]) -> None:
    assert literals(source, set(METHODS)) == caught
