"""Where `submit`'s runs go: one class per executor, each answering the same two questions for the one
driver in slurm/submit.py — how a group of planned runs of one shape is handed over (`hand_over`), and which
of the handed-over runs have ended (`ended`) — plus a few facts (how many ranks may be busy at once, whether
the scheduler orders dependent runs itself). Everything else (the ready queue, dependencies, continuations
on another number of ranks, progress lines, Ctrl-C, --wait) is the driver's, shared by all three, as a
submitit Executor subclass overrides how a job is submitted and inherits the rest.

- slurm: each group is one job array (submitit's SLURM executor), dependent groups wait with `afterany`
  on the jobs they need; a job that needs another number of ranks submits its own continuation.
- local: the runs train in a pool of worker processes on this machine (the smoke's pool,
  bench.experiments.pool): a worker imports torch once and trains run after run; W > 1 ranks start through
  torch's elastic launcher from the worker (bench.run.launch). submitit's local executor started two
  Python processes per run (its controller and the task), seconds each before training began.
- debug: in this process, one run after the other, under submitit's debug executor (breakpoints work).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from abc import ABC, abstractmethod
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench.core.errors import UserError
from bench.core.files import read_json_object, write_json

from . import procgroup
from .executors import Resources, Shape, local_parallelism, make_executor, sbatch_options, sbatch_reason
from .records import (
    JOB,
    SUBMITIT_DIR,
    Planned,
    describe_group,
    job_name,
    job_record,
    process_start,
    quiet_submitit,
    record_job,
)
from .scheduler import ACTIVE, _seconds, scheduler_states


class Backend(ABC):
    """An executor as the driver sees it (see the module docstring). Abstract: a backend that does not say how
    runs are handed over or which have ended cannot be made (the others have defaults)."""

    capacity: float = math.inf  # ranks busy at once
    scheduler_orders = False  # True: a run's needs are met, for the driver, once they are handed over
    poll_s = 0.2

    def __init__(self, out: Path, res: Resources) -> None:
        self.out, self.res = out, res

    def prepare(self, todo: list[Planned]) -> None:
        """Before anything is handed over (all or nothing where the executor can tell)."""
        return None  # the default: nothing to do

    @abstractmethod
    def hand_over(self, runs: list[Planned], shape: Shape, after: list[str]) -> list[str]:
        """Start (or queue) `runs`, all of `shape`, after the jobs `after`; their job ids, in order."""

    @abstractmethod
    def ended(self, running: dict[str, Planned]) -> dict[str, dict[str, Any] | None]:
        """Of the runs handed over (by name), those that have ended, with rank 0's result where the
        executor returns one (None: the run folder's summary says how it ended)."""

    def stop(self, running: dict[str, Planned]) -> None:
        """Ctrl-C: what this executor's runs do when `submit` is interrupted (they resume on the next submit)."""
        return None  # the default: nothing to do

    def close(self) -> None:
        """After the last run (or an error): release what the backend holds."""
        return None  # the default: nothing to do


# -- SLURM ------------------------------------------------------------------------------------------------------
class SlurmBackend(Backend):
    scheduler_orders = True  # afterany dependencies: the scheduler starts a dependent job when its needs end
    poll_s = 3.0

    def __init__(self, out: Path, res: Resources) -> None:
        super().__init__(out, res)
        self.submitted: list[tuple[Planned, Any]] = []
        self.arrays = 0

    def prepare(self, todo: list[Planned]) -> None:
        """`sbatch --test-only` with the script of each shape before submitting anything: SLURM accepts some
        requests that it can never satisfy (more tasks than a node has CPUs, beyond a partition's limits) and
        leaves them pending forever, but its scheduler says so at once when asked."""
        import subprocess

        shapes: dict[Shape, list[Planned]] = {}
        for p in todo:
            shapes.setdefault(p.shape, []).append(p)
        for shape, runs in shapes.items():
            try:
                answer = subprocess.run(
                    [
                        "sbatch",
                        "--test-only",
                        *sbatch_options(self.res, shape, job_name(runs, shape.ranks)),
                        "--wrap=true",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
            except (OSError, subprocess.SubprocessError) as e:
                raise UserError(f"sbatch --test-only failed: {e}") from None
            if answer.returncode != 0:
                reason = sbatch_reason(answer.stderr or answer.stdout)
                raise UserError(f"sbatch refused {describe_group(runs, shape)}: {reason} (nothing was submitted)")

    def hand_over(self, runs: list[Planned], shape: Shape, after: list[str]) -> list[str]:
        """One job array; job.json in each run folder. All or nothing: when sbatch refuses an array, the
        arrays already submitted by this call are cancelled and the reason is raised."""
        import submitit

        ex = make_executor(self.res, shape, self.out / SUBMITIT_DIR, name=job_name(runs, shape.ranks), after=after)
        try:
            # sbatch exports this process's environment: none of a job's or group's variables may pass
            with procgroup.clean_environment(), quiet_submitit():
                with ex.batch():
                    jobs = [ex.submit(_run_job(p, self.out, self.res)) for p in runs]
        except (submitit.core.utils.FailedJobError, OSError) as e:
            undone = f" (cancelled the {len(self.submitted)} jobs this call had submitted)" if self.submitted else ""
            self._undo()
            raise UserError(f"sbatch refused {describe_group(runs, shape)}: {sbatch_reason(e)}{undone}") from None
        for p, job in zip(runs, jobs, strict=True):
            record_job(self.out, p, job, self.res, after)
            self.submitted.append((p, job))
        self.arrays += 1
        deps = f", after {' '.join(after)}" if after else ""
        array = str(jobs[0].job_id).split("_")[0]
        print(f"  submitted array {self.arrays} as job {array} ({len(runs)} run{'s' if len(runs) != 1 else ''}{deps})")
        return [str(j.job_id) for j in jobs]

    def _undo(self) -> None:
        for p, job in self.submitted:
            with contextlib.suppress(Exception), quiet_submitit():
                job.cancel(check=False)
            (self.out / p.name / JOB).unlink(missing_ok=True)
        self.submitted = []

    def ended(self, running: dict[str, Planned]) -> dict[str, dict[str, Any] | None]:
        """The runs whose current job (job.json: a continuation replaces it) is no longer active in sacct
        or squeue (a fresh submission that neither knows yet counts as active for a minute)."""
        records = {n: read_json_object(self.out / n / JOB) for n in running}
        states = scheduler_states([r for r in records.values() if r])
        out: dict[str, dict[str, Any] | None] = {}
        for name, record in records.items():
            state = states.get(str(record.get("job_id")), "UNKNOWN") if record else "UNKNOWN"
            fresh = record is not None and time.time() - _seconds(record.get("submitted_at")) < 60
            if not (state in ACTIVE or (state == "UNKNOWN" and fresh)):
                out[name] = None
        return out


def _run_job(p: Planned, out: Path, res: Resources) -> Any:
    from .job import RunJob

    return RunJob(p.spec, out, p.needs, resources=res)


# -- this machine: the worker pool ------------------------------------------------------------------------------
class LocalBackend(Backend):
    """Runs in worker processes of this machine, at most `capacity` ranks busy at once. Every run gets its
    job.json when `submit` queues it (state queued while it waits, running once a worker starts it); the
    job id is this process's pid and a sequence number, so `status` sees the run as active while this
    `submit` lives."""

    def __init__(self, out: Path, res: Resources) -> None:
        super().__init__(out, res)
        self.capacity = local_parallelism(res)
        self.pool: ProcessPoolExecutor | None = None
        self.futures: dict[str, Future] = {}
        self.ids: dict[str, str] = {}  # run name -> its job id in this submit (the same queued and started)

    def prepare(self, todo: list[Planned]) -> None:
        for p in todo:  # known to `status` as queued from the first second
            write_json(self.out / p.name / JOB, self._record(p, started=False))

    def _record(self, p: Planned, started: bool) -> dict[str, Any]:
        if p.name not in self.ids:
            self.ids[p.name] = f"{os.getpid()}.{len(self.ids) + 1}"
        return {
            **job_record(p, None, self.res, job_id=self.ids[p.name]),
            "pid": os.getpid(),  # this `submit`, with its start time: the job is active while it lives
            "pid_start": process_start(os.getpid()),
            "started": started,
        }

    def _pool(self) -> ProcessPoolExecutor:
        if self.pool is None:
            import multiprocessing

            from bench.experiments.pool import worker_init

            slots = max(1, int(self.capacity))
            context = multiprocessing.get_context("spawn")
            # the workers die with this submit (SIGKILLed, it leaves no worker or resource tracker waiting)
            self.pool = ProcessPoolExecutor(slots, mp_context=context, initializer=worker_init, initargs=(os.getpid(),))
        return self.pool

    def hand_over(self, runs: list[Planned], shape: Shape, after: list[str]) -> list[str]:
        from .poolworker import run_here

        ids = []
        for p in runs:
            record = self._record(p, started=True)
            write_json(self.out / p.name / JOB, record)
            self.futures[p.name] = self._pool().submit(run_here, p.spec, str(self.out), p.needs, record["job_id"])
            ids.append(record["job_id"])
        return ids

    def ended(self, running: dict[str, Planned]) -> dict[str, dict[str, Any] | None]:
        out: dict[str, dict[str, Any] | None] = {}
        for name in running:
            future = self.futures.get(name)
            if future is None or not future.done():
                continue
            del self.futures[name]
            out[name] = future.result()  # Interrupted (a worker stopped on its own) propagates: stop all
        return out

    def stop(self, running: dict[str, Planned]) -> None:
        """SIGTERM to every worker: its run checkpoints at the end of its iteration; wait for that."""
        from bench.experiments.pool import stop_workers

        stop_workers()
        self.close()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


# -- in this process --------------------------------------------------------------------------------------------
class DebugBackend(Backend):
    """One run after the other in this process (submitit's debug executor: breakpoints work)."""

    capacity = 1

    def __init__(self, out: Path, res: Resources) -> None:
        super().__init__(out, res)
        self.results: dict[str, dict[str, Any] | None] = {}

    def hand_over(self, runs: list[Planned], shape: Shape, after: list[str]) -> list[str]:
        from .job import RunJob

        ids = []
        for p in runs:
            ex = make_executor(self.res, p.shape, self.out / SUBMITIT_DIR, name="adascale-debug")
            job = ex.submit(RunJob(p.spec, self.out, p.needs, raise_on_failure=False, resources=self.res))
            record_job(self.out, p, job, self.res)
            self.results[p.name] = job.result()
            ids.append(str(job.job_id))
        return ids

    def ended(self, running: dict[str, Planned]) -> dict[str, dict[str, Any] | None]:
        return {name: self.results.pop(name) for name in list(running) if name in self.results}


BACKENDS: dict[str, type[Backend]] = {"slurm": SlurmBackend, "local": LocalBackend, "debug": DebugBackend}
