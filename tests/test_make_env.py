"""`make` takes VENV and OUT from its command line only, and `make clean` removes only this repository's own
virtual environment (issue 59.8): an exported VENV made `make clean` delete that folder wherever it was, and an
exported OUT moved where `make smoke` writes. Real `make` in a temporary copy of the Makefile; nothing outside
the test's tmp folder is touched."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _repo(tmp: Path) -> Path:
    """A copy of what the Makefile needs, with a built .venv (a folder holding pyvenv.cfg) and a cache."""
    repo = tmp / "repo"
    repo.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, repo / name)
    _venv(repo / ".venv")
    (repo / ".pytest_cache").mkdir()
    return repo


def _venv(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (path / "keep").write_text("a user's environment\n")
    return path


def _make(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("VENV", "OUT", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", *args], cwd=repo, env={**environ, **env}, capture_output=True, text=True)


def test_an_exported_venv_is_not_what_clean_removes(tmp_path: Path) -> None:
    repo, elsewhere = _repo(tmp_path), _venv(tmp_path / "elsewhere" / "env")
    res = _make(repo, "clean", VENV=str(elsewhere))
    assert res.returncode == 0, res.stderr
    assert (elsewhere / "keep").is_file()  # the exported VENV is not the Makefile's
    assert not (repo / ".venv").exists() and not (repo / ".pytest_cache").exists()  # its own is


def test_clean_refuses_a_venv_that_is_not_the_repositorys_own(tmp_path: Path) -> None:
    repo, elsewhere = _repo(tmp_path), _venv(tmp_path / "elsewhere" / "env")
    (repo / "runs").mkdir()
    (repo / "runs" / "result.json").write_text("{}\n")
    (repo / "link").symlink_to(elsewhere.parent)
    cases = {
        str(elsewhere): "not inside this repository",
        "../elsewhere/env": "not inside this repository",
        ".": "not inside this repository",
        "runs": "not a virtual environment",
        "pyproject.toml": "not a virtual environment",
        "link/env": "through a link",
    }
    for venv, why in cases.items():
        res = _make(repo, "clean", f"VENV={venv}")
        assert res.returncode != 0 and why in res.stderr and "Traceback" not in res.stderr, (venv, res.stderr)
        assert (elsewhere / "keep").is_file() and (repo / "runs" / "result.json").is_file(), venv
        assert (repo / "pyproject.toml").is_file() and (repo / ".venv" / "keep").is_file(), venv
    assert _make(repo, "clean", "VENV=.venv").returncode == 0
    assert not (repo / ".venv").exists() and (elsewhere / "keep").is_file()
    assert _make(repo, "clean").returncode == 0  # nothing left to remove is not an error


def _smoke_command(repo: Path, *args: str, **env: str) -> str:
    dry = _make(repo, "-n", "smoke", *args, **env)
    assert dry.returncode == 0, dry.stderr
    return next(line for line in dry.stdout.splitlines() if "adascale-bench smoke" in line)


def test_out_counts_only_on_the_command_line(tmp_path: Path) -> None:
    """An exported OUT (a common name: another tool's output folder) does not move the smoke's results;
    `make smoke OUT=...` does, as the user asked for it in this very command."""
    repo = _repo(tmp_path)
    (repo / ".venv" / ".installed").write_text("")  # built: make -n shows the smoke command alone
    os.utime(repo / ".venv" / ".installed", (2e9, 2e9))
    assert _smoke_command(repo, OUT=str(tmp_path / "exported")).endswith("--out runs/smoke")
    assert _smoke_command(repo, f"OUT={tmp_path / 'asked'}").endswith(f"--out {tmp_path / 'asked'}")
    assert _smoke_command(repo, VENV=str(tmp_path / "v")).startswith(".venv/bin/adascale-bench")
