"""Small helpers shared by the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.engine.distributed import Dist
from bench.engine.loop import Engine
from bench.files import METRICS, read_jsonl
from bench.run.runner import train as run_train
from bench.run.spec import resolve
from tasks import get_task


def spec_for(task: str, method: str = "adascale", scale: int | str = 1, seed: int = 0, **overrides: Any) -> dict:
    return resolve(get_task(task), method, scale, seed, "tiny", overrides=overrides)


def train(spec: dict, run_dir: Path) -> tuple[dict, Engine]:
    return run_train(spec, Path(run_dir), Dist(), progress=False)


def records(run_dir: Path) -> list[dict]:
    return [r for r in read_jsonl(Path(run_dir) / METRICS) if not r.get("eval")]
