"""What every `adascale-bench prepare TASK` shares: an output folder that appears whole or not at all,
a record of what was prepared, and a progress bar for long work.

A prepared folder holds `PREPARED.json` (written last, inside the staged folder, before the rename):
its presence is what "prepared" means. A half-prepared folder is never taken for a prepared one:
everything is written into a hidden sibling `.<name>.partial/` that is renamed into place at the end;
an interrupted run leaves only that sibling, which the next run of the same command reuses (steps that
check what is already there skip it) or clears.

Nothing below the source folder is reached through a link (bench.safefs): `--source` itself is taken as
named, a link included (a data set kept in a shared store is often reached through one), and `prepare`
and the CLI declare it a root; every file and folder read below it is reached with O_NOFOLLOW on each
component. A link (or a FIFO, a device) where prepare would read a file or folder of the data set is
refused in one line naming it (`children`, `regular`, `link_or_copy`); one it would not read is left
alone. So a colleague's link to a private file never lands in `--out`, hard-linked, copied or encoded.

Nothing from the source decides where a file goes outside `--out`: every name taken from input data (a
class id in a ground-truth file, an image id in a list) passes `safe_id` (one path component of plain
characters, else a one-line error naming the file and the id). Two `prepare` into one `--out` exclude
each other (the runs' OS lock, bench.files.file_lock, on `.<name>.lock` beside it), and a staging folder
left by a run with another source is started over, never mixed (its source is recorded in it).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import re
import shutil
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

from bench import safefs
from bench.errors import UserError
from bench.files import file_lock

MARKER = "PREPARED.json"
SOURCE = ".source"  # in the staging folder: the source it is being prepared from
T = TypeVar("T")
_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")


def safe_id(value: object, where: Path | str, what: str = "id") -> str:
    """`value` when it is one plain path component (letters, digits, _ . + -, not starting with a dot),
    so a path built from it stays inside --out; else a one-line UserError naming `where` and the id."""
    if isinstance(value, str) and _SAFE_ID.fullmatch(value):
        return value
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    raise UserError(f"{where}: {what} {shown} is not a plain name (letters, digits, _ . + -); refused")


def prepared(out: Path, task: str | None = None) -> dict[str, Any] | None:
    """The record of a prepared folder, or None when `out` is not (completely) prepared; with `task`, a
    folder prepared for another task is a one-line error."""
    try:
        record = json.loads(safefs.read_text(Path(out) / MARKER, 1 << 20))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    if task is not None and record.get("task") != task:
        raise UserError(f"{out}: already prepared for {record.get('task')!r}, not {task}; choose another --out")
    return record


class AlreadyPrepared(Exception):  # noqa: N818 (not an error: the work is done)
    """Raised by `staged` when, once it holds the lock, `out` turns out prepared by a concurrent `prepare`
    that held the lock first: the caller returns `record` as if it had found it prepared at the start."""

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(f"already prepared: {record.get('task')}")
        self.record = record


@contextlib.contextmanager
def staged(out: Path, task: str, source: Path | None = None) -> Iterator[Path]:
    """Yield the staging folder to write into; on success it becomes `out`.

    `out` must not exist (or be an empty folder): prepare never writes over a folder it did not make.
    The staging folder `.<name>.partial` beside it survives an interruption and is handed back on the
    next call from the same `source`, so steps can resume (one from another source is started over);
    a UserError (a bad source) removes it. The lock `.<name>.lock` beside `out` is held throughout."""
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{out.parent}: cannot create the output's parent folder ({e.strerror})") from None
    with file_lock(out.parent / f".{out.name}.lock", f"{out} (another prepare)"):
        record = prepared(out, task)  # a concurrent prepare may have finished while this one looked
        if record is not None:
            raise AlreadyPrepared(record)
        if out.exists() and not (out.is_dir() and not any(out.iterdir())):
            raise UserError(f"{out}: exists and is not a prepared {task} folder; choose another --out or remove it")
        stage = out.parent / f".{out.name}.partial"
        _same_source(stage, task, source)
        try:
            yield stage
        except UserError:  # a bad source: nothing half-written stays behind
            discard(stage)
            raise
        (stage / SOURCE).unlink(missing_ok=True)
        if out.exists():
            out.rmdir()
        os.replace(stage, out)


def _same_source(stage: Path, task: str, source: Path | None) -> None:
    """Create the staging folder, or keep one left by an interrupted run from the same task and source;
    one left from another source is removed (a warning) so the two never mix."""
    origin = f"{task} {Path(source).resolve()}" if source is not None else task
    if stage.is_symlink() or (stage.exists() and not stage.is_dir()):  # a planted link: writes would land there
        raise UserError(f"{stage}: not a staging folder (a link or a file); remove it and run prepare again")
    if stage.is_dir():
        try:
            before = safefs.read_text(stage / SOURCE, 1 << 16)
        except (OSError, UnicodeDecodeError):
            before = None
        if before != origin:
            print(
                f"adascale-bench: warning: {stage} was left by a prepare from another source "
                f"({(before or 'unknown')[:200]}); starting over",
                file=sys.stderr,
            )
            discard(stage)
    safefs.write_text(stage / SOURCE, origin)


def finish(stage: Path, task: str, source: Path, summary: dict[str, Any]) -> None:
    """Write the record that makes `stage` a prepared folder (the last file written)."""
    record = {"task": task, "source": str(Path(source).resolve()), **summary}
    safefs.write_text(stage / MARKER, json.dumps(record, indent=2, sort_keys=True) + "\n")


def discard(stage: Path) -> None:
    """Remove a staging folder after a user error, so nothing half-written is left behind."""
    shutil.rmtree(stage, ignore_errors=True)


def progress(items: Iterable[T], desc: str, total: int | None = None, unit: str = "file") -> Iterable[T]:
    """A progress bar on stderr for long steps (hidden when stderr is not a terminal)."""
    return tqdm(items, desc=desc, total=total, unit=unit, dynamic_ncols=True, leave=False, disable=None)


F = TypeVar("F", bound=Callable[..., Any])


def confining(prepare: F) -> F:
    """A task's `prepare(source, out, ...)` with its source and the folder of its output declared roots
    (bench.safefs): nothing below them is reached through a link, whoever calls it."""

    @functools.wraps(prepare)
    def confined(source: Path, out: Path, *args: Any, **kwargs: Any) -> Any:
        with safefs.confined(source, Path(out).parent):
            return prepare(source, out, *args, **kwargs)

    return confined  # type: ignore[return-value]


def _refused(path: Path, mode: int) -> safefs.Refused:
    what = safefs.kind(mode)
    if stat.S_ISLNK(mode):
        why = "prepare follows no link below the source folder (replace it by the file, or name the folder it "
        why += "points to as --source)"
    else:
        why = "prepare reads only regular files and folders below the source folder (remove it)"
    return safefs.Refused(path, f"is {what} inside --source; {why}", errno.ELOOP)


def regular(path: Path) -> Path:
    """`path` when it is a regular file reached without a link below the source; else a one-line refusal
    (a link, a FIFO) or FileNotFoundError."""
    mode = safefs.lstat(path).st_mode
    if not stat.S_ISREG(mode):
        raise _refused(Path(path), mode)
    return Path(path)


def exists(path: Path) -> bool:
    """Whether something is at `path` (a link counts, and is refused when it is read)."""
    try:
        safefs.lstat(path)
        return True
    except FileNotFoundError:
        return False


def children(folder: Path, take: Callable[[str, str], bool]) -> list[tuple[Path, str]]:
    """(path, kind) of the entries of a source folder that `take(name, kind)` keeps, kind `file` or `dir`,
    sorted; an entry it would keep as either that is a link or a special file is refused in one line
    (never followed); the others are left alone."""
    found = []
    for name, kind in safefs.entries(folder):
        path = Path(folder) / name
        if kind in ("file", "dir"):
            if take(name, kind):
                found.append((path, kind))
        elif take(name, "file") or take(name, "dir"):
            raise _refused(path, safefs.lstat(path).st_mode)
    return found


def link_or_copy(src: Path, dst: Path) -> str:
    """Hard-link `src` to `dst` where the file system allows, else symlink, else copy; returns which.
    ImageNet's 1.28 M files are then not copied. `src` must be a regular file reached without a link
    below the source (`regular`): a link is refused, not placed."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() or dst.is_symlink():
        return "exists"
    src = Path(src)
    with safefs.folder(src.parent) as fd:
        st = os.stat(src.name, dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            raise _refused(src, st.st_mode)
        try:
            os.link(src.name, dst, src_dir_fd=fd, follow_symlinks=False)  # the entry itself, never a target
        except OSError:
            pass
        else:
            placed = os.lstat(dst)
            if placed.st_ino != st.st_ino:  # swapped for something else in between
                dst.unlink()
                raise _refused(src, placed.st_mode)
            return "hardlink"
    try:
        dst.symlink_to(os.path.realpath(src))  # links only in the root (checked above: none below it)
        return "symlink"
    except OSError:
        with safefs.open_file(src) as f, open(dst, "wb") as g:
            shutil.copyfileobj(f, g)
        os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        return "copy"


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def folder_bytes(root: Path) -> int:
    """Bytes of the regular files under `root` (links counted by what they point to)."""
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file())
