"""The user's own code: a rule or a task named `package.module:NAME`, imported only where the user names it.

One home for how the suite imports a user's module (rules: bench.core.methods.load_rule; tasks:
tasks.load), so that the two follow one policy:

- the name is checked before anything is imported (Python identifiers, one colon);
- the folder the command runs in is searched last, never first: the user's module beside the command is
  found, but a planted `numpy.py` or `soundfile.py` there can never shadow an installed package;
- any failure to import is one line naming the module and the error, never a traceback;
- the module's source is hashed (sha256), so that a run folder records which code ran and a changed
  source is another run (the run's identity includes the digest).

Nothing that reads run folders (report, status) calls this: they read what the runs recorded.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import re
import sys
from typing import Any

from bench.core.errors import UserError

USER_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*", re.ASCII)


def is_user_name(name: object) -> bool:
    """Whether a name is the user's own code (`package.module:NAME`) rather than a built-in's name."""
    return isinstance(name, str) and ":" in name


def check_name(kind: str, name: str) -> None:
    if not USER_NAME.fullmatch(name):
        raise UserError(f"{kind} {name!r}: a {kind} of yours is named package.module:NAME (Python identifiers)")


def source_digest(kind: str, name: str, module: Any) -> str:
    """The sha256 of the module's source file: what a run folder records of the code that ran."""
    path = inspect.getsourcefile(module)
    try:
        if not path:
            raise FileNotFoundError
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:  # a module present only compiled (a .pyc): no source to record, so no identity to run under
        raise UserError(
            f"{kind} {name}: module {module.__name__} ({getattr(module, '__file__', None)}) has no source file to "
            "record (a run records the sha256 of its source); put its .py beside it"
        ) from None


def import_named(kind: str, name: str) -> tuple[Any, str]:
    """The object `NAME` of `package.module` and the sha256 of that module's source, imported as Python would
    import it from PYTHONPATH or (last) the current folder; every failure is one UserError naming it."""
    check_name(kind, name)
    module_name, attr = name.split(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # last, never first (see the module docstring)
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit, KeyboardInterrupt) as e:  # sys.exit(0) at import: no "exit 0, nothing done"
        first = " ".join(str(e).split())[:200]
        raise UserError(f"{kind} {name}: cannot import {module_name} ({type(e).__name__}: {first})") from None
    if not hasattr(module, attr):
        raise UserError(f"{kind} {name}: module {module_name} ({module.__file__}) defines no {attr}")
    return getattr(module, attr), source_digest(kind, name, module)


def check_recorded(kind: str, name: str, recorded: object, digest: str | None) -> None:
    """Refuse to go on with a run whose spec recorded another source of the user's code than the one imported
    now (`recorded`: the spec's record of it, with its `sha256`)."""
    want = recorded.get("sha256") if isinstance(recorded, dict) else None
    if want != digest:
        raise UserError(
            f"{kind} {name}: its source changed since this run was resolved (sha256 {str(digest)[:12]} now, "
            f"{str(want)[:12]} recorded); restore it or start the run in a new folder"
        )
