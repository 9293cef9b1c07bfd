"""No CSV cell the report writes is a formula (issue 42): a label from a run folder starting with = + - @
(`=HYPERLINK(…)` in a summary's metric_label, a rule's label) is written with a leading ' (reports.rundata.guards.
csv_safe), numbers and a lone "-" as they are; and `status` prints a run folder's name with its terminal
control characters escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bench.cli import main
from bench.core.files import SUMMARY
from reports.rundata.guards import cell, csv_safe
from tests.helpers import finished_results

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(180)]
EVIL = '=HYPERLINK("http://x","y")'


def test_cells() -> None:
    assert cell(EVIL) == "'" + EVIL and cell("@SUM(A1)") == "'@SUM(A1)" and cell("+1+cmd") == "'+1+cmd"
    assert cell("-0.5") == "-0.5" and cell("-") == "-" and cell(3.0) == 3.0 and cell("adascale") == "adascale"
    frame = csv_safe(pd.DataFrame({"a": [EVIL, "x"], "b": [1.0, -2.0]}))
    assert list(frame["a"]) == ["'" + EVIL, "x"] and list(frame["b"]) == [1.0, -2.0]


def test_the_report_csvs_hold_no_formula(tmp_path: Path) -> None:
    out = finished_results(tmp_path / "out")
    (summary,) = out.rglob(SUMMARY)
    doc = json.loads(summary.read_text())
    doc["metric_label"] = EVIL
    summary.write_text(json.dumps(doc))
    assert main(["report", str(out), "--format", "csv"]) in (0, 1)
    seen = 0
    for path in (out / "report").glob("*.csv"):
        for row in pd.read_csv(path, dtype=str, keep_default_na=False).itertuples(index=False):
            for value in row:
                seen += EVIL in value
                assert not value.startswith(("=", "+", "@")), (path.name, value)
    assert seen, "the label reached no CSV: the test tests nothing"


def test_status_escapes_control_characters_in_names(tmp_path: Path, capsys) -> None:
    out = finished_results(tmp_path / "out")
    (run,) = [p.parent for p in out.rglob(SUMMARY)]
    evil = run.with_name(run.name + ",x=\x1b[2J\x1b[H\x07")
    run.rename(evil)
    main(["status", str(out)])
    text = capsys.readouterr()
    assert "\x1b" not in text.out and "\x07" not in text.out and "\x1b" not in text.err


def test_status_watch_ends_when_a_job_json_names_pid_1(tmp_path: Path) -> None:
    """A colleague's job.json naming pid 1 (with its true start time) made a run look alive for ever, so
    `status --watch` never ended; a pid counts only as a python process of this user's."""
    import os
    import subprocess
    import sys

    from slurm.records import JOB, process_start

    out = finished_results(tmp_path / "out")
    (summary,) = out.rglob(SUMMARY)
    run = summary.parent
    summary.unlink()
    job = {"executor": "local", "job_id": "local-1", "pid": 1, "pid_start": process_start(1), "started": True,
           "submitted_at": 0, "stderr": None}  # fmt: skip
    (run / JOB).write_text(json.dumps(job))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run(
        [sys.executable, "-m", "bench", "status", str(out), "--watch", "0.2"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in res.stderr and res.returncode in (0, 1), res.stderr
    assert "running" not in res.stdout.split("runs:")[-1], res.stdout
