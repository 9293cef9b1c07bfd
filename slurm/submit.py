"""`adascale-bench submit MATRIX --executor {local,slurm,debug}`: expand a matrix and submit its runs.

Complete runs are skipped, runs whose job is still queued or running are left alone, incomplete ones are
submitted again and resume from their checkpoint (the engine does that when started on the same folder).
Runs of one resource shape share a job array. Runs that depend on others (LSW+ on its AdaScale run) go in
a later array that starts after those have ended (SLURM: afterany, so that a diverged or failed AdaScale
run makes its LSW+ run fail with that reason instead of waiting forever); locally they are started after.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.errors import UserError
from bench.core.files import SUMMARY, read_json_object
from bench.core.runspec import RunSpec
from bench.experiments import matrix as matrices
from bench.experiments.pool import ReadyQueue
from bench.run.runner import existing_summary
from bench.run.spec import run_name

from .backends import BACKENDS
from .datacheck import data_problems
from .executors import (
    MAX_ARRAY,
    Resources,
    Shape,
    SubmitOptions,
    fits,
    named_cap,
    ranks_to_start,
    require_slurm,
    sbatch_options,
    shape_for,
)
from .records import JOB, Planned, describe_group, job_name
from .status import ACTIVE, add_to_manifest, collect, scheduler_states, table


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

    specs: dict[tuple, RunSpec] = {}
    names: dict[tuple, str] = {}
    for req in m.runs:
        spec = m.spec(req)
        spec = spec.replace(ranks=ranks_to_start(spec, out / run_name(spec), res))
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
            todo.append(Planned(req, spec, name, shape_for(spec, spec.ranks, res), needs))
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


def stand_in_roots(m: matrices.Matrix) -> matrices.Matrix:
    """For a dry run: the matrix with a stand-in folder for each data root that cannot be resolved yet (an
    unset variable, a paper preset without one). A run's data root is not part of its identity, so its
    name, W and A, and the plan, are the same once the data is there."""
    roots = dict(m.data_roots)
    for req in {r.task: r for r in m.runs}.values():
        try:
            m.spec(req)
        except UserError:
            roots[req.task] = f"/nonexistent/{req.task}-data-root"
    return dataclasses.replace(m, data_roots=roots)


def uncapped(plan: Plan, res: Resources) -> list[str]:
    """One line per (task, preset) to submit whose card sets no cap on the ranks of one run (its `max_ranks`): its
    runs spread over as many ranks as the resources allow, said rather than done silently (a new task's card
    that forgot it, a run that gains nothing from more ranks)."""
    lines = []
    for task, preset in sorted({(str(p.spec.task), str(p.spec.preset)) for p in plan.todo}):
        spec = next(p.spec for p in plan.todo if (p.spec.task, p.spec.preset) == (task, preset))
        if not named_cap(spec) and not spec.accumulation and res.max_ranks > 1:
            lines.append(
                f"task {task}'s card sets no max_ranks for its {preset} preset: each run spreads over up to "
                f"{res.max_ranks} ranks (set max_ranks={{'{preset}': N}} on the card to cap it)"
            )
    return lines


def print_plan(m: matrices.Matrix, plan: Plan, res: Resources) -> None:
    print(
        f"matrix {m.path} ({m.preset}): {len(m.runs)} runs: {len(plan.complete)} complete, "
        f"{len(plan.queued)} already queued or running, {len(plan.todo)} to submit ({res.executor})"
    )
    for line in uncapped(plan, res):
        print(f"  note: {line}")
    for i, (wave, shape, runs) in enumerate(plan.groups(), 1):
        after = " after the runs they need" if wave else ""
        print(f"  array {i}{after}: {describe_group(runs, shape)}")
        if res.executor == "slurm":  # what each job of the array asks SLURM for
            print(f"    sbatch {' '.join(sbatch_options(res, shape, job_name(runs, shape.ranks)))}")


def submit(args: SubmitOptions) -> int:
    res = Resources.from_options(args)
    m = matrices.with_data_roots(matrices.load(args.matrix), args.data_root)
    if res.executor == "slurm" and m.preset == "paper" and args.gpus_per_node is None and not args.cpu_only:
        raise UserError(
            "the paper preset trains on GPUs: pass --gpus-per-node G, or --cpu-only to run on CPUs on purpose"
        )
    if res.executor == "slurm" and not args.dry_run:
        require_slurm()
    problems = data_problems(m, sizes=not args.rehearse)
    for line in problems:  # a dry run previews a matrix whose data is not prepared yet: warnings only
        print(f"adascale-bench: {'warning' if args.dry_run else 'error'}: {line}", file=sys.stderr)
    if problems and not args.dry_run:
        return 1
    if problems:
        m = stand_in_roots(m)
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
    if not drive(plan, out, res, args.wait):
        print(f"follow with: adascale-bench status {out}")
        return 0
    return closing(out, set(plan.names.values()), {p.name for p in plan.todo})


def closing(out: Path, named: set[str], ended: set[str]) -> int:
    """The closing table once every run this call handed over has ended (`ended`: read as ended, though the
    local runs' controller, this process, still lives), then the count of the matrix's (`named`) failed runs
    with the first one's line on stderr; 1 when any failed."""
    runs = collect(out, ended=ended)
    print(table(runs))
    failed = sorted((r for r in runs if r.name in named and r.state in ("failed", "unreadable")), key=lambda r: r.name)
    if failed:
        first = failed[0]
        print(
            f"adascale-bench: error: {len(failed)} of {len(named)} runs failed; the first, {first.name}: "
            f"{first.detail or 'no log'}",
            file=sys.stderr,
        )
    return 1 if failed else 0


# -- the one driver: every executor is a backend (slurm/backends.py) --------------------------------------------
def drive(plan: Plan, out: Path, res: Resources, wait: bool) -> bool:
    """Hand the planned runs to the executor's backend as their needs allow, within its budget of busy
    ranks, each (wave, shape) group as one hand-over; start again on other ranks a run whose S schedule
    asks for it (where the executor returns that; a SLURM job submits its own continuation); print each
    run's end. Returns True once every run has ended, False when the runs were left to a scheduler
    (SLURM without --wait)."""
    backend = BACKENDS[res.executor](out, res)
    queue = ReadyQueue(
        sorted(plan.todo, key=lambda p: p.wave), lambda p: p.name, lambda p: p.needs, lambda p: p.shape.ranks
    )
    job_of: dict[str, str] = dict(plan.queued)
    arrays: dict[str, set[str]] = {}
    running: dict[str, Planned] = {}
    total, ended = len(plan.todo), 0
    handed: dict[str, float] = {}  # run -> when this call first handed it over: each run's own time
    try:
        backend.prepare(plan.todo)
        while queue or (running and (wait or not backend.scheduler_orders)):
            for name, result in backend.ended(running).items():
                p = running.pop(name)
                again = _ranks_change(out, p, result, res)
                if again is not None:
                    queue.again(again)
                    continue
                if not backend.scheduler_orders:
                    queue.done(p)
                ended += 1
                took = time.time() - handed.get(name, time.time())
                print(f"  [{ended}/{total}] {_outcome(out, p):9s} {name}  ({took:.0f} s)", flush=True)
            while True:  # everything ready now (with a scheduler, the next wave is ready once handed over)
                busy = sum(p.shape.ranks for p in running.values())
                ready = queue.take(backend.capacity - busy, busy=bool(running))
                if not ready:
                    break
                for shape, group in _groups(ready):
                    after = dependency_ids({job_of[n] for p in group for n in p.needs if n in job_of}, arrays)
                    ids = backend.hand_over(group, shape, after)
                    if len(ids) > 1:
                        arrays[ids[0].split("_")[0]] = set(ids)
                    for p, job_id in zip(group, ids, strict=True):
                        job_of[p.name] = job_id
                        handed.setdefault(p.name, time.time())
                        running[p.name] = p
                        if backend.scheduler_orders:
                            queue.done(p)
            if queue and not running:  # (matrix dependencies are acyclic and within the matrix)
                raise RuntimeError(f"{len(queue.waiting)} runs wait for runs that never end")
            if running and (wait or not backend.scheduler_orders):
                time.sleep(backend.poll_s)
    except BaseException:
        backend.stop(running)  # Ctrl-C: the runs of this call checkpoint where the executor lets them
        raise
    finally:
        backend.close()
    return wait or not backend.scheduler_orders


def _groups(ready: list[Planned]) -> list[tuple[Shape, list[Planned]]]:
    """Runs of one shape together, in order of first appearance, each at most one job array long."""
    by: dict[Shape, list[Planned]] = {}
    for p in ready:
        by.setdefault(p.shape, []).append(p)
    out: list[tuple[Shape, list[Planned]]] = []
    for shape, runs in sorted(by.items()):
        out += [(shape, runs[i : i + MAX_ARRAY]) for i in range(0, len(runs), MAX_ARRAY)]
    return out


def dependency_ids(needed: set[str], arrays: dict[str, set[str]]) -> list[str]:
    """The job ids to wait for, with every whole array this call submitted named by its array id (one
    heat-map run can need a whole grid of AdaScale runs: one id instead of hundreds)."""
    out = set(needed)
    for array, members in arrays.items():
        if len(members) > 1 and members <= out:
            out = (out - members) | {array}
    return sorted(out)


def _outcome(out: Path, p: Planned) -> str:
    summary = read_json_object(out / p.name / SUMMARY)
    return (summary or {}).get("status") or "ended without a summary"


def _ranks_change(out: Path, p: Planned, result: dict[str, Any] | None, res: Resources) -> Planned | None:
    """The same run on the ranks its S schedule asks for now, or None."""
    if not result or result.get("status") != "ranks-change":
        return None
    ranks = int(result["ranks"])
    if not fits(ranks, res):
        from bench.run.summary import record_failure

        where = "the debug executor runs one rank only" if res.executor == "debug" else "do not fit on this machine"
        message = f"{result.get('message')}; but {ranks} ranks {where}"
        record_failure(p.spec, out / p.name, message)
        return None
    spec = p.spec.replace(ranks=ranks)
    return Planned(p.request, spec, p.name, shape_for(spec, ranks, res), p.needs, p.wave)
