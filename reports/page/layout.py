"""The page of report.html and what every section of it uses: the CSS, `page`, escaping (`E`), a table's or
figure's name with its variant, the variants' list, the run metadata and warnings, folded details, and the
figures inlined as base64 PNG."""

from __future__ import annotations

import base64
import html
import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.core import safefs
from reports.figures import Figure
from reports.page import words as W
from reports.rundata.variants import display

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; font-size: 15px; line-height: 1.45;
       color: #1a1a1a; margin: 24px auto; max-width: 1500px; padding: 0 24px; background: #fff; }
h1 { font-size: 28px; margin-bottom: 6px; }
h2 { font-size: 22px; border-bottom: 2px solid #ddd; padding-bottom: 4px; margin-top: 36px; }
h3 { font-size: 18px; margin: 22px 0 8px; }
table { border-collapse: collapse; margin: 8px 0 6px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #c8c8c8; padding: 4px 9px; }
th { background: #f0f3f7; font-weight: 600; }
td.num { text-align: right; }
td.grey { background: #c4c4c4; font-weight: 600; }
td.na { text-align: center; color: #8a1c1c; }
td.missing { text-align: center; color: #9a9a9a; }
td.label { font-weight: 600; white-space: nowrap; }
small.n { color: #777; font-size: 0.8em; white-space: nowrap; }
td.detail { font-size: 13px; overflow-wrap: anywhere; }
table.findings { width: 100%; table-layout: fixed; }
table.findings tr.task th { text-align: left; background: #e4e9f0; font-weight: 600; }
table.findings tr.task span.detail { font-weight: normal; color: #444; font-size: 13px; }
.variant { border-bottom: 1px dotted #666; cursor: help; }
tr.first-elastic td { border-top: 2px solid #777; }
tr.group-start td { border-top: 2px solid #999; }
table.meta td, table.meta th { text-align: left; border: none; padding: 2px 14px 2px 0; background: none; }
table.meta th { color: #555; font-weight: 600; }
.note { color: #555; font-style: italic; }
.warn-box { background: #fff6e0; border: 1px solid #e6c56e; padding: 10px 16px; }
.caveat { background: #fdecea; border-left: 5px solid #c0392b; padding: 8px 14px; font-weight: 600; }
figure { margin: 14px 0 28px; }
figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { color: #444; margin-top: 4px; }
.legend { color: #333; font-size: 14px; }
.grey-swatch { background: #c4c4c4; padding: 0 8px; border: 1px solid #999; }
nav a { margin-right: 16px; }
details > summary { cursor: pointer; color: #2a4d8f; font-weight: 600; margin: 6px 0; }
.banner { background: #eef3fb; border-left: 5px solid #3b6db3; padding: 8px 14px; margin: 8px 0; }
table.grid { margin: 4px 0 8px; font-size: 14px; }
table.grid th { font-size: 13px; line-height: 1.2; }
table.grid th small { font-weight: normal; color: #444; }
table.grid td { padding: 2px 8px; }
table.grid td.v { text-align: center; white-space: nowrap; font-weight: 600; line-height: 1.15; }
table.grid td.v small { display: block; font-weight: normal; font-size: 11px; color: #444; white-space: normal; }
table.grid td.blank { color: #999; }
table.grid td.sum { font-size: 13px; max-width: 34em; }
table.grid td.best { font-weight: 600; white-space: nowrap; }
p.key { margin: 2px 0; font-size: 13px; }
p.key .sw { padding: 1px 8px; margin-right: 6px; border: 1px solid #bbb; }
h2#glance { margin-top: 14px; }
h1 { margin-top: 0; }
code { background: #f4f4f4; padding: 1px 4px; overflow-wrap: anywhere; }
td.v { font-weight: 600; }
td.v.none { color: #555; }
"""
# one colour per meaning, the same in every grid, table and key: reports.page.words.COLOURS
CSS += "".join(f"td.v.{cls}, .sw.{cls} {{ background: {colour}; }}\n" for cls, colour in W.COLOURS.items())

E = html.escape


def _td(text: str, cls: str = "num") -> str:
    return f'<td class="{cls}">{E(text)}</td>'


def name_html(name: str, variants: dict[str, str] | None = None) -> str:
    """A table's or figure's name with its variant by its short name, the overrides on hover
    (reports.rundata.variants)."""
    shown, raw = display(name, variants or {})
    if not raw:
        return E(shown)
    head, short = shown[:-1].rsplit("[", 1)
    return f'{E(head)}[<span class="variant" title="{E(raw)}">{E(short)}</span>]'


def variants_html(variants: dict[str, str], c: pd.DataFrame | None = None) -> str:
    """The variants of this folder: each short name with the overrides it stands for; a name that different
    tasks' variants share (reports.rundata.variants) with the tasks of each, from Table 2's cells `c`."""
    named = sorted((short, raw) for raw, short in variants.items() if raw and short != raw)
    if not named:
        return ""
    shared = {short for short, n in Counter(short for short, _ in named).items() if n > 1}
    tasks = {} if c is None or c.empty else c.groupby("variant")["task"].agg(lambda t: ", ".join(sorted(set(t))))

    def head(short: str, raw: str) -> str:
        return f"{short} ({tasks[raw]})" if short in shared and raw in tasks else short

    items = "".join(f"<li><b>{E(head(short, raw))}</b>: <code>{E(raw)}</code></li>" for short, raw in named)
    head = '<p class="legend">Variants (runs with other overrides, in tables of their own):</p>'
    return f'{head}<ul class="legend">{items}</ul>'


MAX_PNG = 64 << 20  # a figure at 100 dpi is ~100 kB


def img_tag(path: Path, alt: str) -> str:
    data = base64.b64encode(safefs.read_bytes(path, MAX_PNG)).decode("ascii")  # no link followed, bounded
    return f'<img alt="{E(alt)}" src="data:image/png;base64,{data}">'


def figures_html(sections: list[tuple[str, str, list[Figure], str]]) -> str:
    """sections: (anchor, heading, figures, note when there are none)."""
    out = []
    for anchor, heading, figs, note in sections:
        out.append(f'<h3 id="{anchor}">{E(heading)}</h3>')
        if not figs:
            out.append(f'<p class="note">Omitted: {E(note)}.</p>')
        shared = shared_caption([f.caption for f in figs])
        if shared:  # what every figure of the family says: once, above them
            out.append(f'<p class="legend">{E(shared)}</p>')
        for f in figs:
            title = f'<span class="variant" title="{E(f.variant)}">{E(f.title)}</span>' if f.variant else E(f.title)
            own = f.caption[len(shared) :].strip()
            out.append(f"<figure>{img_tag(f.path, f.title)}<figcaption><b>{title}.</b> {E(own)}</figcaption></figure>")
    return "\n".join(out)


def shared_caption(captions: list[str]) -> str:
    """The sentences every caption of a figure family begins with ("" for one figure or none in common)."""
    if len(captions) < 2:
        return ""
    common = os.path.commonprefix(captions)
    cut = common.rfind(". ") + 1 if not all(c == common for c in captions) else len(common)
    return common[:cut] if cut > 0 else ""


def meta_html(root: Path, runs: pd.DataFrame, n_warnings: int, generated: str) -> str:
    counts = runs["status"].value_counts().to_dict() if not runs.empty else {}
    order = ["completed", "diverged", "failed", "running", "pending", "unreadable"]
    status = ", ".join(f"{counts[k]} {k}" for k in order if k in counts) or "none"
    rows = [
        ("results folder", f"<code>{E(folder_name(root))}</code>"),
        ("generated", E(generated)),
        ("runs", f"{len(runs)} ({E(status)})"),
    ]
    if not runs.empty:
        rows.append(("tasks", E(", ".join(sorted(runs["task"].dropna().unique())))))
        presets = sorted(p for p in runs["preset"].dropna().unique() if p)
        rows.append(("presets", E(", ".join(presets) or "?")))
        commits = sorted(c for c in runs["git_commit"].dropna().unique() if c)
        rows.append(("git commit", E(", ".join(commits) or "unknown")))
        versions = sorted(v for v in runs["versions"].dropna().unique() if v)
        for v in versions or [None]:
            text = "unknown" if v is None else ", ".join(f"{k} {val}" for k, val in json.loads(v).items())
            rows.append(("versions", E(text)))
        failed = runs[runs["status"] == "failed"]
        for r in failed.itertuples():
            rows.append(("failed run", f"<code>{E(r.run_dir)}</code>: {E(str(r.error or ''))[:300]}"))
    warn = f'<a href="#warnings">{n_warnings} warning(s)</a>' if n_warnings else "none"
    rows.append(("warnings", warn))
    return '<table class="meta">' + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def folder_name(root: Path) -> str:
    """The results folder as the page names it: its own name, never the machine's path to it."""
    return Path(root).resolve().name or str(root)


def unrooted(page_text: str, root: Path) -> str:
    """The page with no machine path in it: the results folder's absolute path (in a warning, a failed run's
    folder) written relative to the folder, the folder itself by its name."""
    for path in {str(Path(root).resolve()), str(Path(root).absolute())}:
        if len(Path(path).parts) < 3:  # "/" or "/x": too short to tell from text
            continue
        for form in (path, E(path)):
            page_text = page_text.replace(form + "/", "").replace(form, folder_name(root))
    return page_text


def warnings_html(items: Sequence[str]) -> str:
    if not items:
        return '<p class="note">None: every file was read.</p>'
    lis = "".join(f"<li><code>{E(w)}</code></li>" for w in items)
    return f'<div class="warn-box"><ul>{lis}</ul></div>'


def on_demand(summary: str, body: str) -> str:
    """A detail the grid at the top already sums up: folded, opened on a click (<details>)."""
    return f"<details><summary>{E(summary)}</summary>\n{body}\n</details>"


def page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{E(title)}</title><style>{CSS}</style></head><body>\n{body}\n</body></html>\n"
    )
