"""`adascale-bench submit MATRIX --executor {local,slurm,debug}`: expand a matrix and submit its runs.

Complete runs are skipped, runs whose job is still queued or running are left alone, incomplete ones are
submitted again and resume from their checkpoint (the engine does that when started on the same folder).
Runs of one resource shape share a job array. Runs that depend on others (LSW+ on its AdaScale run) go in
a later array that starts after those have ended (SLURM: afterany, so that a diverged or failed AdaScale
run makes its LSW+ run fail with that reason instead of waiting forever); locally they are started after.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import UserError
from bench.experiments import matrix as matrices
from bench.experiments.pool import ReadyQueue
from bench.files import SUMMARY, read_json_object
from bench.run.runner import existing_summary
from bench.run.spec import run_name

from . import procgroup
from .datacheck import data_problems
from .executors import (
    MAX_ARRAY,
    Resources,
    Shape,
    SubmitOptions,
    accumulation,
    fits,
    local_parallelism,
    make_executor,
    ranks_to_start,
    require_slurm,
    sbatch_options,
    sbatch_reason,
    shape_for,
)
from .job import RunJob
from .records import JOB, Planned, job_name, quiet_submitit, record_job
from .status import ACTIVE, SUBMITIT_DIR, add_to_manifest, collect, scheduler_states, table


@dataclass
class Plan:
    todo: list[Planned]
    complete: list[str]
    queued: dict[str, str]  # run name -> the job id that already runs or waits for it
    names: dict[tuple, str]  # RunRequest.key -> run name

    def groups(self) -> list[tuple[int, Shape, list[Planned]]]:
        """(wave, shape, runs) in submission order, each at most one job array long."""
        by: dict[tuple[int, Shape], list[Planned]] = {}
        for p in self.todo:
            by.setdefault((p.wave, p.shape), []).append(p)
        out = []
        for (wave, shape), runs in sorted(by.items(), key=lambda kv: kv[0]):
            for i in range(0, len(runs), MAX_ARRAY):
                out.append((wave, shape, runs[i : i + MAX_ARRAY]))
        return out


def make_plan(m: matrices.Matrix, out: Path, res: Resources) -> Plan:
    """Resolve every run of the matrix, give it W ranks, and sort it into complete, queued and to-do."""

    specs: dict[tuple, dict[str, Any]] = {}
    names: dict[tuple, str] = {}
    for req in m.runs:
        spec = m.spec(req)
        spec["ranks"] = ranks_to_start(spec, out / run_name(spec), res)
        specs[req.key], names[req.key] = spec, run_name(spec)

    jobs = {name: read_json_object(out / name / JOB) for name in names.values()}
    states = scheduler_states([j for j in jobs.values() if j])
    complete, queued, todo = [], {}, []
    for req in m.runs:
        name = names[req.key]
        job = jobs[name]
        if existing_summary(out / name) is not None:
            complete.append(name)
        elif job and states.get(job.get("job_id", ""), "UNKNOWN") in ACTIVE:
            queued[name] = job["job_id"]
        else:
            spec = specs[req.key]
            needs = [names[d.key] for d in matrices.depends_on(req, m.runs)]
            todo.append(Planned(req, spec, name, shape_for(spec, spec["ranks"], res), needs))
    waves: dict[str, int] = {}
    pending = {p.name: p for p in todo}

    def wave(p: Planned, seen: tuple[str, ...] = ()) -> int:
        if p.name not in waves:
            if p.name in seen:
                raise UserError(f"matrix {m.path}: runs depend on each other in a cycle ({' -> '.join(seen)})")
            inner = [wave(pending[n], (*seen, p.name)) + 1 for n in p.needs if n in pending]
            waves[p.name] = max(inner, default=0)
        return waves[p.name]

    for p in todo:
        p.wave = wave(p)
    return Plan(todo, complete, queued, names)


def describe_group(runs: list[Planned], shape: Shape) -> str:
    methods = ", ".join(dict.fromkeys(p.spec["method"] for p in runs))
    tasks = ", ".join(dict.fromkeys(p.spec["task"] for p in runs))
    acc: dict[int, int] = {}
    for p in runs:
        acc.update(accumulation(p.spec, shape.ranks))
    s_to_a = ", ".join(f"{s}→{a}" for s, a in sorted(acc.items()))
    return f"{len(runs)} run{'s' if len(runs) != 1 else ''} ({tasks}; {methods}), {shape.describe()}, S→A: {s_to_a}"


def print_plan(m: matrices.Matrix, plan: Plan, res: Resources) -> None:
    print(
        f"matrix {m.path} ({m.preset}): {len(m.runs)} runs: {len(plan.complete)} complete, "
        f"{len(plan.queued)} already queued or running, {len(plan.todo)} to submit ({res.executor})"
    )
    for i, (wave, shape, runs) in enumerate(plan.groups(), 1):
        after = " after the runs they need" if wave else ""
        print(f"  array {i}{after}: {describe_group(runs, shape)}")
        if res.executor == "slurm":  # what each job of the array asks SLURM for
            print(f"    sbatch {' '.join(sbatch_options(res, shape, job_name(runs, shape.ranks)))}")


def submit(args: SubmitOptions) -> int:
    res = Resources.from_options(args)
    m = matrices.load(args.matrix)
    if res.executor == "slurm" and m.preset == "paper" and args.gpus_per_node is None and not args.cpu_only:
        raise UserError(
            "the paper preset trains on GPUs: pass --gpus-per-node G, or --cpu-only to run on CPUs on purpose"
        )
    if res.executor == "slurm" and not args.dry_run:
        require_slurm()
    problems = data_problems(m, sizes=not args.rehearse)
    if problems:
        for line in problems:
            print(f"adascale-bench: error: {line}", file=sys.stderr)
        return 1
    out = Path(args.out).expanduser().resolve()
    if args.rehearse:  # a few iterations of each configuration, in scratch folders
        from .rehearse import rehearse

        return rehearse(args, m, res, out)
    plan = make_plan(m, out, res)
    print_plan(m, plan, res)
    if args.dry_run:
        return 0
    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        plan.names[r.key]: {"task": r.task, "method": r.method, "scale": r.scale, "seed": r.seed, "preset": m.preset}
        for r in m.runs
    }
    add_to_manifest(out, manifest, str(m.path))
    if not plan.todo:
        print("nothing to submit")
        return 0
    if not DRIVERS[res.executor](plan, out, res, args.wait):
        print(f"follow with: adascale-bench status {out}")
        return 0
    runs = collect(out)
    print(table(runs))
    return 1 if any(r.state == "failed" for r in runs) else 0


# -- the executors: every one submits RunJob through submitit (make_executor) and records it (record_job) ---------
def drive_slurm(plan: Plan, out: Path, res: Resources, wait: bool) -> bool:
    """Every array at once, its dependencies left to the scheduler; True once they have ended (--wait)."""
    submit_slurm(plan, out, res)
    if wait:
        wait_slurm(out, [p.name for p in plan.todo])
    return wait


def drive_local(plan: Plan, out: Path, res: Resources, wait: bool) -> bool:
    """Here, each run started once the runs it needs have ended; returns when all have (True)."""
    run_local(plan, out, res)
    return True


def drive_debug(plan: Plan, out: Path, res: Resources, wait: bool) -> bool:
    """In this process, one run after the other; returns when all have ended (True)."""
    run_debug(plan, out, res)
    return True


# The executor is a parameter (--executor): one submit path, one driver per submitit executor.
DRIVERS: dict[str, Callable[[Plan, Path, Resources, bool], bool]] = {
    "slurm": drive_slurm,
    "local": drive_local,
    "debug": drive_debug,
}


# -- SLURM ------------------------------------------------------------------------------------------------------
def preflight(plan: Plan, out: Path, res: Resources) -> None:
    """`sbatch --test-only` with the script of each shape before submitting anything: SLURM accepts some
    requests that it can never satisfy (more tasks than a node has CPUs, beyond a partition's limits) and
    leaves them pending forever, but its scheduler says so at once when asked."""
    import subprocess

    for _, shape, runs in plan.groups():
        try:
            answer = subprocess.run(
                ["sbatch", "--test-only", *sbatch_options(res, shape, job_name(runs, shape.ranks)), "--wrap=true"],
                capture_output=True,
                text=True,
                timeout=120,
            )
        except (OSError, subprocess.SubprocessError) as e:
            raise UserError(f"sbatch --test-only failed: {e}") from None
        if answer.returncode != 0:
            reason = sbatch_reason(answer.stderr or answer.stdout)
            raise UserError(f"sbatch refused {describe_group(runs, shape)}: {reason} (nothing was submitted)")


def dependency_ids(needed: set[str], arrays: dict[str, set[str]]) -> list[str]:
    """The job ids to wait for, with every whole array this call submitted named by its array id (one
    heat-map run can need a whole grid of AdaScale runs: one id instead of hundreds)."""
    out = set(needed)
    for array, members in arrays.items():
        if len(members) > 1 and members <= out:
            out = (out - members) | {array}
    return sorted(out)


def submit_slurm(plan: Plan, out: Path, res: Resources) -> list[str]:
    """One job array per (wave, shape); job.json in each run folder. All or nothing: when sbatch refuses
    an array, the arrays already submitted by this call are cancelled and the reason is raised."""
    import submitit

    preflight(plan, out, res)
    folder = out / SUBMITIT_DIR
    job_of = dict(plan.queued)
    arrays: dict[str, set[str]] = {}
    done: list[tuple[Planned, Any]] = []
    ids: list[str] = []
    for i, (_, shape, runs) in enumerate(plan.groups(), 1):
        after = dependency_ids({job_of[n] for p in runs for n in p.needs if n in job_of}, arrays)
        ex = make_executor(res, shape, folder, name=job_name(runs, shape.ranks), after=after)
        try:
            with procgroup.clean_environment(), quiet_submitit():
                with ex.batch():
                    jobs = [ex.submit(RunJob(p.spec, out, p.needs, resources=res)) for p in runs]
        except (submitit.core.utils.FailedJobError, OSError) as e:
            _undo(out, done)
            undone = f" (cancelled the {len(done)} jobs this call had submitted)" if done else ""
            raise UserError(f"sbatch refused {describe_group(runs, shape)}: {sbatch_reason(e)}{undone}") from None
        array = str(jobs[0].job_id).split("_")[0]
        arrays[array] = {str(j.job_id) for j in jobs}
        for p, job in zip(runs, jobs, strict=True):
            job_of[p.name] = str(job.job_id)
            record_job(out, p, job, res, after)
            done.append((p, job))
        ids += [str(j.job_id) for j in jobs]
        deps = f", after {' '.join(after)}" if after else ""
        print(f"  submitted array {i} as job {array} ({len(runs)} run{'s' if len(runs) != 1 else ''}{deps})")
    return ids


def _undo(out: Path, done: list[tuple[Planned, Any]]) -> None:
    for p, job in done:
        with contextlib.suppress(Exception), quiet_submitit():
            job.cancel(check=False)
        (out / p.name / JOB).unlink(missing_ok=True)


def wait_slurm(out: Path, names: list[str], poll_s: float = 3.0) -> None:
    """Until the job of every run has ended (sacct), printing the counts when they change. Reads job.json
    each time: a run's job may hand over to a continuation job."""
    start, last = time.time(), None
    while True:
        records = {n: read_json_object(out / n / JOB) for n in names}
        states = scheduler_states([r for r in records.values() if r])
        counts: dict[str, int] = {}
        active = 0
        for record in records.values():
            state = states.get(record["job_id"], "UNKNOWN") if record else "UNKNOWN"
            fresh = record is not None and time.time() - float(record.get("submitted_at", 0)) < 60
            active += state in ACTIVE or (state == "UNKNOWN" and fresh)  # sacct lags a fresh submission
            counts[state] = counts.get(state, 0) + 1
        line = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
        if line != last:
            print(f"  [{time.time() - start:5.0f} s] jobs: {line}", flush=True)
            last = line
        if not active:
            return
        time.sleep(poll_s)


# -- this machine -----------------------------------------------------------------------------------------------
def _outcome(out: Path, p: Planned) -> str:
    summary = read_json_object(out / p.name / SUMMARY)
    return (summary or {}).get("status") or "ended without a summary"


def _result(job: Any) -> dict[str, Any] | None:
    """Rank 0's return value, or None when the job failed (its summary.json says why)."""
    try:
        results = job.results()
    except Exception:
        return None
    return results[0] if results and isinstance(results[0], dict) else None


def _ranks_change(out: Path, p: Planned, result: dict[str, Any] | None, res: Resources) -> Planned | None:
    """The same run on the ranks its S schedule asks for now, or None."""
    if not result or result.get("status") != "ranks-change":
        return None
    ranks = int(result["ranks"])
    if not fits(ranks, res):
        from bench.run.summary import record_failure

        message = f"{result.get('message')}; but {ranks} ranks do not fit on this machine"
        record_failure(p.spec, out / p.name, message)
        return None
    spec = {**p.spec, "ranks": ranks}
    return Planned(p.request, spec, p.name, shape_for(spec, ranks, res), p.needs, p.wave)


@contextlib.contextmanager
def _controllers_ignore_sigint():
    """submitit's local controller process shares the terminal's process group: started with SIGINT
    ignored, Ctrl-C does not make it print a KeyboardInterrupt traceback. Its tasks still stop cleanly:
    RunJob installs its own SIGINT handler, and run_local stops them with SIGTERM."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _stop(job: Any) -> None:
    """SIGTERM to a local job's controller, which passes it on to the job: it checkpoints and stops."""
    try:
        os.kill(int(job.job_id), signal.SIGTERM)
    except (ProcessLookupError, ValueError):
        pass


def run_local(plan: Plan, out: Path, res: Resources) -> None:
    """submitit's local executor, with at most `local_parallelism` ranks busy at once, each run started
    once the runs it needs have ended (and started again on other ranks when its S schedule asks)."""
    folder = out / SUBMITIT_DIR
    slots = local_parallelism(res)
    queue = ReadyQueue(
        sorted(plan.todo, key=lambda p: p.wave), lambda p: p.name, lambda p: p.needs, lambda p: p.shape.ranks
    )
    running: dict[str, tuple[Planned, Any]] = {}
    total, started, ended = len(plan.todo), time.time(), 0
    try:
        while queue or running:
            for name, (p, job) in list(running.items()):
                if not job.done():
                    continue
                del running[name]
                again = _ranks_change(out, p, _result(job), res)
                if again is not None:
                    queue.again(again)
                    continue
                queue.done(p)
                ended += 1
                print(f"  [{ended}/{total}] {_outcome(out, p):9s} {name}  ({time.time() - started:.0f} s)")
            busy = sum(p.shape.ranks for p, _ in running.values())
            for p in queue.take(slots - busy, busy=bool(running)):
                ex = make_executor(res, p.shape, folder, name=f"adascale-{p.spec['task']}")
                with _controllers_ignore_sigint():
                    job = ex.submit(RunJob(p.spec, out, p.needs))
                record_job(out, p, job, res)
                running[p.name] = (p, job)
            time.sleep(0.2)
    except BaseException:
        for _, job in running.values():  # Ctrl-C: stop the jobs of this call (they resume on the next submit)
            _stop(job)
        raise


def run_debug(plan: Plan, out: Path, res: Resources) -> None:
    """In this process, one run after the other (submitit's debug executor: breakpoints work)."""
    folder = out / SUBMITIT_DIR
    runs = sorted(plan.todo, key=lambda p: p.wave)
    started = time.time()
    for i, p in enumerate(runs, 1):
        ex = make_executor(res, p.shape, folder, name="adascale-debug")
        job = ex.submit(RunJob(p.spec, out, p.needs, raise_on_failure=False))
        record_job(out, p, job, res)
        result = job.result()
        if result.get("status") == "ranks-change":
            from bench.run.summary import record_failure

            record_failure(p.spec, out / p.name, f"{result['message']}; the debug executor runs one rank only")
        print(f"  [{i}/{len(runs)}] {_outcome(out, p):9s} {p.name}  ({time.time() - started:.0f} s)")
