"""Running many runs on this machine in dependency order: the one scheduler of the suite.

`ReadyQueue` holds runs that wait for others (LSW+ for its AdaScale run, the heat map's scaled SGD for
its grid, as `matrix.depends_on` says) and hands out those whose needs have ended, within a budget of
slots. `run_matrix` drives it over worker processes (smoke, sweep); the submitter's local executor
drives the same queue over submitit jobs.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Generic, TypeVar

from tqdm import tqdm

from bench.core.engine.signals import Interrupted, die_with_parent, install_signal_handlers, stop_requested
from bench.core.runspec import RunSpec
from bench.experiments import matrix as matrices
from bench.run.runner import run_spec

T = TypeVar("T")


class ReadyQueue(Generic[T]):
    """Items waiting for the items they need; `take` hands out, in order, those whose needs have all ended
    and that fit the free slots (an item larger than every budget still runs alone)."""

    def __init__(
        self,
        items: Iterable[T],
        key: Callable[[T], Hashable],
        needs: Callable[[T], Iterable[Hashable]],
        cost: Callable[[T], int] = lambda item: 1,
    ) -> None:
        self.waiting = list(items)
        self.key, self.cost = key, cost
        self._needs = {key(item): set(needs(item)) for item in self.waiting}
        known = set(self._needs)
        for k in self._needs:  # a need outside the queue (already done, or not ours) is not waited for
            self._needs[k] &= known
        self.ended: set[Hashable] = set()

    def __bool__(self) -> bool:
        return bool(self.waiting)

    def take(self, free: int, busy: bool) -> list[T]:
        """Ready items within `free` slots; with nothing running (`busy` False) the first ready item
        is taken whatever its cost."""
        out = []
        for item in list(self.waiting):
            if not self._needs[self.key(item)] <= self.ended:
                continue
            if (busy or out) and self.cost(item) > free:
                break
            out.append(item)
            self.waiting.remove(item)
            free -= self.cost(item)
        return out

    def done(self, item: T) -> None:
        self.ended.add(self.key(item))

    def again(self, item: T) -> None:
        """Queue an item once more, first (e.g. a run restarting on another number of ranks)."""
        self._needs.setdefault(self.key(item), set())
        self.waiting.insert(0, item)


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


def _run_one(spec: RunSpec, out: Path, progress: bool = False) -> tuple[str, str | None]:
    """One run: its final status, and the error of a failed one (UserError included)."""
    try:
        return run_spec(spec, out, progress=progress)["status"], None
    except Interrupted:
        raise
    except Exception as e:
        return "failed", str(e)


def worker_init(parent: int | None = None) -> None:
    """Workers stop on SIGTERM (checkpoint, Interrupted) as a run in the main process does; Ctrl-C goes
    to the parent, which passes it on as SIGTERM, so no run dies between two checkpoints. With `parent`,
    a worker dies with it (a SIGKILLed submit or sweep leaves no worker, nor resource tracker, behind)."""
    if parent is not None:
        die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    install_signal_handlers()


def stop_workers() -> None:
    """SIGTERM to every worker process: its run checkpoints at the end of its iteration and stops."""
    for child in multiprocessing.active_children():
        try:
            os.kill(child.pid, signal.SIGTERM)
        except (ProcessLookupError, TypeError):
            pass


def _run_parallel(m: matrices.Matrix, out: Path, jobs: int, ended: Callable[..., None], bar: Any) -> None:
    queue = ReadyQueue(m.runs, key=lambda r: r.key, needs=lambda r: [d.key for d in matrices.depends_on(r, m.runs)])
    running: dict[Future, matrices.RunRequest] = {}
    stop: BaseException | None = None
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=worker_init, initargs=(os.getpid(),))
    try:
        while (queue and stop is None) or running:
            if stop is None:
                for req in queue.take(jobs - len(running), busy=bool(running)):
                    running[pool.submit(_run_one, m.spec(req), out)] = req
                if not running:  # (matrix dependencies are acyclic and within the matrix)
                    raise RuntimeError(f"{len(queue.waiting)} runs wait for runs that never end")
            bar.set_postfix_str(", ".join(f"{r.task} {r.method} {r.scale}" for r in running.values()), refresh=True)
            try:
                finished, _ = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
                if stop is None and stop_requested():
                    raise Interrupted("stopped by signal")
            except (KeyboardInterrupt, Interrupted) as e:
                stop = stop or e
                stop_workers()
                continue
            for f in finished:
                req = running.pop(f)
                queue.done(req)
                try:
                    ended(req, *f.result())
                except Interrupted as e:  # a worker was stopped on its own: stop the others too
                    if stop is None:
                        stop = e
                        stop_workers()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if stop is not None:
        raise Interrupted("stopped by signal: the running runs checkpointed; run the same command to resume")
