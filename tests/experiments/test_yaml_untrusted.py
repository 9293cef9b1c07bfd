"""Matrix YAML and `--set` values are user input: alias expansion is bounded (a "billion laughs" file is
one short line, at once), messages quote a bounded excerpt, exponent numbers (1e-3, 2e3) are numbers,
and list or mapping values in an experiment's `set` work in `matrix` and `plan`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.errors import UserError
from bench.core.yamlsafe import MAX_NODES, excerpt, load_yaml
from bench.experiments.matrix import load
from bench.run.spec import parse_overrides, resolve
from tasks import get_task


def bomb(levels: int, where: str = "set: {x: *l%d}") -> str:
    """Nested aliases: each level nine of the one before (9**levels strings once expanded)."""
    lines = ["preset: tiny", 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for k in range(1, levels):
        lines.append(f"l{k}: &l{k} [" + ",".join([f"*l{k - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n" + (where % (levels - 1)) + "\n"


def inline_bomb(levels: int) -> str:
    """The same as one flow value: [&l0 [lol x9], &l1 [*l0 x9], ...] (anchors defined where first used)."""
    parts = ['&l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    parts += [f"&l{k} [" + ",".join([f"*l{k - 1}"] * 9) + "]" for k in range(1, levels)]
    return "[" + ", ".join(parts) + "]"


EXPERIMENTS = "experiments:\n  - table2: {tasks: [logreg], methods: [adascale], scales: [1]}\n"


def one_short_line(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 400 and "Traceback" not in err, err[:1000]
    return err


@pytest.mark.parametrize("levels", [9, 10])
def test_alias_bomb_is_one_short_line(tmp_path: Path, capsys: pytest.CaptureFixture, levels: int) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb(levels))
    assert len(path.read_bytes()) < 1000
    start = time.monotonic()
    assert main(["matrix", str(path)]) == 2
    err = one_short_line(capsys)
    assert str(path) in err and f"more than {MAX_NODES}" in err
    assert time.monotonic() - start < 30  # unbounded, the 9-level file took 36 s and 2.2 GB (not a timing bar)


def test_alias_bomb_through_data_roots_on_submit_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(f"preset: tiny\ndata_roots: {{logreg: {inline_bomb(9)}}}\n{EXPERIMENTS}")
    assert main(["submit", str(path), "--executor", "slurm", "--out", str(tmp_path / "o"), "--dry-run"]) == 2
    assert "more than" in one_short_line(capsys)


def test_a_few_aliases_are_fine_and_a_bad_data_root_is_quoted_short(tmp_path: Path, capsys) -> None:
    """The control: aliases below the bound load; a wrong-typed data root is quoted in a bounded excerpt."""
    path = tmp_path / "m.yaml"
    path.write_text(f"preset: tiny\ndata_roots: {{logreg: {inline_bomb(4)}}}\n{EXPERIMENTS}")
    assert load_yaml(path.read_text(), "m")["data_roots"]["logreg"][3][0][0][0] == ["lol"] * 9
    assert main(["submit", str(path), "--executor", "slurm", "--out", str(tmp_path / "o"), "--dry-run"]) == 2
    err = one_short_line(capsys)
    assert "data_roots.logreg" in err and "expected a folder" in err


def test_messages_quote_a_bounded_excerpt(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("preset: tiny\nseeds: ['" + "x" * 100_000 + "']\nexperiments: []\n")
    assert main(["matrix", str(path)]) == 2
    assert "seeds" in one_short_line(capsys)
    assert len(excerpt(list(range(10**6)))) < 100


def test_exponent_numbers_are_numbers(tmp_path: Path) -> None:
    got = parse_overrides(["lr0=1e-3", "T1=2e3", "x=1.5E+2", "y=abc", "z=1.0e-3"])
    assert got == {"lr0": 0.001, "T1": 2000, "x": 150.0, "y": "abc", "z": 0.001}
    assert isinstance(got["T1"], int)
    spec = resolve(
        get_task("logreg"), "adascale", 2, 0, "tiny", overrides=parse_overrides(["T1=2e3", "eval_every=1e2"])
    )
    assert spec.T1 == 2000 and spec.eval_every == 100
    path = tmp_path / "m.yaml"
    path.write_text(
        "preset: tiny\nset: {T1: 4e2}\nexperiments:\n"
        "  - heatmap: {task: cifar10, scale: 2, lr0: [1e-1, 3e-1], decay: [1e-1], threshold: 3e1}\n"
    )
    m = load(path)
    assert {r.overrides["lr_schedule.lr0"] for r in m.runs} == {0.1, 0.3} and m.overrides == {"T1": 400}
    with pytest.raises(UserError, match="lr0"):  # still checked: a string is not a learning rate
        resolve(get_task("logreg"), "adascale", 2, 0, "tiny", overrides={"lr_schedule.lr0": "1e-3x"})


def test_experiment_set_with_list_and_mapping_values(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "preset: tiny\nseeds: [0]\nexperiments:\n"
        "  - table2: {tasks: [logreg], methods: [adascale], scales: [2], set: {elastic.up: [[0.0, 2], [0.5, 4]]}}\n"
        "  - table2: {tasks: [logreg], methods: [adascale], scales: [2], set: {elastic.up: [[0.0, 2], [0.5, 4]]}}\n"
    )
    assert len(load(path).runs) == 1  # the same run twice is one
    assert main(["matrix", str(path)]) == 0
    assert main(["plan", str(path)]) == 0
    assert "unhashable" not in capsys.readouterr().err


MATRIX_TWICE = "preset: tiny\nseeds: [0]\nseeds: [0, 1, 2]\n" + EXPERIMENTS


@pytest.mark.parametrize("command", [["matrix"], ["plan"], ["submit", "--dry-run"]])
def test_a_key_given_twice_is_one_line_naming_the_file_and_key(tmp_path: Path, capsys, command: list[str]) -> None:
    """PyYAML keeps the last of two equal keys without a word (here three seeds for the one the user read
    first); every command that reads a matrix refuses it instead."""
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX_TWICE)
    argv = [command[0], str(path), *command[1:]]
    if command[0] == "submit":
        argv += ["--out", str(tmp_path / "out")]
    assert main(argv) == 2
    line = one_short_line(capsys)
    assert str(path) in line and "duplicate key 'seeds'" in line and "line 3" in line
    assert not (tmp_path / "out").exists()


def test_set_values_are_yaml_1_2(tmp_path: Path, capsys) -> None:
    """`--set T1=1:20` is not sexagesimal 80 (YAML 1.1): it is the string "1:20", refused as T1 in one line."""
    assert parse_overrides(["T1=1:20", "flag=yes", "n=017", "m=0o17", "t=2e3"]) == {
        "T1": "1:20",
        "flag": "yes",
        "n": 17,
        "m": 15,
        "t": 2000,
    }
    argv = ["run", "--task", "logreg", "--method", "adascale", "--scale", "2", "--set", "T1=1:20"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    line = one_short_line(capsys)
    assert "T1" in line and "80" not in line
    assert not list((tmp_path / "out").rglob("summary.json"))


def test_duplicate_keys_in_a_nested_mapping_and_merge_keys() -> None:
    with pytest.raises(UserError, match=r"f.yaml: duplicate key 'lr0' \(line 3\)"):
        load_yaml("set:\n  lr0: 0.1\n  lr0: 0.2\n", "f.yaml")
    assert load_yaml("base: &b {a: 1, b: 2}\nx:\n  <<: *b\n  a: 3\n", "f.yaml")["x"] == {"a": 3, "b": 2}
