"""Degenerate numbers are data (issue 42): every numeric field `report`, `status` and `gain` read from a
run folder — summary.json, spec.json, each metrics.jsonl column, offline_gain.csv — set to 0, ∞, NaN, a
negative number, a huge one or 1e400 (an overflow to ∞ when parsed) reaches the formulas as a stated
status or a one-line warning naming the file and field (reports.rundata.guards, the one home), never a
traceback; `status --json` stays strict JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.files import METRICS, OFFLINE_GAIN, SPEC, SUMMARY

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(300)]
RUN = ["--set", "T1=40", "--set", "eval_every=10", "--set", "checkpoint_every=10", "--set", "keep_checkpoints_every=10"]
VALUES = {"zero": "0", "inf": "Infinity", "nan": "NaN", "negative": "-5", "huge": "1e300", "overflow": "1e400"}
SUMMARY_FIELDS = ["B_simple", "T_AS", "epochs", "iterations", "mean_gain", "noise_scale", "tau", "train_loss",
                  "val_metric", "wall_time_s", "target_epochs"]  # fmt: skip
METRICS_FIELDS = ["gain", "var", "sqr", "sum_sq", "mean_sq", "loss", "tau", "scale", "lr", "progress", "iteration"]
CSV_FIELDS = ["offline_gain", "var", "sqr", "batches", "scale", "offline_B", "batch_size", "exact_gain", "iteration",
              "tau"]  # fmt: skip
SPEC_FIELDS = ["T1", "batch_size", "scale"]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """AdaScale at S = 1, 2, 4 and LSW at S = 2 (logreg, T1 = 40), the S = 2 run with its offline gain."""
    out = tmp_path_factory.mktemp("degenerate") / "out"
    for method, scale in (("adascale", 1), ("adascale", 2), ("adascale", 4), ("lsw", 2)):
        argv = ["run", "--task", "logreg", "--method", method, "--scale", str(scale), *RUN, "--out", str(out)]
        assert main(argv) == 0
    assert main(["gain", str(s2(out)), "--batches", "4"]) == 0
    return out


def s2(out: Path) -> Path:
    return next(out.glob("logreg/adascale/s2/*"))


def set_json(path: Path, fields: list[str], raw: str) -> None:
    d = json.loads(path.read_text())
    for f in fields:
        d[f] = f"@@{f}"
    text = json.dumps(d, indent=2)
    for f in fields:
        text = text.replace(f'"@@{f}"', raw)
    path.write_text(text)


def set_metrics(path: Path, fields: list[str], raw: str) -> None:
    lines = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        text = json.dumps({k: (f"@@{k}" if k in fields else v) for k, v in d.items()})
        for f in fields:
            text = text.replace(f'"@@{f}"', raw)
        lines.append(text)
    path.write_text("\n".join(lines) + "\n")


def set_csv(path: Path, fields: list[str], raw: str) -> None:
    raw = {"Infinity": "inf", "NaN": "nan"}.get(raw, raw)
    head, *rows = path.read_text().splitlines()
    cols = head.split(",")
    cells = [r.split(",") for r in rows]
    for f in fields:
        for r in cells:
            r[cols.index(f)] = raw
    path.write_text("\n".join([head, *(",".join(r) for r in cells)]) + "\n")


def commands(out: Path, run: Path) -> list[list[str]]:
    return [["report", str(out), "--format", "md,csv"], ["status", str(out), "--json"], ["status", str(out)]]


def check(out: Path, run: Path, capsys, extra: list[list[str]] = ()) -> None:
    for argv in [*commands(out, run), *extra]:
        rc = main(argv)
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err, (argv, captured.err[-3000:])
        assert rc in (0, 1, 2), (argv, rc)
        if rc == 2:
            assert len([x for x in captured.err.splitlines() if "error" in x]) == 1, captured.err
        if "--json" in argv:
            json.loads(captured.out, parse_constant=lambda c: pytest.fail(f"status --json printed {c}"))


def case(base: Path, tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "out"
    shutil.copytree(base, out, symlinks=True)
    return out, s2(out)


def _params(kind: str) -> list:
    return [pytest.param(v) for v in VALUES]


# One statistic in turn: σ² = 0 in the late window (every micro-batch gradient equal: sum_sq = 0, or
# mean_sq = 0, or a huge sum_sq whose σ² estimate is clamped) once reached a division by the late noise scale
# in findings.check_iii.
STATISTICS = ["sum_sq", "mean_sq", "var", "sqr", "scale", "gain"]
IN_TURN = [pytest.param(f, v) for f in STATISTICS for v in ("zero", "huge", "overflow")]


@pytest.mark.parametrize("value", _params("summary"))
def test_every_summary_number(base: Path, tmp_path: Path, capsys, value: str) -> None:
    out, run = case(base, tmp_path)
    set_json(run / SUMMARY, SUMMARY_FIELDS, VALUES[value])
    check(out, run, capsys)


@pytest.mark.parametrize("value", _params("metrics"))
def test_every_metrics_column(base: Path, tmp_path: Path, capsys, value: str) -> None:
    out, run = case(base, tmp_path)
    set_metrics(run / METRICS, METRICS_FIELDS, VALUES[value])
    check(out, run, capsys)


@pytest.mark.parametrize(("field", "value"), IN_TURN)
def test_each_gradient_statistic_in_turn(base: Path, tmp_path: Path, capsys, field: str, value: str) -> None:
    out, run = case(base, tmp_path)
    set_metrics(run / METRICS, [field], VALUES[value])
    check(out, run, capsys)


@pytest.mark.parametrize("value", _params("csv"))
def test_every_offline_gain_column(base: Path, tmp_path: Path, capsys, value: str) -> None:
    out, run = case(base, tmp_path)
    set_csv(run / OFFLINE_GAIN, CSV_FIELDS, VALUES[value])
    check(out, run, capsys)


@pytest.mark.parametrize("field", SPEC_FIELDS)
@pytest.mark.parametrize("value", _params("spec"))
def test_each_spec_number_in_turn(base: Path, tmp_path: Path, capsys, field: str, value: str) -> None:
    """The run's identity numbers: the report leaves the run out with a warning naming the field; `gain`
    refuses the folder in one line (its identity no longer matches its weights) or goes on."""
    out, run = case(base, tmp_path)
    set_json(run / SPEC, [field], VALUES[value])
    check(out, run, capsys, [["gain", str(run), "--batches", "2"]])


def test_a_warning_names_the_file_and_field(base: Path, tmp_path: Path, capsys) -> None:
    out, run = case(base, tmp_path)
    set_json(run / SUMMARY, ["iterations"], "0")
    with pytest.warns(UserWarning) as record:
        assert main(["report", str(out), "--format", "csv"]) in (0, 1)
    said = [str(w.message) for w in record if "iterations" in str(w.message)]
    assert said and str(run / SUMMARY) in said[0] and "not in (0" in said[0], said


@pytest.mark.parametrize("argv", [["--watch", "inf"], ["--watch", "1e400"], ["--watch", "nan"], ["--watch", "0"]])
def test_status_watch_out_of_range_is_one_line(base: Path, capsys, argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["status", str(base), *argv])
    assert e.value.code == 2 and "Traceback" not in capsys.readouterr().err


def test_gain_batches_bounded(base: Path, capsys) -> None:
    for n in ("1e9", "1000000000"):
        with pytest.raises(SystemExit) as e:
            main(["gain", str(s2(base)), "--batches", n])
        assert e.value.code == 2
    assert "--batches" in capsys.readouterr().err


def test_durations_and_heartbeat_eta_never_overflow() -> None:
    import io

    from bench.core.engine.heartbeat import Heartbeat
    from slurm.progress import duration

    assert duration(float("inf")) == "-" and duration(float("nan")) == "-" and duration(1e300).startswith(">")
    clock = iter([0.0, 10.0])
    stream = io.StringIO()
    beat = Heartbeat(1.0, "x", 1e20, stream=stream, clock=lambda: next(clock))
    beat.start(0, 0.0)
    assert beat.beat(10, 1.0, 2, 0.5, 1.0, 0.1)
    assert "ETA >1000 days" in stream.getvalue()


def test_a_header_only_offline_gain_csv(base: Path, tmp_path: Path, capsys) -> None:
    out, run = case(base, tmp_path)
    path = run / OFFLINE_GAIN
    path.write_text(path.read_text().splitlines()[0] + "\n")
    check(out, run, capsys)


def test_a_gain_that_is_no_number(base: Path, tmp_path: Path, capsys) -> None:
    out, run = case(base, tmp_path)
    set_csv(run / OFFLINE_GAIN, ["offline_gain"], "x")
    check(out, run, capsys)


def test_a_float_frame_in_range_is_returned_as_it_is_and_one_out_of_range_the_long_way() -> None:
    """guards.frame's look at a float frame's block (`_all_in_range`) passes a frame only where the column by column
    check would change nothing (NaN is absent, not out of range); a negative gain, an infinite τ or a NaN-free column
    out of range goes the long way, with its warning, as before."""
    import numpy as np
    import pandas as pd

    from reports.rundata import guards

    clean = pd.DataFrame({"tau": [0.0, 1.0], "gain": [1.0, np.nan], "loss": [-3.0, 2.0], "other": [-np.inf, 1.0]})
    said: list[str] = []
    assert (
        guards.frame(clean, "m.jsonl", said.append) is clean and not said
    )  # a loss any finite number; a column without a rule anything
    for col, value in (("gain", -1.0), ("tau", np.inf), ("sum_sq", -0.5)):
        bad = clean.assign(**{col: [1.0, value]})
        assert not guards._all_in_range(bad, guards.METRICS_RANGES)
        fixed = guards.frame(bad, "m.jsonl", said.append)
        assert np.isnan(fixed[col].iloc[1]) and said[-1].startswith(f"m.jsonl: field {col!r} is ")
