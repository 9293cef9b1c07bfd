"""Small promises of the command line: --version, the choices `run --task` offers, and `flops` writing the
shipped table only when asked (--write)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import __version__
from bench.cli import PROG, main
from tasks import available


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"{PROG} {__version__}"


def test_run_task_lists_its_choices_in_help_and_in_the_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--task TASK" in help_text and f"one of {', '.join(available())}, or a task of yours" in help_text
    with pytest.raises(SystemExit) as e:
        main(["run", "--task", "mnist", "--method", "adascale", "--scale", "2"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert "unknown task 'mnist'" in err and all(t in err for t in available()) and "package.module:NAME" in err


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the shipped FLOPs table standing in for it (the real one is never touched by a test)."""
    from bench.experiments import flops, plan

    copy = tmp_path / "flops.csv"
    shutil.copyfile(plan.FLOPS, copy)
    monkeypatch.setattr(flops, "FLOPS", copy)
    return copy


def test_flops_without_write_leaves_the_shipped_table_alone(shipped: Path, capsys) -> None:
    before = shipped.read_bytes()
    assert main(["flops", "--task", "logreg", "--preset", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "TFLOP per micro-batch" in out and "not written" in out
    assert shipped.read_bytes() == before


def test_flops_write_updates_the_shipped_table_or_the_one_named(shipped: Path, tmp_path: Path, capsys) -> None:
    before = shipped.read_bytes()
    other = tmp_path / "other.csv"
    assert main(["flops", "--task", "logreg", "--preset", "tiny", "--write", str(other)]) == 0
    assert shipped.read_bytes() == before and "logreg,tiny," in other.read_text()
    assert main(["flops", "--task", "logreg", "--preset", "tiny", "--write"]) == 0
    assert "logreg,tiny," in shipped.read_text() and str(shipped) in capsys.readouterr().out


def test_gain_help_states_the_batches_it_uses(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    from bench.run.offline_gain import BATCHES

    with pytest.raises(SystemExit):
        main(["gain", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    stated = re.search(r"default: (\d+); tiny: (\d+)", text).groups()
    assert stated == (str(BATCHES["paper"]), str(BATCHES["tiny"]))
