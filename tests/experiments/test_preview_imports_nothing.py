"""Previews run no code of a matrix (issue 42): `matrix`, `plan` and `submit --dry-run` show a user's rule
`package.module:NAME` as named and never import it (a matrix from a shared folder is read by people who
only want to see it); and when a rule is imported (run, submit), the working folder goes last on
sys.path, so a planted `soundfile.py` there cannot shadow the installed package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import main
from tests.experiments.test_method_table import EVIL, SMALL, write

MATRIX = SMALL + "  - table2: {tasks: [logreg], methods: [adascale, evil.module:X], scales: [1, 4]}\n"


@pytest.mark.parametrize(
    "command",
    [["matrix"], ["plan"], ["submit", "--dry-run", "--executor", "local"]],
    ids=["matrix", "plan", "submit-dry-run"],
)
def test_a_preview_never_imports_a_rule_the_matrix_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, command: list[str]
) -> None:
    (tmp_path / "evil").mkdir()
    write(tmp_path / "evil" / "__init__.py", "")
    write(tmp_path / "evil" / "module.py", EVIL)
    marker = tmp_path / "evil" / "IMPORTED"
    path = write(tmp_path / "m.yaml", MATRIX)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # importable twice over: nothing may import it
    argv = [command[0], str(path), *command[1:]]
    if command[0] == "submit":
        argv += ["--out", str(tmp_path / "out")]
    rc = main(argv)
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "evil.module:X" in captured.out
    assert not marker.exists() and "evil" not in sys.modules and "evil.module" not in sys.modules
    assert not (tmp_path / "out").exists()


def test_the_working_folder_never_goes_first_on_sys_path(tmp_path: Path) -> None:
    """A user's rule is loaded from the working folder (run), and a `soundfile.py` planted there leaves its
    marker file if it is ever imported instead of the installed soundfile (the speech task's)."""
    (tmp_path / "my_rules.py").write_text(
        "from bench.core.algo.rules import LinearScalingWarmup\n"
        "class R(LinearScalingWarmup):\n    label = title = 'r'\n"
    )
    (tmp_path / "soundfile.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('SHADOWED').write_text('x')\n"
    )
    script = (
        "import sys\nfrom bench.core import methods\nmethods.load_rule('my_rules:R')\n"
        "import soundfile\nprint(soundfile.__file__)\nprint(sys.path.index(sys.path[-1]) == len(sys.path) - 1)\n"
    )
    # the console script's sys.path (its bin folder first, not the working folder): as adascale-bench starts
    res = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; sys.path.pop(0) if sys.path[0] in ('', '.') else None;" + script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "site-packages" in res.stdout.splitlines()[0], res.stdout
    assert not (tmp_path / "SHADOWED").exists()
