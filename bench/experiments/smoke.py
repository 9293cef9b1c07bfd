"""`adascale-bench smoke`: the shipped tiny matrix on this machine (the CLI then measures the offline gain at
its runs' kept checkpoints, bench.experiments.gains, and builds the report)."""

from __future__ import annotations

from pathlib import Path

from bench.core.engine.signals import install_signal_handlers
from bench.experiments import matrix as matrices
from bench.experiments.pool import run_matrix


def smoke(out: Path, seeds: int = 3, jobs: int = 1) -> dict[str, int]:
    """Run the shipped `smoke` matrix (at most `seeds` seeds per experiment) over `jobs` processes;
    counts per final status."""
    install_signal_handlers()
    m = matrices.load("smoke")
    m.runs = [r for r in m.runs if r.seed < seeds]
    out.mkdir(parents=True, exist_ok=True)
    return run_matrix(m, out, jobs=jobs)
