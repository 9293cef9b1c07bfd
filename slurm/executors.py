"""One place that turns a run plus the user's options into a submitit executor (docs/design.md §6).

A run at scale S (the largest S of an elastic schedule included) gets W data-parallel ranks, one per GPU
(one per node on CPU-only jobs), with W ≤ GPUs per node × max nodes and W dividing every S the run uses,
so each rank accumulates A = S / W micro-batches. Runs of the same resource shape share a job array.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import submitit

from bench.core import safefs
from bench.core.algo.schedules import scale_steps
from bench.core.errors import UserError
from bench.core.files import SPEC, read_json_object
from bench.core.runspec import RunSpec
from bench.experiments.concurrency import default_slots
from bench.run.spec import run_name

from .procgroup import DEFAULT_JOIN_TIMEOUT_MIN, user_port

SLURM_DEFAULT_TIME_MIN = 240
# Local jobs have no scheduler limit; submitit's local controller still needs one (it signals at the end).
LOCAL_TIME_MIN = 60 * 24 * 30
# Seconds between submitit's USR2 and the time limit: room for the engine to finish an iteration and save.
SIGNAL_DELAY_S = 120
MAX_ARRAY = 1000  # SLURM's default MaxArraySize is 1001


@dataclass(frozen=True)
class SubmitOptions:
    """`adascale-bench submit`'s options, typed (the CLI fills them from its flags)."""

    matrix: str
    out: str = "runs"
    executor: str = "local"  # local | slurm | debug: which submitit executor runs the jobs
    gpus_per_node: int | None = None
    max_nodes: int = 1
    cpus_per_task: int | None = None
    mem_per_task_gb: float | None = None
    time: int | None = None
    max_requeues: int = 20
    join_timeout: float = DEFAULT_JOIN_TIMEOUT_MIN  # minutes the ranks of a job wait for each other to start
    array_parallelism: int | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    sbatch: list[tuple[str, str]] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)
    cpu_only: bool = False
    dry_run: bool = False
    wait: bool = False
    rehearse: bool = False  # slurm/rehearse.py: each distinct configuration for a few iterations
    iterations: int = 4
    eval_batches: int = 2
    write_throughput: str | None = None
    data_root: list[str] = field(default_factory=list)  # TASK=PATH over the matrix's data_roots


@dataclass(frozen=True)
class Resources:
    """What the user lets one job ask for, and where."""

    executor: str = "local"
    gpus_per_node: int = 0
    max_nodes: int = 1
    cpus_per_task: int | None = None
    mem_per_task_gb: float | None = None
    time_min: int | None = None
    max_requeues: int = 20
    join_timeout_min: float = DEFAULT_JOIN_TIMEOUT_MIN
    master_port: int | None = None  # the MASTER_PORT exported when submitting: every job's group uses it
    array_parallelism: int | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    sbatch: dict[str, str] = field(default_factory=dict)
    setup: tuple[str, ...] = ()

    @classmethod
    def from_options(cls, args: SubmitOptions) -> Resources:
        executor = args.executor
        gpus = args.gpus_per_node
        if gpus is None:
            gpus = _visible_cuda_devices() if executor == "local" else 0
        if executor != "slurm" and args.max_nodes > 1:
            raise UserError(f"--max-nodes {args.max_nodes}: the {executor} executor runs on this machine only")
        return cls(
            executor=executor,
            gpus_per_node=gpus if executor != "debug" else 0,
            max_nodes=args.max_nodes,
            cpus_per_task=args.cpus_per_task,
            mem_per_task_gb=args.mem_per_task_gb,
            time_min=args.time,
            max_requeues=args.max_requeues,
            join_timeout_min=float(args.join_timeout),
            master_port=user_port(os.environ.get("MASTER_PORT")),
            array_parallelism=args.array_parallelism,
            partition=args.partition,
            account=args.account,
            qos=args.qos,
            constraint=args.constraint,
            sbatch=dict(args.sbatch or []),
            setup=tuple(args.setup or ()),
        )

    @property
    def ranks_per_node(self) -> int:
        """One rank per GPU; CPU-only jobs run one rank per node."""
        return max(1, self.gpus_per_node)

    @property
    def max_ranks(self) -> int:
        return 1 if self.executor == "debug" else self.ranks_per_node * self.max_nodes


def _visible_cuda_devices() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@dataclass(frozen=True, order=True)
class Shape:
    """The allocation of one job: W ranks as nodes × tasks per node, a GPU per task when there are GPUs."""

    ranks: int
    nodes: int
    tasks_per_node: int
    gpus_per_node: int
    cpus_per_task: int

    def describe(self) -> str:
        gpus = f"{self.gpus_per_node} GPU{'s' if self.gpus_per_node != 1 else ''}/node" if self.gpus_per_node else "CPU"
        return (
            f"W={self.ranks} ({self.nodes} node{'s' if self.nodes > 1 else ''} × {self.tasks_per_node} "
            f"task{'s' if self.tasks_per_node > 1 else ''}, {gpus}, {self.cpus_per_task} CPU/task)"
        )


def run_scales(spec: RunSpec) -> list[int]:
    """Every scale S a run uses: one, or each step of its elastic schedule."""
    return sorted({s for _, s in scale_steps(spec.scale, spec.elastic)})


def fits(ranks: int, res: Resources) -> bool:
    """W ranks fit the user's bound, and fill whole nodes when they span several."""
    if ranks < 1 or ranks > res.max_ranks:
        return False
    return ranks <= res.ranks_per_node or ranks % res.ranks_per_node == 0


def feasible(ranks: int, scales: list[int], res: Resources) -> bool:
    """W ranks fit, and divide every S the run uses (each rank accumulates the same A = S / W)."""
    return fits(ranks, res) and not any(s % ranks for s in scales)


def choose_ranks(scales: list[int], res: Resources, cap: int | None = None) -> int:
    """The most ranks the run can use (fewer micro-batches accumulated per rank means a faster run), at
    most `cap` (the task card's max_ranks for the run's preset)."""
    most = min(res.max_ranks, cap) if cap else res.max_ranks
    return next(w for w in range(most, 0, -1) if feasible(w, scales, res))


def named_cap(spec: RunSpec) -> bool:
    """Whether the task card names the run's preset in its max_ranks (a number, or None: uncapped on purpose)."""
    from tasks.presets import card_of_run

    try:
        return spec.preset in card_of_run(spec.task, spec.user_task).max_ranks
    except (ImportError, KeyError, UserError):
        return False


def rank_cap(spec: RunSpec) -> int | None:
    """The task card's cap on the ranks of one run of this preset (tasks/presets: `max_ranks`)."""
    from tasks.presets import card_of_run

    try:
        return card_of_run(spec.task, spec.user_task).max_ranks.get(spec.preset)
    except (ImportError, KeyError, UserError):
        return None


def shape_for(spec: RunSpec, ranks: int, res: Resources) -> Shape:
    per_node = min(ranks, res.ranks_per_node)
    nodes = ranks // per_node
    cpus = res.cpus_per_task or int(spec.num_workers or 0) + 1  # data workers + the training process
    return Shape(ranks, nodes, per_node, per_node if res.gpus_per_node else 0, cpus)


def accumulation(spec: RunSpec, ranks: int) -> dict[int, int]:
    """A for each scale of the run: S / W, or the spec's fixed A (then W follows S instead)."""
    fixed = spec.accumulation
    return {s: int(fixed) if fixed else s // ranks for s in run_scales(spec)}


def require_slurm() -> None:
    missing = [c for c in ("sbatch", "srun", "sacct") if shutil.which(c) is None]
    if missing:
        raise UserError(
            f"--executor slurm: no SLURM on this machine ({', '.join(missing)} not found on PATH); "
            "run on a cluster's login node, start a local one with slurm/local/start.sh, or use --executor local"
        )


def make_executor(
    res: Resources, shape: Shape, folder: Path, name: str, after: list[str] | None = None
) -> submitit.Executor:
    """A submitit executor for jobs of one shape; `after` are job ids that must end before these start.
    submitit writes its pickles and logs into `folder` by path itself, so the folder is made (or checked)
    through bench.core.safefs first: no link on the way or inside, this user's, private (a link planted at
    OUT/.submitit is refused in one line)."""
    safefs.private_dir(folder)
    kind = res.executor
    if kind == "debug":
        return submitit.AutoExecutor(folder=folder, cluster="debug")
    if kind == "local":
        ex = submitit.AutoExecutor(folder=folder, cluster="local", local_max_num_timeout=res.max_requeues)
        ex.update_parameters(
            name=name,
            timeout_min=res.time_min or LOCAL_TIME_MIN,
            nodes=1,
            tasks_per_node=shape.tasks_per_node,
            gpus_per_node=shape.gpus_per_node,
        )
        return ex
    if kind != "slurm":
        raise UserError(f"unknown executor {kind!r}; expected local, slurm or debug")
    extra: dict[str, Any] = {"requeue": True, **res.sbatch}
    if after:
        deps = "afterany:" + ":".join(after)
        extra["dependency"] = f"{extra['dependency']},{deps}" if extra.get("dependency") else deps
    ex = submitit.AutoExecutor(folder=folder, cluster="slurm", slurm_max_num_timeout=res.max_requeues)
    params: dict[str, Any] = dict(
        name=name,
        timeout_min=res.time_min or SLURM_DEFAULT_TIME_MIN,
        nodes=shape.nodes,
        tasks_per_node=shape.tasks_per_node,
        cpus_per_task=shape.cpus_per_task,
        gpus_per_node=shape.gpus_per_node or None,
        mem_gb=res.mem_per_task_gb * shape.tasks_per_node if res.mem_per_task_gb else None,
        slurm_partition=res.partition,
        slurm_account=res.account,
        slurm_qos=res.qos,
        slurm_constraint=res.constraint,
        slurm_signal_delay_s=signal_delay_s(res.time_min or SLURM_DEFAULT_TIME_MIN),
        # a task that ends badly (a crash, a kill, a group that did not start) ends the step at once:
        # the other ranks would otherwise wait for it until the collective timeout
        slurm_srun_args=["--kill-on-bad-exit=1"],
        slurm_additional_parameters=extra,
        slurm_setup=list(res.setup) or None,
    )
    if res.array_parallelism:
        params["slurm_array_parallelism"] = res.array_parallelism
    ex.update_parameters(**{k: v for k, v in params.items() if v is not None})
    return ex


def sbatch_options(res: Resources, shape: Shape, name: str) -> list[str]:
    """The request of make_executor's SLURM jobs as sbatch's own options (for `sbatch --test-only`, which
    checks a request without submitting it; submitit has no public way to hand out its script)."""
    opts = {
        "job-name": name,
        "time": res.time_min or SLURM_DEFAULT_TIME_MIN,
        "nodes": shape.nodes,
        "ntasks-per-node": shape.tasks_per_node,
        "cpus-per-task": shape.cpus_per_task,
        "gpus-per-node": shape.gpus_per_node or None,
        "mem": f"{int(res.mem_per_task_gb * shape.tasks_per_node * 1024)}M" if res.mem_per_task_gb else None,
        "partition": res.partition,
        "account": res.account,
        "qos": res.qos,
        "constraint": res.constraint,
        **{k.replace("_", "-"): v for k, v in res.sbatch.items()},
    }
    return [f"--{k}={v}" for k, v in opts.items() if v is not None]


def signal_delay_s(time_min: int) -> int:
    """USR2 comes this long before the time limit; never in the first 80 % of a short job."""
    return int(min(SIGNAL_DELAY_S, max(10, time_min * 60 // 5)))


def local_parallelism(res: Resources) -> int:
    """Ranks busy at once on this machine: the user's choice (--array-parallelism; give 1 for paper presets,
    whose runs use every core), else one per usable core as the smoke's pool (tiny runs use one thread)."""
    return res.array_parallelism or default_slots()


def ranks_to_start(spec: RunSpec, run_dir: Path, res: Resources) -> int:
    """W for the run's next job. Usually the most ranks the resources and the task card's cap allow (an
    incomplete run keeps the W it started with); a spec that fixes the accumulation A needs W = S / A at
    its checkpoint's τ."""
    if spec.accumulation:
        from bench.run.launch import initial_ranks

        ranks = initial_ranks(spec.replace(ranks=1), run_dir)
        if not fits(ranks, res):
            raise UserError(
                f"{run_name(spec)} needs {ranks} ranks (accumulation {spec.accumulation}), more than "
                f"--gpus-per-node × --max-nodes allow ({res.max_ranks}) as whole nodes"
            )
        return ranks
    scales = run_scales(spec)
    before = read_json_object(run_dir / SPEC)
    if before and isinstance(before.get("ranks"), int) and feasible(before["ranks"], scales, res):
        return before["ranks"]
    return choose_ranks(scales, res, rank_cap(spec))


def sbatch_reason(error: BaseException | str) -> str:
    """sbatch's error lines, without their prefixes, on one line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    lines = [line.removeprefix("sbatch: error:").removeprefix("allocation failure:").strip() for line in lines]
    return "; ".join(dict.fromkeys(lines)) or (type(error).__name__ if isinstance(error, BaseException) else "")
