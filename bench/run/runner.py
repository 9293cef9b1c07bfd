"""Run one spec into its folder: skip it when done, resume it when checkpointed, record failures."""

from __future__ import annotations

import functools
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core import safefs
from bench.core.engine.distributed import Dist, pick_device
from bench.core.engine.loop import Engine
from bench.core.engine.signals import Interrupted
from bench.core.engine.task import Task
from bench.core.errors import UserError
from bench.core.files import SPEC, SUMMARY, read_json, read_json_object, remove_temporaries, write_json
from bench.core.locks import run_lock
from bench.core.runspec import RunSpec
from bench.run.dataroot import prepare_data
from bench.run.needs import resolve_needs
from bench.run.spec import run_name
from bench.run.summary import record_failure, summarize, write_summary
from bench.run.taskcheck import check_built

FINAL = ("completed", "diverged")


def run_dir_of(out: Path, spec: RunSpec) -> Path:
    return Path(out) / run_name(spec)


def existing_summary(run_dir: Path) -> dict[str, Any] | None:
    """The summary of a finished run (completed or diverged), else None: failed runs are retried."""
    summary = read_json_object(run_dir / SUMMARY)
    return summary if summary is not None and summary.get("status") in FINAL else None


def check_same(run_dir: Path, spec: RunSpec) -> None:
    """A run folder holds one spec; refuse to mix another run into it."""
    path = run_dir / SPEC
    if not path.exists():
        return
    try:
        old = read_json(path)
    except (OSError, ValueError) as e:
        raise UserError(f"{path} is unreadable ({e}); delete the run folder to start over") from None
    if not isinstance(old, dict):
        raise UserError(f"{path} is a JSON {type(old).__name__}, not a spec; delete the run folder to start over")
    diff = spec.differs_from(old)
    if diff:
        raise UserError(
            f"{run_dir} holds a run with a different spec (differs in: {', '.join(diff)}); "
            "use another --out or delete it"
        )


@contextmanager
def writing(run_dir: Path, dist: Dist) -> Iterator[None]:
    """Rank 0 holds the run folder's lock (one writer per folder; a second one stops at once with a
    UserError naming the holder) and clears what interrupted writes left; other ranks take nothing."""
    if not dist.is_main:
        yield
        return
    with run_lock(run_dir):
        remove_temporaries(run_dir)
        yield


@dataclass(frozen=True)
class Ran:
    """What `run` did: the run's summary, its folder, and whether this call trained it (False: it had finished)."""

    summary: dict[str, Any]
    run_dir: Path
    trained: bool


def run_spec(
    spec: RunSpec, out: Path, progress: bool = True, dist: Dist | None = None, task: Task | None = None
) -> dict[str, Any]:
    """Train `spec` under `out` (or return the summary it already has): `run`'s summary."""
    return run(spec, out, progress, dist, task).summary


def run(spec: RunSpec, out: Path, progress: bool = True, dist: Dist | None = None, task: Task | None = None) -> Ran:
    """Train `spec` under `out`, or take the summary it already has (and is this run's). Else its dependencies' values
    (T_AS, T), then, holding the folder's lock, the same-run check and the training. A crash is recorded as a
    `failed` summary, with the traceback in error.log, and re-raised. One rank (no `dist`) runs on the spec's
    device. `task`: the task this process resolved the spec with (loaded once; its recorded source is this very
    load), else loaded here."""
    out = Path(out)
    dist = dist or Dist(device=pick_device(spec.device))
    run_dir = out / run_name(spec)
    with safefs.confined(out):  # below --out no link is followed (bench.core.safefs)
        done = existing_summary(run_dir)
        if done is not None:
            check_same(run_dir, spec)  # finished, but maybe not this run: a user's rule whose source changed since
            return Ran(done, run_dir, False)
        spec = resolve_needs(out, spec)
        with writing(run_dir, dist):
            done = existing_summary(run_dir)  # finished by the writer that held the lock before
            if done is not None:
                return Ran(done, run_dir, False)
            check_same(run_dir, spec)
            try:
                return Ran(_train(spec, run_dir, dist, progress, task)[0], run_dir, True)
            except (UserError, Interrupted):
                raise
            except Exception as e:
                if dist.is_main:
                    try:
                        record_failure(spec, run_dir, f"{type(e).__name__}: {e}", traceback.format_exc())
                    except OSError:  # a full disk: the error itself says it, and the checkpoint is untouched
                        pass
                raise


def train(spec: RunSpec, run_dir: Path, dist: Dist, progress: bool = True) -> tuple[dict[str, Any], Engine]:
    """Train `spec` into `run_dir` (resuming its checkpoint) and write its summary: spec.json first, then
    the engine, then summary.json from its Outcome. Returns the summary (empty on ranks other than 0)."""
    with writing(run_dir, dist):
        return _train(spec, run_dir, dist, progress)


def _train(
    spec: RunSpec, run_dir: Path, dist: Dist, progress: bool, task: Task | None = None
) -> tuple[dict[str, Any], Engine]:
    from tasks import check_recorded, get_task

    if task is None:  # loaded here, maybe from another source than the one the spec was resolved with
        task = get_task(spec.task)
        check_recorded(spec)  # a task of yours: the source its spec recorded, or one line
    check = functools.partial(check_built, task, spec, dist)  # its card against what it returns, on one batch
    engine = Engine(spec, task, run_dir, prepare_data(task, spec, dist), dist=dist, progress=progress, check=check)
    if dist.is_main:
        write_json(run_dir / SPEC, spec.to_json())
    outcome = engine.run()
    summary = summarize(spec, task, outcome, run_dir) if dist.is_main else {}
    if dist.is_main:
        write_summary(run_dir, summary)
    dist.barrier()
    return summary, engine
