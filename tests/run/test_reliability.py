"""Run folders under stress: one writer at a time, checkpoints and metrics that do not belong, leftovers of
a kill -9, file modes, devices, full disks, and what `status`, `report` and `submit` say about them."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bench.cli import main
from bench.core.engine.signals import Interrupted, clear_stop, request_stop
from bench.core.errors import UserError
from bench.core.files import CHECKPOINT, LOCK, METRICS, SPEC, SUMMARY, atomic_write_bytes, read_json, write_json
from bench.run.runner import run_dir_of
from slurm.status import collect, run_state, table
from tests.helpers import spec_for, train

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = Path(__file__).resolve().parents[2]


def run_args(out: Path, *extra: str, scale: str = "2") -> list[str]:
    return ["run", "--task", "logreg", "--method", "adascale", "--scale", scale, "--out", str(out), *extra]


def one_line_error(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("adascale-bench: error: ") and "Traceback" not in err, err
    return err


def stopped_run(run_dir: Path, **overrides) -> dict:
    """Train a logreg run that a stop signal ends after its first iteration: a checkpoint, no summary."""
    from unittest import mock

    from bench.core.engine.loop import Engine

    spec = spec_for("logreg", "adascale", overrides.pop("scale", 2), T1=100, **overrides)
    after_step = Engine._after_step

    def signalled(self: Engine, *args: object) -> None:  # the signal comes as the first iteration ends
        request_stop(signal.SIGTERM)
        after_step(self, *args)

    try:
        with mock.patch.object(Engine, "_after_step", signalled), pytest.raises(Interrupted):
            train(spec, run_dir)
    finally:
        clear_stop()
    assert (run_dir / CHECKPOINT).exists() and not (run_dir / SUMMARY).exists()
    return spec


def hold_lock(run_dir: Path) -> subprocess.Popen:
    """Another process holding the run folder's lock until killed."""
    code = (
        "import sys, time\nfrom bench.core.locks import run_lock\n"
        f"with run_lock({str(run_dir)!r}):\n    print('held', flush=True)\n    time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


# -- 1. one writer per run folder ------------------------------------------------------------------------------
def test_a_locked_run_folder_stops_a_second_writer_naming_the_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    args = run_args(tmp_path, "--set", "T1=50")
    run_dir = run_dir_of(tmp_path, spec_for("logreg", "adascale", 2, T1=50))
    holder = hold_lock(run_dir)
    try:
        assert main(args) == 2
        err = one_line_error(capsys)
        assert f"run folder {run_dir} is in use by pid {holder.pid} on " in err
        assert not (run_dir / SPEC).exists()  # nothing written
    finally:
        holder.kill()  # kill -9: the OS drops its lock
        holder.wait()
    assert json.loads((run_dir / LOCK).read_text())["pid"] == holder.pid  # a stale lock file ...
    assert main(args) == 0  # ... blocks nobody
    assert read_json(run_dir / SUMMARY)["status"] == "completed"
    assert json.loads((run_dir / LOCK).read_text())["pid"] == os.getpid()


def test_the_lock_names_the_slurm_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.core.locks import run_lock

    monkeypatch.setenv("SLURM_JOB_ID", "4242_7")
    with run_lock(tmp_path):
        info = json.loads((tmp_path / LOCK).read_text())
    assert info["slurm_job_id"] == "4242_7" and info["pid"] == os.getpid()


@pytest.mark.slow
def test_two_real_processes_on_one_folder_one_trains_the_other_stops_at_once(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench", *run_args(tmp_path, "--set", "T1=12000")]
    run_dir = run_dir_of(tmp_path, spec_for("logreg", "adascale", 2, T1=12000))
    first = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (run_dir / METRICS).exists():  # training: the lock is held
        assert first.poll() is None and time.time() < deadline, first.communicate()
        time.sleep(0.05)
    start = time.time()
    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert first.poll() is None, "the first run should still be training"
    assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr
    assert f"is in use by pid {first.pid} on " in second.stderr and "Traceback" not in second.stderr
    assert time.time() - start < 30  # at once: an import of torch, not a training
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert read_json(run_dir / SUMMARY)["status"] == "completed"


# -- 2. a checkpoint from another run ----------------------------------------------------------------------------
def test_a_checkpoint_of_another_run_is_refused(tmp_path: Path) -> None:
    stopped_run(tmp_path / "a", scale=2)
    spec_b = spec_for("logreg", "adascale", 4, T1=100)
    (tmp_path / "b").mkdir()
    shutil.copy(tmp_path / "a" / CHECKPOINT, tmp_path / "b" / CHECKPOINT)
    shutil.copy(tmp_path / "a" / METRICS, tmp_path / "b" / METRICS)
    with pytest.raises(UserError) as e:
        train(spec_b, tmp_path / "b")
    assert "run folder damaged: checkpoint.pt belongs to another run (differs in: scale)" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_checkpoint_that_differs_only_in_non_identity_keys_resumes(tmp_path: Path) -> None:
    spec = stopped_run(tmp_path)
    summary, _ = train(spec.replace(num_workers=0, threads=2, device="cpu"), tmp_path)
    assert summary["status"] == "completed"


def test_a_resume_with_a_where_it_runs_override_continues_the_run(tmp_path: Path) -> None:
    """`--set num_workers=2` on the resume: in the spec's overrides, but not in its identity."""
    spec = stopped_run(tmp_path)
    again = spec_for("logreg", "adascale", 2, T1=100, num_workers=2)
    assert again.overrides != spec.overrides
    summary, _ = train(again, tmp_path)
    assert summary["status"] == "completed" and summary["iterations"] > 1


def test_a_checkpoint_written_before_a_later_setting_existed_resumes(tmp_path: Path) -> None:
    """A checkpoint (and spec.json) from before `amp` and `microbatch_mode` existed is the same run as
    one at their defaults, and another run than one that sets them off their default."""
    from bench.core.identity import LATE_SETTINGS

    spec = stopped_run(tmp_path)
    ckpt = torch.load(tmp_path / CHECKPOINT, weights_only=False)
    ckpt["spec"] = {k: v for k, v in ckpt["spec"].items() if k not in LATE_SETTINGS}
    torch.save(ckpt, tmp_path / CHECKPOINT)
    write_json(tmp_path / SPEC, ckpt["spec"])
    with pytest.raises(UserError, match="differs in: microbatch_mode"):
        train(spec.replace(microbatch_mode="batched"), tmp_path)
    summary, _ = train(spec, tmp_path)
    assert summary["status"] == "completed" and summary["iterations"] > 1


# -- 3. metrics cut short ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_metrics_shorter_than_the_checkpoint_expects_is_an_error(tmp_path: Path, damage: str) -> None:
    spec = stopped_run(tmp_path)
    ckpt = torch.load(tmp_path / CHECKPOINT, weights_only=True)
    offset, records = ckpt["state"]["metrics_offset"], ckpt["state"]["metrics_records"]
    assert offset == (tmp_path / METRICS).stat().st_size and records >= 1
    if damage == "truncate":
        os.truncate(tmp_path / METRICS, offset - 7)
        has = offset - 7
    else:
        (tmp_path / METRICS).unlink()
        has = 0
    with pytest.raises(UserError) as e:
        train(spec, tmp_path)
    message = str(e.value)
    assert message.startswith(f"run folder damaged: metrics.jsonl has {has} bytes")
    assert f"the checkpoint expects {offset} ({records} records)" in message and "\n" not in message
    assert (tmp_path / CHECKPOINT).exists()  # nothing was touched
    if damage == "truncate":
        assert (tmp_path / METRICS).stat().st_size == offset - 7


# -- 4. leftovers of an interrupted atomic write -------------------------------------------------------------------
def test_temporary_files_of_interrupted_writes_are_removed_on_restart(tmp_path: Path) -> None:
    spec = stopped_run(tmp_path)
    leftovers = [tmp_path / ".checkpoint.pt.k2j4_9x1.tmp", tmp_path / ".summary.json.abc123.tmp"]
    leftovers.append(tmp_path / ".spec.json.zz9.tmp")
    for p in leftovers:
        p.write_bytes(b"half a file")
    other = tmp_path / ".notes.txt.tmp"
    other.write_text("not ours")
    summary, _ = train(spec, tmp_path)
    assert summary["status"] == "completed"
    assert not any(p.exists() for p in leftovers) and other.exists()


# -- 5. the umask ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_respect_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "x.json", b"{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "x.json").stat().st_mode) == mode


# -- 6. the device of a one-rank run -----------------------------------------------------------------------------------
def test_device_cuda_without_cuda_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a machine without CUDA, also on a GPU one
    assert main(run_args(tmp_path, "--set", "T1=20", "--set", "device=cuda")) == 2
    assert "device=cuda asked for, but no CUDA device is visible" in one_line_error(capsys)
    assert not any(tmp_path.iterdir())
    assert main(run_args(tmp_path, "--set", "T1=20", "--set", "device=cpu")) == 0


def _engine_device(monkeypatch: pytest.MonkeyPatch) -> list:
    import bench.run.runner as runner

    seen = []
    real = runner.Engine

    def spy(*args, **kwargs):
        engine = real(*args, **kwargs)
        seen.append(engine.dist.device)
        return engine

    monkeypatch.setattr(runner, "Engine", spy)
    return seen


def test_a_one_rank_run_uses_the_spec_device_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _engine_device(monkeypatch)
    assert main(run_args(tmp_path, "--set", "T1=20", "--set", "device=cpu")) == 0
    assert [d.type for d in seen] == ["cpu"]


@pytest.mark.gpu
def test_a_one_rank_run_uses_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _engine_device(monkeypatch)
    assert main(run_args(tmp_path, "--set", "T1=20", "--set", "device=cuda")) == 0
    assert main(run_args(tmp_path / "auto", "--set", "T1=20")) == 0  # auto: CUDA when there is one
    assert [d.type for d in seen] == ["cuda", "cuda"]
    assert read_json(next(tmp_path.rglob(SUMMARY)))["status"] == "completed"


# -- 9. status, report, submit ---------------------------------------------------------------------------------------
def test_status_says_stopped_running_and_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = spec_for("logreg", "adascale", 2, T1=100)
    run_dir = run_dir_of(tmp_path, spec)
    stopped_run(run_dir)
    name = run_dir.relative_to(tmp_path).as_posix()
    st = run_state(tmp_path, name, None, None)
    assert st.state == "stopped" and "resume" in st.detail
    holder = hold_lock(run_dir)
    try:
        assert run_state(tmp_path, name, None, None).state == "running"
    finally:
        holder.kill()
        holder.wait()
    assert run_state(tmp_path, name, None, None).state == "stopped"
    text = table(collect(tmp_path))
    assert "preset" in text.splitlines()[0] and text.splitlines()[2].rstrip().endswith("tiny")
    assert main(["status", str(tmp_path)]) == 0  # stopped is resumable, not failed
    capsys.readouterr()
    (run_dir / SUMMARY).write_text('{"status": "compl')
    assert run_state(tmp_path, name, None, None).state == "unreadable"
    assert main(["status", str(tmp_path)]) == 1
    assert "unreadable" in capsys.readouterr().out


def test_report_of_a_folder_without_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == f"adascale-bench: error: no runs found under {tmp_path}\n"


@pytest.mark.slow
def test_ctrl_c_on_a_local_submit_is_one_line(tmp_path: Path) -> None:
    """The submit starts as a terminal's foreground command does, with SIGINT at its default: a suite
    started in the background of a script (`make test &`, nohup) hands its children SIGINT ignored, and
    Python keeps it ignored, as a background job should (measured: the run went on to its end)."""
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "preset: tiny\nseeds: [0]\nset: {T1: 200000}\n"
        "experiments:\n  - table2: {tasks: [logreg], methods: [adascale], scales: [2]}\n"
    )
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "bench", "submit", str(matrix), "--executor", "local", "--out", str(out)]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 180
    while not list(out.glob(f"logreg/*/*/*/{METRICS}")):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and err == "adascale-bench: interrupted\n", err
    run_dir = next(out.glob("logreg/*/*/*"))
    deadline = time.time() + 60
    while not (run_dir / CHECKPOINT).exists() and time.time() < deadline:
        time.sleep(0.2)
    assert (run_dir / CHECKPOINT).exists()


# -- 10. the file system fails ----------------------------------------------------------------------------------------
def test_a_full_disk_mid_run_is_one_line_and_the_run_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = run_args(tmp_path / "cut", "--set", "T1=200", "--set", "checkpoint_every=20")
    assert main(run_args(tmp_path / "ref", "--set", "T1=200", "--set", "checkpoint_every=20")) == 0
    real, calls = os.fsync, []

    def full_disk(fd: int) -> None:  # the second checkpoint's data does not fit on the disk
        if ".checkpoint.pt." in os.readlink(f"/proc/self/fd/{fd}"):
            calls.append(fd)
            if len(calls) == 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    monkeypatch.setattr(os, "fsync", full_disk)
    capsys.readouterr()
    assert main(args) == 1
    err = one_line_error(capsys)
    run_dir = next((tmp_path / "cut").glob("logreg/*/*/*"))
    assert f"cannot write {run_dir / CHECKPOINT}: no space left on the device" in err
    assert read_json(run_dir / SUMMARY)["status"] == "failed"  # retried by the same command
    ckpt = torch.load(run_dir / CHECKPOINT, weights_only=True)  # the one written before: intact
    assert ckpt["state"]["iteration"] == 20
    (run_dir / ".checkpoint.pt.half01.tmp").write_bytes(b"what a kill -9 mid-write leaves")
    monkeypatch.setattr(os, "fsync", real)
    assert main(args) == 0
    assert not list(run_dir.glob("*.tmp")) and not list(run_dir.glob(".*.tmp"))
    got, want = read_json(run_dir / SUMMARY), read_json(next((tmp_path / "ref").rglob(SUMMARY)))
    strip = lambda s: {k: v for k, v in s.items() if k != "wall_time_s"}  # noqa: E731
    assert strip(got) == strip(want)


@pytest.mark.parametrize("where", ["file", "under a file", "too long"])
def test_bad_out_paths_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, where: str) -> None:
    (tmp_path / "f").write_text("")
    out = {"file": tmp_path / "f", "under a file": tmp_path / "f" / "sub", "too long": tmp_path / ("x" * 300)}[where]
    assert main(run_args(out, "--set", "T1=20")) == 1
    err = one_line_error(capsys)
    assert f"cannot write {out}" in err


def test_a_read_only_report_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import reports.build

    write_json(tmp_path / "logreg/adascale/s2/seed0" / SUMMARY, {"status": "completed"})

    def read_only(out: Path, *args, **kwargs) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(out / "report"))

    monkeypatch.setattr(reports.build, "build", read_only)
    assert main(["report", str(tmp_path)]) == 1
    assert f"cannot write {tmp_path / 'report'}: read-only file system" in one_line_error(capsys)
