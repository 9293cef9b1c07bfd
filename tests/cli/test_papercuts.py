"""The command line's papercuts (#40): help that says what a flag does and its default, a near-miss method
named, a finished run said to be finished, a folder that holds no results said to be none, and `report` /
`plan` output a reader can take in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import build_parser, main

ARGS = ["--task", "logreg", "--scale", "2", "--set", "T1=40", "--set", "eval_every=20"]


def _help(command: str) -> str:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return " ".join(sub.choices[command].format_help().split())  # as one line: argparse wraps


def test_help_says_what_each_flag_does_and_its_default() -> None:
    smoke, sweep, run = _help("smoke"), _help("sweep"), _help("run")
    assert "(default: runs/smoke)" in smoke and "(default: 3)" in smoke
    assert "(default: runs/sweep)" in sweep
    assert "(default: 0)" in run and "(default: tiny)" in run
    assert "control" in _help("matrix") and "control" in _help("plan")


def test_a_near_miss_method_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["run", *ARGS, "--method", "adascal", "--out", str(tmp_path)]) == 2
    assert "did you mean adascale?" in capsys.readouterr().err


def test_a_finished_run_run_again_says_it_was_already_complete(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["run", *ARGS, "--method", "adascale", "--out", str(tmp_path)]) == 0
    first = capsys.readouterr().out
    assert first.startswith("completed: logreg adascale S = 2 seed 0") and " s)" in first
    assert main(["run", *ARGS, "--method", "adascale", "--out", str(tmp_path)]) == 0
    again = capsys.readouterr().out
    assert again.startswith("already complete, nothing trained: logreg adascale S = 2") and " s)" not in again
    assert main(["report", str(tmp_path), "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "report" / "report.html")
    assert main(["report", str(tmp_path), "--format", "md"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) < 15 and printed[-1].startswith("report: ")  # the grids, not the findings in full


def test_status_on_a_folder_without_results_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    deep = tmp_path / "pytest-of-me" / "pytest-1" / "test_x0" / "out"  # run files, but not a run folder's place
    deep.mkdir(parents=True)
    (deep / "spec.json").write_text("{}")
    (tmp_path / "a" / "b" / "c" / "d").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c" / "d" / "spec.json").write_text("{}")
    assert main(["status", str(tmp_path)]) == 2
    assert "is not a results folder" in capsys.readouterr().err


def test_plan_json_has_the_paper_point_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "paper", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cell = next(c for c in doc["cells"] if (c["task"], c["method"], c["scale"]) == ("cifar10", "adascale", "8"))
    assert cell["paper_iterations"] == 5850 and cell["iterations"] == [4888, 39100]
    assert cell["hours"][0] < cell["hours_at_paper"] < cell["hours"][1]
    assert main(["plan", "paper"]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 120 for line in out.splitlines())


def test_status_names_a_sweep_run_by_its_rule_and_a_finished_run_at_100_percent() -> None:
    from bench.experiments.names import method_name, variant_name
    from slurm.progress import Progress
    from slurm.status import RunState, _cell_progress

    spec = {"method": "identity", "experiment": {"kind": "sweep", "method": "linear", "batch": 1024}}
    spec["overrides"] = {"target": 0.2565547538056714, "batch_size": 1024}
    assert (method_name(spec), variant_name(spec)) == ("sweep linear", "batch 1024")
    assert variant_name({"overrides": {"lr_schedule.decay": 1.0, "target": 0.2565547538056714}}) == (
        "decay 1, target 0.2566"
    )
    done = RunState("logreg/adascale/s8/seed0", "done", progress=Progress(tau=2040.0, T1=2000.0))
    assert _cell_progress([done])[0] == "100%"
