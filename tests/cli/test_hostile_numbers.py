"""Numbers past their machine type or any sane bound, through the real commands: each is one line naming the value
(exit 2), never a traceback, nothing trained; and every reader of a run file reads any JSON number a damaged or
hostile file holds (huge integers, 1e400, -0, NaN and Infinity literals) without a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.files import METRICS, SPEC
from tests.helpers import finished_results

RUN = ["run", "--task", "logreg", "--method", "adascale", "--set", "T1=10"]
HUGE = str(10**29)

BAD_RUNS = [
    (["--scale", "2", "--seed", HUGE], "--seed"),
    (["--scale", "2", "--set", f"seed={HUGE}"], "seed="),
    (["--scale", "2", "--set", "batch_size=1000000000000"], "batch_size=1000000000000"),
    (["--scale", str(10**12)], "scale '1000000000000'"),
    (["--scale", "2", "--set", "threads=100000000"], "threads=100000000"),
    (["--scale", "2", "--set", "num_workers=100000000"], "num_workers=100000000"),
    (["--scale", "2", "--set", "checkpoint_every=" + HUGE], "checkpoint_every="),
    (["--scale", "2", "--ranks", "100000"], "--ranks"),
    (["--scale", "elastic-up", "--set", "elastic.up=[[0, 2.5]]"], "S 2.5 is not an integer"),
    (["--scale", "elastic-up", "--set", "elastic.up=[[0, 2], [1.5, 4]]"], "past 1"),
]


def cli(argv: list[str]) -> int:
    """main's exit status, argparse's refusals (SystemExit 2) included."""
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


@pytest.mark.parametrize(("extra", "named"), BAD_RUNS, ids=[" ".join(b[0]) for b in BAD_RUNS])
def test_a_number_past_its_bound_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, extra, named) -> None:
    rc = cli([*RUN, "--out", str(tmp_path), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and named in err, err
    assert err.count("error:") == 1 and not err.split("error:")[1].strip().count("\n"), err
    assert not any(tmp_path.iterdir())  # nothing built


def test_advise_seeds_past_the_bound_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = (
        ("--seeds", "100000000"), ("--probe-seed", HUGE), ("--probe-scale", str(10**12)), ("--probe-seeds", "0"),
        ("--probe-seeds", "1000"), ("--low-probe-scale", "-1"), ("--low-probe-scale", str(10**12)),
        ("--low-probe-scale", "128"),  # not below the high probe's S (the largest of the default --scales)
        ("--mid-probe-scale", "-1"), ("--mid-probe-scale", str(10**12)), ("--mid-probe-scale", "8"),  # 8: the low one's
        ("--most-probe-seeds", "0"), ("--most-probe-seeds", "1000"),
    )  # fmt: skip
    for flag, value in bad:
        rc = cli(["advise", "--task", "logreg", "--out", str(tmp_path / "a"), flag, value])
        err = capsys.readouterr().err
        assert rc == 2 and flag in err and "Traceback" not in err, err
    assert not (tmp_path / "a").exists()


def test_gain_on_a_kept_spec_with_a_huge_seed_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = finished_results(tmp_path / "out")
    (spec_path,) = out.rglob(SPEC)
    spec = json.loads(spec_path.read_text())
    spec_path.write_text(json.dumps({**spec, "seed": 10**29}))
    capsys.readouterr()
    assert main(["gain", str(spec_path.parent)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "seed=" in err and str(spec_path) in err and "Traceback" not in err, err


# -- every reader of a run file, any JSON number ----------------------------------------------------------------
HUGE_INT = "1" + "0" * 400  # json reads an int past float's range: float() of it is an OverflowError
ODD = {  # what a damaged or hostile record may hold where a number belongs: each read as absent, never as a number
    1: {"gain": HUGE_INT, "iteration": "true"},
    2: {"tau": "1e400", "loss": "NaN"},
    3: {"gain": '"7"', "iteration": "[1]"},
    4: {"gain": "Infinity", "lr": "-Infinity"},
}
ODD_EVAL = {"metric": HUGE_INT, "iteration": "NaN", "wall_time_s": "true", "epochs": "1e400"}


def kept_args(method: str) -> list[str]:
    sets = ["T1=20", "eval_every=10", "keep_checkpoints_every=10", "ttt_target=0.1"]
    return ["run", "--task", "logreg", "--method", method, "--scale", "2", *(x for s in sets for x in ("--set", s))]


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder with one finished logreg run whose spec fixes a time-to-target threshold, with kept
    weights and its offline_gain.csv: what report (time to target, lag match), status and gain read."""
    out = tmp_path_factory.mktemp("numbers") / "out"
    assert main([*kept_args("adascale"), "--out", str(out)]) == 0
    (spec,) = out.rglob(SPEC)
    assert main(["gain", str(spec.parent), "--batches", "2"]) == 0
    return out


def plant(line: str, fields: dict[str, str]) -> str:
    """A JSON line with each field's value replaced by the raw JSON text given (json.dumps cannot write them)."""
    record = json.loads(line)
    for key in fields:
        record[key] = f"@{key}@"
    text = json.dumps(record)
    for key, raw in fields.items():
        text = text.replace(f'"@{key}@"', raw)
    return text


def commands(out: Path, run: Path, capsys: pytest.CaptureFixture) -> dict[str, tuple[int, str]]:
    said = {}
    for name, argv in {
        "report": ["report", str(out), "--format", "md,csv,txt"],
        "status": ["status", str(out)],
        "status --json": ["status", str(out), "--json"],
        "gain": ["gain", str(run), "--batches", "2"],
    }.items():
        rc = cli(argv)
        said[name] = (rc, capsys.readouterr().err)
    return said


def test_every_reader_of_a_run_file_reads_any_json_number(kept_run: Path, tmp_path: Path, capsys) -> None:
    """10**400, 1e400, NaN, ±Infinity, true, "7" and [1] where metrics.jsonl, summary.json and offline_gain.csv hold
    numbers: report (its time to target, its lag match), status and gain finish without a traceback, each such value
    read as absent (True is no 1, 10**400 no OverflowError) with a warning naming the file; the intact folder is
    the control (no such warning)."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(kept_run, out)
    (spec,) = out.rglob(SPEC)
    run = spec.parent
    control = commands(out, run, capsys)
    assert all(rc == 0 and str(run) not in err for rc, err in control.values()), control
    metrics = run / METRICS
    lines = metrics.read_text().splitlines()
    first_eval = next(i for i, line in enumerate(lines) if '"eval"' in line)
    lines = [plant(line, ODD.get(i, {})) for i, line in enumerate(lines)]
    lines[first_eval] = plant(lines[first_eval], ODD_EVAL)
    metrics.write_text("\n".join(lines) + "\n")
    summary = run / "summary.json"
    summary.write_text(
        plant(summary.read_text().replace("\n", ""), {"tau": HUGE_INT, "iterations": "true", "val_metric": '"0.5"'})
    )
    csv = run / "offline_gain.csv"
    head, *rows = csv.read_text().splitlines()
    rows[0] = ",".join(HUGE_INT if i == 1 else v for i, v in enumerate(rows[0].split(",")))  # its tau
    csv.write_text("\n".join([head, *rows]) + "\n")
    said = commands(out, run, capsys)
    for name, (rc, err) in said.items():
        assert rc == 0 and "Traceback" not in err, (name, err[-3000:])
    assert cli([*kept_args("adascale"), "--out", str(out)]) == 0  # the finished run, described again
    assert "already complete" in capsys.readouterr().out
    assert f"{metrics}: " in said["gain"][1] and "record(s) whose iteration or gain is not a number" in said["gain"][1]
    from reports.rundata import collect

    res = collect.load(out)
    train, evals = res.metrics(str(run))
    assert any(str(metrics) in w and "not a finite number ignored" in w for w in res.warnings), res.warnings
    by_row = train.reset_index(drop=True)
    assert by_row["gain"].isna().sum() == 3 and not (by_row["gain"] == 1).any()  # true, "7", inf: absent
    assert evals["metric"].isna().sum() == 1 and evals["wall_time_s"].isna().sum() == 1


@pytest.mark.parametrize("T1", [HUGE_INT, "1e-300", "true"])
def test_status_reads_any_json_number_as_a_spec_or_a_log_holds_it(kept_run: Path, tmp_path: Path, capsys, T1) -> None:
    """A run stopped (no summary) whose spec's T1 is 10**400, 1e-300 (τ/T1 past float's range) or true and whose
    last record's τ is 1e300: status shows no share (never 'inf%', never round()'s OverflowError, never T1 = 1)."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(kept_run, out)
    (spec,) = out.rglob(SPEC)
    spec.write_text(plant(spec.read_text().replace("\n", ""), {"T1": T1}))
    (spec.parent / "summary.json").unlink()
    job = {"executor": "debug", "job_id": "7", "submitted_at": "@", "stderr": None}
    (spec.parent / "job.json").write_text(json.dumps(job).replace('"@"', HUGE_INT))  # (10**400 s: OverflowError)
    metrics = spec.parent / METRICS
    lines = [line for line in metrics.read_text().splitlines() if '"eval"' not in line]
    metrics.write_text("\n".join([*lines[:-1], plant(lines[-1], {"tau": "1e300"})]) + "\n")
    said = commands(out, spec.parent, capsys)
    assert all("Traceback" not in err for _, err in said.values()), said
    assert said["status"][0] in (0, 1) and said["report"][0] in (0, 1)  # (1: no finished run to tabulate)
    assert cli(["status", str(out)]) in (0, 1)
    table = capsys.readouterr().out
    assert "%" not in table.split("\n")[2], table


@pytest.mark.parametrize("iterations", ["true", HUGE_INT, "NaN", '"14"'])
def test_lsw_plus_reads_its_adascale_runs_iterations_as_a_number_or_names_the_file(
    kept_run: Path, tmp_path: Path, capsys, iterations: str
) -> None:
    """LSW+ takes T_AS from its AdaScale twin's summary: an iteration count of true (it ran T_AS = 1), 10**400 (an
    OverflowError), NaN or "14" is one line naming that summary, exit 2, nothing trained."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(kept_run, out)
    (summary,) = out.rglob("summary.json")
    summary.write_text(plant(summary.read_text().replace("\n", ""), {"iterations": iterations}))
    rc = cli([*kept_args("lsw+"), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and f"{summary}: field 'iterations'" in err and "Traceback" not in err, err
    assert not list((out / "logreg" / "lsw+").rglob("metrics.jsonl"))


def test_a_job_records_submission_time_is_read_as_a_number_or_not_at_all() -> None:
    """status and submit judge a fresh submission by job.json's submitted_at (slurm.scheduler._seconds, the one
    reading both use): 10**400, 1e400, true or a string is no time (0), not an OverflowError or 1 s."""
    from slurm.scheduler import _seconds

    for raw in (HUGE_INT, "1e400", "NaN", "true", '"5"', "[1]"):
        assert _seconds(json.loads(raw)) == 0.0, raw
    assert _seconds(json.loads("12.5")) == 12.5
