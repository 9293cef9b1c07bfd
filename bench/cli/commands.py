"""What each `adascale-bench` command does, apart from how its flags are parsed (bench.cli.parser): imports are
deferred to each command, so that a command loads only what it runs (`matrix` and `status` never import torch)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from pathlib import Path
from typing import TypeVar

from bench.core.errors import UserError
from bench.core.files import SUMMARY

T = TypeVar("T")

PROG = "adascale-bench"


def cmd_run(args: argparse.Namespace) -> int:
    from bench.core.engine.signals import install_signal_handlers
    from bench.run.runner import run
    from bench.run.spec import parse_overrides, resolve
    from bench.run.summary import describe
    from tasks import get_task

    task = get_task(args.task)  # a task of yours is imported here (you named it); requirements before any write
    spec = resolve(
        task, args.method, args.scale, args.seed, args.preset, args.data_root, parse_overrides(args.set), args.ranks
    )
    if spec.ranks > 1 or spec.accumulation:
        from bench.run.launch import launch_local

        return launch_local(spec, Path(args.out))
    install_signal_handlers()
    ran = run(spec, Path(args.out), task=task)  # the task resolved here: loaded once
    print(describe(ran.summary, ran.run_dir, already=not ran.trained))
    return 0


def _counts(counts: dict[str, int]) -> str:
    return f"{sum(counts.values())} runs ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))})"


def cmd_smoke(args: argparse.Namespace) -> int:
    import time

    from bench.experiments.gains import offline_gains
    from bench.experiments.smoke import smoke
    from reports.build import build_report

    start = time.perf_counter()
    out = Path(args.out)
    counts = smoke(out, seeds=args.seeds, jobs=args.jobs)
    for run_dir, gains in offline_gains(out, jobs=args.jobs):
        print(f"offline gain: {run_dir.relative_to(out)}\n{gains}")
    html = build_report(out)  # every format
    print(f"smoke: {_counts(counts)} in {time.perf_counter() - start:.0f} s")
    print(f"report: {html}")
    print(f"tables: {html.parent / 'table2.md'} (also .tex, .csv)")
    return 0 if counts.get("failed", 0) == 0 else 1


def cmd_matrix(args: argparse.Namespace) -> int:
    from bench.core.methods import previewing
    from bench.experiments.matrix import describe, load, with_data_roots

    with previewing():  # a matrix's user rules are shown as named, never imported
        print(describe(with_data_roots(load(args.matrix), args.data_root)))
    return 0


def typed(cls: type[T], args: argparse.Namespace) -> T:
    """A command's options as its dataclass: the parsed flags of the same names (below the CLI, no Namespace).
    A flag without a field is a programming error, not a silently dropped option."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(vars(args)) - names - {"func", "command"})
    if unknown:
        raise TypeError(f"{cls.__name__} has no field for --{unknown[0].replace('_', '-')}")
    return cls(**{k: v for k, v in vars(args).items() if k in names})


def cmd_plan(args: argparse.Namespace) -> int:
    from bench.core.methods import previewing
    from bench.experiments.plan import PlanOptions, plan

    with previewing():  # a matrix's user rules are shown as named, never imported
        return plan(typed(PlanOptions, args))


def cmd_flops(args: argparse.Namespace) -> int:
    from bench.experiments.flops import FlopsOptions, flops

    return flops(typed(FlopsOptions, args))


def cmd_comm(args: argparse.Namespace) -> int:
    from bench.experiments.comm import CommOptions, comm

    return comm(typed(CommOptions, args))


def cmd_report(args: argparse.Namespace) -> int:
    from reports.rundata import memo

    out = Path(args.dir)
    if not out.is_dir():
        raise UserError(f"results folder {out} does not exist")
    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    unknown = sorted(set(formats) - set(memo.FORMATS))
    if unknown or not formats:
        raise UserError(f"--format {args.format!r}: expected a comma-separated list of {', '.join(memo.FORMATS)}")
    if not any(out.rglob(SUMMARY)):
        print(f"{PROG}: error: no runs found under {out}", file=sys.stderr)
        return 1
    inputs = memo.fingerprint(out, formats, args.std, args.quiet)  # before the build: a change shows next time
    printed = memo.replay(out, inputs)
    if printed is not None:  # nothing changed since the last report: say what it said, build nothing
        memo.show(printed)
        return 0
    from reports.build import build

    memo.forget(out)
    with memo.capture() as warned:
        built = build(out, formats, std=args.std)
    if args.quiet:
        said = f"{built.html or built.folder}\n"
    elif "txt" in formats:
        # the paper's findings, checked (the report's first table), then every rule against S = 1, then what
        # must not be read as a number: disagreeing B_crit, unresolved speed-ups
        said = built.findings + built.rules + built.flags
    else:
        said = built.glance + built.flags  # the grids alone: the findings in full are in findings.txt
    if not args.quiet:
        said += (
            f"report: {built.html}\n" if built.html is not None else f"report: {', '.join(map(str, built.written))}\n"
        )
    memo.record(out, inputs, built.written, {"warnings": warned, "stdout": said})
    print(said, end="")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from bench.experiments.sweep import sweep
    from reports.build import build_sweep
    from reports.rundata.collect import load
    from reports.speed.sweep import critical_batches, critical_text, noise_by_task, wide

    out = Path(args.out)
    counts = sweep(args.task, out, jobs=args.jobs)
    table, written = build_sweep(out)
    print(wide(table))
    res = load(out)
    print(critical_text(critical_batches(res), noise_by_task(res)))
    print(f"sweep: {_counts(counts)}; " + ", ".join(str(p) for p in written))
    return 0 if counts.get("failed", 0) == 0 else 1


def cmd_perf(args: argparse.Namespace) -> int:
    from bench.experiments.perf import PerfOptions, perf

    return perf(typed(PerfOptions, args))


def cmd_prepare(args: argparse.Namespace) -> int:
    import importlib
    import inspect
    import json

    from bench.run.spec import parse_overrides
    from tasks import available, preparable, require
    from tasks.preparing import AlreadyPrepared

    if args.task not in preparable():
        names = ", ".join(preparable())
        raise UserError(
            f"prepare {args.task}: expected one of {names} (the tasks with a tasks/<name>/prepare.py; "
            f"{', '.join(sorted(set(available()) - set(preparable())))} and a task of yours read their data as it is)"
        )
    require(args.task)
    prepare = importlib.import_module(f"tasks.{args.task}.prepare").prepare
    options = {k.replace("-", "_"): v for k, v in parse_overrides(args.set).items()}
    try:
        inspect.signature(prepare).bind(args.source, args.out, progress=True, **options)
    except TypeError as e:  # an option the task does not take
        raise UserError(f"prepare {args.task}: {e}") from None
    params = inspect.signature(prepare).parameters
    for key, value in options.items():  # a yes/no option given 'maybe' or a list would read as yes
        default = params[key].default if key in params else None
        if isinstance(default, bool) and not isinstance(value, bool):
            raise UserError(f"prepare {args.task}: --set {key}={str(value)[:40]}: expected true or false")
    try:
        record = prepare(Path(args.source), Path(args.out), progress=True, **options)
    except AlreadyPrepared as done:  # another `prepare` of the same --out finished first: the same outcome
        record = done.record
    print(json.dumps(record, indent=2, sort_keys=True))
    print(f"prepared: {args.out}")
    return 0


def cmd_gain(args: argparse.Namespace) -> int:
    from bench.core.files import OFFLINE_GAIN, SPEC
    from bench.run.offline_gain import offline_gains, online_gains, table

    run_dir = Path(args.run_dir)
    if args.task:
        from tasks import get_task

        get_task(args.task)  # a task of yours: imported because you named it, never because a folder does
    if not os.path.lexists(run_dir / SPEC):  # a results folder: every run in it that kept weights (a spec.json of
        # any kind, a link or a FIFO included, is a run folder's: its own reader refuses what it must)
        return _gain_folder(run_dir, args.batches, 1 if args.task else args.jobs)
    rows = offline_gains(run_dir, args.batches)
    print(table(rows, online_gains(run_dir)))
    print(f"offline gain: {run_dir / OFFLINE_GAIN}")
    return 0


def _gain_folder(out: Path, batches: int | None, jobs: int) -> int:
    """`gain DIR` on a results folder: bench.experiments.gains over its runs (a task of yours: in this process)."""
    from bench.experiments.gains import offline_gains

    if not out.is_dir():
        raise UserError(f"{out}: not a run folder (no spec.json) nor a results folder")
    done = offline_gains(out, batches, jobs=jobs)
    for run_dir, gains in done:
        print(f"offline gain: {run_dir.relative_to(out)}\n{gains}")
    print(
        f"gain: {len(done)} runs measured under {out} (the others had none kept, or their offline_gain.csv is current)"
    )
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from bench.core.methods import previewing
    from slurm.executors import SubmitOptions
    from slurm.submit import submit

    with previewing() if args.dry_run else contextlib.nullcontext():  # --dry-run imports no user rule
        return submit(typed(SubmitOptions, args))


def cmd_status(args: argparse.Namespace) -> int:
    from slurm.status import status

    return status(Path(args.dir), as_json_=args.json, watch=args.watch)
