"""A small cached summary of each run's metrics.jsonl, so `report` reads each file once, and little of it.

The paper matrix writes ~28 M metrics records (6 GB of JSON lines); holding them all (the report did)
took minutes and gigabytes. What the figures and findings use is small: every evaluation record, and
the training curves (τ, iteration, scale, gain, lr, loss, sum_sq, mean_sq and the estimator's moving
averages) at a few thousand points. So, per run:

- a file of at most SMALL_BYTES is read whole (each line decoded as json.loads reads it: `_decode`): every record;
- a larger one is read a block at a time (pread, not mmap: a run that resumes truncates its log, and a mapped
  reader of a shrunk file dies of SIGBUS, where pread reads short: `Shrunk`, one warning); numpy finds its line
  ends and every line that may be an evaluation (holding `"eval"` or an escape that may spell it), both at memory
  speed (`_Scan`), and only every evaluation record and POINTS training records evenly spaced by record number
  (the first and the last among them) are decoded: a downsampled curve (a systematic sample of the records, in
  order, as the figures' own thinning draws) from a 350 MB file for the cost of a scan. What the scan keeps is
  bounded, not what the file holds (BLOCK_BYTES and the bounds after it): ~8 bytes an offset of every newline
  kept for the whole file was 3.85 GB for a 600 MB file of newlines;
- the result is written atomically as <report>/cache/<hash of the run folder>.npz (JSON text and the
  training columns as one float64 2-D array), keyed as git's index keys a file by the metrics file's
  size, mtime_ns, ctime_ns and inode, all checked on every read (one fstat); reused while they hold. A
  write sets ctime, which no user can set back (only the clock's owner can), so an edit with its size
  and mtime put back by `touch -r`, `cp -p` or `rsync -a` changes the stamp, and a file replaced by
  another has another inode: nothing of the file's contents need be read to trust a matching stamp.
  Except a racily clean one (git's term): a file changed within RACY_NS of the moment it was summarised
  may have changed again in the same clock tick with the same stamp, so such a summary is checked
  against the file's contents before it is used. The cache is not trusted: it is sealed
  (bench.core.safefs.Seal: a keyed digest of the whole file, whose key lives in the user's own config folder),
  so one with other numbers and matching stamps is refused; then np.load(allow_pickle=False), its
  inflated size bounded, dtypes, shapes and counts checked. A damaged, hostile or disagreeing one is
  ignored with a one-line warning naming it (`frames`' warn) and rebuilt.

Training records are counted exactly (lines that are not evaluations; an undecodable line among those
not sampled counts as one); `attrs["records"]` of the frame says
how many there are and `attrs["sampled"]` whether the frame holds all of them.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import math
import os
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from bench.core import safefs
from bench.core.files import finite_float, open_regular
from reports.rundata.memo import seal_of  # the cache folder's Seal (its key in the user's own config folder)

VERSION = 5  # 5: no bool, NaN or inf in the columns (meta's odd); 4: keyed by size, mtime, ctime and inode
# Files up to this size are read whole: ~4 000 records of ~250 bytes, about POINTS, so a file read whole costs
# no more decoding than a sampled one (at 4 MB, 15 000 records, the 749 files of the paper matrix's volume under
# it took as much CPU to decode as the 451 larger ones, 6.3 GB, took to scan). Every tiny run is below it.
SMALL_BYTES = 1 << 20
POINTS = 4096  # training records sampled from a larger file
_EVAL = b'"eval"'
_V = _EVAL.index(b"v")  # the rarest of its letters in the engine's records (`var`'s), where `_candidates` looks
# What a byte may cost: a large file is read a block at a time (pread into one 256 KB buffer, which stays in the
# CPU's cache: the copy and the scan of it cost what the scan of a mapped file with MAP_POPULATE did), and what the
# scan keeps is bounded whatever the file holds (a file of newlines, of `v`s, of lines that are all evaluations):
# the offsets of at most KEEP_LINES training lines (2 × 8 bytes each; past that, counted and found again in a second
# pass), at most MAX_EVAL_RECORDS evaluations (past it, not a run's log: refused), no line longer than MAX_LINE_BYTES
# (past it, undecodable, never read: a small file's largest line, so both paths agree).
BLOCK_BYTES = 1 << 18
KEEP_LINES = 1 << 21  # 32 MB of offsets (twice that while joined); the paper matrix's largest log holds 1.5 M records
MAX_EVAL_RECORDS = 1 << 17  # the paper's runs evaluate a few hundred times
MAX_LINE_BYTES = SMALL_BYTES


class Shrunk(OSError):
    """A metrics file shrunk while read (a resumed run truncates its log to its checkpoint): `cannot read`."""


class TooMany(OSError):
    """A metrics file holding more evaluation records than a run writes: `cannot read`, not held."""


# A file changed within this long of its summary being read may carry the same stamp as before the change:
# the kernel's file times tick at the scheduler's clock (1-10 ms), so a same-size edit in the same tick
# leaves size, mtime and ctime as they were. As git does with a "racily clean" index entry, such a cached
# summary is checked against the file's contents before it is used: two ticks of the coarsest clock (HZ = 100).
RACY_NS = 20_000_000


def cache_file(cache_dir: Path, run_dir: Path) -> Path:
    """The cache file of a run folder: a hash of its path as bytes (any bytes: a name holding 0xFF too)."""
    key = b"v3\0" + os.fsencode(os.path.abspath(run_dir))
    return Path(cache_dir) / (hashlib.sha256(key).hexdigest()[:24] + ".npz")


def stamp_of(st: os.stat_result) -> dict[str, Any]:
    """What a summary of a metrics file of stat `st` is keyed by: size, mtime_ns, ctime_ns, inode (as git's index)."""
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "ino": st.st_ino}


def stamp(fd: int) -> dict[str, Any]:
    """stamp_of the open metrics file `fd` (one fstat: none of its contents is read)."""
    return stamp_of(os.fstat(fd))


def racy(st: dict[str, Any], read_ns: Any) -> bool:
    """Whether a file stamped `st` was changed so close to `read_ns` (when it was read) that a change in the
    same clock tick would have left the stamp as it was (git's racily clean entry): then only its contents
    can vouch for it."""
    return not isinstance(read_ns, int) or max(st["ctime_ns"], st["mtime_ns"]) >= read_ns - RACY_NS


def _decode(line: bytes) -> dict[str, Any] | None:
    """One record: orjson (3× json's speed on the report's first pass, where decoding the sampled records is a
    third of the scan), else json.loads where orjson refuses what json reads (NaN and Infinity literals, a float
    past its range); None for a line that is not a JSON object."""
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # UnicodeDecodeError included; a line nested past the parser's depth
            return None
    return rec if isinstance(rec, dict) else None


def decode_lines(lines: list[bytes]) -> list[dict | None]:
    """_decode of each line: orjson over them all at once where it reads every one (the engine's lines; a sixth
    less CPU than a call of _decode a line), else _decode line by line."""
    try:
        records = list(map(orjson.loads, lines))
    except orjson.JSONDecodeError:
        return [_decode(line) for line in lines]
    return [rec if isinstance(rec, dict) else None for rec in records]


def read_whole(data: bytes) -> tuple[list[dict], list[dict], int, int]:
    """(training records, evaluation records, training record count, undecodable lines) of whole lines."""
    train, evals, bad = [], [], 0
    lines = [
        line for line in data.split(b"\n") if line
    ]  # an empty line is no record; a blank one is damage, as in _Scan
    for rec in decode_lines(lines):
        if rec is None:
            bad += 1
        elif rec.get("eval"):
            evals.append(rec)
        else:
            train.append(rec)
    return train, evals, len(train), bad


def _blocks(fd: int, size: int, block: int) -> Iterator[tuple[int, np.ndarray, int, bytearray]]:
    """(offset, bytes, how many of them are the block's own, the buffer they are in) of the file's first `size`
    bytes, a block at a time into one buffer (pread: a file shrunk under the reader reads short, where a mapped
    one raised SIGBUS), each with the few bytes after it, so that a word across the block's end is seen whole;
    Shrunk where the file holds fewer than `size` bytes now."""
    raw = bytearray(block + len(_EVAL) - 1)
    buf, view = np.frombuffer(raw, np.uint8), memoryview(raw)
    for lo in range(0, size, block):
        want = min(len(raw), size - lo)
        got = os.preadv(fd, [view[:want]], lo)
        if got < want:
            raise Shrunk(f"shrank to {lo + got} bytes while read, from {size} (a run resumed or rewrote it)")
        yield lo, buf[:got], min(block, got), raw


class _Lines:
    """The complete lines of a file's block, in absolute byte offsets: `starts`, `ends` (each line's newline);
    the line not yet ended is carried to the next block (`start` where it begins)."""

    def __init__(self) -> None:
        self.start = 0

    def of(self, lo: int, part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ends = np.flatnonzero(part == 10) + lo
        starts = np.empty_like(ends)
        if len(ends):
            starts[0], starts[1:] = self.start, ends[:-1] + 1
            self.start = int(ends[-1]) + 1
        return starts, ends


def _candidates(lo: int, data: np.ndarray, own: int, raw: bytearray) -> np.ndarray:
    """Offsets of the block's `"eval"` and of its backslashes (an escape may spell the key: `"ev\\u0061l"`): the
    lines that may be evaluation records. `"eval"` from the positions of its rarest letter, `v` (about one a
    training line), each checked for the whole word: half the CPU of re's literal search over the file."""
    at = np.flatnonzero(data == _EVAL[_V]) - _V  # the words starting in the block, the few bytes after it too
    at = at[(at >= 0) & (at < own) & (at + len(_EVAL) <= len(data))]
    for k, byte in enumerate(_EVAL):
        at = at[data[at + k] == byte]
    if raw.find(b"\\", 0, own) >= 0:  # memchr: the engine writes none, so mostly no numpy pass at all
        at = np.union1d(at, np.flatnonzero(data[:own] == 92))
    return at + lo


def _line(fd: int, lo: int, data: np.ndarray, a: int, b: int) -> bytes | None:
    """Bytes a..b of the file, from the block where it holds them; None for a line longer than MAX_LINE_BYTES
    (not a record: undecodable, and never read whole)."""
    if b - a > MAX_LINE_BYTES:
        return None
    if a >= lo:
        return data[a - lo : b - lo].tobytes()
    got = os.pread(fd, b - a, a)
    if len(got) < b - a:
        raise Shrunk(f"shrank below byte {b} while read (a run resumed or rewrote it)")
    return got


class _Scan:
    """One pass over a large file (`_read_sampled`'s first): every evaluation record decoded and kept, training
    lines counted, and their offsets kept while there are at most KEEP_LINES of them (the engine's largest log
    holds 1.5 M); past that, only counted, and `_pick` finds the sampled ones in a second pass. Memory: a
    block, the evaluations and at most KEEP_LINES offsets, whatever the file holds."""

    def __init__(self, fd: int, size: int) -> None:
        self.evals: list[dict] = []
        self.eval_starts: list[int] = []
        self.count = 0
        kept: list[tuple[np.ndarray, np.ndarray]] | None = []
        lines, pending = _Lines(), False  # pending: the line not yet ended holds a candidate
        for lo, data, own, raw in _blocks(fd, size, BLOCK_BYTES):
            starts, ends = lines.of(lo, data[:own])
            cand = np.searchsorted(ends, _candidates(lo, data, own, raw))
            if pending and len(ends):
                cand = np.append(0, cand)
            pending = (pending and not len(ends)) or (len(cand) > 0 and cand[-1] == len(ends))
            train = self._evals(fd, lo, data, starts, ends, np.unique(cand[cand < len(ends)]))
            train &= ends > starts  # not empty
            self.count += int(np.count_nonzero(train))
            if kept is not None:
                kept.append((starts[train], ends[train]))
                if self.count > KEEP_LINES:
                    kept = None
        self.kept = (np.concatenate([s for s, _ in kept]), np.concatenate([e for _, e in kept])) if kept else None

    def _evals(
        self, fd: int, lo: int, data: np.ndarray, starts: np.ndarray, ends: np.ndarray, cand: np.ndarray
    ) -> np.ndarray:
        """Decode the candidate lines, keep those that are evaluations; a mask of the block's other lines."""
        train = np.ones(len(ends), bool)
        for i in cand.tolist():
            line = _line(fd, lo, data, int(starts[i]), int(ends[i]))
            rec = None if line is None else _decode(line)
            if rec is not None and rec.get("eval"):
                if len(self.evals) >= MAX_EVAL_RECORDS:
                    raise TooMany(f"holds more than {MAX_EVAL_RECORDS} evaluation records: not a run's log")
                self.evals.append(rec)
                self.eval_starts.append(int(starts[i]))
                train[i] = False
        return train


def _pick(fd: int, size: int, scan: _Scan, picked: np.ndarray) -> list[bytes | None]:
    """The training lines numbered `picked` (rising), by a second pass over the file: its lines again, less the
    evaluations `scan` found; only the picked ones' offsets are kept."""
    if scan.kept is not None:
        starts, ends = scan.kept[0][picked].tolist(), scan.kept[1][picked].tolist()
        return [_line(fd, size, np.zeros(0, np.uint8), a, b) for a, b in zip(starts, ends, strict=True)]
    evals, lines, seen = np.array(scan.eval_starts, np.int64), _Lines(), 0
    out: list[bytes | None] = []
    for lo, data, own, _ in _blocks(fd, size, BLOCK_BYTES):
        starts, ends = lines.of(lo, data[:own])
        train = (ends > starts) & ~np.isin(starts, evals)
        n = int(np.count_nonzero(train))
        want = picked[(picked >= seen) & (picked < seen + n)] - seen
        if len(want):
            rows = np.flatnonzero(train)[want]
            out += [_line(fd, lo, data, int(starts[i]), int(ends[i])) for i in rows.tolist()]
        seen += n
    return out


def _read_sampled(fd: int, size: int) -> tuple[list[dict], list[dict], int, int]:
    """The same from a large file: POINTS training records evenly spaced by record (the first and the
    last among them), and every evaluation record (each line that may be one decoded, kept where it is one)."""
    scan = _Scan(fd, size)
    train, bad = [], 0
    if scan.count:
        picked = np.linspace(0, scan.count - 1, POINTS).round().astype(np.int64)
        picked = picked[np.append(True, picked[1:] != picked[:-1])]  # rising: np.unique's values, without its sort
        lines = _pick(fd, size, scan, picked)
        for rec in decode_lines([line for line in lines if line is not None]):
            if rec is None:
                bad += 1
            elif not rec.get("eval"):
                train.append(rec)
        bad += lines.count(None)
    return train, scan.evals, scan.count - bad, bad


def _columns(records: list[dict]) -> tuple[dict[str, np.ndarray], int]:
    """Numeric columns of the training records (null and missing: NaN; strings, booleans and lists dropped), and how
    many values of them were no finite number (a bool, a string, NaN, ±inf, 10**400 where numbers stand: NaN
    here, bench.core.files.finite_float's reading, and counted for the report's warning naming the file)."""
    same = _uniform(records)
    if same is not None:
        return same
    keys = dict.fromkeys(k for r in records for k in r)  # every key, in order of first appearance
    columns, odd = {}, 0
    for k in keys:  # the common case at numpy speed: every value of the key a number, null or missing
        values = [r.get(k, None) for r in records]
        if not isinstance(k, str) or not set(map(type, values)) <= _PLAIN:
            return _columns_slow(records)
        try:
            columns[k] = np.array(values, dtype=np.float64)  # None -> NaN, as _float
        except OverflowError:  # an integer past float's range: _float's NaN
            return _columns_slow(records)
        odd += _finite_only(columns[k], values.count(None))
    return columns, odd


_PLAIN = {float, int, type(None)}  # (a bool is no number: True is not read as 1)


def _finite_only(table: np.ndarray, nulls: int) -> int:
    """NaN in place of every value of `table` that is not finite; how many those were, less the `nulls` (absent)."""
    bad = ~np.isfinite(table)
    count = int(np.count_nonzero(bad))
    if count:
        table[bad] = np.nan
    return count - nulls


def _uniform(records: list[dict]) -> tuple[dict[str, np.ndarray], int] | None:
    """_columns of records that all have the same keys in the same order and only numbers and nulls (what the engine
    writes), as one 2-D conversion: the same values, element by element, as a column at a time; None for anything
    else (then _columns reads them a column at a time)."""
    if not records:
        return None
    first = tuple(records[0])
    if not all(isinstance(k, str) for k in first) or any(tuple(r) != first for r in records):
        return None
    types = set(map(type, itertools.chain.from_iterable(map(dict.values, records))))
    if not types <= _PLAIN:
        return None
    try:
        if type(None) in types:
            rows = [tuple(r.values()) for r in records]
            table = np.array(rows, dtype=np.float64)  # None -> NaN
            nulls = sum(row.count(None) for row in rows)
        else:  # numbers only (the engine's records): float() of each, a quarter less CPU than rows
            values = itertools.chain.from_iterable(map(dict.values, records))
            table = np.fromiter(values, np.float64, count=len(records) * len(first)).reshape(len(records), len(first))
            nulls = 0
    except OverflowError:  # an integer past float's range: _float's NaN, on the slow path
        return None
    odd = _finite_only(table, nulls)
    return {k: np.ascontiguousarray(table[:, j]) for j, k in enumerate(first)}, odd


def _columns_slow(records: list[dict]) -> tuple[dict[str, np.ndarray], int]:
    """_columns for records holding other values too: keys ordered by their first numeric value."""
    keys = dict.fromkeys(k for r in records for k, v in r.items() if isinstance(k, str) and _numeric(v))
    columns = {k: [r.get(k) for r in records] for k in keys}
    odd = sum(v is not None and finite_float(v) is None for values in columns.values() for v in values)
    return {k: np.array([_float(v) for v in values], dtype=np.float64) for k, values in columns.items()}, odd


def _numeric(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def _float(value: Any) -> float:
    """A record's value as its column holds it: bench.core.files.finite_float, NaN for anything else."""
    number = finite_float(value)
    return math.nan if number is None else number


def summarize(path: Path) -> tuple[dict[str, np.ndarray], list[dict], dict[str, Any]]:
    """(training columns, evaluation records, meta) of one metrics.jsonl, read as the module says."""
    with open_regular(path, "rb", MAX_METRICS_BYTES) as f:  # no FIFO, device or link: refused, not read
        meta: dict[str, Any] = {"version": VERSION, "stamp": stamp(f.fileno()), "read_ns": time.time_ns()}
        st = os.fstat(f.fileno())
        if st.st_size == 0:
            train, evals, count, bad = [], [], 0, 0
        elif st.st_size <= SMALL_BYTES:
            data = f.read(st.st_size)
            train, evals, count, bad = read_whole(data[: data.rfind(b"\n") + 1])
        else:  # a torn last line is left out: only lines ended by a newline are read
            train, evals, count, bad = _read_sampled(f.fileno(), st.st_size)
    columns, odd = _columns(train)
    meta.update(records=count, sampled=len(train) < count, bad=bad, odd=odd)
    return columns, evals, meta


def _save(target: Path, columns: dict[str, np.ndarray], evals: list[dict], meta: dict[str, Any]) -> None:
    seal = seal_of(target.parent)
    if seal is None:
        return
    buf = io.BytesIO()
    n = len(next(iter(columns.values()))) if columns else 0
    train = np.vstack(list(columns.values())) if columns else np.zeros((0, n))
    meta = meta | {"columns": list(columns)}
    np.savez(buf, meta=np.array(json.dumps(meta)), evals=np.array(json.dumps(evals)), train=train)
    # no fsync: a sealed entry checked on every read, and rebuilt where a crash lost it, costs less than the
    # 1.2 ms an fsync costs each of the paper volume's 1 200 entries (1.5 s of its first report's workers)
    safefs.write_bytes(target, seal.seal(buf.getvalue()), durable=False)


class Damaged(ValueError):
    """A cache file that is not what _save writes (truncated, foreign, hostile): ignored and rebuilt."""

    def warning(self, target: Path, path: Path) -> str:
        return f"ignored damaged report cache {target} ({str(self)[:200]}); rebuilt from {path}"


class Changed(Damaged):
    """A metrics file changed with its size and mtime put back (touch -r, cp -p, rsync -a): re-read."""

    def warning(self, target: Path, path: Path) -> str:
        return f"{path} changed since it was cached ({self}), though its size and mtime are the same; re-read"


def _load(target: Path, path: Path) -> tuple[dict[str, np.ndarray], list[dict], dict[str, Any]] | None:
    """The cached summary when it is there, sealed by this user, readable and made from the file as it is
    now (its stamp); None when it is absent or stale; Damaged (with why) when it is not what _save writes
    or disagrees with the file in a way an ordinary change does not. Nothing in it is trusted: the seal
    first, then no pickle (allow_pickle=False), members and sizes bounded before anything is inflated,
    every array checked for its dtype and shape."""
    seal = seal_of(target.parent)
    if seal is None:
        return None
    try:
        with open_regular(path, "rb", MAX_METRICS_BYTES) as f:
            now = stamp(f.fileno())
        with safefs.open_file(target, "rb", MAX_CACHE_BYTES) as f:
            blob, made = safefs.read_upto(f, MAX_CACHE_BYTES), os.fstat(f.fileno())
    except FileNotFoundError:
        return None
    except OSError as e:
        raise Damaged(f"{type(e).__name__}: {e}") from None
    body = seal.open(blob)
    if body is None:
        if seal.older(made):  # from before this key (a new one): stale, not hostile
            return None
        raise Damaged("not sealed by this user's report: written or changed by someone else")
    try:
        data = io.BytesIO(body)
        with zipfile.ZipFile(data) as zf:  # a zip bomb is refused before numpy inflates anything
            if sum(i.file_size for i in zf.infolist()) > MAX_CACHE_BYTES:
                raise Damaged(f"members larger than {MAX_CACHE_BYTES} bytes")
        with np.load(data, allow_pickle=False) as z:
            meta = json.loads(_text(z, "meta"))
            if not isinstance(meta, dict):
                raise Damaged("meta is not an object")
            if meta.get("version") != VERSION or meta.get("stamp") != now:
                return _stale(meta.get("stamp"), now)
            evals = json.loads(_text(z, "evals"))
            train = z["train"]
    except Damaged:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, AttributeError, TypeError) as e:
        raise Damaged(f"{type(e).__name__}: {e}") from None
    got = _checked(train, evals, meta)
    if racy(now, meta.get("read_ns")):
        _same_as_file(got, path)  # racily clean: the stamp cannot vouch for the contents
    return got


def _same_as_file(got: tuple[dict[str, np.ndarray], list[dict], dict[str, Any]], path: Path) -> None:
    """Raise Changed when the summary `got` is not what `path` reads as now (its stamp being the same), or when it
    cannot be read again (shrunk meanwhile: `Shrunk`)."""
    try:
        columns, evals, _ = summarize(path)
    except OSError as e:
        raise Changed(f"not readable again: {e}") from None
    cached, cached_evals, _ = got
    same = list(columns) == list(cached) and all(np.array_equal(columns[k], cached[k], equal_nan=True) for k in columns)
    if not same or json.dumps(evals, sort_keys=True, default=str) != json.dumps(
        cached_evals, sort_keys=True, default=str
    ):
        raise Changed("contents differ within the file times' resolution")


def _stale(was: Any, now: dict[str, Any]) -> None:
    """None (rebuild without a word) for an ordinary change; Changed when only what a user cannot set back
    (ctime, inode) differs: someone put the size and mtime back."""
    if isinstance(was, dict) and all(was.get(k) == now[k] for k in ("size", "mtime_ns")) and was != now:
        differ = ", ".join(k for k in ("ctime_ns", "ino") if was.get(k) != now[k])
        raise Changed(f"{differ} differ")
    return None


def _checked(train: Any, evals: Any, meta: dict[str, Any]) -> tuple[dict[str, np.ndarray], list[dict], dict]:
    if not isinstance(evals, list) or not all(isinstance(e, dict) for e in evals):
        raise Damaged("evals is not a list of objects")
    names = meta.get("columns")
    if not isinstance(names, list) or not all(isinstance(k, str) for k in names) or len(set(names)) != len(names):
        raise Damaged("meta's columns are not distinct names")
    if train.dtype != np.float64 or train.ndim != 2 or train.shape[0] != len(names):
        raise Damaged(f"train is {train.dtype} of shape {train.shape}, not float64 of {len(names)} columns")
    records, bad, odd, sampled = meta.get("records"), meta.get("bad"), meta.get("odd"), meta.get("sampled")
    if not (_count(records) and _count(bad) and _count(odd) and isinstance(sampled, bool)) or train.shape[1] > records:
        raise Damaged("meta's records, bad, odd or sampled are not counts")
    return dict(zip(names, train, strict=True)), evals, meta


MAX_CACHE_BYTES = 256 << 20  # a summary is ~0.5 MB; anything near this is not one
MAX_METRICS_BYTES = 16 << 30  # 45 × the paper's largest run (1.5 M records, 350 MB): past it, not a run's log


def _text(z: Any, key: str) -> str:
    a = z[key]
    if a.dtype.kind != "U" or a.ndim != 0:
        raise Damaged(f"{key} is not text")
    return str(a)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


Summary = tuple[dict[str, np.ndarray], list[dict], dict[str, Any]]  # (training columns, evaluations, meta)


def refresh(path: Path, cache_dir: Path) -> str | None:
    """Bring the cached summary of `path` up to date (nothing to do when it is current); a warning naming a
    damaged cache file it replaced, or an unreadable metrics file, else None."""
    return _refreshed(path, cache_dir)[0]


def _refreshed(path: Path, cache_dir: Path) -> tuple[str | None, Summary | None]:
    """(`refresh`'s warning, the summary it found current or made; None where the file is unreadable)."""
    target = cache_file(cache_dir, path.parent)
    note = None
    try:
        got = _load(target, path)
        if got is not None:
            return None, got
    except Damaged as e:
        note = e.warning(target, path)
    try:
        got = summarize(path)
    except Exception:  # unreadable metrics: the report's own read of it says why
        return note, None
    try:
        _save(target, *got)
    except Exception:  # a read-only folder: the report goes uncached
        pass
    return note, got


def warm_one(path: Path, cache_dir: Path, read: Callable[[Path, Summary], Any] | None = None) -> tuple[str | None, Any]:
    """`warm`'s unit of work: (`refresh`'s warning, `read(path, summary)` of the summary it found current or made,
    None without `read` or a summary)."""
    note, got = _refreshed(path, cache_dir)
    return note, (read(path, got) if read is not None and got is not None else None)


def warm(
    paths: list[Path],
    cache_dir: Path,
    workers: int,
    warn: Callable[[str], None],
    read: Callable[[Path, Summary], Any] | None = None,
) -> dict[Path, Any]:
    """Refresh the summaries of every metrics file in `paths` in `workers` processes (forked), before the
    report reads them one at a time: the first report of a large matrix is the scan of every file, which
    is CPU work per file and parallel across files. Warnings reach `warn` in the parent. With `read` (a
    module-level function: it runs in the worker), the path -> what it made of each file's summary, so that
    the parent need not load it back from the cache ({} where nothing ran in processes)."""
    return Warming(paths, cache_dir, workers, warn, read).result()


class Warming:
    """`warm` started: the workers scan while the caller goes on (the report imports its drawing and statistics
    libraries meanwhile); `result()` waits for them, gives the warnings and returns what `warm` returns."""

    def __init__(
        self,
        paths: list[Path],
        cache_dir: Path,
        workers: int,
        warn: Callable[[str], None],
        read: Callable[[Path, Summary], Any] | None = None,
    ) -> None:
        self.paths, self.warn, self._pool, self._done = paths, warn, None, None
        if workers < 2 or len(paths) < 2 or seal_of(cache_dir) is None:  # the key made here, before the fork
            return
        from reports.rundata.workers import pool as worker_pool

        # largest first, one at a time (the longest-processing-time rule): the paper matrix's files run from 0.2 MB
        # to 390 MB, and handed out in path order in large chunks the transformer's came last, to one worker, alone
        self._order = sorted(range(len(paths)), key=lambda i: -_size(paths[i]))
        n = len(paths)
        self._pool = worker_pool(workers)
        try:
            self._done = self._pool.map(warm_one, [paths[i] for i in self._order], [cache_dir] * n, [read] * n)
        except BaseException:
            self._pool.shutdown(cancel_futures=True)
            raise

    def cancel(self) -> None:
        """Stop: the files not started are left, the ones being scanned finish (their cache entries whole)."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def result(self) -> dict[Path, Any]:
        if self._pool is None:
            return {}
        try:
            done = dict(zip(self._order, self._done, strict=True))
        finally:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        paths = self.paths
        for i in range(len(paths)):  # the warnings in the order of `paths`
            if done[i][0]:
                self.warn(done[i][0])
        return {paths[i]: done[i][1] for i in range(len(paths)) if done[i][1] is not None}


def current(path: Path, meta: dict[str, Any]) -> bool:
    """Whether the metrics file at `path` still has the stamp `meta` was made from (one lstat: a link there now
    has another inode), and is not racily clean: what a summary handed over by `warm` must pass to be used
    instead of the cache's."""
    try:
        now = stamp_of(os.lstat(path))
    except OSError:
        return False
    return meta.get("stamp") == now and not racy(now, meta.get("read_ns"))


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def frames(
    path: Path, cache_dir: Path | None, warn: Callable[[str], None] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """(training frame, evaluation frame, meta) of the metrics file at `path`, from the cache under
    `cache_dir` when it is current, else read (and cached, when `cache_dir` is given). A damaged cache
    file is named in one line to `warn` and rebuilt."""
    got = None
    if cache_dir is not None:
        target = cache_file(cache_dir, path.parent)
        try:
            got = _load(target, path)
        except Damaged as e:
            if warn is not None:
                warn(e.warning(target, path))
    if got is None:
        got = summarize(path)
        if cache_dir is not None:
            try:
                _save(cache_file(cache_dir, path.parent), *got)
            except OSError:
                pass  # a read-only results folder: the report still renders, uncached
    return frames_of(got)


_EVAL_NUMBERS = ("tau", "iteration", "epochs", "metric", "wall_time_s")  # numbers in every evaluation record


def frames_of(got: Summary) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """`frames` of a summary: its training and evaluation records as frames, sorted by τ. An evaluation column of
    numbers (τ, iteration, epochs, metric, or one whose values are mostly numbers) holds bench.core.files.finite_float
    of each value: NaN for a bool, a string, NaN, ±inf or 10**400 (never True as 1, never pandas' OverflowError),
    each counted in meta's `odd` with the training columns' (the report's one warning naming the file)."""
    columns, evals, meta = got
    train, ev = pd.DataFrame(columns), pd.DataFrame(evals)
    odd = 0
    for key in ev.columns:
        if pd.api.types.is_integer_dtype(ev[key]) and not pd.api.types.is_bool_dtype(ev[key]):
            continue  # every value an int within int64: finite numbers already
        values = [e.get(key) for e in evals]  # (None where a record lacks the key, as null)
        numbers = [_float(v) for v in values]
        present, found = sum(v is not None for v in values), sum(n == n for n in numbers)
        if key in _EVAL_NUMBERS or found >= max(present, 1) / 2:
            ev[key] = np.array(numbers, dtype=np.float64)
            odd += present - found
    train, ev = (_by_tau(df) for df in (train, ev))
    train.attrs.update(records=meta.get("records"), sampled=meta.get("sampled"))
    return train, ev, meta | {"odd": int(meta.get("odd") or 0) + odd}


def _by_tau(df: pd.DataFrame) -> pd.DataFrame:
    """Sorted by τ (stable); a frame in order already (a run's records are) is left as it is, which a
    stable sort would give."""
    if "tau" not in df or df["tau"].is_monotonic_increasing:
        return df
    return df.sort_values("tau", kind="stable")
