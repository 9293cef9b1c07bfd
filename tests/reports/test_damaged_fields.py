"""Every field the report and `status` read, of every run file, damaged in turn (a wrong type, a string
where a number belongs, a list where a string belongs), and every file made non-UTF-8: a warning naming
the file, never a traceback (the report's figures are left out here: each figure kind is already guarded
and a failure there is a warning of its own)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.files import METRICS, SPEC, SUMMARY, read_json
from reports import build, figures
from reports.rundata.collect import SUMMARY_FIELDS
from reports.rundata.specfacts import SPEC_FIELDS
from slurm.records import JOB
from slurm.status import MANIFEST, collect, table
from tests.helpers import finished_results

pytestmark = pytest.mark.usefixtures("one_thread")
BAD_VALUES = {"string": "abc", "list": [1, "a"], "mapping": {"k": [1]}}
JOB_FIELDS = ("job_id", "executor", "submitted_at", "stderr", "stdout")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder with one finished logreg run, its job.json and matrix.json."""
    return finished_results(tmp_path_factory.mktemp("damaged") / "out")


@pytest.fixture
def results(finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    monkeypatch.setattr(figures, "KINDS", {})  # tables, findings and html only (see the module docstring)
    monkeypatch.setattr(figures, "KINDS", {})
    return out


def run_dir_of(out: Path) -> Path:
    (spec,) = out.rglob(SPEC)
    return spec.parent


def report_and_status(out: Path, capsys: pytest.CaptureFixture) -> tuple[list[str], str]:
    """The report's warnings and status's stderr; neither may raise."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        build.build_report(out, ["md", "csv", "html"])
    warned = [str(w.message) for w in record]
    table(collect(out))
    assert main(["status", str(out)]) in (0, 1)  # 1: some run failed (its exit code), not a crash
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return warned, err


def damage(path: Path, key: str, value) -> None:
    obj = read_json(path)
    obj[key] = value
    path.write_text(json.dumps(obj))


@pytest.mark.parametrize("kind", sorted(BAD_VALUES))
@pytest.mark.parametrize(("file", "key"), [(SPEC, k) for k in SPEC_FIELDS] + [(SUMMARY, k) for k in SUMMARY_FIELDS])
def test_a_damaged_field_is_a_warning(results: Path, capsys, file: str, key: str, kind: str) -> None:
    path = run_dir_of(results) / file
    value = BAD_VALUES[kind]
    allowed = (SPEC_FIELDS if file == SPEC else SUMMARY_FIELDS)[key]
    if isinstance(value, allowed):  # e.g. a string scale ("elastic-up") or experiment is allowed
        value = 12345.5
    damage(path, key, value)
    warned, _ = report_and_status(results, capsys)
    assert any(str(path) in w and repr(key) in w for w in warned), warned


def test_the_undamaged_folder_gives_no_such_warning(results: Path, capsys) -> None:
    """The control: the same checks find nothing to say about the intact files."""
    warned, err = report_and_status(results, capsys)
    assert not [w for w in warned if "field" in w] and "warning" not in err


@pytest.mark.parametrize("file", [SPEC, SUMMARY, METRICS, JOB, MANIFEST])
def test_non_utf8_bytes_in_any_run_file(results: Path, capsys, file: str) -> None:
    path = results / MANIFEST if file == MANIFEST else run_dir_of(results) / file
    data = path.read_bytes()
    path.write_bytes(data[:10] + b"\xff\xfe" + data[10:])
    warned, err = report_and_status(results, capsys)
    if file in (SPEC, SUMMARY, METRICS):
        assert any(str(path) in w for w in warned), warned
    else:
        assert str(path) in err


@pytest.mark.parametrize(("record", "key"), [(0, k) for k in ("tau", "loss", "gain", "iteration", "scale")]
                         + [(-1, k) for k in ("tau", "metric", "iteration")])  # fmt: skip
@pytest.mark.parametrize("kind", sorted(BAD_VALUES))
def test_a_damaged_metrics_field_is_no_traceback(results: Path, capsys, record: int, key: str, kind: str) -> None:
    path = run_dir_of(results) / METRICS
    lines = path.read_text().splitlines()
    rec = json.loads(lines[record])
    rec[key] = BAD_VALUES[kind]
    lines[record] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    report_and_status(results, capsys)


@pytest.mark.parametrize(
    "job", [{"executor": "debug"}, {"job_id": ["1"]}, {"job_id": "7", "submitted_at": "x", "stderr": 5}, [1], "x"]
)
def test_odd_job_json(results: Path, capsys, job) -> None:
    path = run_dir_of(results) / JOB
    path.write_text(json.dumps(job))
    _, err = report_and_status(results, capsys)
    if not (isinstance(job, dict) and isinstance(job.get("job_id"), str)):
        assert str(path) in err


@pytest.mark.parametrize(
    "manifest", [[], {"runs": []}, {"runs": {"x": 1}}, {"runs": {"../../a/b/c": {}}}, {"matrices": 5, "runs": {}}, "s"]
)
def test_odd_matrix_json(results: Path, capsys, manifest) -> None:
    (results / MANIFEST).write_text(json.dumps(manifest))
    _, err = report_and_status(results, capsys)
    if manifest not in ({"matrices": 5, "runs": {}},):
        assert str(results / MANIFEST) in err


def test_spec_json_that_is_a_list(results: Path, capsys) -> None:
    path = run_dir_of(results) / SPEC
    path.write_text("[1, 2]")
    warned, _ = report_and_status(results, capsys)
    assert any(str(path) in w for w in warned)


@pytest.mark.parametrize("value", ["9" * 5000, "sixteen", "16"])
def test_a_scale_string_that_names_no_schedule_is_a_warning(results: Path, capsys, value: str) -> None:
    """A string is a scale only as an elastic schedule's name: a 5 000-digit one (int() refuses it, float() makes
    it inf) had been read as a number by the report and ended in a traceback; "16" as a string is damage too."""
    path = run_dir_of(results) / SPEC
    damage(path, "scale", value)
    warned, _ = report_and_status(results, capsys)
    assert any(str(path) in w and "'scale'" in w for w in warned), warned
