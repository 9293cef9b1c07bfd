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

Its parts: `walk` (the roots, the walk below them, what is refused), `read` (bounded reads, lines, the shape
of what was parsed), `write` (atomic writes, folders made), `tree` (a folder's entries, stat, removal) and
`seal` (`Seal`). Every name is here too: callers write `safefs.X`.
"""

from .read import (
    MAX_DEPTH,
    MAX_LINE,
    MAX_VALUES,
    LongLine,
    bounded_lines,
    check_shape,
    lines,
    open_file,
    read_bytes,
    read_text,
    read_upto,
)
from .seal import Seal, config_dir
from .tree import entries, is_dir, is_file, lstat, not_own, rmtree, unlink, walk_files
from .walk import Refused, TooLarge, confined, folder, inside, kind, open_fd, rooted, split
from .write import mkdirs, private_dir, write_bytes, write_text, writer

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE",
    "MAX_VALUES",
    "LongLine",
    "Refused",
    "Seal",
    "TooLarge",
    "bounded_lines",
    "check_shape",
    "config_dir",
    "confined",
    "entries",
    "folder",
    "inside",
    "is_dir",
    "is_file",
    "kind",
    "lines",
    "lstat",
    "not_own",
    "mkdirs",
    "open_fd",
    "open_file",
    "private_dir",
    "read_bytes",
    "read_upto",
    "read_text",
    "rmtree",
    "rooted",
    "split",
    "unlink",
    "walk_files",
    "write_bytes",
    "write_text",
    "writer",
]
