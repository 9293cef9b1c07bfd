"""What differs from the paper, per task and preset that ran, only where that changes a comparison, grouped: a
preset's S against the paper's, its learning-rate schedule, and the miniature in one line; or the paper
preset's own necessary differences (its card's `differs`)."""

from __future__ import annotations

from collections.abc import Sequence

from reports.page.layout import E

SHOWN_KEYS = ("T1", "batch_size", "lr_schedule", "model", "data", "elastic", "scales")  # what a reader compares
NAMES = {"batch_size": "batch b", "T1": "T1 (S = 1's iterations)"}  # a key in words
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


def _pairs(keys: list[str], mine: dict[str, object], paper: dict[str, object]) -> str:
    """`lr0 0.05 (paper 0.1), decay 0.1 (paper 0.01)`: each key's last part, ours and the paper preset's."""
    out = []
    for key in keys:
        theirs = f" (paper {_value(paper[key])})" if key in paper else ""
        out.append(f"{NAMES.get(key, key.rsplit('.', 1)[-1])} {_value(mine[key])}{theirs}")
    return ", ".join(out)


def _scales(mine: dict[str, object], paper: dict[str, object], ran: Sequence[int] | None = None) -> str:
    """Where our S meet the paper's: the S in common, else none; the elastic schedules beside. Ours are the S the
    folder's runs used (`ran`) where known, else the preset's list."""
    ours = sorted(ran) if ran else [int(x) for x in mine.get("scales", []) or []]  # type: ignore[union-attr]
    theirs = [int(x) for x in paper.get("scales", []) or []]  # type: ignore[union-attr]
    common = sorted(set(ours) & set(theirs) - {1})
    met = f"in common: S = {', '.join(map(str, common))}" if common else "no S > 1 in common"
    line = f"ours {_value(ours)}, the paper's {_value(theirs)} ({met})"
    if "elastic" in mine and mine.get("elastic") != paper.get("elastic"):
        line += f"; elastic {_value(mine['elastic'])} (paper {_value(paper.get('elastic', {}))})"
    return line


def preset_lines(task: str, preset: str, ran: Sequence[int] | None = None) -> list[str]:
    """How the preset that ran differs from the paper, only where that changes a comparison, grouped: the
    paper preset's own necessary differences (its card's `differs`), or for another preset three lines —
    where its S meet the paper's, the learning-rate schedule (what S = 1 reaches, so every Δmetric), and
    the miniature in one line (size, budget, data: the absolute numbers it makes incomparable). `ran`: the fixed
    S the folder's runs of this task and preset used (a smoke runs imagenet at S = 16, not its preset's list)."""
    from tasks.presets import card

    c = card(task)
    if preset == "paper" or "paper" not in c.presets:
        return list(c.differs)
    mine = _flat({k: v for k, v in c.presets.get(preset, {}).items() if k in SHOWN_KEYS})
    paper = _flat({k: v for k, v in c.presets["paper"].items() if k in SHOWN_KEYS})
    changed = [k for k, v in mine.items() if paper.get(k) != v]
    lines = [f"S: {_scales(mine, paper, ran)}"] if "scales" in changed or "elastic" in changed or ran else []
    lr = [k for k in changed if k.startswith("lr_schedule.")]
    if lr:
        lines.append(f"learning rate (what S = 1 reaches, so every Δmetric): {_pairs(lr, mine, paper)}")
    size = [k for k in changed if k in ("T1", "batch_size")]
    model = sum(k.startswith("model.") for k in changed)
    data = sum(k.startswith("data.") for k in changed)
    parts = [_pairs(size, mine, paper)] if size else []
    parts += [f"a smaller model ({model} setting{'s' * (model > 1)})"] if model else []
    if preset == "tiny":
        parts.append("the tiny data set of the task's real format, written on first use")
    elif data:
        parts.append(f"other data settings ({data})")
    if parts:
        lines.append(f"a miniature (absolute numbers not comparable, scale-free ones are): {', '.join(parts)}")
    return lines


def _item(line: str) -> str:
    """A grouped line with its group in bold (`S: …`, `learning rate …: …`); a card's line as it is."""
    head, sep, rest = line.partition(": ")
    return f"<b>{E(head)}</b>: {E(rest)}" if sep and len(head) < 70 and preset_group(head) else E(line)


def preset_group(head: str) -> bool:
    return head == "S" or head.startswith(("learning rate", "a miniature"))


def differs_html(tasks: Sequence[str], presets: dict[str, dict[str, list[int]]] | None = None) -> str:
    """Per task and preset that ran (`presets`: task -> preset -> the fixed S its runs used): what differs from
    the paper — a tiny preset's values beside the paper preset's, the paper preset's necessary differences (the
    card's `differs`)."""
    out = []
    for task in tasks:
        ran = (presets or {}).get(task) or {"paper": []}
        for preset, scales in ran.items():
            try:
                lines = preset_lines(task, preset, scales)
            except Exception:  # a task without a card: nothing to list
                continue
            if not lines:
                continue
            what = (
                "the paper preset, by necessity"
                if preset == "paper"
                else f"the {preset} preset, where that changes a comparison"
            )
            items = "".join(f"<li>{_item(x)}</li>" for x in lines)
            out.append(f"<h3>{E(task)} — {E(what)}</h3><ul>{items}</ul>")
    return "\n".join(out) or '<p class="note">No task of this folder lists a difference.</p>'
