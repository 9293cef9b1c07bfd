"""Packaging a user can install beside other work: the LICENSE file says what pyproject's `license` says,
and ultralytics (AGPL-3.0) is an optional extra: the suite imports without it, and running or preparing
yolo without it is one line saying how to install it."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIT_GRANT = "Permission is hereby granted, free of charge, to any person obtaining a copy"


def license_problem(spdx: str, text: str) -> str | None:
    """Why the LICENSE text does not match the SPDX expression `spdx` (only MIT is known here), or None."""
    if spdx != "MIT":
        return f"pyproject says {spdx!r}: this check knows MIT only"
    if text.splitlines()[0].strip() != "MIT License" or MIT_GRANT not in " ".join(text.split()):
        return "LICENSE is not the MIT license's text"
    if not re.search(r"^Copyright \(c\) \d{4}(-\d{4})? \S.*$", text, re.M):
        return "LICENSE names no copyright year and holder"
    return None


def test_license_file_matches_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    text = (ROOT / "LICENSE").read_text()
    assert license_problem(project["license"], text) is None
    assert project["license-files"] == ["LICENSE"]
    assert license_problem("Apache-2.0", text) is not None  # pyproject changed, LICENSE not
    apache = "Apache License\nVersion 2.0, January 2004\n"
    assert license_problem("MIT", apache) is not None  # the other way round
    assert license_problem("MIT", text.replace("Copyright (c)", "Copyleft")) is not None


def test_ultralytics_is_an_extra_that_make_installs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("ultralytics") for d in project["dependencies"])
    assert any(d.startswith("ultralytics") for d in project["optional-dependencies"]["yolo"])
    installs = [line for line in (ROOT / "Makefile").read_text().splitlines() if "pip install" in line and "-e" in line]
    assert installs and all(re.search(r"\.\[[^]]*\byolo\b", line) and "test" in line for line in installs)


# Imports every module of the suite with ultralytics (and opencv, which only it brings) hidden from the
# import system, then asks for yolo. Prints one line per module that failed to import. The old paths' own
# FutureWarning (bench.errors, bench.algo.rules: tests/test_old_paths.py) is theirs, not the yolo extra's.
HIDDEN = textwrap.dedent(
    """
    import importlib, importlib.machinery as m, pkgutil, sys, warnings
    HIDE = {"ultralytics", "cv2"}
    warnings.filterwarnings("ignore", r"bench\\.(errors|algo\\.rules) moved to bench\\.core", FutureWarning)

    class Hide(m.PathFinder):
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            return None if name.split(".")[0] in HIDE else super().find_spec(name, path, target)

    sys.meta_path = [Hide if f is m.PathFinder else f for f in sys.meta_path]
    for top in sys.argv[1:]:
        pkg = importlib.import_module(top)
        for info in pkgutil.walk_packages(pkg.__path__, top + ".", onerror=lambda name: print("FAILED", name)):
            if info.name.endswith("__main__"):
                continue
            try:
                importlib.import_module(info.name)
            except Exception as e:
                print("FAILED", info.name, type(e).__name__, e)
    print("LOADED", sorted(HIDE & set(sys.modules)))
    from bench.cli import main
    print("RUN", main(["run", "--task", "yolo", "--method", "adascale", "--scale", "2", "--out", "/nonexistent/x"]))
    print("PREPARE", main(["prepare", "yolo", "--source", "/nonexistent/s", "--out", "/nonexistent/o"]))
    """
)


def hidden(*packages: str, path: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", HIDDEN, *packages], capture_output=True, text=True, timeout=600, cwd=path
    )


def test_the_suite_imports_without_ultralytics_and_yolo_says_how_to_install_it() -> None:
    res = hidden("bench", "reports", "slurm", "tasks")
    assert "FAILED" not in res.stdout, res.stdout + res.stderr
    assert "LOADED []" in res.stdout and "RUN 2" in res.stdout and "PREPARE 2" in res.stdout, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in res.stderr, res.stderr
    assert all("pip install 'adascale-bench[yolo]'" in line and "ultralytics" in line for line in lines)


def test_a_module_level_import_of_ultralytics_is_caught(tmp_path: Path) -> None:
    """The control: a module that imports ultralytics when imported fails the walk above."""
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "detector.py").write_text("import ultralytics\n")
    res = subprocess.run(
        [sys.executable, "-c", HIDDEN, "planted"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"},
    )
    assert "FAILED planted.detector ModuleNotFoundError" in res.stdout, res.stdout + res.stderr


def test_make_clean_never_removes_results() -> None:
    """`make clean` removes what the build made (.venv, caches), never `runs/`: the README suggests
    `--out runs/paper`, and one habitual command must not delete a user's results."""
    dry = subprocess.run(["make", "-n", "clean"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert ".venv" in dry
    for line in dry.splitlines():
        if line.lstrip().startswith("rm "):
            assert not re.search(r"(^|[\s/])runs(/|\s|$)", line), line
        if line.lstrip().startswith("find "):
            assert "-path ./runs -prune" in line, line
