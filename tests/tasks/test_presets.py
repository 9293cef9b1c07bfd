"""Every task's paper preset against the paper's Table 2 (shipped as reports/tables/paper_table2.csv): the S = 1
batch size and T1, and the scales of its rows; every preset defines every common key; and every tiny
preset states its k and follows the tiny-T1 rule (tasks.presets.tiny_T1) at the scales the smoke uses."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bench.core.runspec import PRESET_KEYS
from tasks import available, get_task
from tasks.presets import card, gain_memory, tiny_T1, windows_at

PAPER_CSV = Path(__file__).resolve().parents[2] / "reports" / "tables" / "paper_table2.csv"
PAPER = pd.read_csv(PAPER_CSV, dtype={"scale": str})
PAPER_TASKS = sorted(set(PAPER["task"]))
TASKS = available()  # every registered task: a new one is checked here without this file changing


def test_the_paper_tasks_are_registered() -> None:
    assert set(PAPER_TASKS) <= set(TASKS)
    assert len(PAPER_TASKS) == 5


@pytest.mark.parametrize("name", TASKS)
def test_paper_preset_matches_table2(name: str) -> None:
    preset = get_task(name).presets["paper"]
    rows = PAPER[PAPER["task"] == name]
    if rows.empty:  # a task the paper does not have says so, in its card
        assert any("not in the paper" in line for line in card(name).differs), (
            f"{name} has no row in the paper's Table 2: its card's differs must say 'not in the paper'"
        )
        return
    s1 = rows[rows["scale"] == "1"]
    assert set(s1["total_batch"].astype(int)) == {preset["batch_size"]}
    assert set(s1["iterations"].astype(int)) == {preset["T1"]}
    numeric = sorted({int(s) for s in rows["scale"] if s.isdigit()})
    assert numeric == preset["scales"]
    for _, row in rows[rows["scale"].str.isdigit()].iterrows():
        assert int(row["total_batch"]) == int(row["scale"]) * preset["batch_size"]


@pytest.mark.parametrize("name", TASKS)
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


def smoke_gaps(largest: dict[str, int]) -> list[str]:
    """The registered tasks the smoke matrix runs no AdaScale cell of (read off the registry, not a list here)."""
    return sorted(set(available()) - set(largest))


def _smoke_scales() -> dict[str, int]:
    """The largest constant S of each task's AdaScale-using runs in the smoke matrix (elastic runs count
    with their schedule's largest S); the sweep is left out (its own T1, and it stops at a target loss)."""
    from bench.experiments import matrix

    largest: dict[str, int] = {}
    for r in matrix.load("smoke").runs:
        if r.experiment["kind"] == "sweep":
            continue
        if isinstance(r.scale, int):
            s = r.scale
        else:
            s = max(n for _, n in card(r.task).presets["tiny"]["elastic"][r.scale.removeprefix("elastic-")])
        largest[r.task] = max(largest.get(r.task, 1), s)
    return largest


@pytest.mark.parametrize("name", TASKS)
def test_tiny_preset_states_its_windows_and_follows_the_rule(name: str) -> None:
    c = card(name)
    assert c.tiny_windows >= 2  # "several" gain memories: see tasks.presets.TINY_WINDOWS
    tiny = c.presets["tiny"]
    for s in [*tiny["scales"], max(n for _, n in tiny["elastic"]["up"])]:
        assert windows_at(tiny["T1"], s) >= c.tiny_windows - 1e-9, (name, s)
    assert tiny["T1"] >= tiny_T1(c.tiny_windows, max(tiny["scales"]))
    assert tiny["T1"] == 1000 * c.tiny_windows  # the rule is independent of S below 1000


def test_smoke_runs_follow_the_rule_at_their_largest_scale() -> None:
    """Every task of the smoke matrix at the largest S it uses there, and every run's own T1 (a `set: {T1}`
    of an experiment included) at that run's largest S."""
    from bench.experiments import matrix

    largest = _smoke_scales()
    missing = smoke_gaps(largest)
    assert not missing, f"a new task adds a table2 cell to bench/experiments/matrices/smoke.yaml: {missing}"
    assert largest["logreg"] == 64  # the positive control's cell: the largest S docs/design.md §2 says is checked
    for name, s in largest.items():
        c = card(name)
        assert windows_at(c.presets["tiny"]["T1"], s) >= c.tiny_windows - 1e-9, (name, s)
    m = matrix.load("smoke")
    for r in m.runs:
        if r.experiment["kind"] == "sweep":
            continue
        spec = m.spec(r)
        s = r.scale if isinstance(r.scale, int) else largest[r.task]
        assert windows_at(spec.T1, s) >= card(r.task).tiny_windows - 1e-9, r


def test_gain_memory_is_the_estimators() -> None:
    from bench.core.algo.gain import theta

    for s in (1, 2, 8, 125, 999, 1000, 4096):
        assert gain_memory(s) == pytest.approx(1 / (1 - theta(s)))
    assert gain_memory(8) == pytest.approx(125) and tiny_T1(2, 8) == 2000 and tiny_T1(2, 1000) == 2000
    assert tiny_T1(2, 2000) == 4000  # θ = 0: a memory of one iteration, T1/S ≥ k


def test_paper_presets_reduce_natively_and_tiny_ones_pairwise() -> None:
    """The paper presets use DDP's all-reduce (it scales with W: tasks.presets.PAPER_REDUCTION); tiny presets
    keep the bit-exact pairwise sum (the schema's default)."""
    from bench.run.spec import resolve
    from tasks.presets import card

    for name in ("cifar10", "imagenet", "speech", "transformer", "yolo"):
        assert resolve(card(name), "adascale", 16, 0, "paper", "/data").reduction == "native"
        assert resolve(card(name), "adascale", 16, 0, "tiny", "/data").reduction == "pairwise"


def test_a_task_added_to_the_registry_is_checked_or_named_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks above read the registry: a task registered without its card or its smoke cell is not skipped.
    `card` says in one line what it must add; the smoke check names it."""
    import tasks
    from bench.core.errors import UserError

    monkeypatch.setitem(tasks._REGISTRY, "newtask", "tasks.logreg:LogReg")
    assert "newtask" in available()
    with pytest.raises(UserError, match="a new task adds tasks/presets/newtask.py defining CARD"):
        card("newtask")
    assert smoke_gaps(_smoke_scales()) == ["newtask"]


def test_every_card_passes_the_card_check_and_a_damaged_one_does_not() -> None:
    """tasks.presets.check_card, which a task of yours and a recorded card go through: every built-in card passes,
    and each damage below is named by its field (a NaN margin is a JSON literal a hostile spec can hold)."""
    import dataclasses
    import math

    from tasks.presets import check_card

    for name in TASKS:
        check_card(card(name))
    good = card("cifar10")
    for field, value in [
        ("margins", {"tiny": math.nan}),
        ("margins", {"tiny": -1.0}),
        ("metric_range", (100.0, 0.0)),
        ("metric_range", (math.nan, 1.0)),
        ("max_ranks", {"paper": True}),
        ("optimum", math.inf),
        ("tiny_windows", 0),
        ("metric", ""),
    ]:
        with pytest.raises(ValueError, match=f"field {field} "):
            check_card(dataclasses.replace(good, **{field: value}))
