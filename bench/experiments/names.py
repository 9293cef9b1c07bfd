"""Names for humans: how every command (`matrix`, `status`, the report) writes a run's variant and values.

A variant is named by what its matrix called it (`variant: NAME`), else by its overrides written short — each
key's last part and its value, `conditioning 10, lr0 1` — never as an override string (`key=value`), so that a
name is never mistaken for one. Numbers are written one way everywhere: 1.0 is 1, 0.2565547538056714 is 0.2566.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bench.core.identity import SpecDocument, identity_of

VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.+-]{0,31}")  # what a matrix's `variant:` may say

DIGITS = 4  # significant digits of a float in a name


def number(v: Any) -> str:
    """A value as every command writes it in a name (a string as it is)."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool) or not isinstance(v, int | float):
        return json.dumps(v, sort_keys=True)
    return str(v) if isinstance(v, int) else f"{v:.{DIGITS}g}"


def short_form(overrides: dict, every: bool = False) -> str:
    """The overrides that name a run (bench.core.identity.identity_of; `every`: all of them), each key's last part and
    its value."""
    overrides = overrides if isinstance(overrides, dict) else {}
    keep = overrides if every else identity_of({"overrides": overrides})["overrides"]
    return ", ".join(phrase(k, v) for k, v in sorted(keep.items()))


PHRASES = {  # an override whose key alone reads as a machine's name, in words ("{}": its value)
    "keep_checkpoints_every": "checkpoints every {}",
    "keep_checkpoints_until": "until {}·T1",
}


def phrase(key: str, value: Any) -> str:
    """One override in words: `checkpoints every 10` (PHRASES), else its key's last part and its value."""
    last = key.rsplit(".", 1)[-1]
    return PHRASES[last].format(number(value)) if last in PHRASES else f"{last} {number(value)}"


def label_of(experiment: Any) -> str:
    """The name a matrix gave a run's variant ("" when none, or when it is not a plain short name)."""
    label = experiment.get("variant") if isinstance(experiment, dict) else None
    return label if isinstance(label, str) and VARIANT_NAME.fullmatch(label) else ""


def variant_name(spec: SpecDocument) -> str:
    """A run's variant as `status` shows it: its matrix's name for it, a sweep run by its batch (the rest is
    the sweep's), else its overrides written short."""
    exp = spec.get("experiment")
    if isinstance(exp, dict) and exp.get("kind") == "sweep" and "batch" in exp:
        return f"batch {number(exp['batch'])}"
    overrides = dict(spec["overrides"]) if isinstance(spec.get("overrides"), dict) else {}  # damaged: none
    if isinstance(exp, dict) and exp.get("kind") == "heatmap":  # every grid run decays exponentially: not news
        overrides.pop("lr_schedule.kind", None)
    return label_of(exp) or short_form(overrides)


def method_name(spec: SpecDocument) -> str:
    """A run's method as `status` shows it: a sweep run by its sweep's rule (`sweep linear`), not the identity
    rule every sweep run trains with."""
    exp = spec.get("experiment")
    if isinstance(exp, dict) and exp.get("kind") == "sweep" and isinstance(exp.get("method"), str):
        return f"sweep {exp['method']}"
    return str(spec.get("method", "?"))
