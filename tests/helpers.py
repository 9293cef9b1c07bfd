"""Small helpers shared by the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.engine import Engine
from bench.runfiles import METRICS, read_jsonl
from bench.spec import resolve
from tasks import get_task


def spec_for(task: str, method: str = "adascale", scale: int | str = 1, seed: int = 0, **overrides: Any) -> dict:
    return resolve(get_task(task), method, scale, seed, "tiny", overrides=overrides)


def train(spec: dict, run_dir: Path) -> tuple[dict, Engine]:
    engine = Engine(spec, run_dir, progress=False)
    return engine.run(), engine


def records(run_dir: Path) -> list[dict]:
    return [r for r in read_jsonl(Path(run_dir) / METRICS) if not r.get("eval")]
