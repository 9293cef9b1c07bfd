"""Every cause of a traceback found by the reliability sweep is one line naming the file or the value, and
the sweep's other inputs of the same kind with it: integers past Python's digit limit, NUL, control and
undecodable characters in `--set` and in a matrix (the YAML reader checks characters when it is built,
which was before the `try`), aliases that expand to gigabytes of characters though few nodes, task
numbers of the wrong sign or kind, a checkpoint whose tensors have other shapes or whose state is not
finite, a spec whose seed or threads is a string, a noise scale of 0. And one form per number: T1=2000
and T1=2000.0 are one run folder. Each has its control: the valid input goes through."""

from __future__ import annotations

import json
import math
import resource
import shutil
from pathlib import Path

import pytest
import torch

from bench.cli import main
from bench.core.errors import UserError
from bench.core.files import CHECKPOINT, SPEC, SUMMARY
from bench.run.runner import run_dir_of
from bench.run.spec import parse_overrides, run_name
from tests.helpers import finished_results, spec_for, train
from tests.run.test_reliability import stopped_run

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(300)]
RUN = ["run", "--task", "logreg", "--method", "adascale", "--scale", "2", "--set", "T1=4"]
MATRIX = (
    "preset: tiny\nseeds: [0]\n{set}experiments:\n  - table2: {{tasks: [logreg], methods: [adascale], scales: [2]}}\n"
)


def one_line(rc: int, capsys, *names: str) -> str:
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err[-3000:]
    for name in names:
        assert name in err, err
    assert len(err) < 1000, err[:300]
    return err


DIGITS = "9" * 5000
SET_VALUES = [  # (--set item, what the error names)
    (f"T1={DIGITS}", "T1"),
    (f"lr_schedule.lr0={DIGITS}", "lr_schedule.lr0"),
    ("T1=1\x00", "T1"),
    ("T1=\x07", "T1"),
    ("T1=\udcff", "T1"),  # a byte 0xFF on the command line, as Python decodes argv
    ("T1=1e400", "T1"),
    ("lr_schedule.lr0=.nan", "lr_schedule.lr0"),
    ("momentum=-inf", "momentum"),
    ("data.conditioning=-1", "data.conditioning"),
    ("data.conditioning=0", "data.conditioning"),
    ("T\x001=5", "T"),
]


@pytest.mark.parametrize(("item", "name"), SET_VALUES, ids=[repr(i[:24]) for i, _ in SET_VALUES])
def test_a_bad_set_value_is_one_line(tmp_path: Path, capsys, item: str, name: str) -> None:
    one_line(main([*RUN, "--set", item, "--out", str(tmp_path)]), capsys, name)


def test_a_negative_tiny_noise_is_one_line(tmp_path: Path, capsys) -> None:
    args = ["run", "--task", "cifar10", "--method", "adascale", "--scale", "2", "--set", "T1=2", "--out", str(tmp_path)]
    one_line(main([*args, "--set", "data.tiny_noise=-1"]), capsys, "data.tiny_noise")
    one_line(main([*args, "--set", "data.eval_batch_size=2.5"]), capsys, "data.eval_batch_size")  # an int key


def test_the_control_set_values_go_through(tmp_path: Path, capsys) -> None:
    assert main([*RUN, "--set", "data.conditioning=2", "--set", "lr_schedule.lr0=1e-1", "--out", str(tmp_path)]) == 0


MATRIX_CASES = {
    "digits": "set: {T1: " + DIGITS + "}\n",
    "nul": "set: {T1: 4}\n# \x00\n",
    "control": "set: {T1: \x1b4}\n",
    "alias bomb": "set: {experiment_note: &a " + "x" * 300_000 + ", more: [" + ", ".join(["*a"] * 10_000) + "]}\n",
}


@pytest.mark.parametrize("case", list(MATRIX_CASES))
def test_a_bad_matrix_is_one_line_naming_it(tmp_path: Path, capsys, case: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX.format(set=MATRIX_CASES[case]), encoding="utf-8")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    one_line(main(["matrix", str(path)]), capsys, str(path))
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024 < 200  # MB: refused unread


def test_a_matrix_that_is_not_utf8_is_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "m.yaml"
    path.write_bytes(MATRIX.format(set="set: {T1: 4}\n").encode() + b"# \xff\xfe\n")
    one_line(main(["matrix", str(path)]), capsys, str(path))
    path.write_text(MATRIX.format(set="set: {T1: 4}\n"))  # the control
    assert main(["matrix", str(path)]) == 0


def test_one_form_per_number_one_folder() -> None:
    a = spec_for("logreg", "adascale", 2, **parse_overrides(["T1=2000"]))
    b = spec_for("logreg", "adascale", 2, **parse_overrides(["T1=2000.0"]))
    c = spec_for("logreg", "adascale", 2, **parse_overrides(["T1=2e3"]))
    assert run_name(a) == run_name(b) == run_name(c) and a.identity == b.identity
    assert run_name(spec_for("logreg", "adascale", 2, T1=2000.5)) != run_name(a)  # the control
    lr = [spec_for("logreg", "adascale", 2, **parse_overrides([f"lr_schedule.lr0={v}"])) for v in ("1", "1.0")]
    assert run_name(lr[0]) == run_name(lr[1])


# -- checkpoints ---------------------------------------------------------------------------------------------
def _edit(run_dir: Path, change) -> None:
    ckpt = torch.load(run_dir / CHECKPOINT, weights_only=True)
    change(ckpt)
    torch.save(ckpt, run_dir / CHECKPOINT)


def _first_tensor(d: dict) -> str:
    return next(k for k, v in d.items() if isinstance(v, torch.Tensor))


EDITS = {
    "tau NaN": lambda c: c["state"].update(tau=math.nan),
    "tau inf": lambda c: c["state"].update(tau=math.inf),
    "iteration float": lambda c: c["state"].update(iteration=1.5),
    "offset negative": lambda c: c["state"].update(metrics_offset=-1),
    "weight shape": lambda c: c["model"].update({_first_tensor(c["model"]): torch.zeros(7, 3)}),
    "momentum shape": lambda c: c["optimizer"]["state"].update({0: {"momentum_buffer": torch.zeros(5)}}),
    "no optimizer state key": lambda c: c["optimizer"].pop("param_groups"),
    "estimator NaN": lambda c: c["estimator"]["ema"].update(raw=[math.nan, 1.0]),
    "estimator string": lambda c: c["estimator"]["ema"].update(updates="many"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_checkpoint_that_does_not_fit_is_one_line(tmp_path: Path, edit: str) -> None:
    spec = stopped_run(tmp_path)
    _edit(tmp_path, EDITS[edit])
    with pytest.raises(UserError) as e:
        train(spec, tmp_path)
    assert str(tmp_path / CHECKPOINT) in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_the_control_checkpoint_resumes(tmp_path: Path) -> None:
    spec = stopped_run(tmp_path)
    _edit(tmp_path, lambda c: None)
    summary, _ = train(spec, tmp_path)
    assert summary["status"] == "completed"


def test_a_legacy_format_checkpoint_is_refused(tmp_path: Path) -> None:
    """The pre-zip format's pickle states the sizes torch allocates: refused, not read."""
    spec = stopped_run(tmp_path)
    ckpt = torch.load(tmp_path / CHECKPOINT, weights_only=True)
    torch.save(ckpt, tmp_path / CHECKPOINT, _use_new_zipfile_serialization=False)
    with pytest.raises(UserError, match="not a zip-format"):
        train(spec, tmp_path)


# -- gain, report ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kept") / "out"
    sets = {"T1": 20, "eval_every": 10, "keep_checkpoints_every": 10}
    assert main(["run", *RUN[1:7], *sum((["--set", f"{k}={v}"] for k, v in sets.items()), []), "--out", str(out)]) == 0
    return run_dir_of(out, spec_for("logreg", "adascale", 2, **sets))


@pytest.mark.parametrize(("key", "value"), [("seed", "0"), ("threads", "one"), ("task", 7), ("T1", [1])])
def test_gain_on_a_spec_of_the_wrong_type_is_one_line(kept: Path, tmp_path: Path, capsys, key: str, value) -> None:
    run = tmp_path / "run"
    shutil.copytree(kept, run)
    spec = json.loads((run / SPEC).read_text())
    assert main(["gain", str(run), "--batches", "4"]) == 0  # the control
    capsys.readouterr()
    spec[key] = value
    (run / SPEC).write_text(json.dumps(spec))
    one_line(main(["gain", str(run), "--batches", "4"]), capsys, str(run / SPEC), key)


def test_report_with_a_noise_scale_of_zero(tmp_path: Path, capsys) -> None:
    out = finished_results(tmp_path / "out")
    for path in out.rglob(SUMMARY):
        summary = json.loads(path.read_text())
        path.write_text(json.dumps(summary | {"B_simple": 0.0, "noise_scale": 0.0}))
    assert main(["report", str(out)]) == 0
    assert "Traceback" not in capsys.readouterr().err
