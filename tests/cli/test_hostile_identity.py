"""A colleague sharing the folders a run reads (issue 59): a tiny data set under a shared ADASCALE_BENCH_DATA
written by another user, or one that others may write into, is refused in one line naming it, as a staging
folder of theirs is (tasks.preparing), never trained or evaluated on; the run's own private set is used."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.cli import main

RUN = ["run", "--task", "cifar10", "--method", "adascale", "--scale", "2", "--set", "T1=40"]


def colleague_set(data: Path) -> Path:
    """The tiny cifar10 folder a colleague wrote where this user's run looks for it (a planted file inside)."""
    root = data / "cifar10"
    root.mkdir(parents=True)
    (root / "data_batch_1").write_bytes(b"theirs")
    return root


@pytest.mark.parametrize("how", ["another user", "group writable", "world writable"])
def test_tiny_data_a_colleague_wrote_is_refused(tmp_path: Path, monkeypatch, capsys, how: str) -> None:
    if how == "another user" and os.geteuid() != 0:
        pytest.skip("simulating another user needs root (os.chown)")
    monkeypatch.setenv("ADASCALE_BENCH_DATA", str(tmp_path / "data"))
    root = colleague_set(tmp_path / "data")
    if how == "another user":
        os.chmod(root, 0o755)
        os.chown(root, 4321, 4321)
    else:
        os.chmod(root, 0o770 if how == "group writable" else 0o777)
    rc = main([*RUN, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and f"{root}: tiny data this user's run did not write" in lines[0], err
    assert "Traceback" not in err
    assert (
        not list((tmp_path / "out").rglob("summary.json"))
        or "failed" in next((tmp_path / "out").rglob("summary.json")).read_text()
    )


def test_submit_refuses_a_colleagues_tiny_data_too(tmp_path: Path) -> None:
    """The same world-writable set under `submit --executor local`: submit's check of the data roots before it sends
    a job (slurm.datacheck) judges it as a run does (it read only the task's layout, and a set with the right
    layout would have been sent): one line naming the folder, exit 1, nothing trained on it."""
    from tests.tasks.test_user_task import cli

    data = tmp_path / "data"
    root = colleague_set(data)
    os.chmod(root, 0o777)
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "preset: tiny\nseeds: [0]\nset: {T1: 40, eval_every: 20}\nexperiments:\n"
        "  - table2: {tasks: [cifar10], methods: [adascale], scales: [2]}\n"
    )
    out = tmp_path / "out"
    env = {**os.environ, "ADASCALE_BENCH_DATA": str(data)}
    res = cli(tmp_path, "submit", str(matrix), "--executor", "local", "--out", str(out), env=env)
    assert res.returncode == 1, (res.stdout, res.stderr[-2000:])
    assert f"{root}: tiny data this user's run did not write" in res.stderr and "Traceback" not in res.stderr
    assert not list(out.rglob("summary.json")) and not list(out.rglob("metrics.jsonl"))  # nothing trained on it


def test_the_users_own_private_set_is_not_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    """The control: the same folder, this user's and private (as a run writes it: 0700), passes the check and
    goes on to the task's own check of its layout."""
    monkeypatch.setenv("ADASCALE_BENCH_DATA", str(tmp_path / "data"))
    root = colleague_set(tmp_path / "data")
    os.chmod(root, 0o700)
    main([*RUN, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert "did not write" not in err, err


@pytest.mark.long  # two submits of a user task
def test_submit_after_the_source_changed_runs_the_new_source_in_its_own_folder(tmp_path: Path, monkeypatch) -> None:
    """A matrix of a task of yours, submitted, then its module edited: the folder's finished runs recorded the old
    source, so they are not "complete" for the new one (it said "nothing to submit"): the run is submitted again,
    into its own folder (its code key in the name), and the report shows the two sources apart."""
    import pandas as pd

    from tests.tasks.test_user_task import NAME, cli, design_blocks

    home = tmp_path / "mine"
    home.mkdir()
    module = home / "mixture.py"
    module.write_text(design_blocks()[0])
    monkeypatch.setenv("ADASCALE_BENCH_DATA", str(tmp_path / "data"))
    matrix = home / "m.yaml"
    matrix.write_text(
        "preset: tiny\nseeds: [0]\nset: {T1: 40, eval_every: 20}\nexperiments:\n"
        f"  - table2: {{tasks: ['{NAME}'], methods: [adascale], scales: [2]}}\n"
    )
    out = tmp_path / "out"
    argv = ("submit", str(matrix), "--executor", "local", "--out", str(out))
    first = cli(home, *argv)
    assert first.returncode == 0, first.stderr[-2000:]
    module.write_text(module.read_text() + "\n# changed\n")
    again = cli(home, *argv)
    assert again.returncode == 0 and "nothing to submit" not in again.stdout, (again.stdout, again.stderr[-2000:])
    done = sorted(p.parent.name for p in (out / NAME / "adascale" / "s2").glob("*/summary.json"))
    assert len(done) == 2 and all(",code=" in leaf for leaf in done), done
    assert "nothing to submit" in cli(home, *argv).stdout  # the new source's run now stands for it
    report = cli(home, "report", str(out))
    assert report.returncode == 0 and f"task {NAME}: runs of 2 codes of it" in report.stderr, report.stderr[-2000:]
    assert len(set(pd.read_csv(out / "report" / "table2.csv")["task"])) == 2


@pytest.mark.long  # two sources, two submits, a report
def test_two_sources_of_a_task_are_two_tasks_in_the_report_each_with_its_card(tmp_path: Path, monkeypatch) -> None:
    """Seed 0 run from one source, seed 1 from an edited one (its card's tiny margin 25): the report pooled the
    two in one Table 2 cell and judged both by the first card read; now each source is a task of its own,
    `name@<source>.<card>`, with a warning saying so."""
    import pandas as pd

    from tests.tasks.test_user_task import NAME, cli, design_blocks

    home = tmp_path / "mine"
    home.mkdir()
    module = home / "mixture.py"
    module.write_text(design_blocks()[0])
    monkeypatch.setenv("ADASCALE_BENCH_DATA", str(tmp_path / "data"))
    out = tmp_path / "out"
    argv = ("run", "--task", NAME, "--method", "adascale", "--scale", "2", "--set", "T1=40", "--out", str(out))
    assert cli(home, *argv, "--seed", "0").returncode == 0
    module.write_text(module.read_text().replace('margins={"tiny": 1.0', 'margins={"tiny": 25.0'))
    res = cli(home, *argv, "--seed", "1")
    assert res.returncode == 0, res.stderr[-2000:]
    report = cli(home, "report", str(out))
    assert report.returncode == 0, report.stderr[-2000:]
    assert f"task {NAME}: runs of 2 codes of it" in report.stderr, report.stderr
    tasks = set(pd.read_csv(out / "report" / "table2.csv")["task"])
    assert len(tasks) == 2 and all(t.startswith(f"{NAME}@") for t in tasks), tasks
    from reports.rundata import collect
    from tasks.presets import card

    collect.load(out)  # each task's card is the one its runs recorded (the first read judged both: Δ 25 for 1.0)
    assert sorted(card(t).margins["tiny"] for t in tasks) == [1.0, 25.0]


def test_a_data_root_the_user_names_elsewhere_is_theirs_whoever_owns_it(tmp_path: Path, monkeypatch, capsys) -> None:
    """Only the shared tiny-data place is checked for ownership: a folder named with --data-root outside it (a lab's
    dataset, prepared by a colleague) is the user's data, read past the ownership check (here: the task's own
    layout check speaks, not the colleague refusal)."""
    if os.geteuid() != 0:
        pytest.skip("simulating another user needs root (os.chown)")
    monkeypatch.setenv("ADASCALE_BENCH_DATA", str(tmp_path / "data"))
    root = colleague_set(tmp_path / "lab")
    os.chown(root, 4321, 4321)
    rc = main([*RUN, "--out", str(tmp_path / "out"), "--data-root", str(root)])
    err = capsys.readouterr().err
    assert "tiny data this user's run did not write" not in err, err
    assert rc == 2 and "Traceback" not in err, err
