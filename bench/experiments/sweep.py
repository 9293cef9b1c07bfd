"""`adascale-bench sweep --task logreg`: the critical-batch sweep's runs (docs/design.md §1), through the one engine.

For global batches 32 … 4096: epochs of data until the full loss reaches the target, under a fixed lr,
under linear scaling with warm-up and with AdaScale at S = B/32. The gradient-noise scale measured by
the AdaScale runs predicts where linear scaling stops paying (the critical batch). The table and figure
are the report's (reports.speed.sweep), built by the CLI from the run files.
"""

from __future__ import annotations

from pathlib import Path

from bench.core.engine.signals import install_signal_handlers
from bench.core.errors import UserError
from bench.experiments import matrix as matrices
from bench.experiments.pool import run_matrix


def sweep(task: str, out: Path, jobs: int = 1) -> dict[str, int]:
    """Run the sweep matrix under `out`; counts per final status."""
    if task != "logreg":
        raise UserError(f"the sweep runs on logreg only, not {task}")
    install_signal_handlers()
    out.mkdir(parents=True, exist_ok=True)
    runs = matrices.sweep_runs(matrices.SWEEP_BATCHES, 80, [0])
    return run_matrix(matrices.Matrix(Path("<sweep>"), "tiny", runs, {}, {}), out, jobs=jobs)
