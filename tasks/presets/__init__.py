"""Every task's presets and metric as plain data: what a matrix, a spec, `plan`, `status` and the reports
need to know of a task, without importing torch or the task's model code.

A task adapter (tasks.<name>) takes its card: `card = CARD`. Presets are complete configurations (see
bench.run.spec for the keys every run has); task-specific settings live under "model" and "data".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

# DESIGN §1: elastic S changes at T1/4 and T1/2, 32 -> 64 -> 128 and back (paper §4); tiny presets 2 -> 4 -> 8.
ELASTIC_PAPER = {"up": [[0.0, 32], [0.25, 64], [0.5, 128]], "down": [[0.0, 128], [0.25, 64], [0.5, 32]]}
ELASTIC_TINY = {"up": [[0.0, 2], [0.25, 4], [0.5, 8]], "down": [[0.0, 8], [0.25, 4], [0.5, 2]]}


@dataclass(frozen=True)
class TaskCard:
    """A task's name, its Table 2 metric (key in evaluate()'s result, label, direction), whether it reads
    a data root, its presets by name (tiny, paper), and `differs`: one line per way the paper preset
    differs from the paper by necessity (a chosen value where the supplement is missing, a model variant)."""

    name: str
    metric: str
    metric_label: str
    higher_is_better: bool
    needs_data: bool
    presets: dict[str, dict[str, Any]]
    differs: tuple[str, ...] = ()


def card(name: str) -> TaskCard:
    """The card of a task by name (the caller checks the name against tasks.available())."""
    return importlib.import_module(f"tasks.presets.{name}").CARD
