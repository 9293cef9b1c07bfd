"""A small cached summary of each run's metrics.jsonl, so `report` reads each file once, and little of it.

The paper matrix writes ~28 M metrics records (6 GB of JSON lines); holding them all (the report did)
took minutes and gigabytes. What the figures and findings use is small: every evaluation record, and
the training curves (τ, iteration, scale, gain, lr, loss, sum_sq, mean_sq and the estimator's moving
averages) at a few thousand points. So, per run:

- a file of at most SMALL_BYTES is read whole (json.loads per line): every record, as before;
- a larger one is opened with mmap; numpy finds its line ends and mmap.find every line holding
  `"eval"` (both at memory speed), and only every evaluation record and POINTS training records evenly
  spaced by record number (the first and the last among them) are decoded: a downsampled curve (a
  systematic sample of the records, in order, as the figures' own thinning draws) from a 350 MB file
  for the cost of a scan;
- the result is written atomically as <report>/cache/<hash of the run folder>.npz (numpy arrays and
  JSON text; np.load(allow_pickle=False)) with the metrics file's size and mtime, and reused while both
  are unchanged. A damaged or foreign cache file is simply recomputed.

Training records are counted exactly (lines that are not evaluations; an undecodable line among those
not sampled counts as one); `attrs["records"]` of the frame says
how many there are and `attrs["sampled"]` whether the frame holds all of them.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import mmap
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.files import atomic_write_bytes, open_regular

VERSION = 1
SMALL_BYTES = 4 << 20  # files up to this size are read whole (~15 000 records)
POINTS = 4096  # training records sampled from a larger file
_EVAL = b'"eval"'


def cache_file(cache_dir: Path, run_dir: Path) -> Path:
    return Path(cache_dir) / (hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:24] + ".npz")


def _decode(line: bytes) -> dict[str, Any] | None:
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):  # UnicodeDecodeError included; a line nested past the parser's depth
        return None
    return rec if isinstance(rec, dict) else None


def read_whole(data: bytes) -> tuple[list[dict], list[dict], int, int]:
    """(training records, evaluation records, training record count, undecodable lines) of whole lines."""
    train, evals, bad = [], [], 0
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        rec = _decode(line)
        if rec is None:
            bad += 1
        elif rec.get("eval"):
            evals.append(rec)
        else:
            train.append(rec)
    return train, evals, len(train), bad


def _line_at(mm: mmap.mmap, offset: int, end: int) -> tuple[int, bytes]:
    start = mm.rfind(b"\n", 0, offset) + 1
    stop = mm.find(b"\n", offset, end)
    return start, mm[start : stop if stop >= 0 else end]


def _newlines(mm: mmap.mmap, end: int, chunk: int = 16 << 20) -> np.ndarray:
    """Byte offsets of every newline before `end` (numpy over the mapped file, a chunk at a time)."""
    parts = [
        np.flatnonzero(np.frombuffer(mm, np.uint8, count=min(chunk, end - lo), offset=lo) == 10) + lo
        for lo in range(0, end, chunk)
    ]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _read_sampled(mm: mmap.mmap, end: int) -> tuple[list[dict], list[dict], int, int]:
    """The same from a large file: POINTS training records evenly spaced by record (the first and the
    last among them), and every evaluation record."""
    nl = _newlines(mm, end)
    starts = np.concatenate(([0], nl[:-1] + 1))
    evals, eval_starts, bad = [], [], 0
    pos = mm.find(_EVAL, 0, end)
    while pos >= 0:
        start, line = _line_at(mm, pos, end)
        rec = _decode(line)
        if rec is not None and rec.get("eval"):
            evals.append(rec)
            eval_starts.append(start)
        after = start + len(line) + 1
        pos = mm.find(_EVAL, after, end) if after < end else -1
    train_lines = np.flatnonzero(~np.isin(starts, eval_starts) & (nl > starts))  # not eval, not empty
    train = []
    if len(train_lines):
        for i in np.unique(train_lines[np.linspace(0, len(train_lines) - 1, POINTS).round().astype(np.int64)]):
            rec = _decode(mm[starts[i] : nl[i]])
            if rec is None:
                bad += 1
            elif not rec.get("eval"):
                train.append(rec)
    return train, evals, len(train_lines) - bad, bad


def _columns(records: list[dict]) -> dict[str, np.ndarray]:
    """Numeric columns of the training records (null and missing: NaN; strings and lists dropped)."""
    keys = dict.fromkeys(k for r in records for k, v in r.items() if isinstance(k, str) and _numeric(v))
    return {k: np.array([_float(r.get(k)) for r in records], dtype=np.float64) for k in keys}


def _numeric(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float)


def _float(value: Any) -> float:
    try:
        return float(value) if _numeric(value) and value is not None else math.nan
    except (TypeError, ValueError, OverflowError):
        return math.nan


def summarize(path: Path) -> tuple[dict[str, np.ndarray], list[dict], dict[str, Any]]:
    """(training columns, evaluation records, meta) of one metrics.jsonl, read as the module says."""
    with open_regular(path, "rb") as f:  # a FIFO or device in a run folder is refused, not read forever
        st = os.fstat(f.fileno())
        meta: dict[str, Any] = {"version": VERSION, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        if st.st_size == 0:
            train, evals, count, bad = [], [], 0, 0
        elif st.st_size <= SMALL_BYTES:
            data = f.read(st.st_size)
            train, evals, count, bad = read_whole(data[: data.rfind(b"\n") + 1])
        else:
            with mmap.mmap(f.fileno(), st.st_size, access=mmap.ACCESS_READ) as mm:
                end = mm.rfind(b"\n") + 1  # a torn last line is left out
                train, evals, count, bad = _read_sampled(mm, end) if end else ([], [], 0, 0)
    meta.update(records=count, sampled=len(train) < count, bad=bad)
    return _columns(train), evals, meta


def _save(target: Path, columns: dict[str, np.ndarray], evals: list[dict], meta: dict[str, Any]) -> None:
    buf = io.BytesIO()
    arrays = {f"train/{k}": v for k, v in columns.items()}
    np.savez(buf, meta=np.array(json.dumps(meta)), evals=np.array(json.dumps(evals)), **arrays)
    atomic_write_bytes(target, buf.getvalue())


def _load(target: Path, path: Path) -> tuple[dict[str, np.ndarray], list[dict], dict[str, Any]] | None:
    """The cached summary when it is there, readable and made from the file as it is now."""
    try:
        st = path.stat()
        with np.load(target, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if (meta.get("version"), meta.get("size"), meta.get("mtime_ns")) != (VERSION, st.st_size, st.st_mtime_ns):
                return None
            evals = json.loads(str(z["evals"]))
            columns = {k.removeprefix("train/"): z[k] for k in z.files if k.startswith("train/")}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, AttributeError, TypeError):
        return None
    if not isinstance(meta, dict) or not isinstance(evals, list):
        return None
    return columns, [e for e in evals if isinstance(e, dict)], meta


def frames(path: Path, cache_dir: Path | None) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """(training frame, evaluation frame, meta) of the metrics file at `path`, from the cache under
    `cache_dir` when it is current, else read (and cached, when `cache_dir` is given)."""
    got = _load(cache_file(cache_dir, path.parent), path) if cache_dir is not None else None
    if got is None:
        got = summarize(path)
        if cache_dir is not None:
            try:
                _save(cache_file(cache_dir, path.parent), *got)
            except OSError:
                pass  # a read-only results folder: the report still renders, uncached
    columns, evals, meta = got
    train, ev = pd.DataFrame(columns), pd.DataFrame(evals)
    for key in ev.columns:  # a hand-edited eval record may hold a string where a number belongs
        numbers = pd.to_numeric(ev[key], errors="coerce")
        if key in ("tau", "iteration", "epochs", "metric") or numbers.notna().sum() >= ev[key].notna().sum() / 2:
            ev[key] = numbers
    train, ev = (df.sort_values("tau", kind="stable") if "tau" in df else df for df in (train, ev))
    train.attrs.update(records=meta.get("records"), sampled=meta.get("sampled"))
    return train, ev, meta
