"""A run's spec is one frozen, typed value (bench.core.runspec.RunSpec) from where it is made to where it is read: no
parameter annotated as a spec is a dict (a spec.json read unchecked is a SpecDocument, by that name), the value
cannot be changed in place, and its JSON document is spec.json as resolved, byte for byte."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from bench.core.runspec import RunSpec, checked
from bench.run.spec import resolve
from tasks import get_task

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bench", "reports", "slurm", "tasks")
SPEC_NAMES = {"spec", "cfg", "twin", "base", "spec_a", "spec_b"}  # what the code calls a run's spec


def dict_specs(source: str) -> list[tuple[int, str]]:
    """(line, name) of every parameter named like a spec whose annotation is a dict (dict, dict[...], Dict)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.arg) and node.arg in SPEC_NAMES and node.annotation is not None:
            text = ast.unparse(node.annotation)
            if text == "dict" or text.startswith(("dict[", "Dict")) or "| dict" in text or text.startswith("dict |"):
                found.append((node.lineno, node.arg))
    return found


def test_no_spec_is_passed_as_a_dict() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, name in dict_specs(path.read_text())
    ]
    assert not found, "specs annotated as dicts (a RunSpec, or a SpecDocument read unchecked):\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("def f(spec: dict[str, Any]) -> None: ...\n", [(1, "spec")]),
        ("def f(x, cfg: dict | None = None): ...\n", [(1, "cfg")]),
        ("def f(spec: RunSpec, doc: dict[str, Any]): ...\n", []),  # typed, and a dict that is not a spec
        ("def f(spec: SpecDocument): ...\n", []),  # a document read unchecked, named for what it is
    ],
)
def test_the_check_catches_a_dict_spec_and_only_that(source: str, caught: list[tuple[int, str]]) -> None:
    assert dict_specs(source) == caught


def test_a_spec_is_frozen_and_a_change_is_a_new_checked_value() -> None:
    spec = resolve(get_task("logreg"), "adascale", 2, 0, "tiny")
    with pytest.raises(ValidationError, match="frozen"):
        spec.T1 = 5  # type: ignore[misc]
    longer = spec.replace(T1=4000)
    assert (spec.T1, longer.T1) == (2000, 4000) and longer.differs_from(spec.to_json()) == ["T1"]
    with pytest.raises(Exception, match="T1"):
        spec.replace(T1="long")  # checked again: a string is no number


def test_spec_json_is_the_resolved_document_byte_for_byte(tmp_path: Path) -> None:
    """Values are checked, not converted: T1 = 2000 stays an integer (a float field keeps it), a float stays a
    float, and reading the document back gives the same value."""
    spec = resolve(get_task("cifar10"), "adascale", 4, 1, "tiny", overrides={"T1": 300, "lr_schedule.lr0": 0.2})
    doc = spec.to_json()
    assert type(doc["T1"]) is int and type(doc["lr_schedule"]["lr0"]) is float and "rule" not in doc
    again = checked(json.loads(json.dumps(doc)), get_task("cifar10").presets["tiny"])
    assert isinstance(again, RunSpec) and again == spec and again.to_json() == doc
    assert json.dumps(again.to_json(), sort_keys=True) == json.dumps(doc, sort_keys=True)
