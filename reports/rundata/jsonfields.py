"""A run folder's JSON object (spec.json, summary.json) read without trusting it, and its fields kept only where
their type is one the report can use: a damaged file or field is a warning naming it, never a traceback later on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.core import safefs
from bench.core.files import MAX_JSON_BYTES, open_regular

NUMBER = (int, float)  # a number field's types (booleans are not numbers: `checked`)


def checked(obj: dict, fields: dict[str, tuple[type, ...]], path: Path, warn: Any) -> dict:
    """`obj` less the fields of a type the report cannot use (None is always "absent"), each named in
    a warning; booleans are not numbers."""
    out = dict(obj)
    for key, types in fields.items():
        value = out.get(key)
        if value is None:
            continue
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            warn(f"{path}: field {key!r} is {type(value).__name__}, not {'/'.join(t.__name__ for t in types)}; ignored")
            del out[key]
    return out


def read_object(path: Path) -> tuple[dict | None, str | None]:
    """(object, None) or (None, why it could not be used)."""
    try:
        with open_regular(path, "rb", MAX_JSON_BYTES) as f:  # no link, no FIFO, bounded (bench.core.safefs)
            text = f.read().decode("utf-8")
    except OSError as e:
        return None, f"cannot read ({e.strerror or e})"
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 text (byte {e.start})"
    if not text.strip():
        return None, "empty file"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"corrupt JSON ({e.msg}: line {e.lineno}, column {e.colno})"
    except (ValueError, RecursionError):  # a value nested past the parser's depth
        return None, "corrupt JSON (nested too deep)"
    if not isinstance(obj, dict):
        return None, f"not a JSON object ({type(obj).__name__})"
    try:
        safefs.check_shape(obj, path)  # a 980-deep value would crash whatever walks it next
    except OSError as e:
        return None, f"corrupt JSON ({e.strerror})"
    return obj, None
