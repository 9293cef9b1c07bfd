"""One definition of a run's identity (bench.core.identity.NOT_IDENTITY): the folder name, the same-run check,
the LSW+ lookup of its AdaScale run and the report's seeds all agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.core.errors import UserError
from bench.run.runner import run_dir_of, run_spec
from bench.run.spec import resolve, run_name
from reports.rundata.collect import load
from reports.tables.table2 import cells
from tasks import get_task

LOGREG = get_task("logreg")


def spec(method: str = "adascale", preset: str = "tiny", **overrides) -> dict:
    return resolve(LOGREG, method, 2, 0, preset, overrides={"T1": 40, "eval_every": 20, **overrides})


def test_the_preset_is_in_the_folder_name() -> None:
    assert run_name(spec()) == "logreg/adascale/s2/seed0,T1=40,eval_every=20"
    assert run_name(spec(preset="paper")) == "logreg/adascale/s2/seed0,preset=paper,T1=40,eval_every=20"


def test_where_a_run_runs_is_not_in_its_folder_name() -> None:
    assert run_name(spec(num_workers=2, threads=2, device="cpu")) == run_name(spec())


def test_a_paper_run_after_the_tiny_one_is_a_run_of_its_own(tmp_path: Path) -> None:
    tiny = run_spec(spec(), tmp_path, progress=False)
    paper = run_spec(spec(preset="paper"), tmp_path, progress=False)
    assert run_dir_of(tmp_path, spec()) != run_dir_of(tmp_path, spec(preset="paper"))
    assert tiny["preset"] == "tiny" and paper["preset"] == "paper"


def test_lsw_plus_never_takes_T_AS_from_another_preset(tmp_path: Path) -> None:
    run_spec(spec(), tmp_path, progress=False)  # only the tiny AdaScale run exists
    with pytest.raises(UserError, match="lsw\\+ needs the AdaScale run"):
        run_spec(spec("lsw+", preset="paper"), tmp_path, progress=False)
    assert run_spec(spec("lsw+"), tmp_path, progress=False)["status"] == "completed"


def test_a_copied_folder_of_another_experiment_is_not_taken_as_the_adascale_run(tmp_path: Path) -> None:
    other = run_spec(spec(T1=60), tmp_path, progress=False)
    # the T1=60 run's files under the T1=40 run's name: the spec says it is another experiment
    src, dst = run_dir_of(tmp_path, spec(T1=60)), run_dir_of(tmp_path, spec())
    dst.parent.mkdir(parents=True, exist_ok=True)
    src.rename(dst)
    assert other["status"] == "completed"
    with pytest.raises(UserError, match="lsw\\+ needs the AdaScale run"):
        run_spec(spec("lsw+"), tmp_path, progress=False)


def test_the_report_counts_one_seed_once_whatever_the_workers(tmp_path: Path) -> None:
    run_spec(spec(), tmp_path, progress=False)
    again = run_spec(spec(num_workers=2), tmp_path, progress=False)  # the same experiment: already done
    assert again["status"] == "completed"
    c = cells(load(tmp_path).runs)
    assert list(c.loc[(c["task"] == "logreg") & (c["method"] == "adascale"), "n_seeds"]) == [1]
