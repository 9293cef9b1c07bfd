"""advise finds its probe by the full resolved spec (issue 59.4b): a second advise with another --set into the
same folder reads its own probe, never the first, and its verify.yaml carries its own settings."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bench.cli import main

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(300)]
ARGS = ["advise", "--task", "logreg", "--scales", "1,2,4", "--probe-scale", "2", "--seeds", "2"]


def test_a_second_advise_with_other_settings_reads_its_own_probe(tmp_path: Path, capsys) -> None:
    out, data = tmp_path / "o", tmp_path / "mydata"
    for t1 in (40, 60):
        argv = [*ARGS, "--set", f"T1={t1}", "--data-root", str(data), "--out", str(out)]
        assert main(argv) == 0
        md = (out / "advice.md").read_text()
        assert f"T1 = {t1} iterations" in md and f"T1={t1}" in md.split("Probe:")[1].splitlines()[0], md
    capsys.readouterr()
    doc = yaml.safe_load((out / "verify.yaml").read_text())
    # logreg's data is drawn, not read: no data_roots to carry; the probe's kept weights (its sharpness, 3 points
    # over at least T1/S iterations) in every run's settings, so the verification's runs share the probe's table
    assert doc["set"] == {"T1": 60, "keep_checkpoints_every": 10}
