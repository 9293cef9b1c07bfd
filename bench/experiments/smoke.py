"""`adascale-bench smoke`: the shipped tiny matrix on this machine, then the offline gain at the kept
checkpoints of its runs (the CLI then builds the report)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.engine.signals import install_signal_handlers
from bench.experiments import matrix as matrices
from bench.experiments.pool import run_matrix, worker_init
from bench.files import KEPT, OFFLINE_GAIN, SUMMARY, read_json_object


def smoke(out: Path, seeds: int = 3, jobs: int = 1) -> dict[str, int]:
    """Run the shipped `smoke` matrix (at most `seeds` seeds per experiment) over `jobs` processes;
    counts per final status."""
    install_signal_handlers()
    m = matrices.load("smoke")
    m.runs = [r for r in m.runs if r.seed < seeds]
    out.mkdir(parents=True, exist_ok=True)
    return run_matrix(m, out, jobs=jobs)


SMOKE_GAIN_BATCHES = 256  # micro-batches per kept checkpoint: enough for μ² to stand above its noise (σ²/n)


def offline_gains(out: Path, batches: int = SMOKE_GAIN_BATCHES, jobs: int = 1) -> list[tuple[Path, str]]:
    """`adascale-bench gain` on every completed run under `out` with kept checkpoints whose
    offline_gain.csv is missing or older than them, over `jobs` processes (a run's gain uses one torch thread:
    serially, the smoke's last two minutes kept one core busy); (run folder, printed table) of each one
    measured, in the runs' order."""
    from bench.run.offline_gain import kept_checkpoints

    todo = []
    for kept in sorted(Path(out).rglob(KEPT)):
        run_dir = kept.parent
        summary = read_json_object(run_dir / SUMMARY)
        paths = kept_checkpoints(run_dir)
        if summary is None or summary.get("status") != "completed" or not paths:
            continue
        csv = run_dir / OFFLINE_GAIN
        if csv.exists() and csv.stat().st_mtime >= max(p.stat().st_mtime for p in paths):
            continue
        todo.append(run_dir)
    if jobs <= 1 or len(todo) < 2:
        return [(run_dir, measured(run_dir, batches, True)) for run_dir in todo]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        min(jobs, len(todo)), mp_context=context, initializer=worker_init, initargs=(os.getpid(),)
    ) as pool:
        tables = list(pool.map(measured, todo, [batches] * len(todo), [False] * len(todo)))
    return list(zip(todo, tables, strict=True))


def measured(run_dir: Path, batches: int, progress: bool) -> str:
    """One run's offline gain measured and written (bench.run.offline_gain), as the table `gain` prints."""
    from bench.run.offline_gain import offline_gains as measure
    from bench.run.offline_gain import online_gains, table

    return table(measure(run_dir, batches, progress=progress), online_gains(run_dir))
