"""Touching a file in a folder others can write: the one home (docs/design.md §4).

A results folder, a data set's source or a matrix file may be shared with a careless or hostile
colleague, who can plant a symbolic link (so a write lands in, or a read copies out, a file they name),
a FIFO (a reader blocks forever), a device or a huge file. Every read and write the suite makes below a
folder the user named goes through here:

- **Roots.** The folders the user names (`--out`, a results DIR, a run folder, `--source`) are taken
  as given, links in them included: a data set kept in a shared store and reached through a link is
  the user's own choice. `confined(*roots)` declares them (the CLI and each entry point do). Below a
  root no link is followed on any component: the walk opens each folder with O_NOFOLLOW|O_DIRECTORY
  relative to the one above it (openat), so a link planted anywhere below is refused in one line naming
  it, and the file it names is never opened. A path under no root is treated the same below its parent.
- **Regular files only, never a wait.** Files are opened O_NONBLOCK|O_NOFOLLOW and checked with fstat:
  a FIFO, a socket or a device is refused at once (an open of a FIFO for reading would block until a
  writer came; for writing it fails with ENXIO).
- **Sizes bounded.** A whole-file read names its limit; a file past it is refused before it is read. Text
  read line by line (`lines`, `bounded_lines`) holds one line of at most MAX_LINE characters; a longer one is
  refused with its number, unread.
- **Writes atomic.** A temporary `.<name>.<random>.tmp` is created (O_EXCL) in the folder reached by
  the walk, fsynced and renamed over the target: a link at the target is replaced, not followed, and a
  reader sees the old file or the new one, never half of one. Its mode is what open() gives (the umask).

`Refused` is both a UserError (a command stops with one line) and an OSError (a report, which skips
unreadable run files with a warning, skips it like any file it cannot read).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hmac
import io
import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from bench.errors import UserError

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


def open_file(path: Path | str, mode: str = "rb", limit: int | None = None) -> IO[Any]:
    """open(path, mode) for reading through open_fd; with `limit`, a file larger than it is refused."""
    fd = open_fd(path)
    try:
        if limit is not None:
            size = os.fstat(fd).st_size
            if size > limit:
                raise TooLarge(path, size, limit)
        return os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path | str, limit: int) -> bytes:
    """The whole of a regular file of at most `limit` bytes (refused past it, before reading)."""
    with open_file(path, "rb", limit) as f:
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew while read
        raise TooLarge(path, len(data), limit)
    return data


def read_text(path: Path | str, limit: int) -> str:
    """read_bytes as UTF-8 (a UnicodeDecodeError, a ValueError, when it is not)."""
    return read_bytes(path, limit).decode("utf-8")


MAX_LINE = 1 << 20  # characters of one line of a data set's text (a transcript, a WMT sentence, a dictionary
# entry): the longest real ones are a few kB, so a line past 1 Mi characters is damage or a trap, and no more of
# it than this is ever held in memory


class LongLine(Refused):
    def __init__(self, path: object, lineno: int, limit: int) -> None:
        why = f"line {lineno} is longer than {limit} characters; refused unread (damaged or crafted)"
        super().__init__(path, why, errno.EFBIG)


def lines(path: Path | str, limit: int = MAX_LINE, where: object = None, max_bytes: int | None = None) -> Iterator[str]:
    """bounded_lines of the UTF-8 text file `path`, opened through open_file (no link below its root; with
    `max_bytes`, a larger file is TooLarge before a byte is read)."""
    with open_file(path, "r", max_bytes) as f:
        yield from bounded_lines(f, path if where is None else where, limit)


def bounded_lines(f: IO[str], where: object, limit: int = MAX_LINE) -> Iterator[str]:
    """Each line of the open text file `f` (line end kept: the lines iterating it gives), read at most
    `limit` + 1 characters at a time, so a 300 MB line is never held whole: one longer than `limit` is
    LongLine naming `where` and the line's number. For a file a caller opened itself (a prepared folder's,
    where link_or_copy may have placed a link). Text that is not UTF-8 is Refused naming `where` (a
    UnicodeDecodeError reached callers as a traceback)."""
    lineno = 0
    while True:
        try:
            line = f.readline(limit + 1)
        except UnicodeDecodeError as e:
            past = f" past line {lineno}" if lineno else ""  # text is decoded a chunk at a time: no exact line
            raise Refused(where, f"is not UTF-8 text{past} ({e.reason}); refused") from None
        if not line:
            return
        lineno += 1
        if len(line) > limit and not line.endswith(("\n", "\r")):  # limit + 1 characters and the line goes on
            raise LongLine(where, lineno, limit)
        yield line


def write_bytes(path: Path | str, data: bytes | memoryview, mode: int | None = None) -> None:
    """Write `data` to `path` whole or not at all: a temporary file in the same folder (reached without
    following a link, created if missing), fsynced, then renamed over the target. Its mode is what
    open() gives (0666 less the umask), or `mode` exactly."""
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


MAX_DEPTH = 100  # nesting of anything parsed from a file (the suite's deepest, a spec, is under 10)
MAX_VALUES = 2_000_000  # values once shared references are expanded (a paper checkpoint's: a few hundred)


def check_shape(obj: Any, where: object, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> Any:
    """`obj` (parsed from a file: JSON, a checkpoint) when its lists, tuples and dicts nest at most
    `max_depth` deep and hold at most `max_values` values counted as every later walk, copy or dump sees them
    (a list shared nine levels deep is 10⁹ values in 3 kB); else Refused in one line, before anything
    recurses into it (a RecursionError) or expands it (a MemoryError). Walked without recursion."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    values = 1
    while stack:
        o, depth = stack.pop()
        if isinstance(o, dict):
            children: Any = o.values()
        elif isinstance(o, list | tuple):
            children = o
        else:
            continue
        if depth > max_depth:
            raise Refused(where, f"nests deeper than {max_depth} levels; refused (damaged or crafted)")
        values += len(children)
        if values > max_values:
            raise Refused(where, f"holds more than {max_values} values (shared references expanded); refused")
        stack.extend((c, depth + 1) for c in children)
    return obj


def config_dir() -> Path:
    """The user's own configuration folder for the suite: $XDG_CONFIG_HOME/adascale-bench, else
    ~/.config/adascale-bench (never inside a results folder, so it never travels with one)."""
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        base = os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "adascale-bench"


def _own_folder(path: Path) -> int:
    """An fd of `path`, made 0700 where missing, and refused unless it is a folder (not a link) owned by
    this user that no one else can write: a key kept in a folder a colleague can write is theirs too."""
    os.makedirs(path.parent, mode=0o700, exist_ok=True)  # ~/.config: the user's own path, taken as given
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    fd = os.open(path, _DIR | os.O_NOFOLLOW)
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        raise Refused(path, "is not a folder only this user can write; no seal key kept there (fix its owner or mode)")
    return fd


class Seal:
    """A keyed digest (HMAC-SHA256, 32 bytes) in front of a file this user's suite wrote into a shared folder
    (the report's caches and figure index), so that what it holds is taken only if this user wrote it for
    this folder and nobody changed it since: a colleague who can write the folder, and so replace the file,
    cannot make one that passes without the key. The key, 32 random bytes, lives in the user's own config
    folder (`config_dir()/seal-key`, folder 0700 and key 0600, both owned by this user, read without
    following a link; made with O_EXCL where missing, made anew when it fails any of these), never in the
    folder it protects: a folder shared as a tarball carries no key. The digest also covers the sealed
    folder's absolute path, so a sealed file copied into another folder does not pass there.
    `made_ns`: when the key was made; a file last changed before that was sealed by no key of this one's
    and is stale, not damaged. An OSError where no key can be kept (the caller goes uncached)."""

    SIZE = 32
    NAME = "seal-key"

    def __init__(self, folder: Path | str, keys: Path | None = None) -> None:
        where = os.fsencode(os.path.abspath(os.fspath(folder)))
        self._context = len(where).to_bytes(8, "big") + where
        dfd = _own_folder(keys or config_dir())
        try:
            self._key, self.made_ns = self._read(dfd) or self._make(dfd)
        finally:
            os.close(dfd)

    def _read(self, dfd: int) -> tuple[bytes, int] | None:
        try:
            fd = os.open(self.NAME, os.O_RDONLY | _NOFOLLOW, dir_fd=dfd)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            ok = stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077
            data = f.read(self.SIZE + 1) if ok and st.st_size == self.SIZE else b""
        return (data, st.st_mtime_ns) if len(data) == self.SIZE else None

    def _make(self, dfd: int) -> tuple[bytes, int]:
        """A new key, written to a fresh temporary (O_EXCL, 0600) and renamed over whatever was there."""
        key = secrets.token_bytes(self.SIZE)
        tmp, fd = _temporary(dfd, self.NAME, self.NAME, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(key)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.NAME, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        return key, os.stat(self.NAME, dir_fd=dfd, follow_symlinks=False).st_mtime_ns

    def _mac(self, data: bytes | memoryview) -> bytes:
        h = hmac.new(self._key, self._context, "sha256")  # OpenSSL's SHA-256: ~2× BLAKE2b here
        h.update(data)
        return h.digest()

    def seal(self, data: bytes) -> bytes:
        return self._mac(data) + data

    def older(self, st: os.stat_result) -> bool:
        """Whether a file of stat `st` was last changed before this key existed (so cannot pass it)."""
        return st.st_ctime_ns < self.made_ns

    def open(self, blob: bytes) -> memoryview | None:
        """The data of a sealed blob, or None when its digest is not this key's of it."""
        view = memoryview(blob)
        mac = self._mac(view[self.SIZE :])
        return view[self.SIZE :] if hmac.compare_digest(mac, bytes(view[: self.SIZE])) else None
