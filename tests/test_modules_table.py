"""docs/design.md's module lists are read off the tree: every module of bench/ has its row in "Modules of
`bench/`" and every row names a module that exists; every module of reports/ and slurm/ is named in its
paragraph. A module added or removed without its line fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = (ROOT / "docs" / "design.md").read_text()


def _modules(package: str) -> set[str]:
    """Modules under `package` as the docs name them, `a/b`; a subpackage's empty __init__ is no module."""
    out = set()
    for p in (ROOT / package).rglob("*.py"):
        rel = p.relative_to(ROOT / package).with_suffix("").as_posix()
        if rel.endswith("/__init__") and not p.read_text().strip():
            continue
        out.add(rel)
    return out


def _bench_table() -> set[str]:
    start = DESIGN.index("**Modules of `bench/`.**")
    table = DESIGN[start : DESIGN.index("\n\n", DESIGN.index("|---|", start))]
    named = set()
    for line in table.splitlines()[3:]:
        first = line.split("|")[1]
        named |= {n for n in re.findall(r"`([^`]+)`", first) if not n.endswith((".yaml", ".csv"))}
    return named


def test_every_bench_module_has_its_row_and_every_row_a_module() -> None:
    named, tree = _bench_table(), _modules("bench")
    assert tree - named == set(), f"modules without a row in docs/design.md: {sorted(tree - named)}"
    assert named - tree == set(), f"rows naming no module: {sorted(named - tree)}"


def test_every_reports_and_slurm_module_is_named() -> None:
    for package, start in (("reports", "- `reports/`:"), ("slurm", "- `slurm/`:")):
        i = DESIGN.index(start)
        paragraph = DESIGN[i : DESIGN.index("\n- ", i + 3) if package == "slurm" else DESIGN.index("\n\n", i)]
        named = set(re.findall(r"`([a-z_0-9]+)`", paragraph))
        tops = {m.split("/")[0] for m in _modules(package)} - {"__init__"}
        assert tops - named == set(), f"{package} modules not named in docs/design.md: {sorted(tops - named)}"
