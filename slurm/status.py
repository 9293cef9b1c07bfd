"""`adascale-bench status DIR [--json] [--watch N]`: the state of every cell of a results folder.

A run's state comes from its own files first (summary.json says done, diverged or failed), then from
the scheduler for the job that `submit` recorded in job.json (sacct through submitit's SlurmInfoWatcher,
squeue for what sacct does not know yet; a run of the local executor is active while its `submit` lives).
A run waiting for its job to start is `queued`; one that a matrix named but that has no folder and no job
is `missing`. Each run's τ/T1 and ETA come from its files (slurm/progress.py). A run's state is read in
slurm/runstate.py, the scheduler's in slurm/scheduler.py; here, the table and the command.
"""

from __future__ import annotations

import math
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.core.algo.rules import method_order
from bench.core.errors import UserError
from bench.core.methods import shared_note
from bench.experiments.matrix import is_shared

from .progress import duration
from .runstate import MANIFEST as MANIFEST
from .runstate import STATES, RunState, collect, printable
from .runstate import add_to_manifest as add_to_manifest
from .runstate import last_line as last_line
from .runstate import run_state as run_state
from .scheduler import ACTIVE as ACTIVE
from .scheduler import scheduler_states as scheduler_states

# Imported `as` themselves: re-exported for submit and the tests, which import them from here (their homes are
# slurm/runstate.py and slurm/scheduler.py).


# -- the table ------------------------------------------------------------------------------------------------
def _scale_key(scale: str) -> tuple[int, int | str]:
    return (0, int(scale)) if scale.isdigit() else (1, scale)


def _cell_state(states: list[str]) -> str:
    counts = Counter(states)
    if len(counts) == 1:
        return states[0]
    return ", ".join(f"{counts[s]} {s}" for s in STATES if counts[s])


def _jobs(ids: list[str]) -> str:
    unique = list(dict.fromkeys(i for i in ids if i))
    return ",".join(unique[:4]) + (f",… ({len(unique)})" if len(unique) > 4 else "") if unique else "-"


def _leaf_name(variant: str) -> str:
    """A run folder's override suffix (`key=value,…`, no spec to read) written as a name: `key value, …`."""
    return ", ".join(part.rsplit(".", 1)[-1].replace("=", " ", 1) for part in variant.split(",") if part)


def _cell_progress(members: list[RunState]) -> tuple[str, str]:
    """τ/T1 of a cell's runs (one percentage, or the least and the most; a finished run is at 100 %, though
    its last step may pass T1) and the ETA of its last one."""
    done = [1.0 if r.state == "done" else f for r in members if (f := r.progress.fraction) is not None]
    if not done:
        share = "-"
    else:
        lo, hi = min(done), max(done)
        share = f"{lo:.0%}" if round(lo * 100) == round(hi * 100) else f"{lo:.0%}–{hi:.0%}"
    etas = [r.progress.eta_s for r in members if r.state == "running"]
    eta = duration(max(e for e in etas if e is not None)) if any(e is not None for e in etas) else "-"
    return share, eta


def table(runs: list[RunState]) -> str:
    """One row per cell (task, method, scale, variant) with its seeds, state and job ids; then the failed
    runs, each with the last line of its log. The S = 1 adascale run is shown once, as shared: at S = 1 the
    Table 2 rules that are identity scaling there are one computation (bench.experiments.matrix)."""
    cells: dict[tuple, list[RunState]] = {}
    shown: dict[tuple, tuple[str, str]] = {}  # a cell's method and variant as a human reads them
    for r in runs:
        task, method, scale, _, variant = r.parts
        key = (task, method, scale, variant, r.preset or "-")
        cells.setdefault(key, []).append(r)
        if r.shown[0] or key not in shown:
            shown[key] = (r.shown[0] or method, r.shown[1] if r.shown[0] else _leaf_name(variant))
    order = sorted(cells, key=lambda k: (k[0], method_order(k[1]), k[1], _scale_key(k[2]), k[3]))
    shared = f"({shared_note(k[1] for k in cells)})"  # the rules of this folder that its S = 1 run stands for
    rows = [("task", "method", "scale", "variant", "seeds", "state", "τ/T1", "ETA", "jobs", "preset")]
    notes: set[str] = set()
    for key in order:
        members = sorted(cells[key], key=lambda r: r.parts[3])
        seeds = ",".join(str(r.parts[3]) for r in members)
        state = _cell_state([r.state for r in members])
        method, variant = shown[key]
        sweep = method.startswith("sweep ")  # a sweep's run at S = 1 stands for no Table 2 rule
        starred = is_shared(key[1], key[2], None) and not sweep
        method = f"{method}*" if starred else method  # * the note under the table, as `plan` writes it
        notes |= {f"* {shared[1:-1]}"} if starred else set()
        jobs = _jobs([r.job_id or "" for r in members])
        rows.append((key[0], method, key[2], variant or "-", seeds, state, *_cell_progress(members), jobs, key[4]))
    lines = fitted(rows) + sorted(notes)
    for kind in ("failed", "unreadable", "stopped"):
        listed = [r for r in runs if r.state == kind]
        if listed:
            lines += ["", f"{kind}:"]
        for r in listed:
            job = f" (job {r.job_id}{', ' + r.scheduler if r.scheduler else ''})" if r.job_id else ""
            said = f"  {r.name}{job}: {r.detail or 'no log'}"  # wrapped, never cut: the reason is the point
            lines += textwrap.wrap(said, WIDTH, subsequent_indent="    ", break_on_hyphens=False) or [said]
    counts = Counter(r.state for r in runs)
    lines += ["", f"{len(runs)} runs: " + ", ".join(f"{counts[s]} {s}" for s in STATES if counts[s])]
    return "\n".join(printable(line) for line in lines)


WIDTH = 160  # a terminal's line: no line of `status` is longer
SHRINK = (3, 1)  # the columns cut first where a table would be wider: variant, then method


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, its end replaced by '…' where it is longer."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def fitted(rows: list[tuple]) -> list[str]:
    """The table's lines (a header, a rule, a line per row), no wider than WIDTH: the variant and method
    columns cut (each to no less than 12 characters) where the whole would be wider."""
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for col in SHRINK:
        over = sum(widths) + 2 * (len(widths) - 1) - WIDTH
        if over > 0:
            widths[col] = max(12, widths[col] - over)
    lines = ["  ".join(cut(str(v), w).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return [cut(line, WIDTH) for line in lines]


def as_json(out: Path, runs: list[RunState]) -> dict[str, Any]:
    """`status --json`: every run's state, τ, T1, progress, ETA and job ids, and the counts per state."""
    counts = Counter(r.state for r in runs)
    return {
        "out": str(out),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "counts": {s: counts[s] for s in STATES if counts[s]},
        "runs": [r.as_json() for r in runs],
    }


ACTIVE_STATES = ("queued", "running")


def _strict_json(obj: Any) -> Any:
    """`obj` with every non-finite float as None, so `--json` prints JSON a strict parser reads."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _strict_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_strict_json(v) for v in obj]
    return obj


def status(out: Path, as_json_: bool = False, watch: float | None = None) -> int:
    """Print the state of every cell of the results folder `out` (or, `as_json_`, every run as JSON);
    with `watch`, again every `watch` seconds until no run is queued or running. 1 when a run failed or
    is unreadable."""
    import json

    out = Path(out)
    if not out.is_dir():
        raise UserError(f"results folder {out} does not exist")
    while True:
        runs = collect(out)
        if not runs:
            raise UserError(
                f"{out} is not a results folder: no run folders (TASK/METHOD/sS/seedN) and no matrix.json in it; "
                f"submit a matrix there first (adascale-bench submit MATRIX --out {out})"
            )
        if as_json_:
            doc = _strict_json(as_json(out, runs))  # no Infinity/NaN: strict JSON, null where not finite
            print(json.dumps(doc, indent=None if watch else 2, allow_nan=False), flush=True)
        else:
            if watch and sys.stdout.isatty():
                print("\033[H\033[J", end="")  # a terminal: redraw in place
            elif watch:
                print(f"-- {time.strftime('%Y-%m-%d %H:%M:%S')}")
            print(table(runs), flush=True)
        if not watch or not any(r.state in ACTIVE_STATES for r in runs):
            break
        time.sleep(watch)
    return 1 if any(r.state in ("failed", "unreadable") for r in runs) else 0
