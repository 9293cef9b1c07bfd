"""throughput.csv (examples/s measured here, written by `perf` and the rehearsal) and flops.csv (counted by `flops`),
the tables `plan` prices runs from beside the published one (bench.experiments.costbasis): in a home of their own,
so that what writes them does not import the plan."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path
from typing import Any

from bench.core import safefs
from bench.core.errors import UserError
from bench.core.files import atomic_write_bytes
from bench.experiments.costbasis import positive_number

THROUGHPUT = Path(__file__).with_name("throughput.csv")
# a measured row says how it was measured: the device, the precision of the loop timed (the spec's `amp`), torch's
# version, the date and the command that reproduces it
THROUGHPUT_COLUMNS = ["task", "preset", "examples_per_s", "device", "amp", "torch", "measured", "command"]
FLOPS = Path(__file__).with_name("flops.csv")
FLOPS_COLUMNS = ["task", "preset", "batch_size", "flops_per_microbatch", "params", "counted", "torch"]


TABLE_BYTES = 16 << 20  # a throughput or FLOPs table: a few kB


# -- the throughput table ---------------------------------------------------------------------------------------
def read_throughput(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(task, preset) -> {examples_per_s: float | None, device, amp, torch, measured (a date)}; an empty
    examples_per_s is unknown, and a table of the older five columns reads with the rest empty."""
    try:
        text = safefs.read_text(path, TABLE_BYTES)  # a FIFO or a huge file: one line, not a hang
    except OSError as e:
        raise UserError(f"throughput table {path}: {e.strerror or e}") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in ("task", "preset", "examples_per_s") if c not in (reader.fieldnames or [])]
    if missing:
        raise UserError(f"throughput table {path}: no column {missing[0]} (expected {','.join(THROUGHPUT_COLUMNS)})")
    out = {}
    for i, row in enumerate(reader, 2):
        value = positive_number(row.get("examples_per_s"), "examples_per_s", f"throughput table {path}, line {i}", True)
        key = (row["task"].strip(), row["preset"].strip())
        out[key] = {"examples_per_s": value, **{k: row.get(k) or "" for k in ("device", "amp", "torch", "measured")}}
    return out


def write_throughput(path: Path, measured: dict[tuple[str, str], tuple[float, str, str]]) -> None:
    """Add or update the rows of (task, preset) -> (examples/s at S = 1 on one device, device, amp),
    each with torch's version, today's date and the command that measured it; the other rows and their order
    are kept."""
    import shlex
    import sys

    import torch

    path = Path(path)
    rows: list[dict[str, str]] = []
    if path.exists():
        rows = [
            {k: r.get(k) or "" for k in THROUGHPUT_COLUMNS}
            for r in csv.DictReader(io.StringIO(safefs.read_text(path, TABLE_BYTES)))
        ]
    today = time.strftime("%Y-%m-%d")
    command = shlex.join(["adascale-bench", *sys.argv[1:]])
    for (task, preset), (eps, device, amp) in measured.items():
        new = {"task": task, "preset": preset, "examples_per_s": f"{eps:.6g}", "device": device}
        new |= {"amp": amp, "torch": torch.__version__, "measured": today, "command": command}
        for r in rows:
            if (r["task"], r["preset"]) == (task, preset):
                r.update(new)
                break
        else:
            rows.append(new)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=THROUGHPUT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_bytes(path, buf.getvalue().encode())


def read_flops(path: Path) -> dict[tuple[str, str], float]:
    """(task, preset) -> counted FLOPs of forward + backward per example (bench.experiments.flops): the
    table's micro-batch divided by the batch size it was counted at, so that a run at another b (the
    critical-batch sweep's) is priced per example, not per micro-batch of another size."""
    try:
        text = safefs.read_text(path, TABLE_BYTES)  # a FIFO or a huge file: one line, not a hang
    except OSError as e:
        raise UserError(f"FLOPs table {path}: {e.strerror or e}") from None
    reader = csv.DictReader(io.StringIO(text))
    if not {"task", "batch_size", "flops_per_microbatch"} <= set(reader.fieldnames or []):
        raise UserError(f"FLOPs table {path}: expected columns {','.join(FLOPS_COLUMNS)}")
    out = {}
    for i, row in enumerate(reader, 2):
        where = f"FLOPs table {path}, line {i}"
        per_micro = positive_number(row.get("flops_per_microbatch"), "flops_per_microbatch", where)
        b = positive_number(row.get("batch_size"), "batch_size", where)
        out[(row["task"].strip(), (row.get("preset") or "").strip())] = per_micro / b  # type: ignore[operator]
    return out
