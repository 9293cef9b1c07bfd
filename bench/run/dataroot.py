"""A run's data root: the tiny preset's dataset is written on first use (atomically, by rank 0), and every
root is checked by its task before anything is built."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.core import safefs
from bench.core.engine.distributed import Dist
from bench.core.errors import UserError
from bench.core.runspec import RunSpec


def prepare_data(task: Any, spec: RunSpec, dist: Dist) -> Path:
    """The data root, with the tiny dataset written first if the tiny preset's root is empty."""
    root = Path(spec.data_root) if spec.data_root else Path()
    if not task.needs_data:
        return root
    if spec.preset == "tiny" and not (root.exists() and any(root.iterdir())):
        if dist.is_main:
            write_tiny_atomically(task, root, spec)
        dist.barrier()
    check_data(task, root, spec)
    return root


def check_data(task: Any, root: Path, spec: RunSpec) -> None:
    """The task's own check of its data root, after the colleague check of a tiny set in the shared place
    (`check_own`): every reader of a data root (a run, submit's check before it sends a job) judges it so."""
    if spec.preset == "tiny" and in_tiny_base(root):
        check_own(root)
    task.check_data(root, spec)


def in_tiny_base(root: Path) -> bool:
    """Whether `root` lies where tiny sets are written for any user's run (ADASCALE_BENCH_DATA, or the default cache):
    the shared place a colleague's set can stand in for this run's. A folder the user names with --data-root
    elsewhere is their data (a lab's shared dataset, owned by whoever prepared it): the task's own check judges it."""
    from bench.run.spec import default_data_root

    base = default_data_root("task").parent  # the folder each task's set is named under
    return Path(os.path.abspath(root)).is_relative_to(os.path.abspath(base))


def check_own(root: Path) -> None:
    """A tiny set is written by this user's run, private (a temporary folder of mode 0700 renamed into place);
    one in a shared data folder written by another user, or that others may write into (group or world
    writable), is not this run's data, as a staging folder of theirs is not (tasks.preparing): refused in one
    line naming it, never trained or evaluated on."""
    try:
        st = os.stat(root)
    except FileNotFoundError:
        return
    why = safefs.not_own(st)
    if why:
        raise UserError(
            f"{root}: tiny data this user's run did not write ({why}); not used: remove it (the next run writes "
            "it afresh) or set ADASCALE_BENCH_DATA to a folder of your own"
        )


def tiny_options(task: Any, spec: RunSpec | None) -> dict[str, Any]:
    """The spec's values of the data keys the task's tiny writer takes (its card's tiny_data)."""
    keys = getattr(task.card, "tiny_data", ())
    return {k: spec.data[k] for k in keys if spec is not None and k in spec.data}


def write_tiny_atomically(task: Any, root: Path, spec: RunSpec | None = None) -> None:
    """Write into a sibling temporary folder and rename it into place: a reader never sees half a set. A
    folder that cannot be made or written (ADASCALE_BENCH_DATA on a read-only or missing mount, another
    user's) is one line naming it."""
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}."))
    except OSError as e:
        raise unwritable(root.parent, e) from None
    try:
        task.write_tiny(tmp, **tiny_options(task, spec))
        if root.exists() and not any(root.iterdir()):
            root.rmdir()
        tmp.rename(root)
    except OSError:
        if root.exists() and any(root.iterdir()):  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            raise unwritable(root, sys.exc_info()[1]) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def unwritable(folder: Path, e: BaseException | None) -> UserError:
    """The one line for a data folder the tiny set cannot be written to, naming it and what to change."""
    why = getattr(e, "strerror", None) or type(e).__name__
    return UserError(
        f"{folder}: cannot write the tiny data set there ({why}); set ADASCALE_BENCH_DATA or --data-root "
        "to a folder this user can write"
    )
