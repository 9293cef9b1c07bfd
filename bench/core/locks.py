"""One writer per folder: the run folder's lock (and prepare's beside its --out), an flock the OS releases
when its holder dies; a second writer stops at once with a one-line error naming the holder."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.core import safefs
from bench.core.errors import UserError
from bench.core.files import LOCK, open_own, read_json_object


class RunFolderBusy(UserError):
    """Another process holds the run folder's lock."""


def _holder(path: Path) -> str:
    info = read_json_object(path) or {}
    if not info:
        return "another process"
    where = f"pid {info.get('pid')} on {info.get('host')}"
    return where + (f", SLURM job {info['slurm_job_id']}" if info.get("slurm_job_id") else "")


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run folder's exclusive lock (flock on .lock, released by the OS when the process dies),
    or fail at once with a UserError naming the holder. The holder writes its host, pid and SLURM job
    id into the lock file. Taken once per run: a second take, even in this process, is refused. On a file
    system without locks (some Lustre mounts), a warning and no lock."""
    run_dir = Path(run_dir)
    safefs.mkdirs(run_dir)
    with file_lock(run_dir / LOCK, f"run folder {run_dir}"):
        yield


@contextmanager
def file_lock(path: Path, what: str) -> Iterator[None]:
    """The lock of run_lock on any lock file `path` (`prepare` holds one beside its --out): `what` names
    the guarded thing in the one-line error when another process holds it."""
    path = Path(path)
    fd = open_own(path, os.O_RDWR | os.O_CREAT)
    try:
        for attempt in range(3):  # `status` probes the lock for a moment: try again past such a probe
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == 2:
                    raise RunFolderBusy(f"{what} is in use by {_holder(path)}; wait for it to end or stop it") from None
                time.sleep(0.05)
            except OSError as e:  # ENOLCK, ENOSYS, EINVAL: no locks here
                print(
                    f"adascale-bench: warning: cannot lock {path} ({e.strerror}); no guard against a second writer",
                    file=sys.stderr,
                )
                break
        info = {"host": socket.gethostname(), "pid": os.getpid(), "slurm_job_id": os.environ.get("SLURM_JOB_ID")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def lock_is_held(run_dir: Path) -> bool | None:
    """Whether some process holds the run folder's lock (None: cannot tell, no locks on this file system)."""
    path = Path(run_dir) / LOCK
    try:
        fd = safefs.open_fd(path)  # a planted FIFO or link: cannot tell
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)
