"""An `ADASCALE_BENCH_DATA` the tiny data set cannot be written to (issue 59.8): `run` says so in one line
naming the folder (it was a FileNotFoundError traceback from pathlib's mkdir). The folders are real ones the
OS refuses, whoever runs the test (root included): one below /proc, where nothing can be made, and one
below a regular file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp: Path, data: str) -> subprocess.CompletedProcess[str]:
    args = ["run", "--task", "cifar10", "--method", "adascale", "--scale", "2", "--out", str(tmp / "runs")]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp), "ADASCALE_BENCH_DATA": data}
    cmd = [sys.executable, "-c", "import sys; from bench.cli import main; sys.exit(main(sys.argv[1:]))", *args]
    cmd += ["--set", "T1=2"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp)


@pytest.mark.parametrize("where", ["below /proc", "below a file"])
def test_an_unwritable_data_folder_is_one_line(tmp_path: Path, where: str) -> None:
    (tmp_path / "a-file").write_text("not a folder\n")
    data = "/proc/adascale-bench-nowhere/tiny" if where == "below /proc" else str(tmp_path / "a-file" / "tiny")
    res = _run(tmp_path, data)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("adascale-bench: error: "), res.stderr
    assert "cannot write the tiny data set" in lines[0] and str(Path(data)) in lines[0], lines[0]
