"""The roots the user named and the walk below them (docs/design.md §4): `confined` and `rooted` declare the
roots; `folder` and `open_fd` reach a folder or a regular file below one through openat, no link followed on
any component; `Refused` and `TooLarge`, what is refused."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from bench.core.errors import UserError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_ROOTS: list[str] = []
F = TypeVar("F", bound=Callable[..., Any])  # absolute, lexically normalised (links in them are the user's, followed)


class Refused(UserError, OSError):
    """A path the suite will not touch: a link below a root, a file that is not regular, one too large."""

    def __init__(self, path: object, why: str, code: int = errno.EINVAL) -> None:
        OSError.__init__(self, code, why, str(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


class TooLarge(Refused):
    def __init__(self, path: object, size: int, limit: int) -> None:
        super().__init__(path, f"{size} bytes, more than the {limit} this file may have; refused unread", errno.EFBIG)


@contextlib.contextmanager
def confined(*roots: Path | str | None) -> Iterator[None]:
    """Inside, paths below any of `roots` are walked without following a link below the root."""
    added = [os.path.abspath(os.fspath(r)) for r in roots if r is not None and os.fspath(r) != ""]
    _ROOTS.extend(added)
    try:
        yield
    finally:
        for r in added:
            _ROOTS.remove(r)


def rooted(fn: F) -> F:
    """`fn(folder, ...)` with its first argument declared a root while it runs (an entry point, such as
    build_report, that tests and other code call without the CLI)."""

    @functools.wraps(fn)
    def wrapped(folder: Any, *args: Any, **kwargs: Any) -> Any:
        with confined(folder):
            return fn(folder, *args, **kwargs)

    return wrapped  # type: ignore[return-value]


def split(path: Path | str) -> tuple[str, list[str]]:
    """(root, the components below it) of `path`: the innermost declared root holding it (each was named
    by the user, links in it included: `prepare --source` may be a link inside --out's folder), else its
    parent."""
    p = os.path.abspath(os.fspath(path))
    best = None
    for r in _ROOTS:
        if (p == r or p.startswith(r.rstrip(os.sep) + os.sep)) and (best is None or len(r) > len(best)):
            best = r
    if best is None or p == best:
        head, tail = os.path.split(p)
        return head, [tail] if tail else []
    return best, [c for c in p[len(best) :].split(os.sep) if c]


def inside(path: Path | str) -> bool:
    """Whether `path` is below a declared root (lexically): a path read from a file (a log named in
    job.json) is only opened when it is, so no file of the user's outside the results folder is shown."""
    p = os.path.abspath(os.fspath(path))
    return any(p.startswith(r.rstrip(os.sep) + os.sep) for r in _ROOTS)


def kind(mode: int) -> str:
    """What a file of this mode is, in words (a symbolic link, a FIFO, a device, ...)."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _refusal(dir_fd: int, name: str, where: str, want: str) -> OSError:
    """Why `name` in `dir_fd` could not be opened as a `want` (folder | file) without following a link."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError as e:
        return OSError(e.errno, e.strerror, where)
    if stat.S_ISLNK(mode):
        return Refused(where, "is a symbolic link; not followed (remove it)", errno.ELOOP)
    return Refused(where, f"is {kind(mode)}, not a {want}; not opened (remove it)")


def _open_root(root: str, create: bool) -> int:
    try:
        return os.open(root, _DIR)
    except FileNotFoundError:
        if not create:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", root) from None
    os.makedirs(root, exist_ok=True)  # the user's own path: links in it are followed
    return os.open(root, _DIR)


def _dir_fd(root: str, parts: list[str], create: bool) -> int:
    """An fd of the folder root/parts…, each part opened without following a link (created when `create`)."""
    fd = _open_root(root, create)
    where = root
    for part in parts:
        where = os.path.join(where, part)
        try:
            nxt = _subdir(fd, part, where, create)
        finally:
            os.close(fd)
        fd = nxt
    return fd


def _subdir(fd: int, name: str, where: str, create: bool) -> int:
    try:
        return os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", where) from None
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refusal(fd, name, where, "folder") from None
        raise OSError(e.errno, e.strerror, where) from None
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o777, dir_fd=fd)
    return _subdir(fd, name, where, False)


def _leaf(path: Path | str) -> tuple[str, list[str], str]:
    root, parts = split(path)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    return root, parts[:-1], parts[-1]


@contextlib.contextmanager
def folder(path: Path | str, create: bool = False) -> Iterator[int]:
    """An fd of the folder `path`, reached without following a link below its root (made when `create`)."""
    named = os.path.abspath(os.fspath(path))
    root, parts = (named, []) if named in _ROOTS else split(path)
    fd = _dir_fd(root, parts, create)
    try:
        yield fd
    finally:
        os.close(fd)


def open_fd(path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o666, create_dirs: bool = False) -> int:
    """os.open of a regular file at `path`: no link followed below its root, nothing but a regular file
    (a FIFO or device is refused at once), the fd blocking again once opened. A file declared a root
    itself (one the user named, such as a matrix file) is opened as named, a link there followed."""
    named = os.path.abspath(os.fspath(path))
    if named in _ROOTS:
        return _open_at(None, named, flags, mode, str(path), follow=True)
    root, parts, name = _leaf(path)
    dfd = _dir_fd(root, parts, create_dirs)
    try:
        return _open_at(dfd, name, flags, mode, str(path))
    finally:
        os.close(dfd)


def _open_at(dfd: int | None, name: str, flags: int, mode: int, where: str, follow: bool = False) -> int:
    try:
        fd = os.open(name, flags | (_NOFOLLOW & ~os.O_NOFOLLOW if follow else _NOFOLLOW), mode, dir_fd=dfd)
    except OSError as e:
        if e.errno == errno.ENXIO:  # a FIFO opened for writing with no reader
            raise Refused(where, "is a FIFO, not a regular file; not opened (remove it)") from None
        if e.errno in (errno.ELOOP, errno.ENOTDIR) and dfd is not None:  # a link below the root
            raise _refusal(dfd, name, where, "regular file") from None
        raise OSError(e.errno, e.strerror, where) from None
    try:
        mode_now = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode_now):
            raise Refused(where, f"is {kind(mode_now)}, not a regular file; not opened (remove it)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd
