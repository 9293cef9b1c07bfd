"""Every task's paper preset against the paper's Table 2 (shipped as reports/paper_table2.csv): the S = 1
batch size and T1, and the scales of its rows; and every preset defines every common key."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bench.run.spec import PRESET_KEYS
from tasks import get_task

PAPER = pd.read_csv(Path(__file__).resolve().parents[2] / "reports" / "paper_table2.csv", dtype={"scale": str})
PAPER_TASKS = ["cifar10", "imagenet", "speech", "transformer", "yolo"]


@pytest.mark.parametrize("name", PAPER_TASKS)
def test_paper_preset_matches_table2(name: str) -> None:
    preset = get_task(name).presets["paper"]
    rows = PAPER[PAPER["task"] == name]
    s1 = rows[rows["scale"] == "1"]
    assert set(s1["total_batch"].astype(int)) == {preset["batch_size"]}
    assert set(s1["iterations"].astype(int)) == {preset["T1"]}
    numeric = sorted({int(s) for s in rows["scale"] if s.isdigit()})
    assert numeric == preset["scales"]
    for _, row in rows[rows["scale"].str.isdigit()].iterrows():
        assert int(row["total_batch"]) == int(row["scale"]) * preset["batch_size"]


@pytest.mark.parametrize("name", PAPER_TASKS + ["logreg"])
@pytest.mark.parametrize("preset", ["tiny", "paper"])
def test_presets_define_every_common_key(name: str, preset: str) -> None:
    cfg = get_task(name).presets[preset]
    assert set(PRESET_KEYS) <= set(cfg)
    assert cfg["lr_schedule"]["kind"] in ("exponential", "step", "constant")
    assert cfg["elastic"]["up"][0][0] == 0.0 and [f for f, _ in cfg["elastic"]["up"]] == [0.0, 0.25, 0.5]


def test_momentum_is_the_papers() -> None:
    assert get_task("transformer").presets["paper"]["momentum"] == 0.99
    for name in ["cifar10", "imagenet", "speech", "yolo"]:
        assert get_task(name).presets["paper"]["momentum"] == 0.9
