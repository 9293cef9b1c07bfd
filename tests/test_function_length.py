"""No function of the suite is over 60 lines but those docs/design.md lists, each with its reason (the list is
read from the design, so adding a long function means saying why there, or splitting it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 60


def long_functions(source: str, where: str) -> dict[str, int]:
    """`where:name` -> lines of every function longer than LIMIT in the source."""
    return {
        f"{where}:{node.name}": node.end_lineno - node.lineno + 1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > LIMIT
    }


def listed() -> dict[str, int]:
    text = (ROOT / "docs" / "design.md").read_text()
    section = text[text.index("**Functions over 60 lines.**") : text.index("### Adding a method")]
    return {name: int(n) for name, n in re.findall(r"^\| `([^`]+)` \| (\d+) \|", section, re.M)}


def test_every_long_function_is_listed_with_its_length_and_every_listed_one_exists() -> None:
    found: dict[str, int] = {}
    for package in ("bench", "reports", "slurm", "tasks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            found |= long_functions(path.read_text(), str(path.relative_to(ROOT)))
    assert found == listed()


def test_the_check_finds_a_long_function_and_only_a_long_one() -> None:
    body = "\n".join(f"    x = {i}" for i in range(LIMIT))
    assert long_functions(f"def long():\n{body}\n", "m.py") == {"m.py:long": LIMIT + 1}
    assert long_functions("def short():\n    return 1\n", "m.py") == {}
