"""Nothing changed, nothing done: `report` on a results folder whose files are as they were at the last
report replays that report's output instead of building it again (docs/design.md §5).

What a report shows is a function of the run files under the folder (spec.json, summary.json,
metrics.jsonl, offline_gain.csv, checkpoints, locks), of the code that computes it and of the options.
So the last full build leaves a sealed record (report/cache/report.json) of:

- the **inputs**: every entry below the folder (the report folder left out), found without following a
  link, each with its kind, size, mtime_ns, ctime_ns and inode (one lstat per file, as git's index keys
  a file), whether each unfinished run's lock was held, the options, and the identity of the code: every
  source file of the project the report's process had imported when the build ended (sys.modules, not a
  hand-kept list: a change to any module it imports is a change; `code_files`), with the .csv tables beside
  them, digested as they are at the next `report`, and the versions of pandas, numpy and matplotlib;
- the **outputs**: every file the build wrote, with the same stat, and what `report` printed (the
  findings, the rules at a glance, the warnings, the last line).

The next `report` takes the same stats and reads that one record. Where everything matches it prints
what was printed and writes nothing. A write sets ctime, which no user can set back, so a file edited with
its size and mtime put back (`touch -r`, `cp -p`, `rsync -a`) does not match, nor does a file replaced
by another (its inode); nothing of the run files is read. Except, as git's "racily clean" entries: a file
changed within RACY_NS of the moment its stat was taken could have changed again in the same clock tick
with the same stat, so a record holding such a file is not replayed (the build runs, reading what it
must). A deleted or edited output (a PNG, a table) does not match either. The record is trusted only
behind the seal (bench.core.safefs.Seal, keyed from the user's own config folder), read through bench.core.safefs
with a bound (no link, no FIFO, no device), and its JSON parsed with the depth refused as damage.

This module imports nothing heavy (no pandas, numpy or matplotlib), so a replay costs a walk of the
folder and one read, not the report's imports.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import stat
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.core import safefs

VERSION = 1
FORMATS = ("md", "tex", "html", "csv", "txt")  # what `report --format` may name (reports.build writes them)
RECORD = "report.json"  # under report/cache/
REPORT_DIR = "report"
MAX_RECORD_BYTES = 64 << 20  # ~200 B per run file: 60 MB is some 300 000 files
MAX_SOURCE_BYTES = 16 << 20  # the project's largest source is ~100 KB
# A file changed within this long of its stat being taken may have the same stat after a later change in
# the same tick of the kernel's file clock (1-10 ms): two ticks of the coarsest (HZ = 100), as runcache.
RACY_NS = 20_000_000
ROOT = Path(__file__).resolve().parents[2]  # the repository (or installed packages') root
PACKAGES = ("bench", "reports", "slurm", "tasks")  # the distribution's (pyproject's packages.find include)


class ReportWarning(UserWarning):
    """A file of the results folder that the report skipped or could only partly use."""


_SEALS: dict[str, safefs.Seal | None] = {}


def seal_of(cache_dir: Path) -> safefs.Seal | None:
    """The cache folder's Seal (made once per process, before a pool forks), or None where the folder
    cannot be written or no key can be kept (the report then goes uncached)."""
    key = os.path.abspath(cache_dir)
    if key not in _SEALS:
        try:
            safefs.mkdirs(cache_dir)
            _SEALS[key] = safefs.Seal(cache_dir)
        except OSError:
            _SEALS[key] = None
    return _SEALS[key]


def read_sealed_json(path: Path, seal: safefs.Seal, limit: int) -> tuple[Any, str | None]:
    """(object, None) from a sealed JSON file, (None, None) where it is missing or older than the key,
    else (None, why it was refused): a link, FIFO or device (refused unopened by bench.core.safefs), more
    than `limit` bytes, not sealed by this user's key, or not JSON (nesting past the parser's depth
    included)."""
    try:
        with safefs.open_file(path, "rb", limit) as f:
            blob, made = safefs.read_upto(f, limit), os.fstat(f.fileno())
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"{type(e).__name__}: {e}"
    body = seal.open(blob)
    if body is None:
        if seal.older(made):  # from before this key: stale, not hostile
            return None, None
        return None, "not sealed by this user's report: written or changed by someone else"
    try:
        return safefs.check_shape(json.loads(bytes(body)), path), None  # nesting and size bounded
    except safefs.Refused as e:
        return None, e.strerror
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError included; nesting past the parser's depth
        return None, f"not JSON ({type(e).__name__})"


def write_sealed_json(path: Path, seal: safefs.Seal, obj: Any) -> None:
    safefs.write_bytes(path, seal.seal(json.dumps(obj, separators=(",", ":")).encode()))


def code_files(root: Path = ROOT) -> list[str]:
    """The project's source files this process has imported (every module of its PACKAGES in sys.modules whose
    file lies under `root`) and the .csv files beside them (the presets' tables),
    relative to `root`: after a build, the code the report was computed by, whatever module it came from."""
    root = Path(os.path.realpath(root))
    found: set[str] = set()
    for key, module in list(sys.modules.items()):
        name = getattr(module, "__file__", None)
        if key.split(".")[0] not in PACKAGES or not isinstance(name, str) or not os.path.isabs(name):
            continue  # another distribution's (installed beside it, under the same root); torch's "_ops.py"
        path = Path(os.path.realpath(name))
        if not path.is_relative_to(root) or not path.is_file():
            continue
        found.add(path.relative_to(root).as_posix())
        found.update(p.relative_to(root).as_posix() for p in path.parent.glob("*.csv"))
    return sorted(found)


def code_identity(files: list[str], root: Path = ROOT) -> str | None:
    """A digest of the source files `files` (code_files) as they are now, and of the versions of the libraries
    that shape the report's numbers and figures; None where one cannot be read (gone, a link, a folder)."""
    h = hashlib.sha256()
    for name in ("pandas", "numpy", "matplotlib"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            h.update(f"{name}={importlib.metadata.version(name)}\0".encode())
    for rel in files:
        try:
            with safefs.open_file(root / rel, "rb", MAX_SOURCE_BYTES) as f:
                h.update(rel.encode() + b"\0" + safefs.read_upto(f, MAX_SOURCE_BYTES) + b"\0")
        except (OSError, ValueError):
            return None
    return h.hexdigest()


def _walk(fd: int, prefix: str, out: list[list[Any]], unfinished: list[str]) -> None:
    """Every entry below the open folder `fd`: [path, kind, size, mtime_ns, ctime_ns, ino], no link followed."""
    names = sorted(os.listdir(fd))
    for name in names:
        rel = prefix + name
        if rel == REPORT_DIR:  # what the report writes is its output, not its input
            continue
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        kind = "d" if stat.S_ISDIR(st.st_mode) else "f" if stat.S_ISREG(st.st_mode) else "o"
        out.append([rel, kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
        if kind == "d":
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                _walk(sub, rel + "/", out, unfinished)
            finally:
                os.close(sub)
    if "spec.json" in names and "summary.json" not in names:
        unfinished.append(prefix)


def fingerprint(out: Path, formats: list[str], std: bool, quiet: bool = False) -> dict[str, Any] | None:
    """What the report of `out` depends on, as above (`quiet`: what it printed); None where the folder cannot be
    walked."""
    from bench.core.locks import lock_is_held

    taken = time.time_ns()
    files: list[list[Any]] = []
    unfinished: list[str] = []
    try:
        with safefs.folder(out) as fd:
            _walk(fd, "", files, unfinished)
    except OSError:
        return None
    locks = {rel: lock_is_held(out / rel) for rel in unfinished}
    return {"version": VERSION, "out": os.path.abspath(out), "formats": sorted(formats), "std": bool(std),
            "quiet": bool(quiet), "files": files, "locks": locks,
            "taken_ns": taken}  # fmt: skip


def _racy(fp: dict[str, Any]) -> bool:
    """Whether some file was changed so close to when its stat was taken that the stat cannot vouch for it."""
    taken = fp.get("taken_ns")
    return not isinstance(taken, int) or any(max(e[3], e[4]) >= taken - RACY_NS for e in fp["files"])


def _stat_row(path: Path) -> list[Any] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino] if stat.S_ISREG(st.st_mode) else None


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in ("version", "out", "formats", "std", "files", "locks"))


def _same_code(code: Any) -> bool:
    """Whether the code a recorded report was computed by (its `code`: the files it imported and their digest,
    taken after its build) is as it was: each of those files read again now."""
    if not isinstance(code, dict) or not isinstance(code.get("files"), list):
        return False
    files = code["files"]
    if not all(isinstance(f, str) and ".." not in Path(f).parts and not Path(f).is_absolute() for f in files):
        return False
    digest = code_identity(files)
    return digest is not None and digest == code.get("digest")


def replay(out: Path, fp: dict[str, Any] | None) -> dict[str, Any] | None:
    """The recorded output of the last report of `out` when `fp` (its inputs now) is what it was built
    from, no input was racily clean and every output is as it was written; else None (build it)."""
    cache = out / REPORT_DIR / "cache"
    seal = seal_of(cache) if fp is not None and safefs.is_dir(cache) else None
    if seal is None:
        return None
    got, why = read_sealed_json(cache / RECORD, seal, MAX_RECORD_BYTES)
    if why is not None:
        why = f"ignored damaged report record {cache / RECORD} ({why}); report built again"
        warnings.warn(why, ReportWarning, stacklevel=2)
    if not isinstance(got, dict) or not isinstance(got.get("inputs"), dict) or not isinstance(got.get("printed"), dict):
        return None
    inputs, outputs = got["inputs"], got.get("outputs")
    if not _same(inputs, fp) or _racy(inputs) or not isinstance(outputs, dict):  # type: ignore[arg-type]
        return None
    if not _same_code(got.get("code")):
        return None
    if any(_stat_row(out / REPORT_DIR / name) != row for name, row in outputs.items()):
        return None
    return got["printed"]


def record(out: Path, fp: dict[str, Any] | None, written: list[Path], printed: dict[str, Any]) -> None:
    """Seal the inputs `fp` (taken before the build), the stats of the files written and what was printed."""
    cache = out / REPORT_DIR / "cache"
    seal = seal_of(cache) if fp is not None else None
    if seal is None:
        return
    report_dir = Path(os.path.abspath(out / REPORT_DIR))
    outputs = {}
    for path in {Path(os.path.abspath(p)) for p in written}:
        row = _stat_row(path)
        if row is None or path.parent != report_dir:
            return  # an output missing already, or outside the report folder: nothing to vouch for
        outputs[path.name] = row
    with contextlib.suppress(OSError):  # a read-only folder: the next report builds again
        files = code_files()  # after the build: what it imported
        code = {"files": files, "digest": code_identity(files)}
        write_sealed_json(cache / RECORD, seal, {"inputs": fp, "outputs": outputs, "printed": printed, "code": code})


def forget(out: Path) -> None:
    """Drop the record (a build about to change the report folder: a replay must not see half of it)."""
    with contextlib.suppress(OSError):
        safefs.unlink(out / REPORT_DIR / "cache" / RECORD)


@contextlib.contextmanager
def capture() -> Iterator[list[str]]:
    """The ReportWarning messages shown inside (each still shown), to replay them."""
    got: list[str] = []
    old = warnings.showwarning

    def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, ReportWarning):
            got.append(str(message))
        old(message, category, *args, **kwargs)

    warnings.showwarning = show
    try:
        yield got
    finally:
        warnings.showwarning = old


def show(printed: dict[str, Any]) -> None:
    """Say again what the recorded report said: its warnings, then what `report` printed."""
    for message in printed.get("warnings", []):
        warnings.warn(str(message), ReportWarning, stacklevel=2)
    print(str(printed.get("stdout", "")), end="")
