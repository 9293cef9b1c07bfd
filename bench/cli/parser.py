"""The `adascale-bench` parser: every command's flags and help in one place, apart from what the commands do
(bench.cli.commands)."""

from __future__ import annotations

import argparse
import re
from typing import Any

from bench.cli import advise
from bench.cli.argtypes import batches, positive_int, scale_int, seed, seed_count, task_help, task_name, watch_seconds
from bench.cli.commands import (
    PROG,
    cmd_comm,
    cmd_flops,
    cmd_gain,
    cmd_matrix,
    cmd_perf,
    cmd_plan,
    cmd_prepare,
    cmd_report,
    cmd_run,
    cmd_smoke,
    cmd_status,
    cmd_submit,
    cmd_sweep,
)
from bench.core.errors import did_you_mean
from bench.experiments.concurrency import default_slots

_positive_int, _seed = positive_int, seed


JOBS_HELP = "runs at a time, each in a worker process (default: one per core, at most 8; 1: in this process)"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (with a pointer to --help), like every other user error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {_suggest(message)} (see {self.prog} --help)\n")


def _suggest(message: str) -> str:
    """argparse's 'invalid choice: 'reprot' (choose from ...)' with the choice that was meant first:
    "invalid choice: 'reprot' (did you mean report?) (choose from ...)"."""
    m = re.search(r"invalid choice: '([^']*)'( \(choose from (.*)\))", message)
    if not m:
        return message
    hint = did_you_mean(m.group(1), re.findall(r"'([^']*)'", m.group(3)))
    return message[: m.start(2)] + hint + message[m.start(2) :]


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
    from bench.core.algo.rules import METHODS

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
    p.add_argument("--ranks", type=scale_int, default=None, help="W local data-parallel processes")
    p.add_argument("--data-root", default=None, help="dataset folder (tiny: written on first use if absent)")
    p.add_argument("--out", default="runs", help="results folder (default: runs)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec value (repeatable)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("smoke", help="the whole tiny matrix on this machine, then the report")
    p.add_argument("--out", default="runs/smoke", help="results folder (default: runs/smoke)")
    p.add_argument("--seeds", type=seed_count, default=3, help="at most this many seeds per experiment (default: 3)")
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


DATA_ROOT_HELP = "a task's data folder over the matrix's data_roots (repeatable)"


def _cost_commands(sub: Any, shipped: str) -> None:
    """matrix, plan and flops: what a matrix expands to, what it will cost, the counted work it is priced by."""
    p = sub.add_parser("matrix", help="print the runs a matrix file expands to")
    p.add_argument("matrix", help=f"a matrix YAML file, or a shipped one: {shipped}")
    p.add_argument("--data-root", action="append", default=[], metavar="TASK=PATH", help=DATA_ROOT_HELP)
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
    _perf_command(sub)
    p = sub.add_parser("comm", help="gradient exchange: reduction=pairwise against DDP's all-reduce (gloo, W ranks)")
    p.add_argument("--ranks", type=lambda t: [int(x) for x in t.split(",")], default=[2, 4], help="e.g. 2,4")
    p.add_argument("--model", default="resnet50", choices=("resnet50", "resnet18"))
    p.add_argument("--image", type=_positive_int, default=32, help="input side (small: the exchange dominates)")
    p.add_argument("--rounds", type=_positive_int, default=5)
    p.set_defaults(func=cmd_comm)

    p = sub.add_parser("gain", help="the offline gain at a run's kept checkpoints (the paper's Figure 2)")
    p.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        help="a run folder with kept checkpoints (keep_checkpoints_every), or a results folder: every completed run "
        "in it with kept checkpoints whose offline_gain.csv is missing or older",
    )
    p.add_argument(
        "--jobs", type=_positive_int, default=default_slots(), help="runs measured at once (a results folder)"
    )
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


def _perf_command(sub: Any) -> None:
    """perf: the engine's overhead against identity scaling and a bare PyTorch loop."""
    from bench.core.algo.rules import OPTIMIZERS

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
    p.add_argument(
        "--optimizer",
        default="sgd",
        choices=OPTIMIZERS,
        help="every variant's optimizer; adamw: the task card's AdamW setting, AdamScale in the engine, "
        "torch.optim.AdamW in the bare loop",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 1 where an engine variant's iteration has a loss not finite, a gain outside [1, S] or more "
        "than one host synchronisation (bench.experiments.stepchecks)",
    )
    p.set_defaults(func=cmd_perf)


def _cluster_commands(sub: Any, shipped: str) -> None:
    """submit and status: a matrix handed to an executor, and where its runs stand."""
    from bench.cli.options import add_submit_arguments

    p = sub.add_parser("submit", help="expand a matrix and submit its runs (skips completed ones)")
    p.add_argument("matrix", help=f"a matrix YAML file, or a shipped one: {shipped}")
    add_submit_arguments(p)
    p.add_argument("--data-root", action="append", default=[], metavar="TASK=PATH", help=DATA_ROOT_HELP)
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("status", help="the state of every cell of a results folder")
    p.add_argument("dir")
    p.add_argument("--json", action="store_true", help="every run as JSON: state, τ, T1, progress, ETA, job ids")
    p.add_argument(
        "--watch", type=watch_seconds, default=None, metavar="N", help="refresh every N s until no run is active"
    )
    p.set_defaults(func=cmd_status)
