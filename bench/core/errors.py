"""User-facing errors: the CLI prints these as one line, without a traceback."""

from __future__ import annotations

from collections.abc import Iterable


class UserError(Exception):
    """Bad input from the user (a flag, a path, a data layout, a file on disk)."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """' (did you mean report?)' for a name one slip away from one of `choices`, else '': the one way every
    command, method, task and preset lookup suggests the name that was meant."""
    import difflib

    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""
