"""The options of `adascale-bench submit`: the executor and the resources a cluster asks for."""

from __future__ import annotations

import argparse

from bench.cli.argtypes import non_negative_int, positive_float, positive_int

_positive_int, _non_negative_int, _positive_float = positive_int, non_negative_int, positive_float


def _sbatch_param(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    key = key.strip().lstrip("-")
    if not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE (an sbatch long option without --)")
    return key, value.strip() if sep else ""


def _resource_arguments(p: argparse.ArgumentParser) -> None:
    """What one run of a matrix is given: ranks, nodes, CPUs, memory, time, requeues."""
    g = p.add_argument_group("resources (a run at scale S gets W = S/A ranks, one per GPU)")
    g.add_argument(
        "--gpus-per-node",
        type=_non_negative_int,
        default=None,
        help="GPUs per node (slurm default 0: CPU jobs, one rank per node; local default: visible CUDA devices)",
    )
    g.add_argument("--max-nodes", type=_positive_int, default=1, help="most nodes one run may span (default 1)")
    g.add_argument("--cpus-per-task", type=_positive_int, default=None, help="default: the task's data workers + 1")
    g.add_argument(
        "--mem-per-task-gb", type=_positive_float, default=None, help="memory per rank (default: the cluster's)"
    )
    g.add_argument("--time", type=_positive_int, default=None, help="time limit per job in minutes (slurm default 240)")
    g.add_argument(
        "--max-requeues",
        type=_non_negative_int,
        default=20,
        help="times a job may hit its time limit and be requeued from its checkpoint (default 20)",
    )
    g.add_argument(
        "--join-timeout",
        type=_positive_float,
        default=10.0,
        metavar="MIN",
        help="minutes the ranks of a multi-rank job wait for each other to start before it fails, naming the "
        "missing ones (default 10, as torchrun; the collective timeout is separate)",
    )
    g.add_argument(
        "--array-parallelism", type=_positive_int, default=None, help="runs of one array at a time (local: at once)"
    )


def _slurm_arguments(p: argparse.ArgumentParser) -> None:
    """Where on a SLURM cluster: partition, account, QOS, features, any sbatch option, setup lines."""
    s = p.add_argument_group("slurm")
    s.add_argument("--partition", default=None)
    s.add_argument("--account", default=None)
    s.add_argument("--qos", default=None)
    s.add_argument("--constraint", default=None, help="node features, as sbatch --constraint")
    s.add_argument(
        "--sbatch",
        action="append",
        type=_sbatch_param,
        default=[],
        metavar="KEY=VALUE",
        help="any other sbatch option, e.g. --sbatch exclude=node7 (repeatable)",
    )
    s.add_argument(
        "--setup", action="append", default=[], metavar="LINE", help="a shell line run before each job (repeatable)"
    )


def add_submit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--executor",
        default="local",
        choices=("local", "slurm", "debug"),
        help="local: jobs on this machine (default); slurm: a SLURM cluster; debug: in this process, one by one",
    )
    p.add_argument("--out", default="runs", help="results folder (default: runs)")
    _resource_arguments(p)
    _slurm_arguments(p)
    p.add_argument(
        "--cpu-only",
        action="store_true",
        help="slurm: run a paper-preset matrix on CPU jobs on purpose (otherwise --gpus-per-node is required)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the job arrays it would submit, submit nothing")
    p.add_argument("--wait", action="store_true", help="slurm: wait until every submitted job has ended")
    r = p.add_argument_group("rehearsal (slurm/rehearse.py)")
    r.add_argument(
        "--rehearse",
        action="store_true",
        help="run each distinct configuration a few iterations, one sliced evaluation, a SIGTERM and a resume; "
        "print s/iteration, memory, host syncs, FLOPs (scratch folders under OUT/rehearsal)",
    )
    r.add_argument("--iterations", type=_positive_int, default=4, help="iterations per configuration (default 4)")
    r.add_argument("--eval-batches", type=_positive_int, default=2, help="evaluation batches of the slice (default 2)")
    r.add_argument(
        "--write-throughput", default=None, metavar="CSV", help="the S = 1 rows' examples/s into plan's table"
    )
