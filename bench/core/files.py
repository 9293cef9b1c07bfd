"""Run directory files (docs/design.md §4): written atomically, appended in whole lines, read tolerantly."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.core import safefs

SPEC = "spec.json"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
CHECKPOINT = "checkpoint.pt"
KEPT = "checkpoints"  # kept model weights (spec keep_checkpoints_every): checkpoints/iter<NNNNNNN>.pt
OFFLINE_GAIN = "offline_gain.csv"  # written by `adascale-bench gain`


def kept_name(iteration: int) -> str:
    return f"iter{iteration:07d}.pt"


LOCK = ".lock"  # held (flock) by the one process writing the run folder
# what atomic_write_bytes leaves behind when killed mid-write: .<name>.<random>.tmp
_TEMPORARY = re.compile(r"\.(checkpoint\.pt|[^/]+\.json)\.[A-Za-z0-9_]+\.tmp")


def finite_float(value: Any) -> float | None:
    """A number read from a run file as a finite float: an int or a float (not a bool: True is no 1) whose float
    value is finite; None for anything else (null, a string, a list, NaN, ±inf, an int past float's range such
    as 10**400, where float() raises OverflowError). The one reading of a JSON number a run file holds: json
    reads 1e400 as inf, 10**400 as an int and accepts NaN/Infinity literals."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def finite_number(value: Any) -> bool:
    """Whether `value` is an int or a float (not a bool) of finite float value (finite_float)."""
    return finite_float(value) is not None


def _clean(obj: Any) -> Any:
    """JSON has no NaN/inf: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def _named(e: OSError, path: Path) -> OSError:
    """The same error, naming `path` when it names no file (a write that ran out of space names none)."""
    return e if e.filename else OSError(e.errno, e.strerror, str(path))


MAX_JSON_BYTES = 64 << 20  # a spec, summary or job record is a few kB; a manifest of 50 000 runs a few MB


def open_regular(path: Path, mode: str = "r", limit: int | None = None) -> Any:
    """open(path, mode) for reading a file others may have planted (bench.core.safefs): no link followed below
    the root, nothing but a regular file (a FIFO would block the reader forever, a device never end),
    with `limit`, nothing larger; a refusal is an OSError naming it."""
    return safefs.open_file(path, mode, limit)


def open_own(path: Path, flags: int) -> int:
    """os.open for writing a run or prepare file in place (append, truncate, lock), refusing a symbolic
    link (a planted one would have the write land in whatever file it names) or anything but a regular
    file, with a one-line UserError naming it (bench.core.safefs.open_fd)."""
    return safefs.open_fd(path, flags)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over the target (bench.core.safefs
    .write_bytes: no link followed on the way; a link at the target is replaced). The file gets the
    mode an ordinary open() would give it (0666 less the umask)."""
    safefs.write_bytes(path, data)


def write_csv_rows(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    """A CSV of `columns` (keys a row lacks are empty, extra keys ignored; floats to 6 significant digits),
    written atomically."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    atomic_write_bytes(path, buf.getvalue().encode())


def remove_temporaries(run_dir: Path) -> list[Path]:
    """Delete what interrupted atomic writes left in a run folder (call it holding the folder's lock)."""
    removed = []
    for name, _ in safefs.entries(run_dir):
        if _TEMPORARY.fullmatch(name):
            safefs.unlink(Path(run_dir) / name)
            removed.append(Path(run_dir) / name)
    return removed


def write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(_clean(obj), indent=2, sort_keys=True) + "\n").encode())


def read_json(path: Path, limit: int = MAX_JSON_BYTES) -> Any:
    """The JSON value of a regular file of at most `limit` bytes; a value nested too deep for the parser
    is a ValueError."""
    with open_regular(path, "r", limit) as f:
        try:
            obj = json.load(f)
        except RecursionError:
            raise ValueError(f"{path}: JSON nests too deep") from None
    return safefs.check_shape(obj, path)  # depth and size bounded before any caller walks it


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
    return list(iter_jsonl(path))


MAX_RECORD_LINE = 1 << 20  # bytes of one metrics record (the engine's are ~250): past it, damage, never held whole


def iter_jsonl(path: Path) -> Iterator[Any]:
    """read_jsonl's records one at a time, so that a reader holds what it keeps, not the file: up to the first
    line that is torn (a crash mid-append), not JSON or longer than MAX_RECORD_LINE (read no further than that)."""
    try:
        with open_regular(path, "rb") as f:
            while True:
                line = f.readline(MAX_RECORD_LINE + 1)
                if not line.endswith(b"\n"):
                    return
                try:
                    yield json.loads(line)
                except (ValueError, RecursionError):  # UnicodeDecodeError included
                    return
    except FileNotFoundError:
        return


def tail_records(path: Path, n: int, keep: Callable[[dict[str, Any]], bool], block: int = 1 << 20) -> list[dict]:
    """The last `n` complete records of a JSON-lines file for which `keep` holds, in file order, read
    backwards a block at a time (a file of millions of records costs only its tail). A torn last line
    (no newline yet) is ignored, as read_jsonl does."""
    found: list[dict[str, Any]] = []
    try:
        f = open_regular(path, "rb")
    except FileNotFoundError:
        return found
    with f:
        pos = f.seek(0, os.SEEK_END)
        carry = None  # the start of the line cut by the block boundary; None until the torn tail is dropped
        while pos > 0 and len(found) < n:
            if carry is not None and len(carry) > MAX_RECORD_LINE:  # a line no record is: read no further back
                break
            step = min(block, pos)
            pos -= step
            f.seek(pos)
            data = f.read(step) + (carry or b"")
            if carry is None:  # drop what follows the last newline (a torn last line)
                cut = data.rfind(b"\n")
                if cut < 0:
                    continue  # no newline yet in this block: keep going back (carry stays None)
                data = data[: cut + 1]
            lines = data.split(b"\n")
            carry = lines[0] if pos > 0 else b""
            for line in reversed(lines[1:] if pos > 0 else lines):
                if len(found) == n:
                    break
                if line.strip():
                    record = json.loads(line)
                    if keep(record):
                        found.append(record)
    return found[::-1]


class MetricsLog:
    """Buffered appends to metrics.jsonl. `offset()` is the byte size of what is durably on disk, saved
    in checkpoints; `truncate(offset)` on resume drops records written after that checkpoint.

    `append_row` runs once per iteration, on the hot path, so it only keeps the record's values beside its
    keys (a tuple the engine makes once); records become dicts and are serialised when they are flushed,
    many at once (a few µs each, see `adascale-bench perf`)."""

    def __init__(self, path: Path, enabled: bool = True, flush_every: int = 1000) -> None:
        self.path = Path(path)
        self.enabled = enabled
        self.flush_every = flush_every
        self._buffer: list[tuple[tuple[str, ...], tuple[Any, ...]]] = []  # (keys, values) per record
        self.records = 0  # records durably on disk (checked against a checkpoint's count on resume)

    def append(self, record: dict[str, Any]) -> None:
        """Keep (a copy of) the record; every `flush_every` records, write them out."""
        self.append_row(tuple(record), tuple(record.values()))

    def append_row(self, keys: tuple[str, ...], values: tuple[Any, ...]) -> None:
        """Keep the record {keys[i]: values[i]} (both tuples: nothing the caller changes later reaches it)."""
        if self.enabled:
            self._buffer.append((keys, values))
            if len(self._buffer) >= self.flush_every:
                self.flush()

    @staticmethod
    def _line(row: tuple[tuple[str, ...], tuple[Any, ...]]) -> str:
        record = dict(zip(*row, strict=True))
        line = json.dumps(record)
        if "NaN" in line or "Infinity" in line:  # not JSON: only then walk the record to write them as null
            line = json.dumps(_clean(record))
        return line + "\n"

    def flush(self) -> None:
        if not self.enabled or not self._buffer:
            return
        text = "".join(map(self._line, self._buffer))
        try:
            with os.fdopen(open_own(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise _named(e, self.path) from None
        self.records += len(self._buffer)
        self._buffer.clear()

    def offset(self) -> int:
        self.flush()
        return self.path.stat().st_size if self.path.exists() else 0

    def truncate(self, offset: int, records: int = 0) -> None:
        """Drop what follows `offset` bytes (`records` records) on resume."""
        self._buffer.clear()
        self.records = records
        if self.enabled and self.path.exists():
            fd = open_own(self.path, os.O_WRONLY)
            try:
                os.ftruncate(fd, offset)
            finally:
                os.close(fd)

    def damage(self, offset: int, records: int) -> str | None:
        """Why the file cannot be what a checkpoint saw at `offset` bytes (`records` records), or None:
        shorter than that, missing, or not ending a record there (cheap checks, no full read)."""
        if not self.enabled or offset == 0:
            return None
        expects = f"the checkpoint expects {offset} ({records} records)"
        try:
            f = open_regular(self.path, "rb")
        except FileNotFoundError:
            return f"{METRICS} has 0 bytes (missing), {expects}"
        except OSError as e:  # a link or a FIFO in its place (bench.core.safefs)
            return f"{self.path}: {e.strerror}"
        with f:
            size = os.fstat(f.fileno()).st_size
            if size < offset:
                return f"{METRICS} has {size} bytes, {expects}"
            f.seek(offset - 1)
            if f.read(1) != b"\n":
                return f"{METRICS} does not end a record at byte {offset} where {expects}"
        return None

    def pending(self) -> int:
        return len(self._buffer)
