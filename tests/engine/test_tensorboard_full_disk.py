"""TensorBoard's events on a full disk (issue 59.8): the events are a view, so the run goes on with
metrics.jsonl and says so in one line naming the folder; no traceback from TensorBoard's writer thread. The
CLI `run` is driven in a subprocess whose events-file writes fail with ENOSPC from the k-th on (TensorBoard's
local file system's `_write`, the one place its writer thread writes a file): k = 0 fails the first event,
written while the writer is made; k = 3 fails mid-run, on the writer thread."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FULL_AFTER = """
import errno, sys
from tensorboard.compat.tensorflow_stub.io import gfile
real, writes = gfile.LocalFileSystem._write, [0]
def full(self, filename, content, mode):
    if "tfevents" in str(filename):
        writes[0] += 1
        if writes[0] > {k}:
            raise OSError(errno.ENOSPC, "No space left on device", str(filename))
    return real(self, filename, content, mode)
gfile.LocalFileSystem._write = full
from bench.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("k", [0, 3])
def test_a_full_disk_under_the_events_is_one_line_and_the_run_completes(tmp_path: Path, k: int) -> None:
    out = tmp_path / "runs"
    args = ["run", "--task", "logreg", "--method", "adascale", "--scale", "2", "--out", str(out)]
    args += ["--set", "T1=40", "--set", "eval_every=10", "--set", "tensorboard=true"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    cmd = [sys.executable, "-c", FULL_AFTER.format(k=k), *args]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "Exception in thread" not in res.stderr, res.stderr
    warnings = [line for line in res.stderr.splitlines() if "TensorBoard events" in line]
    assert len(warnings) == 1 and "No space left on device" in warnings[0], res.stderr
    (summary,) = out.rglob("summary.json")
    assert json.loads(summary.read_text())["status"] == "completed"
    assert str(summary.parent / "tensorboard") in warnings[0]
