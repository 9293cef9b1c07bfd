"""What differs from the paper, per task and preset that ran: a preset's values beside the paper preset's, or
the paper preset's own necessary differences (its card's `differs`)."""

from __future__ import annotations

from collections.abc import Sequence

from .page import E

SHOWN_KEYS = ("T1", "batch_size", "lr_schedule", "model", "data", "elastic", "scales")  # what a reader compares
SKIPPED = ("verify_md5", "eval_batch_size", "num_workers", "checkpoint_every", "eval_every", "ttt_target")


def _flat(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        if k in SKIPPED:
            continue
        if isinstance(v, dict) and k not in ("elastic",):
            out |= _flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def _value(v: object) -> str:
    from bench.experiments.names import number

    if isinstance(v, dict) and set(v) <= {"up", "down"}:  # an elastic schedule: its scales in order
        return " → ".join(str(s) for _, s in v.get("up", []))
    if isinstance(v, list):
        return ", ".join(number(x) for x in v)
    return number(v)


def preset_lines(task: str, preset: str) -> list[str]:
    """How the preset that ran differs from the paper: the paper preset's own `differs` lines (the card's), or
    for another preset each value of it that is not the paper preset's (tasks.presets: plain data)."""
    from tasks.presets import card

    c = card(task)
    if preset == "paper" or "paper" not in c.presets:
        return list(c.differs)
    mine = _flat({k: v for k, v in c.presets.get(preset, {}).items() if k in SHOWN_KEYS})
    paper = _flat({k: v for k, v in c.presets["paper"].items() if k in SHOWN_KEYS})
    lines = (
        ["data: the tiny set of the task's real format, written on first use (no download)"] if preset == "tiny" else []
    )
    lines += [
        f"{key}: {_value(v)} (paper preset: {_value(paper[key]) if key in paper else 'not set'})"
        for key, v in mine.items()
        if paper.get(key) != v
    ]
    return lines


def differs_html(tasks: Sequence[str], presets: dict[str, list[str]] | None = None) -> str:
    """Per task and preset that ran: what differs from the paper — a tiny preset's values beside the paper
    preset's, the paper preset's necessary differences (the card's `differs`)."""
    out = []
    for task in tasks:
        for preset in (presets or {}).get(task) or ["paper"]:
            try:
                lines = preset_lines(task, preset)
            except Exception:  # a task without a card: nothing to list
                continue
            if not lines:
                continue
            what = (
                "the paper preset, by necessity"
                if preset == "paper"
                else f"the {preset} preset (a miniature: its numbers compare with the paper's only scale-free)"
            )
            items = "".join(f"<li>{E(x)}</li>" for x in lines)
            out.append(f"<h3>{E(task)} — {E(what)}</h3><ul>{items}</ul>")
    return "\n".join(out) or '<p class="note">No task of this folder lists a difference.</p>'
