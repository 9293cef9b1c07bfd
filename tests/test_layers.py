"""The tree's layers hold: no import cycle among the project's modules (function-level imports
included), the import-linter contracts in pyproject.toml are kept, and the commands that only read
matrices and run folders never import torch."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

PACKAGES = ("bench", "tasks", "slurm", "reports")
ROOT = Path(__file__).resolve().parents[1]


def test_no_import_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    cycles = [
        (module, imported)
        for module in sorted(graph.modules)
        for imported in graph.find_modules_directly_imported_by(module)
        if graph.chain_exists(importer=imported, imported=module)
    ]
    assert cycles == []


def test_import_linter_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    run = subprocess.run([str(lint), "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


@pytest.mark.parametrize("argv", [["matrix", "paper"], ["matrix", "smoke"], ["status", "{tmp}"]])
def test_reading_commands_do_not_import_torch(argv: list[str], tmp_path) -> None:
    argv = [a.format(tmp=tmp_path) for a in argv]
    code = (
        f"import sys; from bench.cli import main; rc = main({argv!r}); "
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', rc)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "NO-TORCH" in run.stdout, run.stdout[-500:] + run.stderr[-500:]


def test_presets_are_plain_data() -> None:
    names = ("logreg", "cifar10", "imagenet", "speech", "transformer", "yolo")
    code = (
        f"import sys; from tasks.presets import card; [card(t) for t in {names!r}]; "
        "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.stdout.strip() == "[]", run.stderr[-500:]


def test_the_contracts_fail_on_a_planted_import(tmp_path: Path) -> None:
    """Each layer contract breaks when the import it forbids is planted in a copy of the tree: a task importing the
    roof (bench.run), the foundation importing a task, the suite importing an old path (bench.errors)."""
    import shutil

    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    plants = {"tasks/logreg.py": "import bench.run.spec", "bench/core/files.py": "import tasks",
              "reports/advice.py": "import bench.errors"}  # fmt: skip
    for path, line in plants.items():
        (tmp_path / path).write_text((tmp_path / path).read_text() + f"\n{line}  # noqa\n")
    lint = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    run = subprocess.run([str(lint), "--no-cache"], capture_output=True, text=True, cwd=tmp_path, env=env)
    out = " ".join(run.stdout.split())  # import-linter wraps long names
    assert run.returncode != 0, out[-2000:]
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    names = [c["name"] for c in contracts]
    for start in ("Layers: the CLI on top;", "Tasks stand on the foundation alone", "The old paths"):
        name = next(n for n in names if n.startswith(start))
        assert f"{name} BROKEN" in out, out[-3000:]
