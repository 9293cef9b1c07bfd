"""What every `adascale-bench prepare TASK` shares: an output folder that appears whole or not at all,
a record of what was prepared, and a progress bar for long work.

A prepared folder holds `PREPARED.json` (written last, inside the staged folder, before the rename):
its presence is what "prepared" means. A half-prepared folder is never taken for a prepared one:
everything is written into a hidden sibling `.<name>.partial/` that is renamed into place at the end;
an interrupted run leaves only that sibling, which the next run of the same command reuses (steps that
check what is already there skip it) or clears.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

from bench.errors import UserError

MARKER = "PREPARED.json"
T = TypeVar("T")


def prepared(out: Path, task: str | None = None) -> dict[str, Any] | None:
    """The record of a prepared folder, or None when `out` is not (completely) prepared; with `task`, a
    folder prepared for another task is a one-line error."""
    try:
        record = json.loads((Path(out) / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    if task is not None and record.get("task") != task:
        raise UserError(f"{out}: already prepared for {record.get('task')!r}, not {task}; choose another --out")
    return record


@contextlib.contextmanager
def staged(out: Path, task: str) -> Iterator[Path]:
    """Yield the staging folder to write into; on success it becomes `out`.

    `out` must not exist (or be an empty folder): prepare never writes over a folder it did not make.
    The staging folder `.<name>.partial` beside it survives an interruption and is handed back on the
    next call, so steps can resume; a UserError (a bad source) removes it."""
    out = Path(out)
    if out.exists() and not (out.is_dir() and not any(out.iterdir())):
        raise UserError(f"{out}: exists and is not a prepared {task} folder; choose another --out or remove it")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{out.parent}: cannot create the output's parent folder ({e.strerror})") from None
    stage = out.parent / f".{out.name}.partial"
    stage.mkdir(exist_ok=True)
    try:
        yield stage
    except UserError:  # a bad source: nothing half-written stays behind
        discard(stage)
        raise
    if out.exists():
        out.rmdir()
    os.replace(stage, out)


def finish(stage: Path, task: str, source: Path, summary: dict[str, Any]) -> None:
    """Write the record that makes `stage` a prepared folder (the last file written)."""
    record = {"task": task, "source": str(Path(source).resolve()), **summary}
    tmp = stage / f".{MARKER}.tmp"
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, stage / MARKER)


def discard(stage: Path) -> None:
    """Remove a staging folder after a user error, so nothing half-written is left behind."""
    shutil.rmtree(stage, ignore_errors=True)


def progress(items: Iterable[T], desc: str, total: int | None = None, unit: str = "file") -> Iterable[T]:
    """A progress bar on stderr for long steps (hidden when stderr is not a terminal)."""
    return tqdm(items, desc=desc, total=total, unit=unit, dynamic_ncols=True, leave=False, disable=None)


def link_or_copy(src: Path, dst: Path) -> str:
    """Hard-link `src` to `dst` where the file system allows, else symlink, else copy; returns which.
    ImageNet's 1.28 M files are then not copied."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        return "exists"
    try:
        os.link(src, dst)
        return "hardlink"
    except OSError:
        pass
    try:
        dst.symlink_to(Path(src).resolve())
        return "symlink"
    except OSError:
        shutil.copy2(src, dst)
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
