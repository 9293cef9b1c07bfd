"""What a user watches while a run trains: the heartbeat line when stdout is not a terminal (a SLURM log), the
progress bar when it is, and the optional TensorBoard sink; neither reads the device."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from bench.core.engine.heartbeat import Heartbeat
from bench.core.engine.loop import Engine
from bench.core.engine.tensorboard_sink import DIRNAME, TensorBoardSink
from bench.core.files import METRICS, read_jsonl
from tasks import get_task
from tests.helpers import spec_for, train


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_line_every_n_seconds_with_rate_and_eta() -> None:
    out, clock = io.StringIO(), Clock()
    beat = Heartbeat(30, "cifar10 adascale s4 seed0", 2000, out, clock)
    beat.start(0, 0.0)
    clock.now += 10
    assert not beat.beat(10, 40.0, 4, 2.0, 4.0, 0.4)  # 10 s: not yet
    clock.now += 20  # 30 s since the start: 120 iterations, τ 480
    assert beat.beat(120, 480.0, 4, 1.2345, 3.125, 0.1)
    clock.now += 5
    assert not beat.beat(125, 500.0, 4, 1.2, 3.2, 0.1)
    line = out.getvalue().strip()
    assert line == (
        "heartbeat cifar10 adascale s4 seed0: iteration 120, τ 480/2000 (24.0%), S 4, loss 1.234, gain 3.12, "
        "lr 0.1, 4 it/s, ETA 0:01:35"  # (2000 − 480) / (480 / 30 s) = 95 s
    )
    clock.now += 25  # the next interval: its own rates (5 + 25 s since the last line, τ 480 -> 600)
    assert beat.beat(150, 600.0, 4, 1.0, 4.0, 0.1)
    assert (
        out.getvalue().splitlines()[1].endswith("1 it/s, ETA 0:05:50")
    )  # 30 it in 30 s; (2000 − 600) / (120 τ / 30 s) = 350 s


def test_only_rank_zero_off_a_terminal_and_when_asked() -> None:
    spec = spec_for("logreg", "adascale", 2)
    assert spec.heartbeat_s == 60  # the default: a line a minute
    assert Heartbeat.for_run(spec, True, io.StringIO()) is not None
    assert Heartbeat.for_run(spec, True, Terminal()) is None  # a terminal has the progress bar
    assert Heartbeat.for_run(spec, False, io.StringIO()) is None  # one line per run, not per rank
    assert Heartbeat.for_run(spec.replace(heartbeat_s=0), True, io.StringIO()) is None


def _cli(out: Path, *sets: str) -> list[str]:
    args = [sys.executable, "-m", "bench", "run", "--task", "logreg", "--method", "adascale", "--scale", "2"]
    args += ["--out", str(out), "--set", "T1=400"]
    for s in sets:
        args += ["--set", s]
    return args


def test_a_job_log_gets_heartbeat_lines_and_a_terminal_gets_the_bar(tmp_path: Path) -> None:
    """stdout to a file (as SLURM's): heartbeat lines, no bar; stdout and stderr on a terminal (a pty): the
    bar, no heartbeat line."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    res = subprocess.run(_cli(tmp_path / "a", "heartbeat_s=0.05"), env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    beats = [ln for ln in res.stdout.splitlines() if ln.startswith("heartbeat logreg adascale s2 seed0: iteration ")]
    assert len(beats) >= 2, res.stdout
    found = re.search(
        r"iteration (\d+), τ \d+/400 \(.*%\), S 2, loss (.*), gain (.*), lr (.*), .* it/s, ETA ", beats[-1]
    )
    assert found, beats[-1]
    done, loss, gain, lr = int(found[1]), *found.groups()[1:]
    last = next(
        r
        for r in read_jsonl(next((tmp_path / "a").rglob(METRICS)))
        if r.get("iteration") == done - 1 and not r.get("eval")
    )
    assert (loss, gain, lr) == (f"{last['loss']:.4g}", f"{last['gain']:.3g}", f"{last['lr']:.3g}")  # its numbers
    assert "%|" not in res.stderr  # no bar in a log
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal 120 columns wide
    proc = subprocess.Popen(_cli(tmp_path / "b", "heartbeat_s=0.05"), env=env, stdout=child, stderr=child)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(120) == 0
    os.close(main)
    seen = b"".join(chunks).decode(errors="replace")
    assert "τ " in seen and "%|" in seen and "heartbeat logreg" not in seen  # the bar, on a terminal


def test_the_heartbeat_reads_nothing_on_the_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run's host syncs are the same with a line every iteration as with none (pytest's captured stdout is
    not a terminal, so the heartbeat is on)."""
    from bench.experiments.syncs import count_host_syncs

    counts = {}
    for every in (0.0, 1e-9):
        spec = spec_for("logreg", "adascale", 2, T1=20, heartbeat_s=every)
        counts[every] = count_host_syncs(
            lambda spec=spec, every=every: Engine(spec, get_task("logreg"), tmp_path / f"{every}", progress=False).run()
        )[1]
    assert capsys.readouterr().out.count("heartbeat logreg") >= 9  # a line per iteration (T1 = 20 at S = 2)
    assert counts[0.0] == counts[1e-9]


def test_tensorboard_events_hold_the_runs_scalars(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    spec = spec_for("cifar10", "adascale", 2, T1=12, eval_every=6, tensorboard=True)
    train(spec, tmp_path)
    events = EventAccumulator(str(tmp_path / DIRNAME))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    steps = [r for r in read_jsonl(tmp_path / METRICS) if not r.get("eval")]
    evals = [r for r in read_jsonl(tmp_path / METRICS) if r.get("eval")]
    for key in ("loss", "gain", "lr", "tau", "scale", "sum_sq", "mean_sq", "var", "sqr"):
        assert f"train/{key}" in tags, key
        got = [(e.step, e.value) for e in events.Scalars(f"train/{key}")]
        want = [(r["iteration"], r[key]) for r in steps if r.get(key) is not None]
        assert [s for s, _ in got] == [s for s, _ in want]
        assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6)  # stored as float32
    assert len(evals) == 3 and evals[0]["iteration"] == 0  # the untrained model's, then two
    got = [(e.step, e.value) for e in events.Scalars(f"eval/{get_task('cifar10').metric}")]
    assert got == [(r["iteration"], pytest.approx(r["metric"], rel=1e-6)) for r in evals]
    assert not any(t.startswith("train/iteration") for t in tags)


def test_asked_for_without_tensorboard_installed_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # an import of it fails
    spec = spec_for("logreg", "adascale", 2, T1=20, tensorboard=True)
    assert TensorBoardSink.for_run(spec, tmp_path, True, 0) is None
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "tensorboard package is not installed" in err and "[tensorboard]" in err
    assert TensorBoardSink.for_run(spec.replace(tensorboard=False), tmp_path, True, 0) is None
    assert capsys.readouterr().err == ""  # not asked for: nothing said
    Engine(spec, get_task("logreg"), tmp_path / "run", progress=False).run()  # and the run goes on
    assert not (tmp_path / "run" / DIRNAME).exists()


def test_a_resumed_run_purges_the_events_past_its_checkpoint(tmp_path: Path) -> None:
    """As metrics.jsonl is cut back to the checkpoint, TensorBoard drops what was logged after it (steps 5-9
    of the first attempt), so each step shows once, with the resumed run's value."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    spec = spec_for("logreg", "adascale", 2, tensorboard=True)
    first = TensorBoardSink.for_run(spec, tmp_path, True, 0)
    assert first is not None
    for i in range(10):
        first.write({"iteration": i, "loss": 1.0})
    first.close()
    again = TensorBoardSink.for_run(spec, tmp_path, True, 5)  # resumed from the checkpoint at iteration 5
    assert again is not None
    for i in range(5, 8):
        again.write({"iteration": i, "loss": 2.0})
    again.close()
    events = EventAccumulator(str(tmp_path / DIRNAME))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("train/loss")] == [(i, 1.0) for i in range(5)] + [
        (i, 2.0) for i in range(5, 8)
    ]


def test_a_link_at_the_events_folder_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    """A colleague who can write the run folder plants `RUN/tensorboard` as a link to a folder of theirs
    or the user's (also between a SIGTERM and the resume): the sink refuses it in one line and no events
    file lands in the folder it names."""
    from bench.core import safefs

    spec = spec_for("logreg", "adascale", 2, tensorboard=True)
    private = tmp_path / "private"
    private.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    (run / DIRNAME).symlink_to(private)
    with pytest.raises(safefs.Refused, match="symbolic link"):
        TensorBoardSink.for_run(spec, run, True, 5)
    assert list(private.iterdir()) == []
    (run / DIRNAME).unlink()
    (run / DIRNAME).write_text("not a folder")
    with pytest.raises(safefs.Refused, match="not a folder"):
        TensorBoardSink.for_run(spec, run, True, 0)


def test_the_events_file_name_cannot_be_guessed(tmp_path: Path) -> None:
    """The events file ends in random bytes, so a link planted under the name it will have cannot exist."""
    spec = spec_for("logreg", "adascale", 2, tensorboard=True)
    for _ in range(2):
        sink = TensorBoardSink.for_run(spec, tmp_path, True, 0)
        assert sink is not None
        sink.write({"iteration": 0, "loss": 1.0})
        sink.close()
    names = sorted(p.name for p in (tmp_path / DIRNAME).iterdir())
    assert len(names) == 2 and names[0].split(".")[-1] != names[1].split(".")[-1]
