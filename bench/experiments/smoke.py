"""`adascale-bench smoke`: the shipped tiny matrix on this machine, then the offline gain at the kept
checkpoints of its runs (the CLI then builds the report)."""

from __future__ import annotations

from pathlib import Path

from bench.engine.signals import install_signal_handlers
from bench.experiments import matrix as matrices
from bench.experiments.pool import run_matrix
from bench.files import KEPT, OFFLINE_GAIN, SUMMARY, read_json_object


def smoke(out: Path, seeds: int = 3, jobs: int = 1) -> dict[str, int]:
    """Run the shipped `smoke` matrix (at most `seeds` seeds per experiment) over `jobs` processes;
    counts per final status."""
    install_signal_handlers()
    m = matrices.load("smoke")
    m.runs = [r for r in m.runs if r.seed < seeds]
    out.mkdir(parents=True, exist_ok=True)
    return run_matrix(m, out, jobs=jobs)


SMOKE_GAIN_BATCHES = 256  # micro-batches per kept checkpoint: enough for μ² to stand above its noise (σ²/n)


def offline_gains(out: Path, batches: int = SMOKE_GAIN_BATCHES) -> list[tuple[Path, str]]:
    """`adascale-bench gain` on every completed run under `out` with kept checkpoints whose
    offline_gain.csv is missing or older than them; (run folder, printed table) of each one measured."""
    from bench.run.offline_gain import kept_checkpoints, online_gains, table
    from bench.run.offline_gain import offline_gains as measure

    done = []
    for kept in sorted(Path(out).rglob(KEPT)):
        run_dir = kept.parent
        summary = read_json_object(run_dir / SUMMARY)
        paths = kept_checkpoints(run_dir)
        if summary is None or summary.get("status") != "completed" or not paths:
            continue
        csv = run_dir / OFFLINE_GAIN
        if csv.exists() and csv.stat().st_mtime >= max(p.stat().st_mtime for p in paths):
            continue
        rows = measure(run_dir, batches)
        done.append((run_dir, table(rows, online_gains(run_dir))))
    return done
