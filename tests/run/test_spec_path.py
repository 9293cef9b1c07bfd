"""A run's spec followed from the CLI to the first forward pass (issue 57.4): every function of the suite or a task that
is handed the typed spec (a stop), and how often the path comes back to a file it had left (a return). The counts
are a ceiling, the path as it is now, so that a new detour shows here; the task is loaded once and the summary read
once on each side of the folder's lock."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import tasks
from bench.cli import main
from bench.core.runspec import RunSpec
from bench.run import runner

ROOT = Path(__file__).resolve().parents[2]
STOPS, RETURNS = 26, 10  # measured on this tree: `logreg`, `lsw`, S = 4 (the issue counted 49 and 27 before)


def returns(files: list[str]) -> int:
    """Stops in a file the path had left before (not the file of the stop just before)."""
    return sum(1 for i, f in enumerate(files) if i and f != files[i - 1] and f in files[:i])


@contextmanager
def followed() -> Iterator[list[tuple[str, str]]]:
    """(file, function) of every call handed a RunSpec, until the first call of a torch module."""
    stops: list[tuple[str, str]] = []
    done = False

    def tracer(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal done
        code = frame.f_code
        if done or event != "call":
            return
        if code.co_name in ("_call_impl", "_wrapped_call_impl") and code.co_filename.endswith("nn/modules/module.py"):
            done = True
        elif code.co_filename.startswith(str(ROOT)) and not any(d in code.co_filename for d in ("/tests/", "/.venv/")):
            if any(isinstance(v, RunSpec) for v in frame.f_locals.values()):
                stops.append((str(Path(code.co_filename).relative_to(ROOT)), code.co_name))

    sys.settrace(tracer)
    threading.settrace(tracer)
    try:
        yield stops
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]


def test_returns_counts_a_file_left_and_come_back_to() -> None:
    assert returns(["a", "a", "b", "c"]) == 0
    assert returns(["a", "b", "a", "c", "b"]) == 2


def test_the_spec_from_the_cli_to_the_first_forward_pass(tmp_path: Path, monkeypatch, capsys) -> None:
    loads, reads = [], []
    get_task, existing = tasks.get_task, runner.existing_summary
    monkeypatch.setattr(tasks, "get_task", lambda name: loads.append(name) or get_task(name))
    monkeypatch.setattr(runner, "existing_summary", lambda d: reads.append(d) or existing(d))
    argv = ["run", "--task", "logreg", "--method", "lsw", "--scale", "4", "--out", str(tmp_path)]
    with followed() as stops:
        assert main([*argv, "--set", "T1=20", "--set", "eval_every=10"]) == 0
    files = [f for f, _ in stops]
    assert len(stops) <= STOPS and returns(files) <= RETURNS, (len(stops), returns(files), stops)
    assert ("bench/core/engine/loop.py", "__init__") in stops and ("tasks/logreg.py", "build_model") in stops
    assert loads == ["logreg"] and len(reads) == 2  # the task once; the summary before and under the lock
    assert main([*argv, "--set", "T1=20", "--set", "eval_every=10"]) == 0
    assert "already complete, nothing trained" in capsys.readouterr().out.splitlines()[-1]
