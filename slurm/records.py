"""What `submit` and its jobs record in a run folder: job.json (which job runs the folder, with its
allocation) and attempts.json (each start of a job), and the names jobs carry in squeue and sacct."""

from __future__ import annotations

import contextlib
import io
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.files import write_json
from bench.core.runspec import RunSpec
from bench.experiments import matrix as matrices

from .executors import Resources, Shape, accumulation

JOB = "job.json"  # written by `submit`: which job runs this folder
ATTEMPTS = "attempts.json"  # written by the job: each start (a requeued job starts again)
SUBMITIT_DIR = ".submitit"  # submitit's pickles and logs, under the results folder


@dataclass
class Planned:
    """A run to submit: its resolved spec, its allocation, and what it waits for."""

    request: matrices.RunRequest
    spec: RunSpec
    name: str
    shape: Shape
    needs: list[str] = field(default_factory=list)  # run names that must have ended first
    wave: int = 0  # 0: nothing to wait for in this submission; k: after runs of wave k - 1


def job_name(runs: list[Planned], ranks: int) -> str:
    """What squeue and sacct show: the suite, the methods in the array and its ranks per run,
    e.g. `adascale-bench-lsw+-W2`."""
    methods = "+".join(dict.fromkeys(p.request.method for p in runs))
    return f"adascale-bench-{methods}-W{ranks}"


def describe_group(runs: list[Planned], shape: Shape) -> str:
    """One line: how many runs of which tasks and methods, their allocation, and A for each S."""
    methods = ", ".join(dict.fromkeys(p.spec.method for p in runs))
    tasks = ", ".join(dict.fromkeys(p.spec.task for p in runs))
    acc: dict[int, int] = {}
    for p in runs:
        acc.update(accumulation(p.spec, shape.ranks))
    s_to_a = ", ".join(f"{s}→{a}" for s, a in sorted(acc.items()))
    return f"{len(runs)} run{'s' if len(runs) != 1 else ''} ({tasks}; {methods}), {shape.describe()}, S→A: {s_to_a}"


def job_record(
    p: Planned, job: Any, res: Resources, after: list[str] | None = None, job_id: str | None = None
) -> dict[str, Any]:
    """job.json's content; `job` is a submitit Job (None for a run of the local pool, named by `job_id`)."""
    paths = job.paths if job is not None else None
    return {
        "executor": res.executor,
        "job_id": str(job.job_id) if job is not None else job_id,
        "submitted_at": time.time(),
        "submitted": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "task": p.spec.task,
        "method": p.spec.method,
        "scale": p.spec.scale,
        "seed": p.spec.seed,
        "ranks": p.shape.ranks,
        "nodes": p.shape.nodes,
        "tasks_per_node": p.shape.tasks_per_node,
        "gpus_per_node": p.shape.gpus_per_node,
        "cpus_per_task": p.shape.cpus_per_task,
        "accumulation": {str(s): a for s, a in accumulation(p.spec, p.shape.ranks).items()},
        "needs": p.needs,
        "after": after or [],
        "stdout": str(paths.stdout) if paths else None,
        "stderr": str(paths.stderr) if paths else None,
        # the sbatch script (one per array: named after the array's id)
        "script": str(paths.folder / f"{str(job.job_id).split('_')[0]}_submission.sh")
        if paths and res.executor == "slurm"
        else None,
    }


def record_job(out: Path, p: Planned, job: Any, res: Resources, after: list[str] | None = None) -> None:
    """Write the run's job.json: the one place a submitted job is recorded, whatever the executor."""
    write_json(Path(out) / p.name / JOB, job_record(p, job, res, after))


def process_start(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat's 22nd field), None when there is
    no such process: a pid with its start time names one process, never a later one that got the same pid."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError, TypeError):
        return None


@contextlib.contextmanager
def quiet_submitit() -> Iterator[io.StringIO]:
    """submitit prints sbatch's stderr and logs an error before raising; the CLI reports it in one line."""
    logger = logging.getLogger("submitit")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stderr(buffer):
            yield buffer
    finally:
        logger.setLevel(level)
