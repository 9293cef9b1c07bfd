"""The smoke's offline gains over several processes: the same files, bit for bit, as one after another (each run's
estimate draws from its own seeded stream), in the runs' order."""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.experiments import matrix as matrices
from bench.experiments.pool import run_matrix
from bench.experiments.smoke import offline_gains
from bench.files import OFFLINE_GAIN

CASE = """preset: tiny
seeds: [0, 1, 2]
experiments:
  - gain:
      tasks: [logreg]
      scale: 8
      every: 7
      set: {T1: 300}
"""


def test_offline_gains_over_two_processes_equal_one_after_another(tmp_path: Path) -> None:
    (tmp_path / "case.yaml").write_text(CASE)
    one = tmp_path / "one"
    assert run_matrix(matrices.load(str(tmp_path / "case.yaml")), one, progress=False, jobs=1) == {"completed": 3}
    two = tmp_path / "two"
    shutil.copytree(one, two)
    serial = offline_gains(one, batches=8, jobs=1)
    parallel = offline_gains(two, batches=8, jobs=2)
    assert [d.relative_to(one) for d, _ in serial] == [d.relative_to(two) for d, _ in parallel] and len(serial) == 3
    assert [t for _, t in serial] == [t for _, t in parallel]
    for (a, _), (b, _) in zip(serial, parallel, strict=True):
        assert (a / OFFLINE_GAIN).read_bytes() == (b / OFFLINE_GAIN).read_bytes()
    assert offline_gains(two, batches=8, jobs=2) == []  # measured once: nothing newer to measure again
