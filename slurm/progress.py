"""How far a run is (τ/T1) and when it should end (ETA), from what its folder holds: `status` reads them.

τ is the scale-invariant iteration count the engine logs with every training record; a run ends when τ
reaches T1 (spec.json). A finished run's summary has its final τ. A running run's τ is its last training
record in metrics.jsonl: the engine writes records in batches (bench.core.files.MetricsLog), so the file is
behind by at most one batch, and the file's modification time is when that record was written.

The rate is τ per second of the run's own clock, from the records that carry `wall_time_s` (the training
time so far, which a resumed run continues): the first and last such records in the tail, or the last one
alone (its τ over its time). The ETA counts from the last record: (T1 − τ) / rate, less the time since that
record was written. Only the file's last `TAIL_BYTES` are read (a run that is not running: `LAST_BYTES`),
so status costs the same for a run of a million records; a running run whose tail holds no timed record
has no rate yet (no ETA, never a guess).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.files import METRICS, SPEC, finite_float, open_regular, read_json_object

TAIL_BYTES = 1 << 18  # a running run's window: its last ~1 000 records, where the rate is read
LAST_BYTES = 1 << 13  # any other run's: its last record (τ) is all status needs
MAX_SHARE = 1e6  # τ/T1 past it: a damaged τ or T1 (a run ends at τ ≥ T1, a step past it at most)


@dataclass(frozen=True)
class Progress:
    tau: float | None = None
    T1: float | None = None
    rate: float | None = None  # τ per second of training
    eta_s: float | None = None  # seconds until τ reaches T1 at that rate (running runs only)

    @property
    def fraction(self) -> float | None:
        """τ/T1, None where it is no share: T1 not > 0, or a quotient below 0 or past MAX_SHARE (a damaged τ or
        T1 such as 1e300 / 1e-300: its percentage would be no number to print, its round() an OverflowError)."""
        if self.tau is None or self.T1 is None or self.T1 <= 0:
            return None
        share = self.tau / self.T1
        return share if 0 <= share <= MAX_SHARE else None


def _number(value: Any) -> float | None:
    """A run file's number as status reads it: bench.core.files.finite_float (no bool, no 10**400, no NaN or inf)."""
    return finite_float(value)


def tail(path: Path, size: int = TAIL_BYTES) -> tuple[list[bytes], float | None]:
    """The complete lines in the last `size` bytes of a JSON-lines file, and the file's modification time;
    ([], None) when it cannot be read."""
    try:
        with open_regular(path, "rb") as f:
            mtime = os.fstat(f.fileno()).st_mtime
            end = f.seek(0, os.SEEK_END)
            f.seek(max(0, end - size))
            data = f.read(size)
    except OSError:
        return [], None
    lines = data.split(b"\n")
    return (lines[1:-1] if end > size else lines[:-1]), mtime  # a line cut by the window's start; a torn last line


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def last_training(lines: list[bytes]) -> dict[str, Any] | None:
    """The last training (not evaluation) record among the lines, parsing from the end."""
    for line in reversed(lines):
        record = _record(line) if line.strip() else None
        if record is not None and not record.get("eval"):
            return record
    return None


def timed(lines: list[bytes]) -> list[dict[str, Any]]:
    """The records that carry wall_time_s, in order (only those lines are parsed: status reads the tails
    of a thousand runs)."""
    data, found, at = b"\n".join(lines), [], 0
    while (hit := data.find(b'"wall_time_s"', at)) >= 0:
        start, end = data.rfind(b"\n", 0, hit) + 1, data.find(b"\n", hit)
        end = len(data) if end < 0 else end
        if (record := _record(data[start:end])) is not None:
            found.append(record)
        at = end
    return found


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
    lines, mtime = tail(run_dir / METRICS, TAIL_BYTES if running else LAST_BYTES)
    last = last_training(lines)
    tau = _number(last.get("tau")) if last else None
    rate = rate_of(timed(lines)) if running else None
    eta = None
    if running and tau is not None and T1 and rate and mtime is not None:
        since = max(0.0, (now if now is not None else time.time()) - mtime)
        eta = max(0.0, (T1 - tau) / rate - since)
    return Progress(tau, T1, rate, eta)


MAX_SHOWN_S = 1000 * 86400


def duration(seconds: float | None) -> str:
    """3h05m, 12m, 40s; '-' for None."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-"
    if seconds >= MAX_SHOWN_S:  # an ETA of 10^20 s is no number of hours worth printing (nor an int to make)
        return f">{MAX_SHOWN_S // 86400}d"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m"
    return f"{s}s"
