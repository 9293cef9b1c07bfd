"""A task of yours, `package.module:NAME`, without a fork: the example module of docs/design.md ("Your own
model"), written outside the project, goes through `run`, a matrix under `submit --executor local`, `status`,
`report`, `flops` and `advise` as a user would call them (separate processes, the module beside the command);
a module missing a method of the protocol is refused at load in one line; the reports never import it; a
changed source is another run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
NAME = "mixture:Mixture"


def design_blocks() -> tuple[str, str]:
    """The module and the commands of docs/design.md's "Your own model", as written there."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text[text.index("### Your own model") : text.index("## 4. The public contract")]
    (module,) = re.findall(r"```python\n(.*?)```", section, re.S)
    (commands,) = re.findall(r"```console\n(.*?)```", section, re.S)
    return module, commands


def cli(cwd: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command line as a user runs it, in `cwd` (where their module lives), tiny data under tmp."""
    return subprocess.run(
        [sys.executable, "-m", "bench", *argv], cwd=cwd, capture_output=True, text=True, env=env, timeout=600
    )


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "mine"
    home.mkdir()
    (home / "mixture.py").write_text(design_blocks()[0])
    monkeypatch.setenv("ADASCALE_BENCH_DATA", str(tmp_path / "data"))  # the tiny set, written on first use
    return home


def test_the_docs_commands_run_the_task_as_written(user_dir: Path) -> None:
    """The console block of the docs, line by line (each a command of the suite), from the module's folder;
    then the report shows (iii)'s prediction from the probe (evidence: the runs keep no weights to judge by)."""
    for line in design_blocks()[1].strip().splitlines():
        argv = line.split()[1:]
        res = cli(user_dir, *argv)
        assert res.returncode == 0, (line, res.stderr[-2000:])
    out = user_dir / "runs" / "advise-mixture"
    advice = pd.read_csv(out / "advice.csv")
    assert list(advice["S"])[:4] == [1, 2, 4, 8]
    findings = pd.read_csv(out / "report" / "findings.csv")
    (iii,) = findings[(findings["task"] == NAME) & (findings["check"] == "iii")]["detail"]
    assert "predicts" in iii and "evidence only" in iii, iii


def test_a_matrix_of_the_task_runs_under_submit_and_is_read_by_status_and_report_without_importing_it(
    user_dir: Path, tmp_path: Path
) -> None:
    matrix = user_dir / "mine.yaml"
    matrix.write_text(
        "preset: tiny\nseeds: [0]\nset: {T1: 200, eval_every: 100}\nexperiments:\n"
        f"  - table2: {{tasks: ['{NAME}'], methods: [adascale, lsw], scales: [1, 4]}}\n"
    )
    out = tmp_path / "out"
    res = cli(user_dir, "submit", str(matrix), "--executor", "local", "--out", str(out))
    assert res.returncode == 0, res.stderr[-2000:]
    (run_dir,) = (out / NAME / "adascale" / "s4").glob("seed0,T1=200,eval_every=100,code=*")  # its source's key
    spec = (run_dir / "spec.json").read_text()
    assert '"user_task"' in spec and '"sha256"' in spec

    # elsewhere, a module of that name that leaves a mark when imported: status and report must not import it
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mixture.py").write_text("open(__file__ + '.IMPORTED', 'w').close()\n")
    status = cli(elsewhere, "status", str(out))
    assert status.returncode == 0 and NAME in status.stdout, status.stderr
    report = cli(elsewhere, "report", str(out))
    assert report.returncode == 0, report.stderr[-2000:]
    assert not (elsewhere / "mixture.py.IMPORTED").exists()
    table2 = pd.read_csv(out / "report" / "table2.csv")
    assert NAME in set(table2["task"])
    assert "Δ = 1 points" in (out / "report" / "findings.txt").read_text()  # the margin of its card, as recorded

    # gain on its run folder imports nothing the folder names: it asks for the task by name
    gain = cli(elsewhere, "gain", str(run_dir))
    assert gain.returncode == 2 and f"--task {NAME}" in gain.stderr and len(gain.stderr.strip().splitlines()) == 1
    assert not (elsewhere / "mixture.py.IMPORTED").exists()


def test_a_changed_source_is_another_run(user_dir: Path, tmp_path: Path) -> None:
    argv = ("run", "--task", NAME, "--method", "adascale", "--scale", "2", "--set", "T1=100", "--out", str(tmp_path))
    assert cli(user_dir, *argv).returncode == 0
    module = user_dir / "mixture.py"
    module.write_text(module.read_text() + "\n# changed\n")
    res = cli(user_dir, *argv)  # a folder of its own (its code key in the name), the old one left as it was
    assert res.returncode == 0, res.stderr[-2000:]
    assert len(list((tmp_path / NAME / "adascale" / "s2").glob("seed0,T1=100,code=*/summary.json"))) == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("    def eval_stats(", "    def not_eval_stats("), "does not define eval_stats"),
        (("    card = CARD\n", "    pass\n"), "has no card"),
        (("class Mixture(Task):", "class Mixture:"), "expected a subclass of tasks.base.Task"),
        (('"tiny": {', '"small": {'), "no tiny preset"),
        (("metric_range=(0.0, 100.0),", 'metric_range=("0", "100"),'), "card's field metric_range has the wrong"),
    ],
)
def test_a_task_module_that_breaks_the_protocol_fails_at_load_in_one_line(
    user_dir: Path, tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    module = user_dir / "mixture.py"
    module.write_text(module.read_text().replace(*change))
    for argv in (
        ("run", "--task", NAME, "--method", "adascale", "--scale", "2", "--out", str(tmp_path / "o")),
        ("advise", "--task", NAME, "--out", str(tmp_path / "a")),
    ):
        res = cli(user_dir, *argv)
        assert res.returncode == 2, res.stderr
        assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "Traceback" not in res.stderr
    assert not (tmp_path / "o").exists()


def test_a_module_that_is_not_there_or_not_importable_is_one_line(user_dir: Path, tmp_path: Path) -> None:
    (user_dir / "broken.py").write_text("import no_such_package_anywhere\n")
    for task, message in (("nowhere:Task", "cannot import nowhere"), ("broken:Task", "no_such_package_anywhere")):
        res = cli(user_dir, "run", "--task", task, "--method", "adascale", "--scale", "2", "--out", str(tmp_path))
        assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_flops_counts_the_task_on_its_own_data(user_dir: Path, tmp_path: Path) -> None:
    table = tmp_path / "flops.csv"
    res = cli(user_dir, "flops", "--task", NAME, "--preset", "tiny", "--write", str(table))
    assert res.returncode == 0, res.stderr
    row = pd.read_csv(table).iloc[0]
    # the MLP's matmuls, forward and backward: 2·b·(8·32 + 32·4) forward, twice that backward (weights and
    # inputs of the second layer; the first layer's input needs no gradient)
    b = 16
    forward = 2 * b * (8 * 32 + 32 * 4)
    assert row["task"] == NAME and int(float(row["flops_per_microbatch"])) == forward + 2 * forward - 2 * b * 8 * 32


def test_a_damaged_recorded_card_is_one_line_naming_the_file(user_dir: Path, tmp_path: Path) -> None:
    """The card a run folder recorded is read field by field (it may come from someone else): a damaged one is
    a report warning naming spec.json, and for `gain` one line naming it; nothing is imported either way."""
    import json

    out = tmp_path / "out"
    argv = ("run", "--task", NAME, "--method", "adascale", "--scale", "2", "--set", "T1=100", "--out", str(out))
    assert cli(user_dir, *argv, "--set", "keep_checkpoints_every=50").returncode == 0
    (spec_path,) = out.rglob("spec.json")
    spec = json.loads(spec_path.read_text())
    spec["user_task"]["card"]["metric"] = 5
    spec_path.write_text(json.dumps(spec))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    report = cli(elsewhere, "report", str(out))
    assert report.returncode == 0 and f"{spec_path}: user_task.card: field metric" in report.stderr, report.stderr
    gain = cli(user_dir, "gain", "--task", NAME, str(spec_path.parent))
    assert gain.returncode == 2 and len(gain.stderr.strip().splitlines()) == 1, gain.stderr
    assert f"{spec_path}: user_task.card: field metric" in gain.stderr


def test_the_slurm_backend_protocol_is_abstract_too() -> None:
    """An executor backend that does not say which runs have ended cannot be made (slurm.backends.Backend)."""
    from slurm.backends import Backend

    class HandsOverOnly(Backend):
        def hand_over(self, runs, shape, after):  # noqa: ANN001, ANN202
            return []

    with pytest.raises(TypeError, match="ended"):
        HandsOverOnly(Path(), None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("capped", "noted"), [(True, False), (False, True)])
def test_submit_says_when_a_card_sets_no_cap_on_a_runs_ranks(
    user_dir: Path, tmp_path: Path, capped: bool, noted: bool
) -> None:
    """A card without max_ranks for a preset lets each run spread over every rank the resources allow: submit says
    so in one line (it used to default silently); the documented card caps its paper preset at 4 and says nothing."""
    module = user_dir / "mixture.py"
    if not capped:
        module.write_text(module.read_text().replace('    max_ranks={"tiny": 1, "paper": 4},\n', ""))
    matrix = user_dir / "paper.yaml"
    matrix.write_text(
        f"preset: paper\nseeds: [0]\ndata_roots: {{'{NAME}': {tmp_path}}}\nexperiments:\n"
        f"  - table2: {{tasks: ['{NAME}'], methods: [adascale], scales: [4]}}\n"
    )
    argv = ("submit", str(matrix), "--executor", "slurm", "--dry-run", "--gpus-per-node", "8", "--out", str(tmp_path))
    res = cli(user_dir, *argv)
    assert res.returncode == 0, res.stderr
    note = f"task {NAME}'s card sets no max_ranks for its paper preset: each run spreads over up to 8 ranks"
    assert (note in res.stdout) is noted, res.stdout
