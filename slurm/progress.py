"""How far a run is (τ/T1) and when it should end (ETA), from what its folder holds: `status` reads them.

τ is the scale-invariant iteration count the engine logs with every training record; a run ends when τ
reaches T1 (spec.json). A finished run's summary has its final τ. A running run's τ is its last training
record in metrics.jsonl: the engine writes records in batches (bench.files.MetricsLog), so the file is
behind by at most one batch, and the file's modification time is when that record was written.

The rate is τ per second of the run's own clock, from the records that carry `wall_time_s` (the training
time so far, which a resumed run continues): the first and last such records in the tail, or the last one
alone (its τ over its time). The ETA counts from the last record: (T1 − τ) / rate, less the time since that
record was written. Only the file's last `TAIL_BYTES` are read, so status costs the same for a run of a
million records; a run whose tail holds no timed record has no rate yet (no ETA, never a guess).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.files import METRICS, SPEC, open_regular, read_json_object

TAIL_BYTES = 1 << 20


@dataclass(frozen=True)
class Progress:
    tau: float | None = None
    T1: float | None = None
    rate: float | None = None  # τ per second of training
    eta_s: float | None = None  # seconds until τ reaches T1 at that rate (running runs only)

    @property
    def fraction(self) -> float | None:
        if self.tau is None or not self.T1:
            return None
        return self.tau / self.T1


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def tail(path: Path, size: int = TAIL_BYTES) -> tuple[list[dict[str, Any]], float | None]:
    """The complete records in the last `size` bytes of a JSON-lines file (a damaged line is skipped), and
    the file's modification time; ([], None) when it cannot be read."""
    try:
        with open_regular(path, "rb") as f:
            mtime = os.fstat(f.fileno()).st_mtime
            end = f.seek(0, os.SEEK_END)
            f.seek(max(0, end - size))
            data = f.read(size)
    except OSError:
        return [], None
    lines = data.split(b"\n")
    lines = lines[1:-1] if end > size else lines[:-1]  # a line cut by the window's start; a torn last line
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            records.append(record)
    return records, mtime


def rate_of(records: list[dict[str, Any]]) -> float | None:
    """τ per second from the records that carry wall_time_s (see the module docstring)."""
    timed = [
        (t, w) for r in records if (t := _number(r.get("tau"))) is not None and (w := _number(r.get("wall_time_s")))
    ]
    if len(timed) >= 2 and timed[-1][1] > timed[0][1] and timed[-1][0] > timed[0][0]:
        return (timed[-1][0] - timed[0][0]) / (timed[-1][1] - timed[0][1])
    if timed and timed[-1][1] > 0 and timed[-1][0] > 0:
        return timed[-1][0] / timed[-1][1]
    return None


def progress(run_dir: Path, summary: dict[str, Any] | None, running: bool, now: float | None = None) -> Progress:
    """τ, T1, the rate and (for a running run) the ETA of one run folder."""
    spec = read_json_object(run_dir / SPEC) or {}
    T1 = _number(spec.get("T1"))
    if summary is not None and _number(summary.get("tau")) is not None:
        return Progress(_number(summary.get("tau")), T1)
    if not (run_dir / METRICS).exists():
        return Progress(None, T1)
    records, mtime = tail(run_dir / METRICS)
    training = [r for r in records if not r.get("eval")]
    tau = _number(training[-1].get("tau")) if training else None
    rate = rate_of(records)
    eta = None
    if running and tau is not None and T1 and rate and mtime is not None:
        since = max(0.0, (now if now is not None else time.time()) - mtime)
        eta = max(0.0, (T1 - tau) / rate - since)
    return Progress(tau, T1, rate, eta)


def duration(seconds: float | None) -> str:
    """3h05m, 12m, 40s; '-' for None."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m"
    return f"{s}s"
