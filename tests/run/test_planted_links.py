"""Nothing is written through a link someone planted: a run folder's `.lock` or `metrics.jsonl` that is a
symbolic link to another file (the lock holder would overwrite it, a resume would truncate it), its
`checkpoints/` linked to another folder, and `prepare`'s staging folder linked elsewhere, are each refused in
one line naming the link; the file or folder it points to is left as it was. A checkpoint whose state holds a
string where a number belongs is refused in one line, not a traceback. The same folders without the links
resume normally (the control)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from bench.cli import main
from bench.core.errors import UserError
from bench.core.files import CHECKPOINT, KEPT, LOCK, METRICS, SUMMARY
from bench.run.runner import run_dir_of
from tasks.cifar10.tiny import write_tiny
from tests.helpers import spec_for, train
from tests.run.test_reliability import stopped_run

pytestmark = pytest.mark.usefixtures("one_thread")
SETS = {"T1": 40, "eval_every": 10, "checkpoint_every": 10, "keep_checkpoints_every": 10}
ARGS = ["run", "--task", "logreg", "--method", "adascale", "--scale", "2"]
for k, v in SETS.items():
    ARGS += ["--set", f"{k}={v}"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("links") / "out"
    assert main([*ARGS, "--out", str(out)]) == 0
    return out


@pytest.fixture
def unfinished(finished: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the run with its summary removed: running the same command resumes it."""
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    run = run_dir_of(out, spec_for("logreg", "adascale", 2, **SETS))
    (run / SUMMARY).unlink()
    return out, run


def one_line(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_the_control_resumes(unfinished: tuple[Path, Path]) -> None:
    out, run = unfinished
    assert main([*ARGS, "--out", str(out)]) == 0
    assert (run / SUMMARY).is_file()


@pytest.mark.parametrize("name", [LOCK, METRICS])
def test_a_linked_lock_or_log_is_refused_and_its_target_kept(unfinished, tmp_path: Path, capsys, name: str) -> None:
    out, run = unfinished
    victim = tmp_path / "victim.txt"
    body = (run / METRICS).read_bytes() + b'{"precious": 1}\n' * 3  # what a resume would truncate away
    victim.write_bytes(body)
    (run / name).unlink(missing_ok=True)
    (run / name).symlink_to(victim)
    assert main([*ARGS, "--out", str(out)]) == 2
    err = one_line(capsys)
    assert str(run / name) in err and "symbolic link" in err
    assert victim.read_bytes() == body


def test_linked_kept_weights_folder_is_refused(unfinished, tmp_path: Path, capsys) -> None:
    out, run = unfinished
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(run / KEPT)
    for name in (CHECKPOINT, METRICS):  # start over, so kept weights would be written
        (run / name).unlink(missing_ok=True)
    (run / KEPT).symlink_to(elsewhere)
    assert main([*ARGS, "--out", str(out)]) == 2
    assert str(run / KEPT) in one_line(capsys)
    assert list(elsewhere.iterdir()) == []


def test_a_resume_through_a_linked_log_is_refused(tmp_path: Path) -> None:
    """A run stopped after its first checkpoint: resuming truncates metrics.jsonl to the checkpoint's
    offset, which through a link would cut the file it points to."""
    run = tmp_path / "run"
    spec = stopped_run(run)
    victim = tmp_path / "victim.txt"
    body = (run / METRICS).read_bytes() + b'{"precious": 1}\n' * 3
    victim.write_bytes(body)
    (run / METRICS).unlink()
    (run / METRICS).symlink_to(victim)
    with pytest.raises(UserError, match="symbolic link"):
        train(spec, run)
    assert victim.read_bytes() == body


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("metrics_offset", "a"),
        ("iteration", [1]),
        ("last_eval", {"x": "y"}),
        ("tau", 10**400),
        ("metrics_offset", 2**70),
        ("gain_sum", -(10**400)),
        ("last_eval", {"loss": 10**400}),
    ],
)  # fmt: skip  (an int past float's or a file offset's range: a pickle holds any int)
def test_a_checkpoint_state_of_the_wrong_type_is_one_line(tmp_path: Path, key: str, value) -> None:
    spec = stopped_run(tmp_path)
    ckpt = torch.load(tmp_path / CHECKPOINT, weights_only=True)
    ckpt["state"][key] = value
    torch.save(ckpt, tmp_path / CHECKPOINT)
    with pytest.raises(UserError) as e:
        train(spec, tmp_path)
    assert str(tmp_path / CHECKPOINT) in str(e.value) and key in str(e.value) and "\n" not in str(e.value)


def test_a_linked_staging_folder_is_refused_by_prepare(tmp_path: Path, capsys) -> None:
    folder = write_tiny(tmp_path / "src")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / ".out.partial").symlink_to(elsewhere)
    args = ["prepare", "cifar10", "--source", str(folder), "--out", str(tmp_path / "out"), "--set", "verify_md5=false"]
    assert main(args) == 2
    assert str(tmp_path / ".out.partial") in one_line(capsys)
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "out").exists()
    (tmp_path / ".out.partial").unlink()  # the control: without the link, prepare goes through
    assert main(args) == 0


def test_a_linked_prepare_lock_is_refused_and_its_target_kept(tmp_path: Path, capsys) -> None:
    folder = write_tiny(tmp_path / "src")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / ".out.lock").symlink_to(victim)
    args = ["prepare", "cifar10", "--source", str(folder), "--out", str(tmp_path / "out"), "--set", "verify_md5=false"]
    assert main(args) == 2
    assert str(tmp_path / ".out.lock") in one_line(capsys)
    assert victim.read_text() == "precious\n" and not (tmp_path / "out").exists()


def test_a_prepare_that_waited_for_a_concurrent_one_reports_its_result(tmp_path: Path, monkeypatch, capsys) -> None:
    """Three `prepare`s of one --out started together: one prepares; the others looked before it finished
    (the folder not yet prepared) and got the lock after. They report the finished folder, exit 0, instead
    of refusing it as "exists and is not a prepared cifar10 folder" (the sweep's spurious failure)."""
    import tasks.cifar10.prepare as cifar_prepare

    folder = write_tiny(tmp_path / "src")
    out = tmp_path / "out"
    args = ["prepare", "cifar10", "--source", str(folder), "--out", str(out), "--set", "verify_md5=false"]
    assert main(args) == 0  # the one that finished first
    first = capsys.readouterr().out
    looked = []
    real = cifar_prepare.prepared

    def not_yet_on_first_look(path, task=None):
        looked.append(path)
        return None if len(looked) == 1 else real(path, task)

    monkeypatch.setattr(cifar_prepare, "prepared", not_yet_on_first_look)
    assert main(args) == 0
    assert capsys.readouterr().out == first and len(looked) == 1


def test_prepare_from_a_folder_takes_the_batches_only(tmp_path: Path) -> None:
    """A colleague's cifar-10-batches-py/ with a link to a private file beside the batches: the prepared
    set holds the seven files the task reads, not the private one."""
    from tasks.cifar10.prepare import prepare

    folder = write_tiny(tmp_path / "src")
    secret = tmp_path / "id_rsa"
    secret.write_text("private\n")
    (folder / "notes.txt").symlink_to(secret)
    record = prepare(folder, tmp_path / "out", progress=False, verify_md5=False)
    assert record["placed"] == {"hardlink": 7}
    assert not (tmp_path / "out" / "cifar-10-batches-py" / "notes.txt").exists()


@pytest.mark.parametrize("value", ["maybe", "[1,2]", "1"])
def test_a_yes_no_prepare_option_takes_only_yes_or_no(tmp_path: Path, capsys, value: str) -> None:
    """verify_md5=maybe read as 'yes' (the md5 check then refused the tiny set); now one line."""
    folder = write_tiny(tmp_path / "src")
    base = ["prepare", "cifar10", "--source", str(folder), "--out", str(tmp_path / "out")]
    assert main([*base, "--set", f"verify_md5={value}"]) == 2
    err = one_line(capsys)
    assert "verify_md5" in err and "true or false" in err
    assert main([*base, "--set", "verify_md5=false"]) == 0  # the control
