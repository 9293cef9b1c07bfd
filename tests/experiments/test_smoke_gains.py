"""The offline gains over a results folder (the smoke's, and `adascale-bench gain DIR` after a matrix): over several
processes the same files, bit for bit, as one after another (each run's estimate draws from its own seeded stream),
in the runs' order; a folder measured is not measured again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.files import OFFLINE_GAIN
from bench.experiments import matrix as matrices
from bench.experiments.gains import offline_gains
from bench.experiments.pool import run_matrix

CASE = """preset: tiny
seeds: [0, 1, 2]
experiments:
  - gain:
      tasks: [logreg]
      scale: 8
      every: 7
      set: {T1: 300}
"""
TABLE = """  - table2:
      tasks: [logreg]
      methods: [adascale]
      scales: [1]
      seeds: [0]
      set: {T1: 300}
"""


def test_offline_gains_over_two_processes_equal_one_after_another(tmp_path: Path) -> None:
    (tmp_path / "case.yaml").write_text(CASE)
    one = tmp_path / "one"
    assert run_matrix(matrices.load(str(tmp_path / "case.yaml")), one, progress=False, jobs=1) == {"completed": 3}
    two = tmp_path / "two"
    shutil.copytree(one, two)
    serial = offline_gains(one, batches=8, jobs=1)
    parallel = offline_gains(two, batches=8, jobs=2)
    assert [d.relative_to(one) for d, _ in serial] == [d.relative_to(two) for d, _ in parallel] and len(serial) == 3
    assert [t for _, t in serial] == [t for _, t in parallel]
    for (a, _), (b, _) in zip(serial, parallel, strict=True):
        assert (a / OFFLINE_GAIN).read_bytes() == (b / OFFLINE_GAIN).read_bytes()
    assert offline_gains(two, batches=8, jobs=2) == []  # measured once: nothing newer to measure again


def test_gain_on_a_results_folder_measures_every_run_that_kept_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gain DIR` on a matrix's folder (the control's H4 references): each run with kept weights once, the others
    (a table run keeping none) left alone; a second call measures nothing; a folder that is neither is one line."""
    (tmp_path / "case.yaml").write_text(CASE.replace("seeds: [0, 1, 2]", "seeds: [0, 1]") + TABLE)
    out = tmp_path / "out"
    assert run_matrix(matrices.load(str(tmp_path / "case.yaml")), out, progress=False, jobs=1) == {"completed": 3}
    assert main(["gain", str(out), "--batches", "8", "--jobs", "2"]) == 0
    printed = capsys.readouterr().out
    assert "gain: 2 runs measured" in printed and len(list(out.rglob(OFFLINE_GAIN))) == 2
    assert main(["gain", str(out), "--batches", "8"]) == 0
    assert "gain: 0 runs measured" in capsys.readouterr().out
    kept = next(out.rglob("checkpoints"))  # someone else's folder: a dangling link planted among the kept weights
    (kept / "iter9999999.pt").symlink_to(tmp_path / "gone.pt")
    assert main(["gain", str(out), "--batches", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "Traceback" not in err and "iter9999999.pt" in err, err
    assert main(["gain", str(tmp_path / "nowhere")]) == 2
    assert "not a run folder (no spec.json) nor a results folder" in capsys.readouterr().err
