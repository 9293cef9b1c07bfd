"""The foundation's old paths (bench.errors, bench.algo.rules) still load a task or rule written against them: the
same classes as bench.core's, with a FutureWarning naming the new path; the suite itself imports neither."""

from __future__ import annotations

import subprocess
import sys

import pytest

CASES = {
    "bench.errors": "from bench.errors import UserError as old; from bench.core.errors import UserError as new",
    "bench.algo.rules": "from bench.algo.rules import ScalingRule as old; from bench.core.algo.rules import "
    "ScalingRule as new",
}


@pytest.mark.parametrize("path", sorted(CASES))
def test_an_old_path_is_the_same_class_with_a_warning(path: str) -> None:
    code = CASES[path] + "; print(old is new)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.stdout.strip() == "True", run.stderr[-800:]
    assert f"FutureWarning: {path} moved to bench.core." in run.stderr, run.stderr[-800:]
    strict = subprocess.run([sys.executable, "-W", "error::FutureWarning", "-c", code], capture_output=True, text=True)
    assert strict.returncode != 0 and "moved to bench.core" in strict.stderr


def test_the_suite_imports_no_old_path() -> None:
    """Loading the CLI, the engine, every task and the reports leaves both old paths unimported."""
    code = (
        "import sys, bench.cli, bench.core.engine.loop, reports.build, slurm; from tasks import get_task; "
        "[get_task(t) for t in ('logreg', 'cifar10')]; "
        "print(sorted(m for m in ('bench.errors', 'bench.algo', 'bench.algo.rules') if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.stdout.strip() == "[]", run.stdout[-500:] + run.stderr[-800:]
