"""Numbers past their machine type or any sane bound, through the real commands: each is one line naming the value
(exit 2), never a traceback, nothing trained; and every reader of a run file reads any JSON number a damaged or
hostile file holds (huge integers, 1e400, -0, NaN and Infinity literals) without a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.files import SPEC
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
    for flag, value in (("--seeds", "100000000"), ("--probe-seed", HUGE), ("--probe-scale", str(10**12))):
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
