"""A run stopped by SIGTERM and started again with the same command ends number for number like an
uninterrupted one (CPU), and a damaged checkpoint gives a one-line error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.core.files import CHECKPOINT, METRICS, SUMMARY, read_json, read_jsonl

pytestmark = pytest.mark.slow


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench", *args]


def run_args(out: Path, task: str, scale: str, *extra: str) -> list[str]:
    return cli(
        "run",
        "--task",
        task,
        "--method",
        "adascale",
        "--scale",
        scale,
        "--seed",
        "3",
        "--out",
        str(out),
        "--set",
        "checkpoint_every=5",
        *extra,
    )


def _strip(record: dict) -> dict:
    """A summary or metrics record without its wall-clock time, the one number a resume may change."""
    return {k: v for k, v in record.items() if k != "wall_time_s"}


@pytest.mark.parametrize(
    ("task", "scale", "extra"),
    [
        ("logreg", "4", ("--set", "T1=1500")),
        pytest.param("cifar10", "elastic-up", ("--set", "T1=600"), marks=pytest.mark.long),  # three cifar10 runs
    ],
)
def test_sigterm_then_same_command_resumes_exactly(tmp_path: Path, task: str, scale: str, extra: tuple) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    ref = subprocess.run(run_args(tmp_path / "ref", task, scale, *extra), env=env, capture_output=True, text=True)
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "cut"
    proc = subprocess.Popen(run_args(out, task, scale, *extra), env=env, stderr=subprocess.PIPE, text=True)
    run_dir = next(iter((tmp_path / "ref").glob(f"{task}/*/*/*"))).relative_to(tmp_path / "ref")
    deadline = time.time() + 120
    while not (out / run_dir / CHECKPOINT).exists():
        assert proc.poll() is None and time.time() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert "resume" in err and not (out / run_dir / SUMMARY).exists()
    again = subprocess.run(run_args(out, task, scale, *extra), env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert _strip(read_json(out / run_dir / SUMMARY)) == _strip(read_json(tmp_path / "ref" / run_dir / SUMMARY))
    records = [_strip(r) for r in read_jsonl(out / run_dir / METRICS)]
    assert records == [_strip(r) for r in read_jsonl(tmp_path / "ref" / run_dir / METRICS)]
    assert not (out / run_dir / CHECKPOINT).exists()


def test_unreadable_checkpoint_is_a_one_line_error(tmp_path: Path) -> None:
    run_dir = tmp_path / "logreg/adascale/s4/seed3,checkpoint_every=5"
    run_dir.mkdir(parents=True)
    (run_dir / CHECKPOINT).write_bytes(b"not a checkpoint")
    res = subprocess.run(run_args(tmp_path, "logreg", "4"), capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert str(run_dir / CHECKPOINT) in res.stderr and "unreadable" in res.stderr


TICKING = '''
import os as _os
import time as _time


class Ticking(Mixture):
    """The docs' task, each micro-batch's loss ticking a file (its time) and taking a few ms: an iteration at a
    large S takes seconds, and the ticks say how many micro-batches a run computed after a signal."""

    def loss(self, model, batch):
        with open(_os.environ["TICKS"], "a") as f:
            f.write(f"{_time.monotonic()}\\n")
        _time.sleep(0.004)
        return super().loss(model, batch)
'''


@pytest.mark.long  # S = 256 micro-batches cut and resumed
def test_sigterm_stops_within_a_micro_batch_and_the_resume_is_exact(tmp_path: Path) -> None:
    """At S = 256 (one iteration: 256 micro-batches of a few ms each, a second or more) a SIGTERM halfway through
    the second iteration stops the run before the next micro-batch (it waited for the iteration's end: at a huge
    S, for ever), the iteration dropped; the same command then ends number for number like an uninterrupted run."""
    from tests.tasks.test_user_task import design_blocks

    home = tmp_path / "mine"
    home.mkdir()
    (home / "ticking.py").write_text(design_blocks()[0] + TICKING)
    S = 256
    sets = ("--set", f"T1={2 * S}", "--set", f"eval_every={S}", "--set", "checkpoint_every=100000")
    args = ["run", "--task", "ticking:Ticking", "--method", "lsw", "--scale", str(S), "--seed", "3", *sets]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ADASCALE_BENCH_DATA": str(tmp_path / "data")}
    ref = subprocess.run(
        [*cli(*args), "--out", str(tmp_path / "ref")],
        cwd=home,
        capture_output=True,
        text=True,
        env={**env, "TICKS": str(tmp_path / "ref.ticks")},
    )
    assert ref.returncode == 0, ref.stderr[-2000:]
    ticks = tmp_path / "cut.ticks"
    cut = [*cli(*args), "--out", str(tmp_path / "cut")]
    proc = subprocess.Popen(cut, cwd=home, env={**env, "TICKS": str(ticks)}, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not ticks.exists() or len(ticks.read_text().split()) < S + S // 2:
        assert proc.poll() is None and time.time() < deadline, "the run did not reach its second iteration"
        time.sleep(0.01)
    at = [float(t) for t in ticks.read_text().split()]
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    assert proc.stderr is not None
    said = proc.stderr.readline()  # the run's one line: checkpoint saved (the interpreter's exit then is not its)
    stopped = time.monotonic() - signalled
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3 and "stopped by signal" in said and "resume" in said, said + err
    after = [float(t) for t in ticks.read_text().split()]
    iteration_s = at[S] - at[0]  # the first iteration's S micro-batches
    assert len(after) - len(at) <= 1, f"{len(after) - len(at)} micro-batches after the signal"
    assert stopped < iteration_s, f"stopped {stopped:.2f} s after the signal; an iteration takes {iteration_s:.2f} s"
    (run_dir,) = [p.parent.relative_to(tmp_path / "ref") for p in (tmp_path / "ref").rglob(SUMMARY)]
    assert (tmp_path / "cut" / run_dir / CHECKPOINT).exists() and not (tmp_path / "cut" / run_dir / SUMMARY).exists()
    kept = read_jsonl(tmp_path / "cut" / run_dir / METRICS)
    assert [r["iteration"] for r in kept if not r.get("eval")] == [0]  # the first iteration's record, no other
    again = subprocess.run(cut, cwd=home, capture_output=True, text=True, env={**env, "TICKS": str(ticks)})
    assert again.returncode == 0, again.stderr[-2000:]
    ours, theirs = tmp_path / "cut" / run_dir, tmp_path / "ref" / run_dir
    assert _strip(read_json(ours / SUMMARY)) == _strip(read_json(theirs / SUMMARY))
    assert [_strip(r) for r in read_jsonl(ours / METRICS)] == [_strip(r) for r in read_jsonl(theirs / METRICS)]
