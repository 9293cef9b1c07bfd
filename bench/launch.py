"""Local launcher for `run --ranks W`: W processes on this machine, gloo on CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import UserError


def launch_local(spec: dict[str, Any], out: Path) -> int:
    raise UserError("--ranks > 1 is not available yet in this version (single process only)")
