"""Run directory files (DESIGN §4): written atomically, appended in whole lines, read tolerantly."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

SPEC = "spec.json"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
CHECKPOINT = "checkpoint.pt"
KEPT = "checkpoints"  # kept model weights (spec keep_checkpoints_every): checkpoints/iter<NNNNNNN>.pt
OFFLINE_GAIN = "offline_gain.csv"  # written by `adascale-bench gain`


def kept_name(iteration: int) -> str:
    return f"iter{iteration:07d}.pt"


# Spec keys that do not change what a run computes: where its data lives, how it is spread over
# processes, threads and devices, which matrix it came from, and T_AS / T (derived from the runs it
# depends on, which are part of the identity). The one definition of a run's identity: the folder
# name, the same-run check on a folder, dependency lookups, status and the report's variants use it.
NOT_IDENTITY = ("data_root", "device", "T_AS", "T", "experiment", "threads", "num_workers", "ranks")


def in_identity(key: str) -> bool:
    """Whether a spec key (or a dotted override key) is part of a run's identity."""
    return key.split(".", 1)[0] not in NOT_IDENTITY


def _clean(obj: Any) -> Any:
    """JSON has no NaN/inf: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over the target."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(_clean(obj), indent=2, sort_keys=True) + "\n").encode())


def read_json(path: Path) -> Any:
    with open(path) as f:
        return json.load(f)


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A JSON object from a file another process may be writing or may never have written: None when
    the file is absent, unreadable, not JSON or not an object (callers treat all four alike)."""
    try:
        obj = read_json(path)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """All complete records; a torn last line (a crash mid-append) is ignored."""
    records = []
    try:
        with open(path) as f:
            for line in f:
                if not line.endswith("\n"):
                    break
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    break
    except FileNotFoundError:
        pass
    return records


class MetricsLog:
    """Buffered appends to metrics.jsonl. `offset()` is the byte size of what is durably on disk, saved
    in checkpoints; `truncate(offset)` on resume drops records written after that checkpoint.

    `append` runs once per iteration, on the hot path, so it only keeps (a copy of) the record; records
    are serialised when they are flushed, many at once (a few µs each, see `adascale-bench perf`)."""

    def __init__(self, path: Path, enabled: bool = True, flush_every: int = 1000) -> None:
        self.path = Path(path)
        self.enabled = enabled
        self.flush_every = flush_every
        self._buffer: list[dict[str, Any]] = []

    def append(self, record: dict[str, Any]) -> None:
        """Keep the record; every `flush_every` records, write them out."""
        if self.enabled:
            self._buffer.append(dict(record))
            if len(self._buffer) >= self.flush_every:
                self.flush()

    @staticmethod
    def _line(record: dict[str, Any]) -> str:
        line = json.dumps(record)
        if "NaN" in line or "Infinity" in line:  # not JSON: only then walk the record to write them as null
            line = json.dumps(_clean(record))
        return line + "\n"

    def flush(self) -> None:
        if not self.enabled or not self._buffer:
            return
        text = "".join(map(self._line, self._buffer))
        with open(self.path, "a") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        self._buffer.clear()

    def offset(self) -> int:
        self.flush()
        return self.path.stat().st_size if self.path.exists() else 0

    def truncate(self, offset: int) -> None:
        self._buffer.clear()
        if self.enabled and self.path.exists():
            with open(self.path, "r+") as f:
                f.truncate(offset)

    def pending(self) -> int:
        return len(self._buffer)
