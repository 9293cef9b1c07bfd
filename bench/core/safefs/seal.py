"""`Seal`: a keyed digest in front of a file the suite wrote into a shared folder, its key in the user's own
configuration folder (`config_dir`), never in the folder sealed."""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from .tree import not_own
from .walk import _DIR, _NOFOLLOW, Refused
from .write import _temporary


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
    if not_own(st):
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
