"""Reading, bounded: a regular file whole up to a stated size, text line by line with a bounded line, and the
shape (depth, values) of what was parsed from a file."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .walk import Refused, TooLarge, open_fd


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


def read_upto(f: IO[bytes], limit: int, block: int = 1 << 20) -> bytes:
    """At most `limit` + 1 bytes of the open binary file `f` from where it stands, allocating what the file holds,
    not the bound: f.read(n) allocates n bytes up front (a 256 MB bound cost 256 MB for a 0.5 MB file). What the
    file held at its fstat is read at once; anything it grew by since, a block at a time."""
    try:
        size = max(os.fstat(f.fileno()).st_size - f.tell(), 0)
    except (OSError, ValueError):  # not a file of the system's (a BytesIO)
        size = 0
    parts = [f.read(min(size, limit) + 1)]
    got = len(parts[0])
    while got <= limit and parts[-1]:
        parts.append(f.read(min(block, limit + 1 - got)))
        got += len(parts[-1])
    return b"".join(parts)


def read_bytes(path: Path | str, limit: int) -> bytes:
    """The whole of a regular file of at most `limit` bytes (refused past it, before reading)."""
    with open_file(path, "rb", limit) as f:
        data = read_upto(f, limit)
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
