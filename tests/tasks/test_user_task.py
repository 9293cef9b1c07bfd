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
import yaml

from reports import advice as A

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


@pytest.mark.long  # advise, submit and report from the docs' console block: ~35 s
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


@pytest.mark.long  # submit, status and report end to end
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
        (
            ("metric_range=(0.0, 100.0),", 'metric_range=("0", "100"),'),
            "mixture.py: its card's field metric_range = ('0', '100') (tuple): expected a tuple of two numbers",
        ),
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


RUN = ("run", "--task", NAME, "--method", "adascale", "--scale", "2", "--set", "T1=100")


def test_a_card_metric_the_task_does_not_return_is_one_line_before_any_training(user_dir: Path, tmp_path: Path) -> None:
    """The card's metric names against what metrics_from returns on one evaluation batch, before training (issue
    55.6): `run`, `advise` and `submit` (its dry run warns) say it in one line naming the field, the user's module
    and what it returns, before a single iteration is trained (it was a KeyError traceback after the first
    evaluation)."""
    module = user_dir / "mixture.py"
    module.write_text(module.read_text().replace('metric="top1"', 'metric="accuracy"'))
    want = f"task {NAME}: {module}: the card's metric 'accuracy' is not among what metrics_from returns ("
    res = cli(user_dir, *RUN, "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and want in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "'top1'); expected one of those" in res.stderr and not list((tmp_path / "o").rglob("metrics.jsonl"))
    res = cli(user_dir, "advise", "--task", NAME, "--scales", "1,2", "--set", "T1=100", "--out", str(tmp_path / "a"))
    assert res.returncode == 2 and want in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    matrix = user_dir / "m.yaml"  # the data is there now (the run wrote the tiny set): submit checks before it sends
    table2 = f"{{tasks: ['{NAME}'], methods: [adascale], scales: [1]}}"
    matrix.write_text(f"preset: tiny\nseeds: [0]\nexperiments:\n  - table2: {table2}\n")
    for dry, rc, kind in ((("--dry-run",), 0, "warning"), ((), 1, "error")):
        res = cli(user_dir, "submit", str(matrix), "--executor", "local", *dry, "--out", str(tmp_path / "s"))
        assert res.returncode == rc and f"adascale-bench: {kind}: {want}" in res.stderr, res.stderr
    assert not list((tmp_path / "s").rglob("metrics.jsonl"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("    tiny_windows=TINY_WINDOWS,\n", '    tiny_windows=TINY_WINDOWS,\n    paper_metric="acc",\n'),
            "the card's paper_metric 'acc' is not among what metrics_from returns",
        ),
        (
            ('"top1": 100.0 * stats["correct"] / n,', '"top1": [stats["correct"]],'),
            "metrics_from's 'top1' is a list; expected a number (int or float)",
        ),
    ],
)
def test_other_card_mistakes_are_one_line_too(
    user_dir: Path, tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    module = user_dir / "mixture.py"
    assert change[0] in module.read_text()
    module.write_text(module.read_text().replace(*change))
    res = cli(user_dir, *RUN, "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and f"task {NAME}: {module}: {message}" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not list((tmp_path / "o").rglob("metrics.jsonl"))


def test_a_module_that_is_not_there_or_not_importable_is_one_line(user_dir: Path, tmp_path: Path) -> None:
    (user_dir / "broken.py").write_text("import no_such_package_anywhere\n")
    for task, message in (("nowhere:Task", "cannot import nowhere"), ("broken:Task", "no_such_package_anywhere")):
        res = cli(user_dir, "run", "--task", task, "--method", "adascale", "--scale", "2", "--out", str(tmp_path))
        assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1


UNRUNNABLE = {  # a change to the docs' module -> what the one line says, and the commands that say it
    "a Path in the card": (
        ('"model": {"hidden": 32},', '"model": {"hidden": 32, "where": Path("/tmp")},'),
        "card.presets.tiny.model.where (a pathlib.PosixPath) in ",
        ("run", "advise", "submit"),
    ),
    "an np.float32 in the card": (
        ('"momentum": 0.9,', '"momentum": np.float32(0.9),'),
        "card.presets.tiny.momentum (a numpy.float32) in ",
        ("run",),
    ),
    "a set in the card": (
        ('"data": {},', '"data": {"keys": {"x"}},'),
        "card.presets.tiny.data.keys (a builtins.set)",
        ("run",),
    ),
    "sys.exit(0) at import": (
        ("import numpy as np\n", "import numpy as np\nimport sys\nsys.exit(0)\n"),
        "(SystemExit: 0)",
        ("run", "submit"),
    ),
    "KeyboardInterrupt at import": (
        ("import numpy as np\n", "import numpy as np\nraise KeyboardInterrupt\n"),
        "cannot import mixture (KeyboardInterrupt",
        ("run",),
    ),
    "only a .pyc": (None, "mixture.pyc) has no source file to record", ("run", "advise")),
}


@pytest.mark.long  # six CLI calls over hostile modules
def test_a_module_whose_card_json_cannot_hold_or_that_exits_at_import_is_one_line(
    user_dir: Path, tmp_path: Path
) -> None:
    """A card value JSON cannot hold (a Path, an np.float32, a set: its spec records the card), a module calling
    sys.exit(0) or raising KeyboardInterrupt at import, a module present only compiled: one line naming the field
    and the file, or the module, exit 2 (they were 'not JSON serializable' and FileNotFoundError tracebacks, and
    exit 0 with nothing done), through run, advise and submit --dry-run; nothing is written."""
    import py_compile
    import shutil

    original = (user_dir / "mixture.py").read_text()
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        f"preset: tiny\nseeds: [0]\nexperiments:\n  - table2: {{tasks: ['{NAME}'], methods: [adascale], scales: [2]}}\n"
    )
    argvs = {
        "run": ("run", "--task", NAME, "--method", "adascale", "--scale", "2", "--out", str(tmp_path / "o")),
        "advise": ("advise", "--task", NAME, "--out", str(tmp_path / "o")),
        "submit": ("submit", str(matrix), "--dry-run", "--out", str(tmp_path / "o")),
    }
    for case, (change, message, commands) in UNRUNNABLE.items():
        shutil.rmtree(user_dir / "__pycache__", ignore_errors=True)  # (a rewrite within the second: a stale .pyc)
        (user_dir / "mixture.py").write_text(original.replace(*change) if change else original)
        if change is None:
            py_compile.compile(str(user_dir / "mixture.py"), cfile=str(user_dir / "mixture.pyc"))
            (user_dir / "mixture.py").unlink()
        for command in commands:
            res = cli(user_dir, *argvs[command])
            lines = res.stderr.strip().splitlines()
            assert res.returncode == 2 and len(lines) == 1 and message in lines[0], (case, command, res.stderr[-2000:])
            assert f"task {NAME}: " in lines[0] and "Traceback" not in res.stderr, (case, command, lines)
            if "card" in case:
                assert str(user_dir / "mixture.py") in lines[0] and "is no JSON value" in lines[0], lines
        assert not (tmp_path / "o").exists(), case


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
    # a number past float's range where the card holds a count (json reads it as an int): no OverflowError
    spec["user_task"]["card"]["metric"] = "top1"
    spec["user_task"]["card"]["tiny_windows"] = "@"
    spec_path.write_text(json.dumps(spec).replace('"@"', "1" + "0" * 400))
    report = cli(elsewhere, "report", str(out))
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr[-2000:]
    assert f"{spec_path}: user_task.card: field tiny_windows" in report.stderr, report.stderr


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


@pytest.mark.long  # advise, submit and report end to end
def test_advise_then_its_printed_submit_then_report_on_data_only_under_a_data_root(tmp_path: Path) -> None:
    """Issue 55's acceptance: a task of yours whose data (.npz files) exists only in a folder given by --data-root
    (its module writes no tiny set; ADASCALE_BENCH_DATA an empty folder that must stay empty): `advise`, then the
    `submit` command advise prints, run as printed, then `report`: every run completed on that folder's data and
    Table 2 has the task's cells. Small by the user's own knobs: --scales 1,2 (the S asked), --seeds 2, T1=100."""
    import json
    import os
    import shlex

    import numpy as np

    home, data, empty = tmp_path / "mine", tmp_path / "my-data", tmp_path / "no-data-here"
    for folder in (home, data, empty):
        folder.mkdir()
    module = design_blocks()[0]
    module = module[: module.index("    def write_tiny(")] + module[module.index("    def check_data(") :]
    (home / "mixture.py").write_text(module)
    centres = np.random.default_rng(0).normal(0.0, 1.0, (4, 8))  # the docs' mixture, in its real format
    for name, n, seed in (("train.npz", 2000, 1), ("eval.npz", 1000, 2)):
        rng = np.random.default_rng(seed)
        y = rng.integers(0, 4, n)
        np.savez(data / name, x=(centres[y] + rng.normal(0.0, 1.0, (n, 8))).astype(np.float32), y=y)
    env = {**os.environ, "ADASCALE_BENCH_DATA": str(empty)}
    out = tmp_path / "advice"
    argv = ("advise", "--task", NAME, "--data-root", str(data), "--scales", "1,2", "--seeds", "2", "--set", "T1=100")
    res = cli(home, *argv, "--out", str(out), env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    (printed,) = [line.strip() for line in res.stdout.splitlines() if line.strip().startswith("adascale-bench submit")]
    advice = (out / "advice.md").read_text()
    assert f"    {printed}\n" in advice
    for said_once in ("Δ = ", "; late ", "Largest S with efficiency"):  # one number per quantity (issue 55.7)
        assert advice.count(said_once) == 1, (said_once, advice)
    command = shlex.split(printed)
    res = cli(home, *command[1:], env=env)  # as printed: `adascale-bench` is this interpreter's `-m bench`
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "failed" not in res.stderr
    res = cli(home, "report", str(out), env=env)
    assert res.returncode == 0, res.stderr[-2000:]

    summaries = list(out.rglob("summary.json"))
    probes = yaml.safe_load((out / "verify.yaml").read_text())["pilot_seeds"][NAME]  # 2, or more where they disagree
    assert len(probes) >= 2 and len(summaries) == len(probes) + 2 * 3  # the probes (S = 2), S = 1, the rules
    counts = [json.loads(next(out.glob(f"{NAME}/adascale/s2/seed{p},*/summary.json")).read_text())["iterations"]
              for p in probes]  # fmt: skip
    assert not any(A.seeds_enough(counts[:k]) for k in range(2, len(probes)))  # a seed added only while unsure
    assert A.seeds_enough(counts) or len(probes) == A.MOST_PROBE_SEEDS
    for path in summaries:
        assert json.loads(path.read_text())["status"] == "completed", path
        assert json.loads((path.parent / "spec.json").read_text())["data_root"] == str(data.resolve())
        first = json.loads((path.parent / "metrics.jsonl").read_text().splitlines()[0])
        assert first["eval"] is True and first["iteration"] == 0  # the untrained model's evaluation (issue 55.4)
        assert json.loads(path.read_text())["initial_eval"]["top1"] == first["top1"]
    table2 = pd.read_csv(out / "report" / "table2.csv")
    cells = table2[table2["task"] == NAME]
    assert {(m, s) for m, s in zip(cells["method"], cells["scale"], strict=True)} == {
        (m, s) for m in ("adascale", "lsw") for s in (1, 2)
    }
    assert set(cells["n_seeds"]) == {2} and cells["val_metric"].notna().all()  # the pilot (probe) seed left out
    left_out = f"Left out: {len(probes)} run(s) of pilot seed(s) {', '.join(map(str, probes))}"
    assert left_out in (out / "report" / "table2.md").read_text()  # said under it
    assert not any(empty.iterdir())  # nothing was written to (or read from) the default data place
