"""scripts/gpu_check.sh, the first checks on a GPU, run as a dry run on this CPU with the tiny presets: every step
runs and writes its files (so a lent GPU's minutes are not lost to a typo), and a step that fails fails the script,
naming itself."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TASKS = ["cifar10", "imagenet", "speech", "transformer", "yolo"]


def _check(out: Path, *more: str) -> subprocess.CompletedProcess[str]:
    argv = [str(ROOT / "scripts" / "gpu_check.sh"), "--device", "cpu", "--preset", "tiny", "--out", str(out), *more]
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)


@pytest.mark.long  # five tasks' perf and the gpu tests' collection: ~1 min
def test_the_dry_run_writes_every_table(tmp_path: Path) -> None:
    res = _check(tmp_path / "out", "--repeats", "2")
    assert res.returncode == 0, res.stdout[-3000:]
    out = tmp_path / "out"
    files = ["env.txt", "gpu_check.log", "perf.csv", "pytest_gpu.log", "throughput.csv"]
    assert sorted(p.name for p in out.iterdir()) == files
    rows = list(csv.DictReader((out / "perf.csv").open()))
    assert sorted({r["task"] for r in rows}) == TASKS and {r["scale"] for r in rows} == {"1", "2"}
    assert all(r["host_syncs_adascale"] == "1" and r["host_syncs_bf16"] == "1" for r in rows)
    measured = {r["task"]: r for r in csv.DictReader((out / "throughput.csv").open()) if r["preset"] == "tiny"}
    assert sorted(measured) == TASKS and all(float(r["examples_per_s"]) > 0 for r in measured.values())
    assert all(r["command"].startswith("adascale-bench perf --task") for r in measured.values())
    assert "test_a_tiny_run_on_cuda_is_the_cpu_run" in (out / "pytest_gpu.log").read_text()
    assert "gpu_check: every step passed" in res.stdout


@pytest.mark.long
def test_a_step_that_fails_fails_the_script_and_says_which(tmp_path: Path) -> None:
    res = _check(tmp_path / "out", "--task-seconds", "1")
    assert res.returncode == 1
    assert "gpu_check: failed: perf cifar10 (exit 124, over 1 s)" in res.stdout, res.stdout[-3000:]
    assert (tmp_path / "out" / "gpu_check.log").read_text().count("gpu_check: failed: perf ") == 5


def test_an_out_folder_with_something_planted_in_it_is_refused_before_anything_runs(tmp_path: Path) -> None:
    target = tmp_path / "theirs.csv"
    target.write_text("keep\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "perf.csv").symlink_to(target)  # a write through it would land in someone else's file
    res = _check(out)
    assert res.returncode == 2 and "must be a new or empty folder" in res.stderr
    assert target.read_text() == "keep\n" and sorted(p.name for p in out.iterdir()) == ["perf.csv"]
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    assert _check(tmp_path / "link").returncode == 2 and not (tmp_path / "elsewhere").exists()
