"""`adascale-bench smoke`: the tiny matrix on this machine, then the report."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tqdm import tqdm

from . import matrix as matrices
from .engine import Interrupted, install_signal_handlers
from .runner import run_spec


def run_matrix(m: matrices.Matrix, out: Path, progress: bool = True) -> dict[str, int]:
    """Run every run of a matrix in this process, in dependency order; a failed run is reported and
    the matrix goes on. Returns counts per final status."""
    counts: dict[str, int] = {}
    bar = tqdm(m.runs, desc="runs", unit="run", disable=not progress or None, dynamic_ncols=True)
    for req in bar:
        spec = m.spec(req)
        bar.set_postfix_str(f"{req.task} {req.method} {req.scale} seed{req.seed}", refresh=True)
        try:
            status = run_spec(spec, out, progress=progress)["status"]
        except Interrupted:
            raise
        except Exception as e:  # a failed run (UserError included) is reported; the matrix goes on
            status = "failed"
            tqdm.write(f"failed: {req.task} {req.method} {req.scale} seed{req.seed}: {e}", file=sys.stderr)
        counts[status] = counts.get(status, 0) + 1
    bar.close()
    return counts


def smoke(out: Path, seeds: int = 2) -> int:
    """Run the shipped `smoke` matrix (at most `seeds` seeds per experiment), then build the report."""
    from reports.build import build_report

    from .sweep import sweep_table, write_sweep_csv

    install_signal_handlers()
    start = time.perf_counter()
    m = matrices.load("smoke")
    m.runs = [r for r in m.runs if r.seed < seeds]
    out.mkdir(parents=True, exist_ok=True)
    counts = run_matrix(m, out)
    write_sweep_csv(sweep_table(m, out), out / "sweep.csv")
    html = build_report(out, ["md", "tex", "html", "csv"])
    print(
        f"smoke: {sum(counts.values())} runs ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}) "
        f"in {time.perf_counter() - start:.0f} s"
    )
    print(f"report: {html}")
    print(f"tables: {html.parent / 'table2.md'} (also .tex, .csv)")
    return 0 if counts.get("failed", 0) == 0 else 1
