"""Small helpers shared by the tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.core.engine.distributed import Dist
from bench.core.engine.loop import Engine
from bench.core.files import METRICS, read_jsonl
from bench.core.runspec import RunSpec
from bench.run.runner import train as run_train
from bench.run.spec import resolve
from tasks import get_task


def spec_for(task: str, method: str = "adascale", scale: int | str = 1, seed: int = 0, **overrides: Any) -> RunSpec:
    return resolve(get_task(task), method, scale, seed, "tiny", overrides=overrides)


def preset_spec(task: str, preset: str, seed: int = 0, **changes: Any) -> RunSpec:
    """A task's spec at `preset` with `changes`, for the task's own methods (no data root: they are given one);
    `model` and `data` changes are merged into the preset's mappings."""
    spec = resolve(get_task(task), "adascale", 1, seed, preset, "/nonexistent").replace(data_root=None)
    return spec.replace(**{k: {**getattr(spec, k), **v} if k in ("model", "data") else v for k, v in changes.items()})


def tiny_spec(task: str, seed: int = 0, **changes: Any) -> RunSpec:
    """preset_spec at the tiny preset."""
    return preset_spec(task, "tiny", seed, **changes)


def train(spec: RunSpec, run_dir: Path) -> tuple[dict, Engine]:
    return run_train(spec, Path(run_dir), Dist(), progress=False)


def records(run_dir: Path) -> list[dict]:
    return [r for r in read_jsonl(Path(run_dir) / METRICS) if not r.get("eval")]


def finished_results(out: Path) -> Path:
    """A results folder at `out` with one finished logreg run (S = 2, 40 iterations), its job.json and the
    folder's matrix.json: what the damaged-file tests of report and status start from."""
    import json

    from bench.cli import main
    from bench.core.files import SPEC
    from slurm.records import JOB
    from slurm.status import MANIFEST

    args = ["run", "--task", "logreg", "--method", "adascale", "--scale", "2", "--out", str(out)]
    assert main([*args, "--set", "T1=40", "--set", "eval_every=10"]) == 0
    (run_dir,) = [p.parent for p in out.rglob(SPEC)]
    (run_dir / JOB).write_text(json.dumps({"executor": "debug", "job_id": "7", "submitted_at": 0, "stderr": None}))
    name = run_dir.relative_to(out).as_posix()
    (out / MANIFEST).write_text(json.dumps({"matrices": ["m.yaml"], "runs": {name: {"preset": "tiny"}}}))
    return out


def run_ranks(target: Callable[..., None], *args: Any, world: int = 2, timeout: float = 120) -> None:
    """Run target(rank, world, port, *args) in `world` spawned processes that can form a gloo group on a free
    local port; every one must exit 0 (the stragglers are killed)."""
    import multiprocessing
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=(r, world, port, *args)) for r in range(world)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(timeout)
        assert [p.exitcode for p in procs] == [0] * world
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
