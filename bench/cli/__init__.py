"""`adascale-bench` (also `python -m bench`): the public command line (docs/design.md §4)."""

from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path

from bench.cli.commands import PROG
from bench.cli.parser import build_parser
from bench.core import safefs
from bench.core.errors import UserError

# Errors of the file system rather than of the program: one line naming the path, no traceback.
_FILE_ERRORS = {
    errno.ENOSPC: "no space left on the device; free some and run the same command to resume",
    errno.EDQUOT: "disk quota exceeded; free some space and run the same command to resume",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EEXIST: "a file is in the way of a folder",
    errno.EISDIR: "a folder is in the way of a file",
    errno.ENAMETOOLONG: "path too long (shorten --out or the --set values that name the run)",
}


def describe_os_error(e: OSError) -> str:
    path = e.filename or "(unknown path)"
    return f"cannot write {path}: {_FILE_ERRORS.get(e.errno or 0, e.strerror)}"


def _named_paths(args: argparse.Namespace) -> list[Path]:
    """The folders and files named on the command line: taken as given, links in them included; below
    them no link is followed (bench.core.safefs). `prepare` writes beside its --out, so its parent is one."""
    keys = ("out", "dir", "run_dir", "source", "matrix", "throughput", "flops", "write", "write_throughput")
    named = [Path(v) for k in keys if isinstance(v := getattr(args, k, None), str | Path) and v]
    if args.command == "prepare":
        named.append(Path(args.out).parent)
    return named


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "advise" and not args.out:  # a folder per task: its advice and verification runs
        args.out = f"runs/advise-{args.task}"
    from bench.core.engine.signals import Interrupted

    try:
        with safefs.confined(*_named_paths(args)):
            return int(args.func(args) or 0)
    except UserError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 3
    except BrokenPipeError:  # output piped into head and the like
        sys.stderr.close()
        return 0
    except OSError as e:
        if e.errno not in _FILE_ERRORS:
            raise
        print(f"{PROG}: error: {describe_os_error(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
