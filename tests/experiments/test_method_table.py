"""A method is one row of the method table (bench.core.algo.rules.METHODS) or of a user's module
(`package.module:NAME`): defined there and nowhere else, it reaches the matrix expansion, `plan`, a run,
`status` and the report (Table 2's columns, the per-rule verdicts). A run folder never causes an import."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bench.cli import main
from bench.core import methods as registry
from bench.core.algo.rules import iterations_for
from bench.core.algo.schedules import ScaleSchedule
from bench.core.errors import UserError
from bench.core.files import METRICS, SPEC, read_jsonl
from bench.experiments import matrix, plan
from bench.experiments.pool import run_matrix
from bench.run.runner import run_spec
from reports.build import build_report
from reports.page import rulecompare as RC
from reports.rundata.collect import load
from reports.tables.table2 import cells, markdown
from reports.verdicts.findings import STATUSES
from slurm.status import collect, table
from tests.helpers import spec_for

ROOT = Path(__file__).resolve().parents[2]
SMALL = "preset: tiny\nseeds: [0]\nset: {T1: 60, eval_every: 30}\nexperiments:\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture
def user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """sys.path, sys.modules and the loaded-rule cache as they were: a test's user modules do not leak."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(registry, "_LOADED", {})
    monkeypatch.setattr(registry, "_DIGESTS", {})
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith(("my_rules", "evil")):
            del sys.modules[name]


def test_an_unknown_method_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path / "m.yaml", SMALL + "  - table2: {tasks: [logreg], methods: [adascale, sqrtx], scales: [4]}\n"
    )
    with pytest.raises(UserError, match="unknown method 'sqrtx'"):
        matrix.load(path)


LOAD_FORMS = {
    # one class, its facts as class attributes: the form the docs show
    "my_rules_one:R": (
        "from bench.core.algo.rules import ScalingRule\n"
        "class R(ScalingRule):\n    pace = 'scale'\n"
        "    def factors(self, t, scale, gain):\n        return 1.0, float(scale), 1.0\n",
        None,
    ),
    "my_rules_nofactors:R": (
        "from bench.core.algo.rules import ScalingRule\nclass R(ScalingRule):\n    pace = 'scale'\n",
        "^rule my_rules_nofactors:R: R defines no factors",
    ),
    "my_rules_nopace:R": (
        "from bench.core.algo.rules import Identity\nclass R(Identity):\n    pace = 'fast'\n",
        "^rule my_rules_nopace:R: pace 'fast' is not one of scale, gain, one",
    ),
    "my_rules_flag:R": (
        "from bench.core.algo.rules import Identity\nclass R(Identity):\n    uses_gain = 'yes'\n",
        "^rule my_rules_flag:R: uses_gain is str, not True or False$",
    ),
    "my_rules_optim:R": (
        "from bench.core.algo.rules import Identity\nclass R(Identity):\n    optimizers = ('lamb',)\n",
        "^rule my_rules_optim:R: optimizers \\('lamb',\\) are not among sgd, adamw$",
    ),
    "my_rules_label:R": (
        "from bench.core.algo.rules import Identity\nclass R(Identity):\n    label = 5\n",
        "^rule my_rules_label:R: label is int, not a string$",
    ),
    "my_rules_value:R": ("R = 3\n", "^rule my_rules_value:R: my_rules_value.R is int; expected a subclass of "),
    "my_rules_class:R": ("class R:\n    pass\n", "^rule my_rules_class:R: my_rules_class.R is R; expected a subclass"),
}


@pytest.mark.parametrize("name", LOAD_FORMS)
def test_a_user_rule_is_one_class_and_anything_else_is_one_line(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user_modules: None
) -> None:
    """A rule of yours loads as a ScalingRule subclass, named as you name it; a class without factors, a pace, a
    flag or an optimizer of the wrong kind, or a value that is no such class is one line naming the rule."""
    source, error = LOAD_FORMS[name]
    write(tmp_path / f"{name.split(':')[0]}.py", source)
    monkeypatch.chdir(tmp_path)
    if error is not None:
        with pytest.raises(UserError, match=error):
            registry.load_rule(name)
        return
    row = registry.load_rule(name)
    assert (row.name, row.label, row.title, row.pace) == (name, name, name, "scale")
    assert registry.make_rule(name, ScaleSchedule.constant(4), 100.0).factors(0, 4, 1.0) == (1.0, 4.0, 1.0)


def test_a_method_row_written_by_hand_still_loads_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user_modules: None
) -> None:
    """How rules were written before they were one class: the row loads as it did, and a FutureWarning says how to
    write it now."""
    write(
        tmp_path / "my_rules_row.py",
        "from bench.core.algo.rules import METHODS, Method\n"
        "R = Method(name='x', label='r', title='my r', build=METHODS['lsw'].build, pace='scale',\n"
        "           identity_at_s1=True)\n",
    )
    monkeypatch.chdir(tmp_path)
    with pytest.warns(FutureWarning, match="a Method row is deprecated; write the rule as one class"):
        row = registry.load_rule("my_rules_row:R")
    assert (row.name, row.label, row.title, row.identity_at_s1) == ("my_rules_row:R", "r", "my r", True)


def test_a_built_in_rule_reaches_matrix_plan_run_status_and_table2(tmp_path: Path) -> None:
    """Square-root scaling, built in: a row of the table and its test (tests/algo), nothing else."""
    path = write(
        tmp_path / "m.yaml", SMALL + "  - table2: {tasks: [logreg], methods: [adascale, sqrt], scales: [1, 4]}\n"
    )
    m = matrix.load(path)
    assert {(r.method, r.scale) for r in m.runs} == {("adascale", 1), ("adascale", 4), ("sqrt", 4)}  # S = 1 shared
    assert "(shared: AS = √S at S = 1)" in matrix.describe(m)

    cost = {(c.method, c.scale): c for c in plan.make_plan(m, {}, None)}
    assert cost[("sqrt", 4)].iterations == [iterations_for(ScaleSchedule.constant(4), 60)] * 2  # pace: p = S
    assert cost[("adascale", 4)].iterations == [15, 60]

    out = tmp_path / "out"
    for r in m.runs:
        assert run_spec(m.spec(r), out, progress=False)["status"] == "completed"
    records = read_jsonl(out / "logreg/sqrt/s4/seed0,T1=60,eval_every=30" / METRICS)
    lr0 = spec_for("logreg").lr_schedule.lr0  # a constant schedule
    assert [r["lr"] for r in records if not r.get("eval")] == [pytest.approx(2.0 * lr0)] * 15  # √4 · lr0

    text = table(collect(out))
    assert "logreg  sqrt " in text and "adascale*" in text and "* shared: AS = √S at S = 1" in text

    c = cells(load(out).runs)
    row = c[(c["method"] == "sqrt") & (c["scale"] == "1")].iloc[0]  # the shared run, in √S's column
    assert row["n_seeds"] == 1 and row["iterations"] == 60
    header = markdown(c).splitlines()[2]
    assert header.endswith("| iterations AS | iterations √S |"), header


def test_a_matrix_of_four_rules_gives_a_column_and_a_verdict_per_rule(tmp_path: Path) -> None:
    """The acceptance of #31: adascale, lsw, sqrt and legw in one matrix; LEGW, which warms up at S = 1,
    runs its own S = 1; every rule gets its Table 2 column and a verdict against S = 1 by finding (i)'s rule."""
    body = "  - table2: {tasks: [logreg], methods: [adascale, lsw, sqrt, legw], scales: [1, 4]}\n"
    m = matrix.load(write(tmp_path / "m.yaml", SMALL.replace("seeds: [0]", "seeds: [0, 1, 2]") + body))
    assert {(r.method, r.scale) for r in m.runs if r.scale == 1} == {("adascale", 1), ("legw", 1)}
    assert "(shared: AS = LSW = √S at S = 1)" in matrix.describe(m)
    out = tmp_path / "out"
    assert run_matrix(m, out, progress=False) == {"completed": 18}
    report = build_report(out, ["md", "csv", "txt", "html"])
    header = next(ln for ln in (report.parent / "table2.md").read_text().splitlines() if ln.startswith("| S |"))
    assert header.endswith("| iterations AS | iterations LSW | iterations √S | iterations LEGW |"), header
    verdicts = pd.read_csv(report.parent / "rule_verdicts.csv", dtype={"scale": str})
    assert sorted(verdicts["method"]) == ["adascale", "legw", "lsw", "sqrt"] and set(verdicts["scale"]) == {"4"}
    assert (
        set(verdicts["status"]) <= {RC.verdict(s) for s in STATUSES}
        and (verdicts["n"] == 3).all()
        and (verdicts["n_base"] == 3).all()
    )
    glance = pd.read_csv(report.parent / "rules_at_a_glance.csv")
    assert list(glance["label"]) == ["AS", "LSW", "√S", "LEGW"]
    assert glance.set_index("method").loc["lsw", "speedup"] == pytest.approx(4.0)  # τ advances by S: T1/(T1/4)
    printed = (report.parent / "rules.txt").read_text()
    words = "|".join(re.escape(RC.verdict(s)) for s in STATUSES)  # the rules' own vocabulary
    assert all(re.search(rf"^  {label} +({words})  ", printed, re.M) for label in glance["label"])
    html = report.read_text()
    assert 'id="rules"' in html and "LEGW" in html


# -- a user's rule, as docs/design.md shows it ---------------------------------------------------------------------
def docs_blocks() -> tuple[str, list[str]]:
    """The python block and the console block of docs/design.md's "Adding a method", exactly."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text[text.index("### Adding a method") :]
    section = section[: section.index("\n## ")]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    console = re.search(r"```console\n(.*?)```", section, re.S)
    assert code and console, "the section shows a rule and the commands that run it"
    return code[1], console[1].strip().splitlines()


def test_the_documented_user_rule_runs_through_a_matrix_and_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], user_modules: None
) -> None:
    code, commands = docs_blocks()
    run_cmd = shlex.split(next(c for c in commands if c.split()[1] == "run"))
    name = run_cmd[run_cmd.index("--method") + 1]
    module = name.split(":")[0]
    source = write(tmp_path / f"{module}.py", code)
    monkeypatch.chdir(tmp_path)  # the module is found beside the command, as Python's -m would find it

    # the documented command, with a short T1 and its own results folder
    assert main([*run_cmd[1:], "--out", "single", "--set", "T1=60", "--set", "eval_every=30"]) == 0
    (spec_path,) = Path("single").rglob(SPEC)
    spec = json.loads(spec_path.read_text())
    assert spec["method"] == name and spec["rule"]["name"] == name
    assert spec["rule"]["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()  # the run's identity has it

    # a tiny matrix beside the paper's AdaScale; the rule is identity at S = 1, so S = 1 is the shared run
    m = matrix.load(
        write(
            tmp_path / "m.yaml",
            SMALL + f"  - table2: {{tasks: [logreg], methods: [adascale, {name}], scales: [1, 4]}}\n",
        )
    )
    assert {(r.method, r.scale) for r in m.runs} == {("adascale", 1), ("adascale", 4), (name, 4)}
    assert run_matrix(m, tmp_path / "out", progress=False) == {"completed": 3}
    assert main(["report", "out", "--format", "md,csv"]) == 0
    label = registry.method(name).label
    header = next(ln for ln in Path("out/report/table2.md").read_text().splitlines() if ln.startswith("| S |"))
    assert header.endswith(f"| iterations AS | iterations {label} |"), header
    verdicts = pd.read_csv("out/report/rule_verdicts.csv", dtype={"scale": str})
    mine = verdicts[verdicts["method"] == name]
    assert (
        list(mine["scale"]) == ["4"]
        and mine["status"].iloc[0] in {RC.verdict(s) for s in STATUSES}
        and mine["n_base"].iloc[0] == 1
    )

    # the source changed: another identity, so another folder (its code key in the name); the old one stays
    write(source, code + "\n# edited\n")
    registry._LOADED.clear()
    sys.modules.pop(module, None)
    assert main([*run_cmd[1:], "--out", "single", "--set", "T1=60", "--set", "eval_every=30"]) == 0
    specs = list(Path("single").rglob(SPEC))
    digests = {json.loads(p.read_text())["rule"]["sha256"][:12]: p.parent.name for p in specs}
    assert len(specs) == len(digests) == 2 and all(f",rule={d}." in leaf for d, leaf in digests.items()), digests


EVIL = '''"""A rule whose import leaves a mark: reading its run folders must never import it."""
import pathlib

pathlib.Path(__file__).with_name("IMPORTED").write_text("imported")

from bench.core.algo.rules import SquareRootScaling


class X(SquareRootScaling):
    label, title = "<b>e|vil</b>", "evil"
'''


def test_a_run_folder_naming_a_user_rule_is_reported_and_statused_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user_modules: None
) -> None:
    (tmp_path / "evil").mkdir()
    write(tmp_path / "evil" / "__init__.py", "")
    write(tmp_path / "evil" / "module.py", EVIL)
    marker = tmp_path / "evil" / "IMPORTED"
    out = tmp_path / "out"
    # someone else's results: a run of the rule (made in another process) and the S = 1 run beside it
    script = (
        "import sys; from bench.cli import main\n"
        "for method, scale in (('evil.module:X', '2'), ('adascale', '1')):\n"
        "    argv = ['run', '--task', 'logreg', '--method', method, '--scale', scale, '--out', sys.argv[1]]\n"
        "    assert main([*argv, '--set', 'T1=40', '--set', 'eval_every=20']) == 0\n"
    )
    res = subprocess.run([sys.executable, "-c", script, str(out)], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert marker.exists()  # the run did import it: the user named it
    marker.unlink()

    # here the module is importable twice over (on sys.path, and in the current folder): nothing may import it
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    report = build_report(out, ["md", "tex", "html", "csv"])
    text = table(collect(out))
    assert "evil.module:X" in text
    assert not marker.exists() and "evil" not in sys.modules and "evil.module:X" not in registry._LOADED
    md = (report.parent / "table2.md").read_text()
    assert "| iterations AS | iterations <b>e\\|vil</b> |" in md  # the label its spec recorded, one cell
    html = report.read_text()
    assert "&lt;b&gt;e|vil&lt;/b&gt;" in html and "<b>e|vil</b>" not in html  # escaped where it is markup
    assert (
        "& \\textless{}b\\textgreater{}e|vil\\textless{}/b\\textgreater{} \\\\"
        in (report.parent / "table2.tex").read_text()
    )
    # and the command line, run where `python -m` puts the module's folder first on sys.path
    res = subprocess.run(
        [sys.executable, "-m", "bench", "status", str(out)], cwd=tmp_path, capture_output=True, text=True
    )
    assert res.returncode == 0 and "evil.module:X" in res.stdout, res.stderr
    assert not marker.exists()


def test_a_user_rule_that_needs_its_adascale_twin_runs_after_it_and_takes_its_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user_modules: None
) -> None:
    """`needs: T_AS` orders and chains a user's rule as it does LSW+: it waits for the AdaScale run of its
    experiment and runs as many iterations (its spec's `rule` record is not part of its twin's identity)."""
    write(
        tmp_path / "my_rules_plus.py",
        "from bench.core.algo.rules import LinearScalingWarmupPlus\n"
        "class PLUS(LinearScalingWarmupPlus):\n    label, title = 'LSW+ (mine)', 'mine'\n",
    )
    monkeypatch.chdir(tmp_path)
    body = "  - table2: {tasks: [logreg], methods: [my_rules_plus:PLUS, adascale], scales: [4]}\n"
    m = matrix.load(write(tmp_path / "m.yaml", SMALL + body))
    assert [r.method for r in m.runs] == ["adascale", "my_rules_plus:PLUS"]  # what it needs first
    assert [d.method for d in matrix.depends_on(m.runs[1], m.runs)] == ["adascale"]
    assert run_matrix(m, tmp_path / "out", progress=False) == {"completed": 2}
    summaries = {
        s.parent.parent.parent.name: json.loads(s.read_text()) for s in (tmp_path / "out").rglob("summary.json")
    }
    assert summaries["my_rules_plus:PLUS"]["iterations"] == summaries["adascale"]["iterations"]
