"""A run that holds its folder's lock but has flushed no metrics and written no checkpoint yet (a paper
run before its first checkpoint) is `running` in `status` and `report`, not missing or not started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.files import SPEC, write_json
from reports.rundata.collect import load
from slurm.status import collect

ROOT = Path(__file__).resolve().parents[2]
NAME = "logreg/adascale/s2/seed0"


def holder(run_dir: Path) -> subprocess.Popen:
    code = (
        "import sys, time\nfrom bench.core.locks import run_lock\n"
        f"with run_lock({str(run_dir)!r}):\n    print('held', flush=True)\n    time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize("with_spec", [True, False])
def test_a_run_holding_its_lock_is_running(tmp_path: Path, with_spec: bool) -> None:
    run_dir = tmp_path / NAME
    run_dir.mkdir(parents=True)
    if with_spec:
        write_json(run_dir / SPEC, {"task": "logreg", "method": "adascale", "scale": 2, "seed": 0, "preset": "tiny"})
    proc = holder(run_dir)
    try:
        assert [(s.name, s.state) for s in collect(tmp_path)] == [(NAME, "running")]
        if with_spec:
            assert list(load(tmp_path).runs["status"]) == ["running"]
    finally:
        proc.kill()
        proc.wait()
    # the writer is gone (killed before anything was written): no longer running
    assert [s.state for s in collect(tmp_path)] == ["missing"]
    if with_spec:
        assert list(load(tmp_path).runs["status"]) == ["pending"]
