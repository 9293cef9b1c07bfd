"""What a folder holds, and removing it, without following a link: `lstat`, `is_file`, `is_dir`, `entries`,
`walk_files`, `unlink`, `rmtree` (which never leave the tree)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from .walk import _ROOTS, Refused, _dir_fd, _leaf, folder


def lstat(path: Path | str) -> os.stat_result:
    """The stat of `path` itself (a link is not followed; nor is any below the root on the way). A root is
    taken as named (its link followed)."""
    named = os.path.abspath(os.fspath(path))
    if named in _ROOTS:
        return os.stat(named)
    root, parts, name = _leaf(path)
    dfd = _dir_fd(root, parts, create=False)
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None
    finally:
        os.close(dfd)


def is_file(path: Path | str) -> bool:
    """Whether `path` is a regular file reached without a link (a link, a FIFO or nothing: False)."""
    try:
        return stat.S_ISREG(lstat(path).st_mode)
    except OSError:
        return False


def is_dir(path: Path | str) -> bool:
    """Whether `path` is a folder reached without a link."""
    try:
        with folder(path):
            return True
    except OSError:
        return False


def unlink(path: Path | str, missing_ok: bool = True) -> None:
    """Remove the file (or link: itself, not what it names) at `path`."""
    root, parts, name = _leaf(path)
    try:
        dfd = _dir_fd(root, parts, create=False)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        os.unlink(name, dir_fd=dfd)
    except FileNotFoundError:
        if not missing_ok:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path)) from None
    finally:
        os.close(dfd)


def rmtree(path: Path | str) -> None:
    """Remove the folder `path` and everything in it, following no link (a link at `path` is removed
    itself; shutil.rmtree with dir_fd never leaves the tree); a missing one is no error."""
    root, parts, name = _leaf(path)
    try:
        dfd = _dir_fd(root, parts, create=False)
    except FileNotFoundError:
        return
    try:
        try:
            mode = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISDIR(mode):
            shutil.rmtree(name, dir_fd=dfd)
        else:
            os.unlink(name, dir_fd=dfd)
    finally:
        os.close(dfd)


def entries(path: Path | str) -> list[tuple[str, str]]:
    """(name, kind) of each entry of the folder `path`, kind one of file, dir, link, other; nothing followed."""
    out = []
    with folder(path) as fd, os.scandir(fd) as it:
        for e in it:
            if e.is_symlink():
                kind = "link"
            elif e.is_dir(follow_symlinks=False):
                kind = "dir"
            elif e.is_file(follow_symlinks=False):
                kind = "file"
            else:
                kind = "other"
            out.append((e.name, kind))
    return sorted(out)


def walk_files(path: Path | str, refuse_links: bool = False) -> Iterator[Path]:
    """Every regular file below the folder `path` (sorted, depth first), reached without following a link;
    a link or other non-regular entry is skipped, or with `refuse_links` refused in one line."""
    base = Path(path)
    for name, kind in entries(base):
        p = base / name
        if kind == "dir":
            yield from walk_files(p, refuse_links)
        elif kind == "file":
            yield p
        elif refuse_links:
            raise Refused(p, "is a symbolic link or not a regular file; not followed (remove it)", errno.ELOOP)


def not_own(st: os.stat_result, others: int = 0o022) -> str | None:
    """Why a folder is not this user's own, or None: another user owns it, or the `others` bits of its mode are
    set (0o022: group or world may write it; 0o077: not private). One test for every folder whose contents the
    suite takes as the user's (a tiny data set, a staging folder, the seal key's folder): a colleague's folder,
    or one they can write into, holds what they put there."""
    if st.st_uid != os.geteuid() or st.st_mode & others:
        return f"owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}"
    return None
