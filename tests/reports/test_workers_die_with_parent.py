"""The report's worker processes die with it: a `report` SIGKILLed while its 2 cache workers
(reports.rundata.runcache.warm, each in `warm_one`) are busy, or while its figure-drawing processes
(reports.figures.Renderer) wait idle on their call queue, leaves no process behind. A forked
ProcessPoolExecutor worker holds both ends of its call-queue pipe, so without PR_SET_PDEATHSIG it waited
forever. The control: the same workers are alive while their parent is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

WARM = """
import os, sys, time
from pathlib import Path
from reports.rundata import runcache

def slow(path, cache_dir, *rest):
    os.write(1, f"{os.getpid()}\\n".encode())  # one write: two workers share the pipe
    time.sleep(600)

runcache.warm_one = slow
runcache.warm([Path(f"/nonexistent/{i}/metrics.jsonl") for i in range(2)], Path(sys.argv[1]), 2, print)
"""

DRAW = """
import os, sys, time
from pathlib import Path
from reports import figures

def draw(plan, path):
    os.write(1, f"{os.getpid()}\\n".encode())  # one write: two workers share the pipe

with figures.rendering(Path(sys.argv[1]) / "figures.json", 2) as renderer:
    for i in range(2):
        renderer.submit(draw, i, Path(sys.argv[1]) / f"f{i}.png")
    time.sleep(600)  # killed here: the workers wait for more work
"""


def children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has died (nobody may reap it in a container)


@pytest.mark.parametrize("script", [WARM, DRAW], ids=["cache workers, busy", "figure workers, idle"])
def test_workers_die_when_their_parent_is_sigkilled(tmp_path: Path, script: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    pids: set[int] = set()
    try:
        pids = {int(proc.stdout.readline()) for _ in range(2)}
        time.sleep(0.5)
        pids |= children(proc.pid)  # every worker the pool forked, busy or not
        assert all(alive(p) for p in pids)  # the control: alive while the parent is
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.1)
        left = [p for p in pids if alive(p)]
        assert not left, f"workers {left} outlived their SIGKILLed parent"
    finally:
        proc.kill()
        for p in pids:  # what the test started, so a failure leaves nothing behind
            if alive(p):
                os.kill(p, signal.SIGKILL)


LONG = (
    "preset: tiny\nseeds: [0]\nset: {T1: 1000000}\n"
    "experiments:\n  - table2: {tasks: [logreg], methods: [adascale], scales: [2]}\n"
)


def descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        kids = children(todo.pop())
        found |= kids
        todo += list(kids)
    return found


def test_submit_local_workers_and_resource_tracker_die_with_a_sigkilled_submit(tmp_path: Path) -> None:
    """`submit --executor local` runs its runs in a spawn pool (bench.experiments.pool.worker_init): SIGKILLed
    mid-run, it leaves neither the training worker nor multiprocessing's resource tracker behind."""
    (tmp_path / "m.yaml").write_text(LONG)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, "-m", "bench", "submit", str(tmp_path / "m.yaml"), "--executor", "local"]
    proc = subprocess.Popen([*argv, "--out", str(tmp_path / "out")], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    pids: set[int] = set()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not list((tmp_path / "out").rglob("metrics.jsonl")):
            time.sleep(0.2)
        assert list((tmp_path / "out").rglob("metrics.jsonl")), "the run never started"
        pids = descendants(proc.pid)
        assert pids and all(alive(p) for p in pids)  # the control: alive while the parent is
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.1)
        left = [p for p in pids if alive(p)]
        assert not left, f"processes {left} outlived their SIGKILLed submit"
    finally:
        proc.kill()
        for p in pids:
            if alive(p):
                os.kill(p, signal.SIGKILL)
