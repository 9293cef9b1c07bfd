"""Matrix files: validation with messages naming the file and the key, expansion, dependencies, and the
heat map's scaled-SGD length derived from the grid's AdaScale runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bench.core.errors import UserError
from bench.core.files import write_json
from bench.experiments import matrix
from bench.experiments.plancells import PAPER_TABLE
from bench.run.needs import find_T
from bench.run.spec import resolve
from tasks import get_task


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return path


def test_shipped_matrices_expand() -> None:
    smoke = matrix.load("smoke")
    kinds = {r.experiment["kind"] for r in smoke.runs}
    assert kinds == {"table2", "elastic", "heatmap", "sweep", "gain"}
    kept = {r.task: r for r in smoke.runs if r.experiment["kind"] == "gain"}
    assert set(kept) == {"logreg", "cifar10"}  # the paper's Figure 2: weights kept, offline gain measured by smoke
    assert all(r.method == "adascale" and r.overrides["keep_checkpoints_every"] >= 1 for r in kept.values())
    assert {r.task for r in smoke.runs} >= {"logreg", "cifar10", "imagenet", "speech", "transformer", "yolo"}
    control = [r for r in smoke.runs if "data.conditioning" in r.overrides]  # the positive control's cell
    assert {r.scale for r in control} == {1, 64}
    ordinary = [r for r in smoke.runs if "data.conditioning" not in r.overrides and r.experiment["kind"] != "sweep"]
    assert max(r.scale for r in ordinary if isinstance(r.scale, int)) == 16
    # every task with a row in the paper's Table 2 has a smoke cell at an S that row has: ours beside the paper's
    paper_s = pd.read_csv(PAPER_TABLE, dtype={"scale": str})
    for task, rows in paper_s.groupby("task"):
        theirs = {int(s) for s in rows["scale"] if s.isdigit() and s != "1"}
        ours = {r.scale for r in ordinary if r.task == task and isinstance(r.scale, int)}
        assert ours & theirs, (task, sorted(ours), sorted(theirs))
    grid = [r for r in smoke.runs if r.experiment["kind"] == "heatmap"]
    assert len(grid) == 4 * 3 * 3 and all("T1" not in r.overrides for r in grid)  # 3 × 3 grid, the preset's T1
    scaled_lr0 = {r.overrides["lr_schedule.lr0"] for r in grid if r.method == "scaled"}
    other_lr0 = {r.overrides["lr_schedule.lr0"] for r in grid if r.method != "scaled"}
    assert scaled_lr0 == {0.08, 0.2, 0.4} and other_lr0 == {0.02, 0.05, 0.1}  # scaled SGD's own lr axis
    # logreg's own schedule is constant: every grid run decays exponentially, as a heat map's grid is
    assert {r.task for r in grid} == {"logreg"} and all(r.overrides["lr_schedule.kind"] == "exponential" for r in grid)
    paper = matrix.load("paper")
    cells = [r for r in paper.runs if r.experiment["kind"] == "table2"]
    assert len(cells) == 5 * (1 + 3 * 4) * 5  # tasks × (S = 1 once + methods × larger scales) × seeds
    assert not [r for r in cells if r.scale == 1 and r.method != "adascale"]  # S = 1: one shared run
    grid = [r for r in paper.runs if r.experiment["kind"] == "heatmap"]
    assert len(grid) == 13 * 13 * 4  # lr0 × decay (down to 1e-5) × panels: the paper's 13 × 13
    assert min(r.overrides["lr_schedule.decay"] for r in grid) == 1e-5
    assert max(r.overrides["lr_schedule.lr0"] for r in grid if r.method == "scaled") == 100.0
    assert {r.experiment["panel"] for r in grid} == {"S=1", "AdaScale S=16", "LSW S=16", "scaled SGD S=16"}


def test_dependencies_come_first() -> None:
    runs = matrix.load("smoke").runs
    position = {r.key: i for i, r in enumerate(runs)}
    for r in runs:
        deps = matrix.depends_on(r, runs)
        if r.method in ("lsw+", "scaled"):
            assert deps, r
        assert all(position[d.key] < position[r.key] for d in deps)
    scaled = next(r for r in runs if r.method == "scaled")
    assert len(matrix.depends_on(scaled, runs)) == 9  # the whole 3 × 3 AdaScale grid


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("experiments: [{table2: {tasks: [cifar10], methods: [sgd], scales: [1]}}]", "experiments[0].table2.methods"),
        ("experiments: [{table2: {tasks: [mnist], methods: [lsw], scales: [1]}}]", "experiments[0].table2.tasks"),
        ("experiments: [{table2: {tasks: [logreg], methods: [lsw], scales: [0]}}]", "scales"),
        ("experiments: [{table3: {}}]", "experiments[0]"),
        ("experiments: [{gain: {tasks: [logreg], every: {cifar10: 5}}}]", "experiments[0].gain.every"),
        ("preset: huge\nexperiments: []", "preset"),
        ("seeds: one\nexperiments: [{table2: {tasks: [logreg], methods: [lsw], scales: [1]}}]", "seeds"),
        ("experiments: [{heatmap: {task: cifar10, lr0: [x], decay: [1], threshold: 1}}]", "lr0"),
        (
            "experiments: [{heatmap: {task: cifar10, lr0: [1], scaled_lr0: [x], decay: [1], threshold: 1}}]",
            "scaled_lr0",
        ),
        ("experiments: [{heatmap: {task: cifar10, lr0: [1], scaled_lr0: [], decay: [1], threshold: 1}}]", "scaled_lr0"),
        ("experiments: [{table2: {tasks: [logreg], methods: [lsw], scales: [1], extra: 1}}]", "table2.extra"),
        ("[1, 2", "not valid YAML"),
    ],
)
def test_invalid_files_name_the_file_and_the_key(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UserError) as err:
        matrix.load(path)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_matrix_command_prints_the_expansion_and_count(tmp_path: Path) -> None:
    path = write(
        tmp_path, "seeds: [0, 1]\nexperiments: [{table2: {tasks: [logreg], methods: [adascale, lsw+], scales: [1, 4]}}]"
    )
    res = subprocess.run([sys.executable, "-m", "bench", "matrix", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith("6 runs")  # S = 1: one adascale run per seed stands for lsw+ too
    assert "(shared: AS = LSW+ at S = 1)" in res.stdout  # the rules it names that share S = 1
    assert "after its AdaScale run" in res.stdout
    res = subprocess.run(
        [sys.executable, "-m", "bench", "matrix", str(tmp_path / "none.yaml")], capture_output=True, text=True
    )
    assert res.returncode == 2 and "none.yaml" in res.stderr and res.stderr.count("\n") == 1


def _grid_run(out: Path, lr0: float, iterations: int, metric: float, grid: str = "g") -> None:
    d = out / "cifar10" / "adascale" / "s4" / f"seed0,lr_schedule.lr0={lr0}"
    write_json(d / "spec.json", {"experiment": {"kind": "heatmap", "grid": grid}})
    write_json(d / "summary.json", {"status": "completed", "iterations": iterations, "val_metric": metric})


def test_scaled_sgd_T_is_the_mean_adascale_iterations_of_grid_runs_reaching_the_threshold(tmp_path: Path) -> None:
    _grid_run(tmp_path, 0.1, 30, 60.0)
    _grid_run(tmp_path, 0.2, 40, 70.0)
    _grid_run(tmp_path, 0.4, 90, 20.0)  # below the threshold: left out
    _grid_run(tmp_path, 0.8, 10, 99.0, grid="other")  # another grid: left out
    spec = resolve(
        get_task("cifar10"), "scaled", 4, 0, "tiny", experiment={"kind": "heatmap", "grid": "g", "threshold": 50.0}
    )
    assert find_T(tmp_path, spec) == 35.0
    spec = spec.replace(
        experiment={**spec.experiment, "threshold": 99.5}
    )  # none reaches it: all of the grid's completed runs
    assert find_T(tmp_path, spec) == pytest.approx((30 + 40 + 90) / 3)
