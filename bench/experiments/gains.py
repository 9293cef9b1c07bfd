"""The offline gain over a results folder: `adascale-bench gain DIR` and the smoke measure every completed run
with kept checkpoints whose offline_gain.csv is missing or older than them, over processes (a run's gain uses
one torch thread), so that finding (iii)'s reference and Figure 2 come from one command after a matrix."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.core.files import KEPT, OFFLINE_GAIN, SUMMARY, read_json_object
from bench.experiments.pool import worker_init


def offline_gains(out: Path, batches: int | None = None, jobs: int = 1) -> list[tuple[Path, str]]:
    """`adascale-bench gain` on every completed run under `out` with kept checkpoints whose
    offline_gain.csv is missing or older than them, over `jobs` processes (serially, the smoke's last two minutes
    kept one core busy); `batches` micro-batches per checkpoint (None: each run's preset's, BATCHES); (run
    folder, printed table) of each one measured, in the runs' order."""
    from bench.run.offline_gain import kept_checkpoints

    todo = []
    for kept in sorted(Path(out).rglob(KEPT)):
        run_dir = kept.parent
        summary = read_json_object(run_dir / SUMMARY)
        paths = kept_checkpoints(run_dir)
        if summary is None or summary.get("status") != "completed" or not paths:
            continue
        csv = run_dir / OFFLINE_GAIN  # times read without following a link (a planted one, dangling or not,
        # is refused by the measurement's own reader and writer, in one line naming it)
        if os.path.lexists(csv) and csv.lstat().st_mtime >= max(p.lstat().st_mtime for p in paths):
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


def measured(run_dir: Path, batches: int | None, progress: bool) -> str:
    """One run's offline gain measured and written (bench.run.offline_gain), as the table `gain` prints."""
    from bench.run.offline_gain import offline_gains as measure
    from bench.run.offline_gain import online_gains, table

    return table(measure(run_dir, batches, progress=progress), online_gains(run_dir))
