"""`adascale-bench` (also `python -m bench`): the public command line (docs/design.md §4)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import sys
from pathlib import Path
from typing import Any, TypeVar

from bench import safefs
from bench.cli import advise
from bench.cli.argtypes import batches, non_negative_int, positive_int, task_help, task_name, watch_seconds
from bench.errors import UserError
from bench.experiments.concurrency import default_slots
from bench.files import SUMMARY

T = TypeVar("T")

PROG = "adascale-bench"


_positive_int, _seed = positive_int, non_negative_int
# Errors of the file system rather than of the program: one line naming the path, no traceback.
_FILE_ERRORS = {
    errno.ENOSPC: "no space left on the device; free some and run the same command to resume",
    errno.EDQUOT: "disk quota exceeded; free some space and run the same command to resume",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EEXIST: "a file is in the way of a folder",
    errno.EISDIR: "a folder is in the way of a file",
    errno.ENAMETOOLONG: "path too long (shorten --out or the --set values that name the run)",
}


def describe_os_error(e: OSError) -> str:
    path = e.filename or "(unknown path)"
    return f"cannot write {path}: {_FILE_ERRORS.get(e.errno or 0, e.strerror)}"


def cmd_run(args: argparse.Namespace) -> int:
    from bench.engine.signals import install_signal_handlers
    from bench.run.runner import existing_summary, run_dir_of, run_spec
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
    run_dir = run_dir_of(Path(args.out), spec)
    already = existing_summary(run_dir) is not None  # finished before: run_spec returns its summary untrained
    summary = run_spec(spec, Path(args.out))
    print(describe(summary, run_dir, already))
    return 0


JOBS_HELP = "runs at a time, each in a worker process (default: one per core, at most 8; 1: in this process)"


def _counts(counts: dict[str, int]) -> str:
    return f"{sum(counts.values())} runs ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))})"


def cmd_smoke(args: argparse.Namespace) -> int:
    import time

    from bench.experiments.smoke import offline_gains, smoke
    from reports.build import build_report

    start = time.perf_counter()
    out = Path(args.out)
    counts = smoke(out, seeds=args.seeds, jobs=args.jobs)
    for run_dir, gains in offline_gains(out):
        print(f"offline gain: {run_dir.relative_to(out)}\n{gains}")
    html = build_report(out)  # every format
    print(f"smoke: {_counts(counts)} in {time.perf_counter() - start:.0f} s")
    print(f"report: {html}")
    print(f"tables: {html.parent / 'table2.md'} (also .tex, .csv)")
    return 0 if counts.get("failed", 0) == 0 else 1


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (with a pointer to --help), like every other user error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def cmd_matrix(args: argparse.Namespace) -> int:
    from bench.algo.rules import previewing
    from bench.experiments.matrix import describe, load

    with previewing():  # a matrix's user rules are shown as named, never imported
        print(describe(load(args.matrix)))
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
    from bench.algo.rules import previewing
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
    from reports import memo

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
    from reports.collect import load
    from reports.sweep import critical_batches, critical_text, noise_by_task, wide

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
    from bench.files import OFFLINE_GAIN
    from bench.run.offline_gain import offline_gains, online_gains, table

    run_dir = Path(args.run_dir)
    if args.task:
        from tasks import get_task

        get_task(args.task)  # a task of yours: imported because you named it, never because a folder does
    rows = offline_gains(run_dir, args.batches)
    print(table(rows, online_gains(run_dir)))
    print(f"offline gain: {run_dir / OFFLINE_GAIN}")
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from bench.algo.rules import previewing
    from slurm.executors import SubmitOptions
    from slurm.submit import submit

    with previewing() if args.dry_run else contextlib.nullcontext():  # --dry-run imports no user rule
        return submit(typed(SubmitOptions, args))


def cmd_status(args: argparse.Namespace) -> int:
    from slurm.status import status

    return status(Path(args.dir), as_json_=args.json, watch=args.watch)


def build_parser() -> argparse.ArgumentParser:
    from bench import __version__
    from bench.experiments.matrix import PRESET_DIR

    shipped = ", ".join(sorted(p.stem for p in PRESET_DIR.glob("*.yaml")))  # the matrices shipped (control too)
    parser = _Parser(prog=PROG, description="AdaScale SGD benchmark suite")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    _one_run_commands(sub)
    _cost_commands(sub, shipped)
    _result_commands(sub, shipped)
    _measuring_commands(sub)
    _cluster_commands(sub, shipped)
    return parser


def _one_run_commands(sub: Any) -> None:
    """run, smoke and prepare: one run, the tiny matrix here, a data set made ready."""
    from bench.algo.rules import METHODS

    p = sub.add_parser("run", help="train one run")
    p.add_argument("--task", required=True, type=task_name, help=task_help())
    p.add_argument(
        "--method",
        required=True,
        metavar="METHOD",
        help=f"one of {', '.join(METHODS)}, or a rule of yours as package.module:NAME (docs/design.md §3)",
    )
    p.add_argument("--scale", required=True, help="a positive integer S, elastic-up or elastic-down")
    p.add_argument("--seed", type=_seed, default=0, help="the run's seed: data order, initial weights (default: 0)")
    p.add_argument(
        "--preset",
        default="tiny",
        choices=("tiny", "paper"),
        help="tiny: a small model on small data, minutes on a CPU; paper: the paper's setup (default: tiny)",
    )
    p.add_argument("--ranks", type=_positive_int, default=None, help="W local data-parallel processes")
    p.add_argument("--data-root", default=None, help="dataset folder (tiny: written on first use if absent)")
    p.add_argument("--out", default="runs", help="results folder (default: runs)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec value (repeatable)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("smoke", help="the whole tiny matrix on this machine, then the report")
    p.add_argument("--out", default="runs/smoke", help="results folder (default: runs/smoke)")
    p.add_argument("--seeds", type=_positive_int, default=3, help="at most this many seeds per experiment (default: 3)")
    p.add_argument("--jobs", type=_positive_int, default=default_slots(), help=JOBS_HELP)
    p.set_defaults(func=cmd_smoke)

    from tasks import preparable

    prepared = ", ".join(preparable())
    p = sub.add_parser(
        "prepare",
        help="turn a dataset as published into the layout its task reads",
        description=f"Turn a dataset as published into the layout its task reads. Tasks: {prepared} (the "
        "tasks with a tasks/<name>/prepare.py; the others, and a task of yours, read their data as it is).",
    )
    p.add_argument("task", metavar="TASK", help=f"one of: {prepared}")
    p.add_argument("--source", required=True, help="the downloaded files (archives or their extraction)")
    p.add_argument("--out", required=True, help="the prepared data root to write (must not exist)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="a task option, e.g. vocab_size=32000")
    p.set_defaults(func=cmd_prepare)


def _result_commands(sub: Any, shipped: str) -> None:
    """report, sweep and advise: what runs show, and what a probe predicts."""
    p = sub.add_parser("report", help="rebuild every table and figure from the run files in DIR")
    p.add_argument("dir")
    p.add_argument(
        "--format",
        default="md,tex,html,csv,txt",
        help="comma-separated, what to write: md (table2.md), tex (table2.tex), html (report.html and its figures), "
        "csv (the CSV tables), txt (findings.txt, rules.txt: printed in full; else only the verdict grids); "
        "default all",
    )
    p.add_argument("--std", action="store_true", help="show mean ± std over seeds")
    p.add_argument("--quiet", action="store_true", help="print only where the report is, no findings")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("sweep", help="the critical-batch sweep (epochs-to-target against global batch)")
    p.add_argument("--task", default="logreg", choices=("logreg",), help="the task swept (default: logreg)")
    p.add_argument("--out", default="runs/sweep", help="results folder (default: runs/sweep)")
    p.add_argument("--jobs", type=_positive_int, default=default_slots(), help=JOBS_HELP)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser(
        "advise", help="predict what each S buys a task from one short AdaScale probe; write the matrix that checks it"
    )
    advise.add_arguments(p)
    p.set_defaults(func=advise.cmd_advise)


def _cost_commands(sub: Any, shipped: str) -> None:
    """matrix, plan and flops: what a matrix expands to, what it will cost, the counted work it is priced by."""
    p = sub.add_parser("matrix", help="print the runs a matrix file expands to")
    p.add_argument("matrix", help=f"a matrix YAML file, or a shipped one: {shipped}")
    p.set_defaults(func=cmd_matrix)

    p = sub.add_parser("plan", help="what a matrix costs: runs, iterations, examples, GPU-hours per cell")
    p.add_argument("matrix", help=f"a matrix YAML file, or a shipped one: {shipped}")
    p.add_argument("--gpus", type=_positive_int, default=None, help="also the wall-clock hours on N GPUs")
    p.add_argument(
        "--throughput",
        default=None,
        metavar="CSV",
        help="examples/s per task and preset at S = 1 on one GPU (default: the shipped table)",
    )
    p.add_argument("--flops", default=None, metavar="CSV", help="FLOPs per micro-batch (default: the shipped table)")
    p.add_argument(
        "--basis",
        default="published",
        choices=("published", "flops"),
        help="price GPU time at a public source's per-GPU throughput (default) or at counted FLOPs × --mfu of the "
        "peak; measured throughput (--throughput, written by --write-throughput) supersedes both",
    )
    p.add_argument("--published", default=None, metavar="CSV", help="published throughput (default: the shipped table)")
    p.add_argument(
        "--device", default="a100", choices=("a100", "h100"), help="the GPU priced: its published rows or its peak"
    )
    p.add_argument("--precision", default="bf16", choices=("bf16", "tf32", "fp32"), help="which dense peak (FLOPs)")
    p.add_argument("--mfu", type=float, default=0.4, help="assumed fraction of the peak (FLOPs basis; default 0.4)")
    p.add_argument("--json", action="store_true", help="every cell and the totals as JSON, not the table")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("flops", help="count the FLOPs of one training micro-batch per task (the table plan reads)")
    p.add_argument("--task", action="append", type=task_name, help="a task (repeatable; default: the five paper tasks)")
    p.add_argument("--preset", default="paper", choices=("tiny", "paper"))
    own = "count a task without synthetic data (a task of yours) on this data set (default for tiny: its tiny set)"
    p.add_argument("--data-root", default=None, help=own)
    p.add_argument(
        "--write",
        nargs="?",
        const=True,
        default=None,
        metavar="CSV",
        help="update this table with the counts (--write alone: the shipped table plan reads); without it, print only",
    )
    p.set_defaults(func=cmd_flops)


def _measuring_commands(sub: Any) -> None:
    """perf, comm and gain: what the engine, the exchange and the gain measure."""
    p = sub.add_parser("perf", help="overhead benchmark: engine vs identity vs a bare PyTorch loop")
    p.add_argument("--task", action="append", type=task_name, help="a task (repeatable; default: every task)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--preset", default="tiny", choices=("tiny", "paper"))
    p.add_argument("--scales", default="1,4,16", help="comma-separated scales")
    p.add_argument("--repeats", type=_positive_int, default=20, help="timed iterations per variant")
    p.add_argument("--data-root", default=None, help="dataset folder for the paper preset")
    p.add_argument("--out", default="runs/perf")
    p.add_argument(
        "--write-throughput",
        default=None,
        metavar="CSV",
        help="add or update each task's examples/s at S = 1 (bare loop) in this throughput table (see plan)",
    )
    p.add_argument(
        "--synthetic",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="random data of the preset's shapes, no dataset (default: on for --preset paper without --data-root)",
    )
    p.add_argument(
        "--microbatch-mode",
        default="sequential",
        choices=("sequential", "both"),
        help="both: also time the engine with microbatch_mode=batched, interleaved",
    )
    p.add_argument(
        "--amp", default="none", choices=("none", "both"), help="both: also time the engine with amp=bf16, interleaved"
    )
    p.set_defaults(func=cmd_perf)

    p = sub.add_parser("comm", help="gradient exchange: reduction=pairwise against DDP's all-reduce (gloo, W ranks)")
    p.add_argument("--ranks", type=lambda t: [int(x) for x in t.split(",")], default=[2, 4], help="e.g. 2,4")
    p.add_argument("--model", default="resnet50", choices=("resnet50", "resnet18"))
    p.add_argument("--image", type=_positive_int, default=32, help="input side (small: the exchange dominates)")
    p.add_argument("--rounds", type=_positive_int, default=5)
    p.set_defaults(func=cmd_comm)

    p = sub.add_parser("gain", help="the offline gain at a run's kept checkpoints (the paper's Figure 2)")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder with kept checkpoints (keep_checkpoints_every)")
    p.add_argument(
        "--batches", type=batches, default=None, help="micro-batches per checkpoint (default: 1000; tiny: 256)"
    )
    p.add_argument(
        "--task",
        type=task_name,
        default=None,
        help="a run of a task of yours: name it (never imported from the folder)",
    )
    p.set_defaults(func=cmd_gain)


def _cluster_commands(sub: Any, shipped: str) -> None:
    """submit and status: a matrix handed to an executor, and where its runs stand."""
    from bench.cli.options import add_submit_arguments

    p = sub.add_parser("submit", help="expand a matrix and submit its runs (skips completed ones)")
    p.add_argument("matrix", help=f"a matrix YAML file, or a shipped one: {shipped}")
    add_submit_arguments(p)
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("status", help="the state of every cell of a results folder")
    p.add_argument("dir")
    p.add_argument("--json", action="store_true", help="every run as JSON: state, τ, T1, progress, ETA, job ids")
    p.add_argument(
        "--watch", type=watch_seconds, default=None, metavar="N", help="refresh every N s until no run is active"
    )
    p.set_defaults(func=cmd_status)


def _named_paths(args: argparse.Namespace) -> list[Path]:
    """The folders and files named on the command line: taken as given, links in them included; below
    them no link is followed (bench.safefs). `prepare` writes beside its --out, so its parent is one."""
    keys = ("out", "dir", "run_dir", "source", "matrix", "throughput", "flops", "write", "write_throughput")
    named = [Path(v) for k in keys if isinstance(v := getattr(args, k, None), str | Path) and v]
    if args.command == "prepare":
        named.append(Path(args.out).parent)
    return named


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "advise" and not args.out:  # a folder per task: its advice and verification runs
        args.out = f"runs/advise-{args.task}"
    from bench.engine.signals import Interrupted

    try:
        with safefs.confined(*_named_paths(args)):
            return int(args.func(args) or 0)
    except UserError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 3
    except BrokenPipeError:  # output piped into head and the like
        sys.stderr.close()
        return 0
    except OSError as e:
        if e.errno not in _FILE_ERRORS:
            raise
        print(f"{PROG}: error: {describe_os_error(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
