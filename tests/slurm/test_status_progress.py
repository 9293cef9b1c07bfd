"""`status`'s τ/T1 and ETA (slurm/progress.py), `--json`, `--watch`, and runs the local executor has queued,
on run folders written here (the exact answers are known: a rate of 10 τ/s, 600 τ to go)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.files import METRICS, SPEC, SUMMARY, write_json
from slurm.progress import duration, last_training, progress, rate_of, tail, timed
from slurm.records import JOB, process_start
from slurm.status import collect

NAME = "logreg/adascale/s4/seed0"


def training(tau: float, i: int) -> dict:
    return {"iteration": i, "tau": tau, "scale": 4, "gain": 4.0, "lr": 0.1, "loss": 0.5}


def write_run(out: Path, timed: bool = True, started: bool = True, alive: bool = True) -> Path:
    """A run at τ = 400 of T1 = 1000 whose evaluations say 10 τ per second, in a local submit's pool."""
    run_dir = out / NAME
    run_dir.mkdir(parents=True)
    write_json(run_dir / SPEC, {"task": "logreg", "method": "adascale", "scale": 4, "seed": 0, "T1": 1000})
    records = [training(4.0 * i, i) for i in range(101)]
    if timed:
        records.insert(26, {"eval": True, "iteration": 25, "tau": 100.0, "wall_time_s": 10.0, "metric": 0.4})
        records.insert(77, {"eval": True, "iteration": 75, "tau": 300.0, "wall_time_s": 30.0, "metric": 0.3})
    (run_dir / METRICS).write_text("".join(json.dumps(r) + "\n" for r in records) + '{"iteration": 101, "ta')
    pid = os.getpid()
    write_json(
        run_dir / JOB,
        {
            "executor": "local",
            "job_id": f"{pid}.1",
            "pid": pid,
            "pid_start": process_start(pid) if alive else 1,  # 1: another process that had this pid
            "started": started,
            "submitted_at": time.time(),
        },
    )
    return run_dir


def test_a_running_run_has_its_tau_T1_rate_and_eta(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path)
    (run,) = collect(tmp_path)
    assert run.state == "running"
    p = run.progress
    assert (p.tau, p.T1, p.fraction, p.rate) == (400.0, 1000.0, 0.4, 10.0)  # the torn last line is not read
    assert p.eta_s == pytest.approx(60.0, abs=5.0)  # (1000 - 400) / 10, less the seconds since the write
    old = time.time() - 30
    os.utime(run_dir / METRICS, (old, old))  # written 30 s ago: 30 s of those 60 are gone
    assert collect(tmp_path)[0].progress.eta_s == pytest.approx(30.0, abs=5.0)


def test_no_timed_record_no_eta_and_a_finished_run_reads_its_summary(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, timed=False)
    p = collect(tmp_path)[0].progress
    assert p.tau == 400.0 and p.rate is None and p.eta_s is None  # no rate yet: no guess
    write_json(run_dir / SUMMARY, {"status": "completed", "tau": 1003.5})
    (run,) = collect(tmp_path)
    assert run.state == "done" and run.progress.tau == 1003.5 and run.progress.eta_s is None


def test_rate_from_one_timed_record_and_a_window_that_cuts_a_line(tmp_path: Path) -> None:
    assert rate_of([{"tau": 50.0, "wall_time_s": 5.0}]) == 10.0
    assert rate_of([{"tau": 50.0}, {"eval": True, "tau": 0.0, "wall_time_s": 0.0}]) is None
    path = tmp_path / METRICS
    path.write_text("".join(json.dumps(training(float(i), i)) + "\n" for i in range(50)))
    lines, mtime = tail(path, size=200)  # the window starts inside a record: that record is dropped
    records = [json.loads(line) for line in lines]
    assert records and records[-1]["tau"] == 49.0 and all(r["iteration"] > 45 for r in records)
    assert mtime == path.stat().st_mtime
    assert last_training([*lines, b'{"eval": true, "tau": 50.0}', b"not json"])["tau"] == 49.0
    assert timed([b'{"tau": 1.0, "wall_time_s": 2.0}', b'{"tau": 2.0}', b'{"wall_time_s": ']) == [
        {"tau": 1.0, "wall_time_s": 2.0}
    ]
    assert progress(tmp_path / "nothing", None, True).tau is None
    assert [duration(s) for s in (None, 40, 725, 11100)] == ["-", "40s", "12m", "3h05m"]


def test_status_json_and_table_show_progress(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_run(tmp_path)
    assert main(["status", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (run,) = doc["runs"]
    assert doc["counts"] == {"running": 1}
    assert (run["name"], run["state"], run["tau"], run["T1"], run["progress"]) == (NAME, "running", 400.0, 1000.0, 0.4)
    assert run["eta_s"] == pytest.approx(60.0, abs=5.0) and run["job_ids"] == [f"{os.getpid()}.1"]
    assert main(["status", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "τ/T1" in text.splitlines()[0] and "  running  40%   " in text and ("1m" in text or "59s" in text)


def test_a_run_the_local_executor_has_queued_is_queued_not_missing(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, started=False)
    assert collect(tmp_path)[0].state == "queued"
    (run_dir / METRICS).unlink()
    write_json(run_dir / JOB, {**json.loads((run_dir / JOB).read_text()), "pid_start": 1})  # its submit is gone
    (run,) = collect(tmp_path)
    assert run.state == "stopped" and "never started" in run.detail  # Ctrl-C before a worker took it
    write_json(run_dir / JOB, {**json.loads((run_dir / JOB).read_text()), "started": True})
    assert collect(tmp_path)[0].state == "failed"  # started, then ended without a summary or a checkpoint


def test_watch_refreshes_until_no_run_is_active(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = write_run(tmp_path)
    write_json(run_dir / SUMMARY, {"status": "completed", "tau": 1003.5})
    assert main(["status", str(tmp_path), "--watch", "0.1"]) == 0  # nothing active: one table, and return
    assert capsys.readouterr().out.count("1 runs: 1 done") == 1
    (run_dir / SUMMARY).unlink()
    ticks: list[float] = []

    def finish_after_two(seconds: float) -> None:  # the run ends while status watches it
        ticks.append(seconds)
        if len(ticks) == 2:
            write_json(run_dir / SUMMARY, {"status": "completed", "tau": 1003.5})

    monkeypatch.setattr(time, "sleep", finish_after_two)
    assert main(["status", str(tmp_path), "--watch", "5", "--json"]) == 0
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [d["counts"] for d in docs] == [{"running": 1}, {"running": 1}, {"done": 1}] and ticks == [5.0, 5.0]
