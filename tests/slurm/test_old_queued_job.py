"""A job queued before an upgrade whose spec this version no longer validates (issue 59.8): when submitit
loads its pickle on the node, the job fails in one line naming that pickle, not a pydantic ValidationError
traceback from `RunJob.__setstate__`. The pickle is written as submitit writes it, and loaded and run by
submitit's own job entry point (`python -m submitit.core._submit`) in a subprocess, as on a node."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from submitit.core.utils import DelayedSubmission

from bench.run.spec import resolve
from slurm.job import RunJob
from tasks import get_task

ROOT = Path(__file__).resolve().parents[2]


def _queued(folder: Path, out: Path, change: dict | None, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`folder/1_submitted.pkl`: a RunJob for a tiny logreg run, its spec's JSON document changed by `change`
    (a field an older version had), pickled by submitit's own DelayedSubmission."""
    spec = resolve(get_task("logreg"), "adascale", 2, 0, "tiny", data_root=None, overrides={"T1": 4})
    job = RunJob(spec, out)
    original = RunJob.__getstate__

    def old_state(self: RunJob) -> dict:
        state = original(self)
        return state | {"spec": {**state["spec"], **(change or {})}}

    monkeypatch.setattr(RunJob, "__getstate__", old_state)
    folder.mkdir(parents=True)
    DelayedSubmission(job).dump(folder / "1_submitted.pkl")
    monkeypatch.undo()
    return folder / "1_submitted.pkl"


def _run_on_node(folder: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SUBMITIT_EXECUTOR": "local",
        "SUBMITIT_LOCAL_JOB_ID": "1",
        "SUBMITIT_LOCAL_NTASKS": "1",
        "SUBMITIT_LOCAL_JOB_NUM_NODES": "1",
        "SUBMITIT_LOCAL_NODEID": "0",
        "SUBMITIT_LOCAL_GLOBALID": "0",
        "SUBMITIT_LOCAL_LOCALID": "0",
    }
    cmd = [sys.executable, "-m", "submitit.core._submit", str(folder)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=folder.parent)


def test_a_queued_job_whose_spec_no_longer_validates_fails_in_one_line(tmp_path: Path, monkeypatch) -> None:
    folder, out = tmp_path / ".submitit", tmp_path / "runs"
    pickle = _queued(folder, out, {"renamed_in_an_older_version": 1}, monkeypatch)
    res = _run_on_node(folder)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "ValidationError" not in res.stderr, res.stderr
    ours = [line for line in res.stderr.splitlines() if line.startswith("adascale-bench: error: ")]
    assert len(ours) == 1 and str(pickle) in ours[0] and "renamed_in_an_older_version" in ours[0], res.stderr
    assert str(out) in ours[0] and "submit it again" in ours[0]
    assert not out.exists()  # nothing ran


def test_a_queued_job_whose_spec_validates_runs(tmp_path: Path, monkeypatch) -> None:
    folder, out = tmp_path / ".submitit", tmp_path / "runs"
    _queued(folder, out, None, monkeypatch)
    res = _run_on_node(folder)
    assert res.returncode == 0, res.stderr
    assert (folder / "1_0_result.pkl").is_file() and len(list(out.rglob("summary.json"))) == 1
