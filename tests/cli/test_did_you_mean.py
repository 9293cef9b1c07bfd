"""A mistyped name gets the name that was meant, and `status` fits a terminal (issue 56): through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from tests.reports.test_reports import write_run


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["reprot", "runs"], "did you mean report?"),
        (["statsu", "runs"], "did you mean status?"),
        (["run", "--task", "logre", "--method", "adascale", "--scale", "2"], "did you mean logreg?"),
        (["run", "--task", "logreg", "--method", "adascle", "--scale", "2"], "did you mean adascale?"),
        (["run", "--task", "logreg", "--preset", "tiyn", "--scale", "2"], "did you mean tiny?"),
        (["plan", "papr"], "did you mean paper?"),
    ],
)
def test_a_mistyped_name_gets_the_one_that_was_meant(
    argv: list[str], meant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*argv, "--out", str(tmp_path / "out")] if argv[0] == "run" else argv
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors exit
        code = e.code
    err = capsys.readouterr().err
    assert code != 0 and meant in err and len(err.strip().splitlines()) == 1, err


def test_status_of_a_smoke_shaped_folder_fits_160_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The smoke's shapes: shared S = 1 runs, kept-checkpoint variants, a control variant, a long set of
    overrides and a failed run with a long error; no line past 160 characters."""
    out = tmp_path / "smoke"
    long = {f"model.some_rather_long_setting_{k}": 1000 + k for k in range(6)}
    kept = {"keep_checkpoints_every": 12, "keep_checkpoints_until": 0.1}
    for task in ("cifar10", "logreg", "transformer"):
        for method, scale, overrides in (("adascale", 1, {}), ("lsw+", 8, {}), ("adascale", 8, kept), ("lsw", 4, long)):
            run = write_run(out, task, method, scale, 0)
            spec = json.loads((run / "spec.json").read_text())
            (run / "spec.json").write_text(json.dumps(spec | {"overrides": overrides}))
            new = run.with_name(f"seed0,{len(overrides)}") if overrides else run
            run.rename(new)
    failed = write_run(out, "logreg", "lsw", 2, 1, status="failed", summary_extra={"error": "x" * 400})
    assert failed.exists()
    main(["status", str(out)])
    printed = capsys.readouterr().out
    assert "adascale*" in printed and "* shared: AS = LSW = LSW+ at S = 1" in printed
    assert "checkpoints every 12, until 0.1·T1" in printed
    assert max(len(line) for line in printed.splitlines()) <= 160, max(printed.splitlines(), key=len)
    assert "x" * 150 in printed.replace("\n    ", "")  # a failed run's reason wrapped, never cut
