"""A run stopped by SIGTERM and started again with the same command ends number for number like an
uninterrupted one (CPU), and a damaged checkpoint gives a one-line error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.files import CHECKPOINT, METRICS, SUMMARY, read_json, read_jsonl

pytestmark = pytest.mark.slow


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench", *args]


def run_args(out: Path, task: str, scale: str, *extra: str) -> list[str]:
    return cli(
        "run",
        "--task",
        task,
        "--method",
        "adascale",
        "--scale",
        scale,
        "--seed",
        "3",
        "--out",
        str(out),
        "--set",
        "checkpoint_every=5",
        *extra,
    )


def _strip(record: dict) -> dict:
    """A summary or metrics record without its wall-clock time, the one number a resume may change."""
    return {k: v for k, v in record.items() if k != "wall_time_s"}


@pytest.mark.parametrize(
    ("task", "scale", "extra"), [("logreg", "4", ("--set", "T1=1500")), ("cifar10", "elastic-up", ())]
)
def test_sigterm_then_same_command_resumes_exactly(tmp_path: Path, task: str, scale: str, extra: tuple) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    ref = subprocess.run(run_args(tmp_path / "ref", task, scale, *extra), env=env, capture_output=True, text=True)
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "cut"
    proc = subprocess.Popen(run_args(out, task, scale, *extra), env=env, stderr=subprocess.PIPE, text=True)
    run_dir = next(iter((tmp_path / "ref").glob(f"{task}/*/*/*"))).relative_to(tmp_path / "ref")
    deadline = time.time() + 120
    while not (out / run_dir / CHECKPOINT).exists():
        assert proc.poll() is None and time.time() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert "resume" in err and not (out / run_dir / SUMMARY).exists()
    again = subprocess.run(run_args(out, task, scale, *extra), env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert _strip(read_json(out / run_dir / SUMMARY)) == _strip(read_json(tmp_path / "ref" / run_dir / SUMMARY))
    records = [_strip(r) for r in read_jsonl(out / run_dir / METRICS)]
    assert records == [_strip(r) for r in read_jsonl(tmp_path / "ref" / run_dir / METRICS)]
    assert not (out / run_dir / CHECKPOINT).exists()


def test_unreadable_checkpoint_is_a_one_line_error(tmp_path: Path) -> None:
    run_dir = tmp_path / "logreg/adascale/s4/seed3,checkpoint_every=5"
    run_dir.mkdir(parents=True)
    (run_dir / CHECKPOINT).write_bytes(b"not a checkpoint")
    res = subprocess.run(run_args(tmp_path, "logreg", "4"), capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert str(run_dir / CHECKPOINT) in res.stderr and "unreadable" in res.stderr
