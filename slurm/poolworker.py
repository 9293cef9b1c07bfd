"""One run of `submit --executor local`, in a worker process of the local pool (slurm/backends.py).

The same contract as the SLURM job (slurm/job.py RunJob): the runs it needs must have ended with a
summary, each start is appended to attempts.json, a failure is recorded in the run folder, and a run whose
S schedule asks for another number of ranks comes back as {"status": "ranks-change", "ranks": W} for the
driver to start again. One rank trains in the worker itself; W > 1 ranks start through torch's elastic
launcher (bench.run.launch), which names the rank that failed first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core.engine.signals import Interrupted, RanksChange, clear_stop
from bench.core.errors import UserError
from bench.core.files import SUMMARY, read_json_object
from bench.core.locks import RunFolderBusy
from bench.core.runspec import RunSpec
from bench.run.runner import existing_summary, run_dir_of, run_spec
from bench.run.summary import record_failure

from .job import record_attempt, unmet_need


def run_here(spec: RunSpec, out: str, needs: list[str], job_id: str) -> dict[str, Any]:
    """Train `spec` under `out` here; rank 0's result (the summary, or a ranks change). Raises Interrupted
    when stopped by a signal (the run has checkpointed)."""
    clear_stop()  # a worker trains run after run: a stop asked of an earlier run is not this one's
    root, run_dir = Path(out), run_dir_of(Path(out), spec)
    done = existing_summary(run_dir)
    if done is not None:
        return done
    ranks = spec.ranks
    record_attempt(run_dir, job_id, "local", ranks)
    unmet = unmet_need(spec, root, needs)
    if unmet:
        return _failed(spec, run_dir, unmet)
    try:
        if ranks == 1:
            return run_spec(spec, root, progress=False)
        return _ranks(spec, root, ranks)
    except RanksChange as e:
        return {"status": "ranks-change", "ranks": e.ranks, "message": str(e)}
    except Interrupted:
        raise
    except RunFolderBusy as e:  # the folder is another writer's: nothing of ours to record there
        return {"status": "failed", "error": str(e)}
    except UserError as e:  # found before training: not recorded by the runner
        return _failed(spec, run_dir, str(e))
    except Exception as e:  # a crash in training: the runner has written the failed summary and error.log
        return _summary(run_dir) or {"status": "failed", "error": f"{type(e).__name__}: {e}"}


def _ranks(spec: RunSpec, out: Path, ranks: int) -> dict[str, Any]:
    from bench.run.launch import JobFailed, launch_ranks

    try:
        result = launch_ranks(spec.replace(ranks=ranks), out, ranks)
    except JobFailed as e:
        if e.interrupted:
            raise Interrupted(e.message) from None
        if e.user_error:
            raise UserError(e.message) from None
        run_dir = run_dir_of(out, spec)
        if existing_summary(run_dir) is None:  # rank 0 may itself be the rank that died
            record_failure(spec, run_dir, e.message, ranks=ranks)
        return {"status": "failed", "error": e.message}
    if "ranks" in result:
        raise RanksChange(int(result["ranks"]), str(result["message"]))
    return result["summary"]


def _summary(run_dir: Path) -> dict[str, Any] | None:
    return read_json_object(run_dir / SUMMARY)


def _failed(spec: RunSpec, run_dir: Path, message: str) -> dict[str, Any]:
    return record_failure(spec, run_dir, message)
