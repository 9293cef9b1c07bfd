"""Writing, atomic: a temporary in the folder reached without a link, fsynced and renamed over the target
(`write_bytes`, `writer`); folders made below a root (`mkdirs`) or made private for submitit (`private_dir`)."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .tree import entries, walk_files
from .walk import _NOFOLLOW, Refused, TooLarge, _dir_fd, _leaf, folder


def write_bytes(path: Path | str, data: bytes | memoryview, mode: int | None = None, durable: bool = True) -> None:
    """Write `data` to `path` whole or not at all: a temporary file in the same folder (reached without
    following a link, created if missing), fsynced, then renamed over the target. Its mode is what
    open() gives (0666 less the umask), or `mode` exactly. `durable=False` leaves out the fsync, for a cache
    whose every read checks what it reads: after a crash the entry may be empty or damaged, which that check
    refuses and a rebuild replaces, at less cost than an fsync for every entry."""
    root, parts, name = _leaf(path)
    dfd = _dir_fd(root, parts, create=True)
    try:
        tmp, fd = _temporary(dfd, name, str(path), 0o600 if mode is not None else 0o666)
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if durable:
                    os.fsync(f.fileno())
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            if isinstance(e, OSError) and not isinstance(e, Refused):
                raise OSError(e.errno, e.strerror, str(path)) from None
            raise
    finally:
        os.close(dfd)


@contextlib.contextmanager
def writer(path: Path | str, text: bool = False, limit: int | None = None) -> Iterator[IO[Any]]:
    """A file to stream into that becomes `path` whole when the block ends (atomic as write_bytes: a
    temporary in the folder reached without a link, fsynced, renamed over the target), and is removed when
    it raises. With `limit`, writing past that many bytes is refused (a tar member that grows)."""
    root, parts, name = _leaf(path)
    dfd = _dir_fd(root, parts, create=True)
    try:
        tmp, fd = _temporary(dfd, name, str(path))
        try:
            with os.fdopen(fd, "wb") as raw:
                f: IO[Any] = _Bounded(raw, path, limit) if limit is not None else raw
                if text:
                    f = io.TextIOWrapper(f, encoding="utf-8", errors="backslashreplace", newline="")
                yield f
                f.flush()
                os.fsync(raw.fileno())
                if text:
                    f.detach()  # type: ignore[attr-defined]
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        os.close(dfd)


class _Bounded(io.RawIOBase):
    """A binary file that refuses to grow past `limit` bytes (TooLarge)."""

    def __init__(self, raw: IO[bytes], path: Path | str, limit: int) -> None:
        self._raw, self._path, self._limit, self._n = raw, path, limit, 0

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self._n += len(memoryview(b).cast("B"))
        if self._n > self._limit:
            raise TooLarge(self._path, self._n, self._limit)
        return self._raw.write(b)

    def fileno(self) -> int:
        return self._raw.fileno()

    def flush(self) -> None:
        self._raw.flush()


def _temporary(dfd: int, name: str, where: str, mode: int = 0o666) -> tuple[str, int]:
    """Create `.<name>.<random>.tmp` in `dfd` (O_EXCL: never an existing file or link): its name and fd."""
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode, dir_fd=dfd)
        except FileExistsError:
            continue
        except OSError as e:
            raise OSError(e.errno, e.strerror, where) from None
    raise FileExistsError(errno.EEXIST, "no free temporary name", where)


def write_text(path: Path | str, text: str) -> None:
    write_bytes(path, text.encode("utf-8", errors="backslashreplace"))


def mkdirs(path: Path | str) -> None:
    """Make the folder `path` and its parents below the root, refusing a link or a file on the way."""
    with folder(path, create=True):
        pass


def private_dir(path: Path | str) -> None:
    """Make (or check) the folder `path` for a tool that writes into it by path itself (submitit): reached
    without a link, owned by this user and made private (0700), with no link, FIFO or device anywhere in
    it but the links submitit itself leaves after each sbatch; else Refused in one line. Nobody else can then
    plant anything in it."""
    with folder(path, create=True) as fd:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise Refused(path, f"is a folder of uid {st.st_uid}, not this user's; not used (remove it)", errno.EPERM)
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
        found = entries(path)
        for name, what in found:
            if what == "dir":
                for _ in walk_files(Path(path) / name, refuse_links=True):
                    pass
            elif what != "file" and not (what == "link" and _submitit_link(fd, name, path)):
                raise Refused(Path(path) / name, "is a symbolic link or not a regular file; not followed (remove it)")


_SUBMITIT_LINK = re.compile(r"\.submission_file_[0-9a-f]{32}\.sh")
_SUBMITIT_TARGET = re.compile(r"[0-9]+(_[0-9]+)?_submission\.sh")


def _submitit_link(dfd: int, name: str, path: Path | str) -> bool:
    """Whether the link `name` in the folder `path` (open as `dfd`) is one submitit leaves after each sbatch
    (`move_temporary_file(..., keep_as_symlink=True)`): `.submission_file_<uuid hex>.sh` naming
    `<job id>_submission.sh` in the same folder. submitit never opens it again and its target stays in the
    folder; any other link there is refused."""
    if not _SUBMITIT_LINK.fullmatch(name):
        return False
    try:
        target = os.readlink(name, dir_fd=dfd)
    except OSError:
        return False
    here = os.path.abspath(os.fspath(path))
    return os.path.normpath(os.path.dirname(target)) == here and bool(
        _SUBMITIT_TARGET.fullmatch(os.path.basename(target))
    )
