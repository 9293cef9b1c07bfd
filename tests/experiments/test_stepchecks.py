"""`perf --check` (bench.experiments.stepchecks): every engine variant's extra iteration is recorded, and the
command fails, in one line each, where a gain leaves [1, S] or an iteration reads the device more than once;
a loss that is not finite stops it as the engine's divergence."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.experiments.stepchecks import COLUMNS, breaches
from tests.tasks.test_user_task import design_blocks

ROW = {"task": "t", "scale": 4, "loss_adascale": 0.5, "gain_adascale": 2.5, "host_syncs_adascale": 1.0}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"gain_adascale": 4.0001}, "gain 4.0001 outside [1, 4]"),
        ({"gain_adascale": 0.9999}, "outside [1, 4]"),
        ({"gain_adascale": math.nan}, "gain nan outside"),
        ({"host_syncs_adascale": 2.0}, "2 host synchronisations per iteration"),
    ],
)
def test_each_check_holds_and_fails(change: dict, says: str) -> None:
    assert breaches(ROW) == [] and breaches({**ROW, "gain_adascale": 1.0}) == []
    assert breaches({**ROW, "gain_adascale": 4.0}) == []
    (line,) = breaches({**ROW, **change})
    assert line.startswith("t S=4 adascale: ") and says in line, line


CHATTY = '''
from mixture import Mixture


class Chatty(Mixture):
    """The docs' task, with a loss that reads its value on the host (one more sync per micro-batch)."""

    def loss(self, model, batch):
        loss = super().loss(model, batch)
        if float(loss) < 0:  # data-dependent control flow: a device read
            raise AssertionError
        return loss


class Broken(Mixture):
    """The docs' task with a loss that is NaN."""

    def loss(self, model, batch):
        return super().loss(model, batch) * float("nan")
'''


def _perf(home: Path, task: str, out: Path, *more: str) -> subprocess.CompletedProcess[str]:
    argv = ["perf", "--task", task, "--repeats", "2", "--check", "--out", str(out), *more]
    return subprocess.run([sys.executable, "-m", "bench", *argv], cwd=home, capture_output=True, text=True, timeout=600)


def test_perf_check_passes_the_engine_and_fails_a_loss_that_reads_the_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "mine"
    home.mkdir()
    (home / "mixture.py").write_text(design_blocks()[0])
    (home / "chatty.py").write_text(CHATTY)
    monkeypatch.setenv("ADASCALE_BENCH_DATA", str(tmp_path / "data"))
    ok = _perf(home, "mixture:Mixture", tmp_path / "ok", "--scales", "1,2", "--amp", "both")
    assert ok.returncode == 0 and "perf --check: 2 cell(s)" in ok.stdout, ok.stderr[-2000:]
    with open(tmp_path / "ok" / "perf.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["gain_adascale"] for r in rows][0] == "1" and 1 < float(rows[1]["gain_adascale"]) <= 2
    assert all(r[c] != "" for r in rows for c in COLUMNS if "batched" not in c)
    bad = _perf(home, "chatty:Chatty", tmp_path / "bad", "--scales", "2", "--amp", "both")
    assert bad.returncode == 1, bad.stderr[-2000:]
    lines = [x for x in bad.stderr.splitlines() if x.startswith("perf --check: ")]
    assert len(lines) == 2 and all("3 host synchronisations per iteration (at most 1)" in x for x in lines), lines
    nan = _perf(home, "chatty:Broken", tmp_path / "nan", "--scales", "1")
    assert nan.returncode != 0 and "diverged at S = 1 during the benchmark" in nan.stderr, nan.stderr[-2000:]
