"""Local launcher for `run --ranks W`: W data-parallel processes on this machine (gloo on CPU, NCCL on GPUs).

The processes are started by torch's own elastic agent (torch.distributed.launcher.api.elastic_launch),
the machinery behind torchrun: a c10d rendezvous on 127.0.0.1 with a port the OS picks, RANK/WORLD_SIZE/
LOCAL_RANK in each worker's environment, and a monitor that stops every rank as soon as one fails. No
automatic restarts: a failed job fails, with a one-line message naming the rank, and the same command
resumes it from its last checkpoint.

Each worker runs bench.run.runner.run_spec with its bench.core.engine.distributed.Dist; only rank 0 writes run files.
When the spec fixes the accumulation A and the S schedule needs another number of ranks, the workers
checkpoint and return bench.core.engine.signals.RanksChange's W, and this launcher starts the run again on W ranks.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from bench.core.errors import UserError
from bench.core.files import CHECKPOINT
from bench.core.runspec import RunSpec

PROG = "adascale-bench"
_USER_ERROR = "UserError: "
_PEER_GRACE_S = 2.0
INTERRUPTED_EXIT = 3  # a worker stopped by SIGTERM/SIGUSR2/SIGINT after checkpointing (the CLI's code too)
_QUIET = ("torch.distributed.elastic", "torch.distributed.launcher", "torch.multiprocessing")


def _worker(spec: RunSpec, out: str, progress: bool) -> dict[str, Any]:
    """One rank (in a process of its own): train, and tell the launcher how it ended."""
    import multiprocessing

    from bench.core.engine.distributed import from_env, shutdown
    from bench.core.engine.signals import Interrupted, RanksChange, install_signal_handlers, request_stop
    from bench.run.runner import run_spec

    # Forked by the forkserver, this process inherits its start method; go back to the platform default,
    # as a torchrun worker has (DataLoader workers, tqdm's lock: no named semaphores to leak on a kill).
    multiprocessing.set_start_method(None, force=True)
    install_signal_handlers()
    signal.signal(signal.SIGINT, request_stop)  # Ctrl-C reaches every rank: checkpoint, then stop
    dist = from_env(spec.device, spec.collective_timeout_s)
    try:
        return {"summary": run_spec(spec, Path(out), progress=progress, dist=dist)}
    except RanksChange as e:
        return {"ranks": e.ranks, "message": str(e)}
    except Interrupted:
        # Exit rather than return: when the agent itself got the signal it no longer collects return
        # values, and a worker that returned would wait for that until killed.
        sys.exit(INTERRUPTED_EXIT)
    except Exception as e:
        if _lost_a_peer(e):
            time.sleep(_PEER_GRACE_S)  # let the agent see the rank that died first and report that one
        raise
    finally:
        shutdown()


def _lost_a_peer(error: Exception) -> bool:
    """Whether a collective failed because another rank went away (gloo, NCCL or the store)."""
    if isinstance(error, torch.distributed.DistError):
        return True
    text = str(error)
    return any(k in text for k in ("by peer", "Broken pipe", "gloo", "NCCL", "Connection refused"))


def checkpoint_tau(run_dir: Path) -> float:
    """τ of the run's checkpoint (0 without one), read with mmap so a large checkpoint costs little."""
    path = run_dir / CHECKPOINT
    if not path.exists():
        return 0.0
    from bench.core.engine.checkpoint import CheckpointRefused, safe_load

    try:
        return float(safe_load(path, "cpu", "checkpoint", mmap=True)["state"]["tau"])
    except CheckpointRefused:
        raise  # a file that is not plain data stops here, before any rank starts
    except Exception:  # the engine reports a damaged checkpoint with a one-line error of its own
        return 0.0


def initial_ranks(spec: RunSpec, run_dir: Path) -> int:
    """The ranks to start with: --ranks, or S / A at the checkpoint's τ when the spec fixes A."""
    from bench.core.algo.schedules import scale_schedule
    from bench.core.engine.distributed import ranks_for

    if spec.accumulation is None:
        return int(spec.ranks)
    scale = scale_schedule(spec.scale, spec.elastic, spec.T1)(checkpoint_tau(run_dir))
    return ranks_for(spec.accumulation, scale, int(spec.ranks))


@contextmanager
def _quiet_torch_logs():
    """torch's agent logs every failure as a multi-line traceback; the launcher prints one line instead
    (set LOGLEVEL, torchrun's variable, to see them)."""
    if os.environ.get("LOGLEVEL"):
        yield
        return
    loggers = [
        logging.getLogger(name)
        for name in list(logging.root.manager.loggerDict)
        if name.startswith(_QUIET) or name in _QUIET
    ] + [logging.getLogger(name) for name in _QUIET]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _preload(spec: RunSpec) -> None:
    """Workers fork from a forkserver that has imported torch, DDP's dependencies and the task once:
    W processes no longer import them side by side (seconds each), and a restart on a new W reuses it.
    The forkserver initialises no CUDA and starts no threads, so forking it is safe."""
    import multiprocessing

    from tasks import get_task

    task = type(get_task(spec.task)).__module__
    multiprocessing.set_forkserver_preload(["torch._dynamo", "bench.run.runner", task])


def _launch(spec: RunSpec, out: Path, world: int, progress: bool) -> dict[int, Any]:
    """One elastic_launch of `world` local workers; their return values by rank."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    from bench.core.engine.distributed import timeout_s

    timeout = timeout_s(spec.collective_timeout_s)
    _preload(spec)
    with tempfile.TemporaryDirectory(prefix="adascale-launch-") as logs, _quiet_torch_logs():
        config = LaunchConfig(
            min_nodes=1,
            max_nodes=1,
            nproc_per_node=world,
            run_id=f"adascale-{uuid.uuid4().hex[:12]}",
            rdzv_backend="c10d",
            rdzv_endpoint="127.0.0.1:0",  # the OS picks a free port
            rdzv_configs={"timeout": int(max(timeout, 30))},
            max_restarts=0,
            monitor_interval=0.1,
            start_method="forkserver",
            # the agent passes these on to every worker, which checkpoints at the end of its iteration
            signals_to_handle="SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR2",
            logs_specs=DefaultLogsSpecs(log_dir=logs),
        )
        try:
            return elastic_launch(config, _worker)(spec.replace(ranks=world), str(out), progress)
        except ChildFailedError as e:  # described here, while the workers' error files still exist
            raise JobFailed(*describe_failure(e)) from None


def launch_ranks(spec: RunSpec, out: Path, world: int, progress: bool = False) -> dict[str, Any]:
    """One start of `spec` on `world` local ranks, without restarting: rank 0's result, {"summary": ...}
    or {"ranks": W, "message": ...} when its S schedule asks for another W (the caller starts it again;
    `submit`'s local executor does, within its budget of busy ranks). Raises JobFailed."""
    return _launch(spec, Path(out), world, progress)[0]


class JobFailed(Exception):
    """A rank failed; `message` names it and says how, `user_error` when it was a UserError, and
    `interrupted` when it stopped on a signal after checkpointing."""

    def __init__(self, message: str, user_error: bool, interrupted: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.user_error = user_error
        self.interrupted = interrupted


def describe_failure(error: Exception) -> tuple[str, bool, bool]:
    """(one line naming the rank that failed first and how, whether it was a user error, whether it
    stopped on a signal after checkpointing)."""
    rank, failure = error.get_first_failure()  # type: ignore[attr-defined]
    if failure.exitcode == INTERRUPTED_EXIT:
        return f"rank {rank} stopped by a signal; checkpoint saved, run the same command to resume", False, True
    # only a worker's own exception leaves an error file; without one torch's message is boilerplate
    message = failure.message if failure.error_file and os.path.isfile(failure.error_file) else ""
    if isinstance(message, dict):
        message = message.get("message", "")
    message = " ".join(str(message or "").split())
    if message.startswith(_USER_ERROR):
        return message.removeprefix(_USER_ERROR), True, False
    if failure.signal_name() != "<N/A>":
        return f"rank {rank} (pid {failure.pid}) was killed by {failure.signal_name()}", False, False
    if message:
        return f"rank {rank} (pid {failure.pid}) failed: {message}", False, False
    return f"rank {rank} (pid {failure.pid}) exited with status {failure.exitcode}", False, False


def _record_failure(spec: RunSpec, run_dir: Path, message: str) -> None:
    """A `failed` summary with the root cause (rank 0 may itself be the rank that died), unless the run
    finished after all."""
    from bench.run.runner import existing_summary
    from bench.run.summary import record_failure

    if existing_summary(run_dir) is None:
        record_failure(spec, run_dir, message, ranks=spec.ranks)


def launch_local(spec: RunSpec, out: Path, progress: bool = True) -> int:
    """Train `spec` under `out` on local data-parallel processes, restarting on a new number of ranks
    whenever the S schedule asks for one. Returns 0 when the run has finished (completed or diverged),
    1 when a rank failed (a one-line message on stderr; the same call resumes from the last checkpoint).
    Raises UserError for a user mistake found by a rank, Interrupted when stopped by a signal."""
    from torch.distributed.elastic.multiprocessing.api import SignalException

    from bench.core.algo.schedules import scale_schedule
    from bench.core.engine.signals import Interrupted
    from bench.run.runner import existing_summary, run_dir_of
    from bench.run.summary import describe

    out = Path(out)
    run_dir = run_dir_of(out, spec)
    done = existing_summary(run_dir)
    if done is not None:
        print(describe(done, run_dir))
        return 0
    world = initial_ranks(spec, run_dir)
    devices = torch.cuda.device_count() if spec.device != "cpu" and torch.cuda.is_available() else 0
    for _ in range(
        len(scale_schedule(spec.scale, spec.elastic, spec.T1).steps) + 2
    ):  # at most one restart per change of S
        if devices and world > devices:
            raise UserError(f"{world} ranks asked for, but only {devices} CUDA devices are visible")
        try:
            results = _launch(spec, out, world, progress)
        except JobFailed as e:
            if e.user_error:
                raise UserError(e.message) from None
            if e.interrupted:
                raise Interrupted(e.message) from None
            _record_failure(spec.replace(ranks=world), run_dir, e.message)
            print(f"{PROG}: error: {e.message}; the same command resumes from the last checkpoint", file=sys.stderr)
            return 1
        except SignalException as e:
            raise Interrupted(
                f"stopped by {signal.Signals(e.sigval).name}; the ranks checkpoint at the end of their iteration, "
                "run the same command to resume"
            ) from None
        first = results[0]
        if "ranks" in first:
            print(f"{PROG}: {first['message'].split(';')[0]}: restarting on {first['ranks']} ranks", file=sys.stderr)
            world = first["ranks"]
            continue
        print(describe(first["summary"], run_dir))
        return 0
    raise RuntimeError(f"the number of ranks kept changing ({world} last); this is a bug")
