"""What every `adascale-bench prepare TASK` shares: an output folder that appears whole or not at all,
a record of what was prepared, and a progress bar for long work.

A prepared folder holds `PREPARED.json` (written last, inside the staged folder, before the rename):
its presence is what "prepared" means. A half-prepared folder is never taken for a prepared one:
everything is written into a hidden sibling `.<name>.partial/` that is renamed into place at the end;
an interrupted run leaves only that sibling, which the next run of the same command reuses (steps that
check what is already there skip it) or clears.

Nothing below the source folder is reached through a link (bench.core.safefs): `--source` itself is taken as
named, a link included (a data set kept in a shared store is often reached through one), and `prepare`
and the CLI declare it a root; every file and folder read below it is reached with O_NOFOLLOW on each
component. A link (or a FIFO, a device) where prepare would read a file or folder of the data set is
refused in one line naming it (`children`, `regular`, `link_or_copy`); one it would not read is left
alone. So a colleague's link to a private file never lands in `--out`, hard-linked, copied or encoded.

Nothing from the source decides where a file goes outside `--out`: every name taken from input data (a
class id in a ground-truth file, an image id in a list) passes `safe_id` (one path component of plain
characters, else a one-line error naming the file and the id). Two `prepare` into one `--out` exclude
each other (the runs' OS lock, bench.core.locks.file_lock, on `.<name>.lock` beside it), and a staging folder
left by a run with another source is started over, never mixed (its source is recorded in it).

A staging folder is made by this user's prepare, private (mode 0700, so nobody else can plant anything
in it) and opened without following a link; one already there is reused only when it is this user's and
private (an interrupted run of theirs), and refused in one line otherwise (a colleague's, holding the
`.source` line the user's prepare would write, and links inside). It gets the umask's mode when it
becomes `--out`. Archives are extracted member by member by `extract_member`, which checks every member
itself (never relying on tarfile's "data" filter, CVE-2025-4517): only regular files and folders, a
relative path with no `..`, a bounded size and count, written through bench.core.safefs; a member held in memory
is read by `read_member`, the same checks and a bound on what it claims, before a byte is inflated.
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
import struct
import sys
import tarfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any, TypeVar

from tqdm import tqdm

from bench.core import safefs
from bench.core.errors import UserError
from bench.core.locks import file_lock

MARKER = "PREPARED.json"
SOURCE = ".source"  # in the staging folder: the source it is being prepared from
T = TypeVar("T")
MAX_MEMBERS = 5_000_000  # members of one archive (ImageNet's train tar of tars: 1.28 M images in all)
MAX_MEMBER_BYTES = 1 << 30  # one extracted file (the largest in the supported sets is ~100 MB)
MAX_ARCHIVE_BYTES = 1 << 40  # all extracted files of one archive (1 TB; ImageNet's is 150 GB)
MAX_READ_BYTES = 256 << 20  # one member read into memory (read_member: the devkit's meta.mat is 2 MB)
_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")
MAX_IMAGE_BYTES = 64 << 20  # one image file: ImageNet's and VOC's are kB to a few MB each
# Pixels an image's header may claim: PIL's own default MAX_IMAGE_PIXELS, past which decoding it in a run would
# warn (a decompression bomb: a 100 000 × 100 000 PNG is a few kB on disk and 30 GB decoded).
MAX_IMAGE_PIXELS = 89_478_485
IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n")  # JPEG's SOI + marker; PNG's signature


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
        safefs.unlink(stage / SOURCE)
        if out.exists():
            out.rmdir()
        os.chmod(stage, 0o777 & ~_umask())  # private while staged; the mode any folder gets once prepared
        os.replace(stage, out)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _same_source(stage: Path, task: str, source: Path | None) -> None:
    """Create the staging folder fresh and private (0700), or keep one left by an interrupted run of this
    user's from the same task and source; one from another source is removed (a warning) so the two never
    mix. One that is not this user's and private (a colleague's, planted with the `.source` line this
    prepare would write and links inside) is refused in one line: its contents are not the user's."""
    origin = f"{task} {Path(source).resolve()}" if source is not None else task
    try:
        st = os.lstat(stage)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):  # a planted link: writes would land there
        raise UserError(f"{stage}: not a staging folder ({safefs.kind(st.st_mode)}); remove it and run prepare again")
    why = safefs.not_own(st, others=0o077) if st is not None else None
    if why:
        raise UserError(
            f"{stage}: a staging folder this user's prepare did not make ({why}); not used: remove it and run "
            "prepare again"
        )
    if st is not None:
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
            st = None
    if st is None:
        try:
            os.mkdir(stage, 0o700)  # fresh: O_EXCL-like, a folder planted meanwhile is an error, not reused
        except FileExistsError:
            raise UserError(f"{stage}: appeared while prepare started; remove it and run prepare again") from None
        os.chmod(stage, 0o700)  # whatever the umask
    safefs.write_text(stage / SOURCE, origin)


def finish(stage: Path, task: str, source: Path, summary: dict[str, Any]) -> None:
    """Write the record that makes `stage` a prepared folder (the last file written)."""
    record = {"task": task, "source": str(Path(source).resolve()), **summary}
    safefs.write_text(stage / MARKER, json.dumps(record, indent=2, sort_keys=True) + "\n")


def discard(stage: Path) -> None:
    """Remove a staging folder after a user error, so nothing half-written is left behind (no link in it
    followed)."""
    with contextlib.suppress(OSError):
        safefs.rmtree(stage)


def progress(items: Iterable[T], desc: str, total: int | None = None, unit: str = "file") -> Iterable[T]:
    """A progress bar on stderr for long steps (hidden when stderr is not a terminal)."""
    return tqdm(items, desc=desc, total=total, unit=unit, dynamic_ncols=True, leave=False, disable=None)


F = TypeVar("F", bound=Callable[..., Any])


def confining(prepare: F) -> F:
    """A task's `prepare(source, out, ...)` with its source and the folder of its output declared roots
    (bench.core.safefs): nothing below them is reached through a link, whoever calls it."""

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
    below the source (`regular`): a link is refused, not placed. `dst` is placed from its folder's fd,
    reached through bench.core.safefs (no link followed on the way)."""
    dst = Path(dst)
    safefs.mkdirs(dst.parent)
    src = Path(src)
    with safefs.folder(dst.parent) as dfd:
        with contextlib.suppress(FileNotFoundError):
            os.stat(dst.name, dir_fd=dfd, follow_symlinks=False)
            return "exists"
        with safefs.folder(src.parent) as fd:
            st = os.stat(src.name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise _refused(src, st.st_mode)
            try:  # the entry itself, never a target
                os.link(src.name, dst.name, src_dir_fd=fd, dst_dir_fd=dfd, follow_symlinks=False)
            except OSError:
                pass
            else:
                placed = os.stat(dst.name, dir_fd=dfd, follow_symlinks=False)
                if placed.st_ino != st.st_ino:  # swapped for something else in between
                    os.unlink(dst.name, dir_fd=dfd)
                    raise _refused(src, placed.st_mode)
                return "hardlink"
        try:
            os.symlink(os.path.realpath(src), dst.name, dir_fd=dfd)  # links only in the root (none below it)
            return "symlink"
        except OSError:
            pass
    with safefs.open_file(src) as f, safefs.writer(dst) as g:
        shutil.copyfileobj(f, g)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
    return "copy"


class Extraction:
    """The running count and bytes of one archive's extraction, refused past MAX_MEMBERS/MAX_ARCHIVE_BYTES."""

    def __init__(self, where: Path | str) -> None:
        self.where, self.count, self.bytes = str(where), 0, 0

    def add(self, m: tarfile.TarInfo) -> None:
        self.count += 1
        self.bytes += max(m.size, 0)
        if self.count > MAX_MEMBERS or self.bytes > MAX_ARCHIVE_BYTES:
            raise UserError(
                f"{self.where}: more than {MAX_MEMBERS} members or {human_bytes(MAX_ARCHIVE_BYTES)} extracted; refused"
            )


def member_path(m: tarfile.TarInfo, where: Path | str) -> PurePosixPath:
    """The relative path of a regular-file or folder member of an archive, checked here (not by tarfile's
    filter): a link, device or FIFO member, an absolute path, `..`, or a file past MAX_MEMBER_BYTES is
    a one-line UserError naming the archive and the member."""
    shown = repr(m.name) if len(m.name) <= 120 else repr(m.name[:117]) + "..."
    if not (m.isfile() or m.isdir()):
        what = "a link" if m.issym() or m.islnk() else "a device or FIFO" if m.isdev() else "not a file"
        raise UserError(f"{where}: member {shown} is {what}; only files and folders are extracted (refused)")
    path = PurePosixPath(m.name)
    if (
        not m.name
        or path.is_absolute()
        or "\\" in m.name
        or "\0" in m.name
        or any(part == ".." for part in path.parts)
        or os.path.normpath(m.name).startswith((os.sep, ".."))
    ):
        raise UserError(f"{where}: member {shown} is not a plain relative path; refused")
    if m.isfile() and not 0 <= m.size <= MAX_MEMBER_BYTES:
        raise UserError(f"{where}: member {shown} claims {m.size} bytes (at most {MAX_MEMBER_BYTES}); refused")
    return path


def extract_member(tar: tarfile.TarFile, m: tarfile.TarInfo, dest: Path, rel: str | None, job: Extraction) -> None:
    """Write the member `m` (checked by member_path) to `dest/rel` (its own path when None) through
    bench.core.safefs: folders made and files written atomically without following a link below the root,
    never more bytes than the member claims."""
    path = member_path(m, job.where)
    job.add(m)
    target = Path(dest) / (rel if rel is not None else str(path))
    if m.isdir():
        safefs.mkdirs(target)
        return
    src = tar.extractfile(m)
    if src is None:
        raise UserError(f"{job.where}: member {m.name!r} has no data; refused")
    with src, safefs.writer(target, limit=m.size) as out:
        shutil.copyfileobj(src, out, 1 << 20)


def read_member(tar: tarfile.TarFile, m: tarfile.TarInfo, where: Path | str, limit: int = MAX_READ_BYTES) -> bytes:
    """The bytes of the file member `m`, held in memory: checked by member_path as extract_member's are (no link,
    no `..`, at most MAX_MEMBER_BYTES) and refused in one line when it claims more than `limit`, before a byte is
    inflated (a 3 MB .tar.gz of a 3 GB meta.mat was a MemoryError); never more than it claims is read."""
    member_path(m, where)
    shown = repr(m.name) if len(m.name) <= 120 else repr(m.name[:117]) + "..."
    if not m.isfile():
        raise UserError(f"{where}: member {shown} is not a file; refused")
    if m.size > limit:
        raise UserError(f"{where}: member {shown} claims {m.size} bytes (at most {limit} read); refused")
    src = tar.extractfile(m)
    if src is None:
        raise UserError(f"{where}: member {shown} has no data; refused")
    with src:
        return src.read(m.size)


def extract_all(tar: tarfile.TarFile, dest: Path, where: Path | str, image: Callable[[str], bool] | None = None) -> int:
    """Every member of `tar` (streamed) into `dest`, each checked by member_path, and by extract_image when
    `image(name)` says it is one: the files written."""
    job = Extraction(where)
    files = 0
    for m in tar:
        if image is not None and m.isfile() and image(m.name):
            extract_image(tar, m, dest, None, job)
        else:
            extract_member(tar, m, dest, None, job)
        files += m.isfile()
    return files


def extract_image(tar: tarfile.TarFile, m: tarfile.TarInfo, dest: Path, rel: str | None, job: Extraction) -> None:
    """extract_member for an image: the size its header claims bounded (MAX_IMAGE_BYTES) before a byte is
    written, its image header checked (check_image) once it is; refusals name `<archive>:<member>`."""
    path = member_path(m, job.where)  # a link or `..` is refused as such, first
    where = f"{job.where}:{m.name}"
    if m.size > MAX_IMAGE_BYTES:
        raise safefs.Refused(
            where, f"claims {m.size} bytes, more than the {MAX_IMAGE_BYTES} an image may have; refused"
        )
    extract_member(tar, m, dest, rel, job)
    check_image(Path(dest) / (rel if rel is not None else str(path)), where)


def check_image(path: Path, where: object = None) -> tuple[int, int]:
    """(width, height) of the image file `path`, decoded whole by the decoder the tasks read it with
    (PIL's, as torchvision's default_loader and ultralytics' check use it), so prepare and `run` agree on
    what a readable image is. Refused in one line naming `where` (else `path`), before it is placed: more
    than MAX_IMAGE_BYTES (a 1 GB "JPEG" of zeros), no JPEG or PNG signature, a header PIL cannot read, more
    than MAX_IMAGE_PIXELS (checked from the header, before a pixel is decoded), or pixel data PIL cannot
    decode (a JPEG cut after its header: "image file is truncated" in a run)."""
    shown = path if where is None else where
    with safefs.open_file(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_IMAGE_BYTES:
            why = f"{size} bytes, more than the {MAX_IMAGE_BYTES} an image may have; refused unread"
            raise safefs.Refused(shown, why, errno.EFBIG)
        head = f.read(8)
        if not head.startswith(IMAGE_MAGIC):
            raise safefs.Refused(shown, f"not a JPEG or PNG (it starts {head.hex(' ') or 'empty'}); refused")
        f.seek(0)
        im = _header(f, head.startswith(IMAGE_MAGIC[1]), shown)
        width, height = (int(v) for v in im.size)
        if width < 1 or height < 1 or width * height > MAX_IMAGE_PIXELS:
            why = f"a {width} × {height} image; expected 1 to {MAX_IMAGE_PIXELS} pixels (refused)"
            raise safefs.Refused(shown, why)
        _decode(im, shown)
    return width, height


def _header(f: IO[bytes], png: bool, shown: object) -> Any:
    """The image of `f` opened by PIL's plugin for the signature found (lazily: only the header is read).
    The plugin itself, not Image.open: ultralytics replaces that process-wide with one that tries to
    install a HEIF plugin when a file is not identified."""
    from PIL import JpegImagePlugin, PngImagePlugin

    try:
        return PngImagePlugin.PngImageFile(f) if png else JpegImagePlugin.JpegImageFile(f)
    except (OSError, ValueError, SyntaxError, EOFError, struct.error) as e:
        raise safefs.Refused(shown, f"an image header PIL cannot read ({type(e).__name__}); refused") from None


def _decode(im: Any, shown: object) -> None:
    """Every pixel of `im` decoded and converted to RGB, as torchvision's default_loader does in a run, with
    truncated data an error (as it is there: PIL's LOAD_TRUNCATED_IMAGES off)."""
    from PIL import ImageFile

    keep, ImageFile.LOAD_TRUNCATED_IMAGES = ImageFile.LOAD_TRUNCATED_IMAGES, False
    try:
        im.convert("RGB")
    except (OSError, ValueError, SyntaxError, EOFError, struct.error) as e:
        detail = " ".join(str(e).split())[:120]
        raise safefs.Refused(shown, f"image data PIL cannot decode ({type(e).__name__}: {detail}); refused") from None
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = keep


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def folder_bytes(root: Path) -> int:
    """Bytes of the regular files under `root` (links counted by what they point to)."""
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file())
