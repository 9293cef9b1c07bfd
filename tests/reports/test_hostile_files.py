"""Run files planted by someone else or damaged past their type: a FIFO or a device where a run file
belongs (it would block `report`/`status` forever), JSON nested deeper than the parser's recursion limit
(a RecursionError traceback), a task name holding a lone surrogate (an encode traceback) or 10 000
characters (file names too long for the file system). Each gives a warning naming the file, or is written
safely, and `report` and `status` finish; the intact folder is the control (no warning)."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.files import LOCK, METRICS, SPEC, SUMMARY, read_json
from reports import build, figures
from slurm.records import JOB
from slurm.status import MANIFEST, collect, table
from tests.helpers import finished_results

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(120)]
DEEP = "[" * 100_000 + "]" * 100_000  # past json's recursion limit


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return finished_results(tmp_path_factory.mktemp("hostile") / "out")


@pytest.fixture
def results(finished: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    return out


def run_dir_of(out: Path) -> Path:
    (spec,) = out.rglob(SPEC)
    return spec.parent


def report_and_status(out: Path, capsys, monkeypatch, figures_too: bool = False) -> tuple[list[str], str]:
    if not figures_too:
        monkeypatch.setattr(figures, "KINDS", {})
        monkeypatch.setattr(figures, "KINDS", {})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        build.build_report(out, ["md", "csv", "html"])
    table(collect(out))
    assert main(["status", str(out)]) in (0, 1)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return [str(w.message) for w in record], err


def test_the_intact_folder_is_the_control(results: Path, capsys, monkeypatch) -> None:
    warned, err = report_and_status(results, capsys, monkeypatch)
    assert not [w for w in warned if "skipped" in w or "cannot read" in w] and "warning" not in err


@pytest.mark.parametrize("file", [METRICS, SUMMARY, SPEC])
def test_a_fifo_in_place_of_a_run_file_is_skipped_not_waited_on(results: Path, capsys, monkeypatch, file: str) -> None:
    path = run_dir_of(results) / file
    path.unlink()
    os.mkfifo(path)
    warned, _ = report_and_status(results, capsys, monkeypatch)
    assert any(str(path) in w for w in warned), warned


def test_a_fifo_lock_or_job_log_does_not_block_status(results: Path, capsys) -> None:
    run = run_dir_of(results)
    (run / SUMMARY).unlink()  # so status looks at the lock
    (run / LOCK).unlink(missing_ok=True)
    os.mkfifo(run / LOCK)
    os.mkfifo(run / "job.err")
    (run / JOB).write_text(json.dumps({"executor": "debug", "job_id": "7", "stderr": str(run / "job.err")}))
    table(collect(results))
    assert main(["status", str(results)]) in (0, 1)
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("file", [SPEC, SUMMARY, METRICS, JOB, MANIFEST])
def test_json_nested_past_the_parser_is_a_warning(results: Path, capsys, monkeypatch, file: str) -> None:
    path = results / MANIFEST if file == MANIFEST else run_dir_of(results) / file
    if file == METRICS:
        with open(path, "a") as f:
            f.write(DEEP + "\n")
    else:
        path.write_text(DEEP)
    warned, err = report_and_status(results, capsys, monkeypatch)
    if file in (SPEC, SUMMARY, METRICS):
        assert any(str(path) in w for w in warned), warned


def test_odd_task_names_are_written_safely(results: Path, capsys, monkeypatch) -> None:
    path = run_dir_of(results) / SPEC
    spec = read_json(path)
    spec["task"] = "log\udcffreg"  # a lone surrogate, as a JSON escape "\udcff" gives
    path.write_text(json.dumps(spec))
    report_and_status(results, capsys, monkeypatch)
    assert "\\udcff" in (results / "report" / "table2.md").read_text()
    spec["task"] = "t" * 10_000
    path.write_text(json.dumps(spec))
    warned, _ = report_and_status(results, capsys, monkeypatch, figures_too=True)
    assert not [w for w in warned if "File name too long" in w], [w[:200] for w in warned]
    assert all(len(p.name) < 255 for p in (results / "report").iterdir())
    assert all(len(w) < 2000 for w in warned)


@pytest.mark.parametrize("planted", ["report", "report/cache"])
def test_a_linked_report_folder_is_refused(results: Path, tmp_path: Path, capsys, planted: str) -> None:
    """A planted `report` (or its cache) link would have report write figures there and delete the PNGs
    it finds; refused in one line, nothing written or deleted there. Without the link: the control."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "holiday.png").write_bytes(b"mine")
    (results / planted).parent.mkdir(parents=True, exist_ok=True)
    (results / planted).symlink_to(elsewhere, target_is_directory=True)
    assert main(["report", str(results), "--format", "md"]) == 2
    err = capsys.readouterr().err
    assert "is a link" in err and len(err.strip().splitlines()) == 1, err
    assert [p.name for p in elsewhere.iterdir()] == ["holiday.png"]
    (results / planted).unlink()
    assert main(["report", str(results), "--format", "md"]) == 0
    assert (results / "report" / "table2.md").is_file()
