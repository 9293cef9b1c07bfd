"""The submitit job that trains one run, and survives preemption and time limits.

Stopping a run exactly is the engine's business: bench.core.engine.loop.request_stop() raises a flag that the
engine checks before each micro-batch (W = 1) or after each iteration (W > 1), and then it writes checkpoint.pt
and raises Interrupted. A signal
handler cannot wait for the end of an iteration while it runs on the thread that is training, so the
run trains on a worker thread and the main thread only waits. Then:

- USR2 (submitit's preemption and time-limit signal, rank 0): submitit calls `checkpoint()`, which asks
  the engine to stop, waits for checkpoint.pt, and hands submitit a fresh job to requeue. The requeued
  job starts the engine on the same folder, and the engine resumes from the checkpoint.
- SIGTERM (scancel, `scontrol requeue`, a preemption without USR2): submitit ignores it; here it also
  asks the engine to stop, so that the run checkpoints before SLURM's SIGKILL, and the job then waits for
  that end instead of reporting a failure that would race a requeue.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import submitit
from pydantic import ValidationError

from bench.core.engine.signals import Interrupted, RanksChange, clear_stop, request_stop
from bench.core.errors import UserError
from bench.core.files import SUMMARY, open_regular, read_json, read_json_object, write_json
from bench.core.locks import RunFolderBusy
from bench.core.runspec import RunSpec
from bench.experiments import matrix as matrices
from bench.run.runner import existing_summary, run_dir_of, run_spec
from bench.run.spec import run_name
from bench.run.summary import record_failure

from . import procgroup
from .executors import Resources, fits, make_executor, shape_for
from .records import ATTEMPTS, JOB, SUBMITIT_DIR, Planned, job_name, quiet_submitit, record_job  # noqa: F401 (JOB: re-exported)

# What a one-task job removes: the variables that would make torch.distributed wait for peers.
ONE_PROCESS_CLEARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
TORCHRUN_PREFIXES = ("TORCHELASTIC_", "GROUP_", "ROLE_")
CHECKPOINT_WAIT_S = 100.0  # < executors.SIGNAL_DELAY_S: submitit's USR2 comes that long before the limit
STOPPED_WAIT_S = 120.0  # after a SIGTERM stop: how long to wait for SLURM's SIGKILL or submitit's USR2
LOST_RANK_WAIT_S = 5.0  # how long rank 0 looks for srun's line naming the rank that ended first


def dist_environment(env: Any) -> dict[str, str]:
    """torch.distributed's variables for this task of a multi-task job (empty for a single task), as torchrun
    sets them: LOCAL_WORLD_SIZE too (ranks on this node: what per-node code such as NCCL's topology or a
    data loader's share of the CPUs reads). MASTER_PORT is the one the group starts on (start_group)."""
    if env.num_tasks <= 1:
        return {}
    nodes = max(1, int(getattr(env, "num_nodes", 1) or 1))
    return {
        "RANK": str(env.global_rank),
        "WORLD_SIZE": str(env.num_tasks),
        "LOCAL_RANK": str(env.local_rank),
        "LOCAL_WORLD_SIZE": str(env.num_tasks // nodes),
        "MASTER_ADDR": env.hostnames[0],
    }


def member_of(env: Any) -> procgroup.Member:
    nodes = max(1, int(getattr(env, "num_nodes", 1) or 1))
    names = list(env.hostnames)
    node = os.environ.get("SLURMD_NODENAME") or (names[env.node] if env.node < len(names) else socket.gethostname())
    return procgroup.Member(
        rank=env.global_rank,
        world=env.num_tasks,
        node=node,
        master=names[0],
        job_id=str(env.raw_job_id),
        attempt=int(os.environ.get("SLURM_RESTART_COUNT") or 0),
        tasks_per_node=env.num_tasks // nodes,
    )


def start_group(
    env: Any,
    spec: RunSpec,
    folder: Path,
    res: Resources | None,
    on_failure: Callable[[procgroup.GroupFailed], None] = lambda e: None,
) -> Any:
    """This task's bench.core.engine.distributed.Dist. One task: no group, and no variable inherited from
    the process that submitted the job may make it wait for peers. Several: the ranks meet first
    (slurm/procgroup.py: a free port, the join timeout, a named cause when it fails), then the group
    starts on the store they share. Raises procgroup.GroupFailed."""
    from bench.core.engine.distributed import from_env, timeout_s

    device = spec.device
    if env.num_tasks <= 1:
        for key in [k for k in os.environ if k in ONE_PROCESS_CLEARS or k.startswith(TORCHRUN_PREFIXES)]:
            del os.environ[key]
        return from_env(device, spec.collective_timeout_s)
    os.environ.update(dist_environment(env))
    member = member_of(env)
    # (getattr: a job pickled before these resources existed, still queued after an upgrade)
    join_min = getattr(res, "join_timeout_min", None) or procgroup.DEFAULT_JOIN_TIMEOUT_MIN
    collective = timeout_s(spec.collective_timeout_s)
    port = getattr(res, "master_port", None)
    store = procgroup.join(member, folder, join_min * 60, collective, port, list(env.hostnames), on_failure)
    os.environ["MASTER_PORT"] = str(store.port)
    try:
        return from_env(device, spec.collective_timeout_s, store=store)
    except Exception as e:
        raise procgroup.GroupFailed(member.rank, member.node, f"torch.distributed did not start: {e}") from None


class RunFailed(RuntimeError):
    """The run failed; its summary.json and error.log say why. Raised so that the scheduler sees a failure."""


class RunJob(submitit.helpers.Checkpointable):
    """Train one resolved spec into its folder under `out`; `needs` are run names (relative to `out`) that
    must have ended first (LSW+ needs its AdaScale run). `resources` lets a SLURM job submit the run's
    continuation when its S schedule needs another number of ranks (spec `accumulation`)."""

    def __init__(
        self,
        spec: RunSpec,
        out: str | Path,
        needs: list[str] | None = None,
        raise_on_failure: bool = True,
        resources: Any = None,
    ) -> None:
        self.spec = spec
        self.out = str(out)
        self.needs = list(needs or [])
        self.raise_on_failure = raise_on_failure
        self.resources = resources
        self._worker: threading.Thread | None = None
        self._outcome: tuple[str, Any, str] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # the thread and the outcome belong to one process; a requeued job starts clean. The spec travels
        # as its JSON document, typed again on arrival (a job queued before an upgrade holds a dict too)
        state = {k: v for k, v in self.__dict__.items() if k not in ("_worker", "_outcome", "_unreadable")}
        return state | {"spec": self.spec.to_json()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A job queued before an upgrade may hold a spec this version no longer validates: it is kept as
        one line naming the job's pickle, which `__call__` reports (no ValidationError traceback in the log)."""
        self.__dict__.update(state, _worker=None, _outcome=None, _unreadable=None)
        try:
            self.spec = RunSpec.model_validate(state.get("spec"))
        except ValidationError as e:
            first = e.errors()[0] if e.errors() else {}
            field = ".".join(str(part) for part in first.get("loc", ())) or "spec"
            why = " ".join(str(first.get("msg", e)).split())[:200]
            self._unreadable = (
                f"{_queued_pickle()}: a job queued for {state.get('out')} by another version of adascale-bench; "
                f"its spec no longer validates ({field}: {why}); not run, submit it again"
            )

    @property
    def run_dir(self) -> Path:
        return run_dir_of(Path(self.out), self.spec)

    def fresh(self, **changes: Any) -> RunJob:
        """The same job, without this process's state (what submitit requeues)."""
        spec = self.spec.replace(**changes)
        return RunJob(spec, self.out, self.needs, self.raise_on_failure, self.resources)

    # -- submitit's side ---------------------------------------------------------------------------------
    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        """Called by submitit on USR2 (preemption or time limit): let the engine save, then requeue."""
        request_stop(signal.SIGUSR2)
        worker = self._worker
        if worker is not None:
            worker.join(CHECKPOINT_WAIT_S)
        return submitit.helpers.DelayedSubmission(self.fresh())

    def __call__(self) -> dict[str, Any]:
        if getattr(self, "_unreadable", None):
            return self._not_run(self._unreadable)
        clear_stop()
        env = submitit.JobEnvironment()
        out, run_dir = Path(self.out), self.run_dir
        main = env.global_rank == 0
        if main:
            record_attempt(run_dir, env.job_id, env.cluster, env.num_tasks)
        done = existing_summary(run_dir)
        if done is not None:
            return done
        unmet = unmet_need(self.spec, out, self.needs)
        if unmet:
            if main:
                record_failure(self.spec, run_dir, unmet)
            return self._failed(unmet)
        from bench.core.engine.distributed import shutdown

        folder = Path(os.environ.get("SUBMITIT_FOLDER") or out)
        record = functools.partial(self._record_start_failure, env)
        try:
            dist = start_group(env, self.spec, folder, self.resources, on_failure=record)
        except procgroup.GroupFailed as e:
            if not e.relayed:  # (rank 0 records its own failure before the others learn of it)
                record(e)
            return self._failed(f"the process group did not start: {e}")
        threaded = env.cluster != "debug" and threading.current_thread() is threading.main_thread()
        try:
            if threaded:
                self._install_handlers(local=env.cluster == "local")
                self._worker = threading.Thread(target=self._train, args=(out, dist), name="train", daemon=True)
                self._worker.start()
                while self._worker.is_alive():
                    self._worker.join(1.0)  # wakes for signals: their handlers run on this thread
            else:
                self._train(out, dist)
        finally:
            if not self._worker or not self._worker.is_alive():
                shutdown()
        assert self._outcome is not None
        kind, value, _ = self._outcome
        if kind == "done":
            return value
        if isinstance(value, RanksChange):
            return self._continue(env, value)
        if isinstance(value, Interrupted):
            if threaded and env.cluster == "slurm":
                self._await_end()
            raise value
        if isinstance(value, UserError):  # found by the runner before training: not recorded by it
            if main and not isinstance(value, RunFolderBusy):  # the folder is another writer's
                record_failure(self.spec, run_dir, str(value))
            return self._failed(str(value))
        # a crash in training: bench.run.runner has written the failed summary and error.log
        if main and dist.world > 1 and env.cluster == "slurm" and lost_a_peer(value):
            self._name_lost_rank(env, value, self._outcome[2])
        return self._failed(f"{type(value).__name__}: {value}", value)

    def _continue(self, env: Any, change: RanksChange) -> dict[str, Any]:
        """The S schedule needs `change.ranks` ranks now (the checkpoint is saved). On SLURM, rank 0 submits
        the continuation with that allocation and records its job; elsewhere the submitter does it."""
        result = {"status": "ranks-change", "ranks": change.ranks, "message": str(change)}
        if env.cluster != "slurm" or env.global_rank != 0 or self.resources is None:
            return result
        try:
            result["job_id"] = submit_continuation(self, change.ranks)
        except UserError as e:
            record_failure(self.spec, self.run_dir, f"{change}; but {e}")
            return self._failed(str(e))
        return result

    # -- helpers -------------------------------------------------------------------------------------------
    def _not_run(self, message: str) -> dict[str, Any]:
        """A job that cannot run (its spec unreadable): one line, and the job fails without a traceback
        (submitit would log an Exception's and re-raise it; SystemExit passes it by)."""
        print(f"adascale-bench: error: {message}", file=sys.stderr, flush=True)
        if self.raise_on_failure:
            raise SystemExit(2)
        return {"status": "failed", "error": message}

    def _train(self, out: Path, dist: Any) -> None:
        try:
            self._outcome = ("done", run_spec(self.spec, out, progress=False, dist=dist), "")
        except BaseException as e:  # handed to the main thread, which decides
            self._outcome = ("error", e, traceback.format_exc())

    def _install_handlers(self, local: bool = False) -> None:
        """SIGTERM and submitit's USR2 also raise the engine's stop flag, on every rank (submitit checkpoints
        on rank 0 only, but the engine makes every rank stop in the same iteration). Local jobs also stop
        cleanly on Ctrl-C (SIGINT reaches them from the terminal)."""
        preempt = getattr(signal, "SIG" + submitit.JobEnvironment.USR_SIG)
        for sig in {signal.SIGTERM, preempt} | ({signal.SIGINT} if local else set()):
            previous = signal.getsignal(sig)

            def handler(signum: int, frame: Any, previous: Any = previous) -> None:
                request_stop(signum)
                if callable(previous) and previous is not signal.default_int_handler:  # no KeyboardInterrupt
                    previous(signum, frame)

            signal.signal(sig, handler)

    def _await_end(self) -> None:
        """Stopped by SIGTERM with the checkpoint saved: SLURM kills or requeues the job next (or submitit's
        USR2 arrives and requeues it); failing now would race that. Give up after STOPPED_WAIT_S."""
        deadline = time.monotonic() + STOPPED_WAIT_S
        while time.monotonic() < deadline:
            time.sleep(0.5)

    def _record_start_failure(self, env: Any, error: procgroup.GroupFailed) -> None:
        """The cause of a group that did not start, in the run folder (summary.json and error.log): the
        first rank to fail in this attempt of the job writes it; the others' failures follow from it."""
        attempt = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        before = read_json_object(self.run_dir / SUMMARY) or {}
        if before.get("status") == "failed" and (before.get("job_id"), before.get("attempt")) == (env.job_id, attempt):
            return
        with contextlib.suppress(OSError):
            record_failure(
                self.spec,
                self.run_dir,
                f"the process group did not start: {error}",
                job_id=env.job_id,
                attempt=attempt,
                rank=error.rank,
                node=error.node,
            )

    def _name_lost_rank(self, env: Any, error: BaseException, details: str) -> None:
        """Rank 0 lost a peer in a collective: srun says in the job's log which rank ended first and on
        which node (`--kill-on-bad-exit` then ends the others); record that with this rank's error."""
        deadline = time.monotonic() + LOST_RANK_WAIT_S
        while time.monotonic() < deadline:
            said = procgroup.describe_bad_task(_tail(env.paths.stderr))
            if said and not said.startswith("rank 0 "):
                with contextlib.suppress(OSError):
                    message = f"{said}; rank 0 lost it: {type(error).__name__}: {error}"
                    record_failure(self.spec, self.run_dir, message, details, job_id=env.job_id)
                return
            time.sleep(0.2)

    def _failed(self, message: str, cause: BaseException | None = None) -> dict[str, Any]:
        if self.raise_on_failure:
            raise RunFailed(message) from cause
        path = self.run_dir / SUMMARY
        return read_json(path) if path.exists() else {"status": "failed", "error": message}


def _queued_pickle() -> str:
    """The pickle submitit is loading this job from (on a node), else a description of the job."""
    try:
        return str(submitit.JobEnvironment().paths.submitted_pickle)
    except Exception:  # not inside a submitit job (no job environment): nothing more to name
        return "a queued RunJob"


def unmet_need(spec: RunSpec, out: Path, needs: list[str]) -> str | None:
    """Why the run cannot start yet (a run it needs ended without a readable summary), or None."""
    for need in needs:
        path = Path(out) / need / SUMMARY
        try:
            status = read_json(path).get("status") if path.exists() else None
        except (OSError, ValueError):
            status = "unreadable"
        if status is None:  # its job ended (afterany) without a summary: cancelled, killed, out of time
            return f"{spec.method} needs the run {need}, which did not finish (no summary.json)"
        if status == "unreadable":
            return f"{spec.method} needs the run {need}, whose summary.json is unreadable"
    return None


def record_attempt(run_dir: Path, job_id: str, cluster: str, tasks: int) -> None:
    """attempts.json: one entry per start of a job on the run (a requeued job starts again)."""
    path = run_dir / ATTEMPTS
    try:
        attempts = read_json(path) if path.exists() else []
    except (OSError, ValueError):
        attempts = []
    attempts = attempts if isinstance(attempts, list) else []
    attempts.append(
        {
            "job_id": job_id,
            "cluster": cluster,
            "host": socket.gethostname(),
            "tasks": tasks,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
    )
    write_json(path, attempts)


def lost_a_peer(error: BaseException) -> bool:
    """Whether a collective failed because another rank went away (gloo, NCCL or the store)."""
    import torch

    if isinstance(error, torch.distributed.DistError):
        return True
    return any(k in str(error) for k in ("by peer", "Broken pipe", "gloo", "NCCL", "Connection refused"))


def _tail(path: Any, size: int = 65536) -> str:
    try:
        with open_regular(Path(path), "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def submit_continuation(job: RunJob, ranks: int) -> str:
    """From inside a SLURM job whose run now needs `ranks` ranks: submit the same run with that allocation
    (it resumes from the checkpoint just saved) and record the new job in job.json."""
    res: Resources = job.resources
    if not fits(ranks, res):
        raise UserError(f"{ranks} ranks do not fit --gpus-per-node {res.gpus_per_node} × --max-nodes {res.max_nodes}")
    spec = job.spec.replace(ranks=ranks)
    request = matrices.RunRequest(spec.task, spec.method, spec.scale, spec.seed)
    p = Planned(request, spec, run_name(spec), shape_for(spec, ranks, res), job.needs)
    ex = make_executor(res, p.shape, Path(job.out) / SUBMITIT_DIR, name=job_name([p], ranks))
    # sbatch exports this process's environment: the next job must not inherit this job's allocation
    # (SLURM_*) nor its place in this job's group (RANK, WORLD_SIZE, MASTER_PORT, ...)
    with procgroup.clean_environment(), quiet_submitit():
        new = ex.submit(job.fresh(ranks=ranks))
    record_job(Path(job.out), p, new, res)
    return str(new.job_id)
