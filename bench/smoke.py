"""`adascale-bench smoke`: the tiny matrix on this machine, then the report."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path

from tqdm import tqdm

from . import matrix as matrices
from .engine import Interrupted, install_signal_handlers, stop_requested
from .runner import run_spec


def run_matrix(m: matrices.Matrix, out: Path, progress: bool = True, jobs: int = 1) -> dict[str, int]:
    """Run every run of a matrix on this machine, in dependency order: in this process (`jobs` = 1), or
    over `jobs` worker processes, each run starting once the runs it needs have ended. A failed run is
    reported and the matrix goes on. Returns counts per final status."""
    counts: dict[str, int] = {}
    bar = tqdm(total=len(m.runs), desc="runs", unit="run", disable=not progress or None, dynamic_ncols=True)

    def ended(req: matrices.RunRequest, status: str, error: str | None) -> None:
        counts[status] = counts.get(status, 0) + 1
        if error is not None:
            tqdm.write(f"failed: {req.task} {req.method} {req.scale} seed{req.seed}: {error}", file=sys.stderr)
        bar.update(1)

    try:
        if jobs <= 1:
            for req in m.runs:
                bar.set_postfix_str(f"{req.task} {req.method} {req.scale} seed{req.seed}", refresh=True)
                ended(req, *_run_one(m.spec(req), out, progress))
        else:
            _run_parallel(m, out, jobs, ended, bar)
    finally:
        bar.close()
    return counts


def _run_one(spec: dict, out: Path, progress: bool = False) -> tuple[str, str | None]:
    """One run: its final status, and the error of a failed one (UserError included)."""
    try:
        return run_spec(spec, out, progress=progress)["status"], None
    except Interrupted:
        raise
    except Exception as e:
        return "failed", str(e)


def _worker_init() -> None:
    """Workers stop on SIGTERM (checkpoint, Interrupted) as a run in the main process does; Ctrl-C goes
    to the parent, which passes it on as SIGTERM, so no run dies between two checkpoints."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    install_signal_handlers()


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """SIGTERM to every worker: its run checkpoints at the end of its iteration and stops. (The pool
    keeps its processes in `_processes`, a private attribute that has held them since Python 3.2.)"""
    for pid in list(getattr(pool, "_processes", None) or {}):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def _run_parallel(m: matrices.Matrix, out: Path, jobs: int, ended: Callable[..., None], bar: tqdm) -> None:
    needs = {r.key: {d.key for d in matrices.depends_on(r, m.runs)} for r in m.runs}
    pending, done = list(m.runs), set()
    running: dict[Future, matrices.RunRequest] = {}
    stop: BaseException | None = None
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init)
    try:
        while (pending and stop is None) or running:
            if stop is None:
                ready = [r for r in pending if needs[r.key] <= done][: jobs - len(running)]
                for req in ready:
                    pending.remove(req)
                    running[pool.submit(_run_one, m.spec(req), out)] = req
                if not running:  # (matrix dependencies are acyclic and within the matrix)
                    raise RuntimeError(f"{len(pending)} runs wait for runs that never end")
            bar.set_postfix_str(", ".join(f"{r.task} {r.method} {r.scale}" for r in running.values()), refresh=True)
            try:
                finished, _ = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
                if stop is None and stop_requested():
                    raise Interrupted("stopped by signal")
            except (KeyboardInterrupt, Interrupted) as e:
                stop = stop or e
                _stop_workers(pool)
                continue
            for f in finished:
                req = running.pop(f)
                done.add(req.key)
                try:
                    ended(req, *f.result())
                except Interrupted as e:  # a worker was stopped on its own: stop the others too
                    if stop is None:
                        stop = e
                        _stop_workers(pool)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if stop is not None:
        raise Interrupted("stopped by signal: the running runs checkpointed; run the same command to resume")


def smoke(out: Path, seeds: int = 2, jobs: int = 1) -> int:
    """Run the shipped `smoke` matrix (at most `seeds` seeds per experiment) over `jobs` processes, then
    build the report."""
    from reports.build import build_report

    from .sweep import sweep_table, write_sweep_csv

    install_signal_handlers()
    start = time.perf_counter()
    m = matrices.load("smoke")
    m.runs = [r for r in m.runs if r.seed < seeds]
    out.mkdir(parents=True, exist_ok=True)
    counts = run_matrix(m, out, jobs=jobs)
    write_sweep_csv(sweep_table(m, out), out / "sweep.csv")
    html = build_report(out, ["md", "tex", "html", "csv"])
    print(
        f"smoke: {sum(counts.values())} runs ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}) "
        f"in {time.perf_counter() - start:.0f} s"
    )
    print(f"report: {html}")
    print(f"tables: {html.parent / 'table2.md'} (also .tex, .csv)")
    return 0 if counts.get("failed", 0) == 0 else 1
