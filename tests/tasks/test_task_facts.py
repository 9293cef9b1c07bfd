"""A task's facts are on the task: its paper data check (Task.check_paper_data, run by `submit` on a paper
matrix: the full data set's split sizes, each problem one line naming the folder; a task without one checks
nothing), and every registered task is the engine's Task."""

from __future__ import annotations

import dataclasses
import pickle
import sys
import types
from pathlib import Path

import pytest

from bench.core.algo.rules import paper_methods
from bench.core.errors import UserError
from tasks import get_task
from tasks.cifar10.data import BASE_FOLDER, PAPER_SPLITS, TEST_FILES, TRAIN_FILES
from tasks.logreg import LogReg
from tasks.presets.logreg import CARD as LOGREG_CARD
from tests.helpers import spec_for


def _cifar_labels(root: Path, per_file: dict[str, int]) -> Path:
    """CIFAR-10 pickles in the real layout whose files hold `n` labels each (the check reads only labels)."""
    folder = root / BASE_FOLDER
    folder.mkdir(parents=True)
    for name, n in per_file.items():
        with open(folder / name, "wb") as f:
            pickle.dump({"labels": [0] * n, "data": b""}, f)
    return root


def test_cifar10_at_the_paper_sizes_passes_and_a_short_split_is_named(tmp_path: Path) -> None:
    task, spec = get_task("cifar10"), spec_for("cifar10")
    full = {**dict.fromkeys(TRAIN_FILES, PAPER_SPLITS["train"] // 5), TEST_FILES[0]: PAPER_SPLITS["test"]}
    assert task.check_paper_data(_cifar_labels(tmp_path / "full", full), spec) == []
    short = _cifar_labels(tmp_path / "short", {**full, TEST_FILES[0]: 100})
    (problem,) = task.check_paper_data(short, spec)
    assert problem == f"cifar10: {short / BASE_FOLDER}: 100 test images (1 × 100), the paper preset expects 10000"


def test_the_tiny_imagenet_is_not_the_paper_one_and_logreg_checks_nothing(tmp_path: Path) -> None:
    imagenet = get_task("imagenet")
    imagenet.write_tiny(tmp_path)
    problems = imagenet.check_paper_data(tmp_path, spec_for("imagenet"))
    assert any("class folders, the paper preset expects 1000" in p for p in problems), problems
    assert any("validation images, the paper preset expects 50000" in p for p in problems), problems
    assert all("\n" not in p for p in problems)
    assert get_task("logreg").check_paper_data(tmp_path, spec_for("logreg")) == []


def test_every_registered_task_is_the_engines_task() -> None:
    """The engine's protocol (bench.core.engine.task.Task) is what a registry line must point at; a class missing
    one of its methods is not one."""
    from bench.core.engine.task import Task as EngineTask
    from tasks import available

    assert available() and all(isinstance(get_task(name), EngineTask) for name in available())
    assert not isinstance(object(), EngineTask)


def test_prepare_help_lists_the_tasks_it_prepares(capsys) -> None:
    """The list is read off the task packages (a tasks/<name>/prepare.py), so a new task's shows up."""
    import pytest

    from bench.cli import main
    from tasks import preparable

    with pytest.raises(SystemExit):
        main(["prepare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert preparable() == ["cifar10", "imagenet", "speech", "transformer", "yolo"]
    assert "Tasks: cifar10, imagenet, speech, transformer, yolo (the tasks with a tasks/<name>/prepare.py" in text
    assert main(["prepare", "logreg", "--source", "x", "--out", "y"]) == 2
    err = capsys.readouterr().err
    assert "expected one of cifar10, imagenet, speech, transformer, yolo" in err and "logreg and a task of yours" in err


def test_the_how_to_add_section_names_files_and_names_that_exist() -> None:
    """docs/design.md's "How to add a method, a task or a figure" names real files and real names."""
    import re

    from bench.core.algo import rules
    from reports import figures

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "design.md").read_text()
    section = text[text.index("**How to add a method, a task or a figure.**") : text.index("## 4. The public contract")]
    for path in re.findall(r"`((?:bench|tasks|reports|tests)/[\w/.<>]+\.py)`", section):
        if "<name>" not in path:
            assert (root / path).is_file(), path
    assert "`METHODS`" in section and isinstance(rules.METHODS, dict)
    assert "`KINDS`" in section and set(figures.KINDS) >= {"curves", "heatmap"}
    assert "`_REGISTRY`" in section and "logreg" in __import__("tasks")._REGISTRY


PROBE_CARD = dataclasses.replace(LOGREG_CARD, name="probe", unit="probes")


class Probe(LogReg):
    """A task added by its package (here: this class), its card and one registry line, nothing else."""

    card = PROBE_CARD


def test_a_task_is_its_package_its_card_and_one_registry_line(tmp_path: Path, monkeypatch) -> None:
    import tasks
    from bench.experiments import matrix, plan
    from bench.run.runner import run_spec
    from reports.rundata.collect import load
    from reports.tables.table2 import cells
    from slurm.status import collect, table

    card_module = types.ModuleType("tasks.presets.probe")
    card_module.CARD = PROBE_CARD
    monkeypatch.setitem(sys.modules, "tasks.presets.probe", card_module)  # its card
    path = tmp_path / "m.yaml"
    cell = f"{{tasks: [probe], methods: [{', '.join(paper_methods())}], scales: [2]}}"  # the paper's rules
    path.write_text(f"seeds: [0]\nset: {{T1: 40, eval_every: 20}}\nexperiments:\n  - table2: {cell}\n")
    with pytest.raises(
        UserError, match=r"tasks: expected values among .*, got 'probe'"
    ):  # without its registry line it is no task
        matrix.load(path)
    monkeypatch.setitem(tasks._REGISTRY, "probe", f"{__name__}:Probe")  # its one registry line
    m = matrix.load(path)
    assert {(r.task, r.method) for r in m.runs} == {("probe", name) for name in paper_methods()}
    assert plan.totals(plan.make_plan(m, {}, None), None)["examples"].endswith(" probes")  # its card's unit
    out = tmp_path / "out"
    for r in m.runs:
        assert run_spec(m.spec(r), out, progress=False)["status"] == "completed"
    assert "probe  adascale" in table(collect(out))
    c = cells(load(out).runs)
    assert set(c["task"]) == {"probe"} and (c["n_seeds"] == 1).all()
