"""report.html: one self-contained file (inline CSS, figures inlined as base64 PNG, no external links)."""

from __future__ import annotations

import base64
import html
import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench import safefs
from bench.algo.rules import label

from .. import noninferiority as NI
from ..figures import Figure
from ..scalefree import _delta, paper_quality
from ..table2 import LEGEND, MISSING, NA, NO_RUNS, decimals, fmt_iterations, fmt_value, views
from ..variants import display

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
td.holds { background: #e3f4e1; font-weight: 600; white-space: nowrap; }
td.fails { background: #f9dcdc; font-weight: 600; white-space: nowrap; }
td.seeds, td.notrun { background: #f3f3f3; color: #555; white-space: nowrap; }
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
table.grid td.v small { display: block; font-weight: normal; font-size: 11px; color: #444; }
table.grid td.ok { background: #cdebc9; }
table.grid td.bad { background: #f4c2c2; }
table.grid td.open { background: #fbe7b5; }
table.grid td.none { background: #e6e6e6; color: #555; }
table.grid td.blank { color: #999; }
table.grid td.sum { font-size: 13px; max-width: 34em; }
table.grid td.best { font-weight: 600; white-space: nowrap; }
p.key { margin: 2px 0; font-size: 13px; }
p.key .sw { padding: 1px 8px; margin-right: 6px; border: 1px solid #bbb; }
.sw.ok { background: #cdebc9; } .sw.bad { background: #f4c2c2; } .sw.open { background: #fbe7b5; }
.sw.none { background: #e6e6e6; }
h2#glance { margin-top: 14px; }
h1 { margin-top: 0; }
code { background: #f4f4f4; padding: 1px 4px; overflow-wrap: anywhere; }
"""

E = html.escape


def _td(text: str, cls: str = "num") -> str:
    return f'<td class="{cls}">{E(text)}</td>'


def name_html(name: str, variants: dict[str, str] | None = None) -> str:
    """A table's or figure's name with its variant by its short name, the overrides on hover (reports.variants)."""
    shown, raw = display(name, variants or {})
    if not raw:
        return E(shown)
    head, short = shown[:-1].rsplit("[", 1)
    return f'{E(head)}[<span class="variant" title="{E(raw)}">{E(short)}</span>]'


def variants_html(variants: dict[str, str], c: pd.DataFrame | None = None) -> str:
    """The variants of this folder: each short name with the overrides it stands for; a name that different
    tasks' variants share (reports.variants) with the tasks of each, from Table 2's cells `c`."""
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


def table2_html(c: pd.DataFrame, std: bool = False, variants: dict[str, str] | None = None) -> str:
    if c.empty:
        return f'<p class="note">{E(NO_RUNS)}</p>'
    out = []
    for v in views(c, std):
        direction = "higher" if v.higher_is_better else "lower"
        note = f"<small>— validation {E(v.metric_label)}, {direction} is better</small>"
        out.append(f"<h3>{name_html(v.name, variants)} {note}</h3>")
        out.append("<table>")
        out.append(
            '<tr><th rowspan="2">S</th><th rowspan="2">total batch</th>'
            + "".join(f'<th colspan="{len(v.methods)}">{E(g)}</th>' for g in v.groups)
            + "</tr>"
        )
        out.append("<tr>" + "".join(f"<th>{E(lab)}</th>" for _ in v.groups for _, lab in v.methods) + "</tr>")
        first_elastic = True
        for scale, total, cells in v.rows:
            cls = ""
            if scale.startswith("elastic") and first_elastic:
                cls, first_elastic = ' class="first-elastic"', False
            tds = [_td(scale, "label"), _td(total)]
            for cell in cells:
                kind = "grey num" if cell.grey else {"na": "na", "missing": "missing"}.get(cell.kind, "num")
                hover = "; ".join(h for h in ("significantly worse than S = 1" if cell.grey else "", cell.hover) if h)
                title = f' title="{E(hover)}"' if hover else ""
                note = f"<sup>{E(cell.note)}</sup>" if cell.note else ""
                n = f' <small class="n">{E(cell.seeds)}</small>' if cell.seeds else ""
                tds.append(f'<td class="{kind}"{title}>{E(cell.text)}{note}{n}</td>')
            out.append(f"<tr{cls}>" + "".join(tds) + "</tr>")
        out.append("</table>")
        if v.notes:
            items = "".join(f"<li>{E(n)}</li>" for n in v.notes)
            out.append(f'<ol class="legend footnotes">{items}</ol>')
        if v.noise:
            out.append(f'<p class="legend">{E(v.noise)}</p>')
    legend = LEGEND.replace("† grey:", "").strip()
    out.append(f'<p class="legend"><span class="grey-swatch">&nbsp;</span> {E(legend)}</p>')
    return "\n".join(out)


def _fmt(v: float, iterations: bool) -> str:
    return fmt_iterations(v) if iterations else fmt_value(v)


def _diff(v: float, ref: float, iterations: bool) -> str:
    if not math.isfinite(v):
        return MISSING
    if iterations:
        return f"{round(v):+d}"
    return f"{v:+.{decimals(ref if math.isfinite(ref) else v)}f}"


def comparison_html(
    comp: pd.DataFrame, note: str, tasks_without_paper: Sequence[str], variants: dict[str, str] | None = None
) -> str:
    out = []
    if note:
        out.append(f'<p class="caveat">{E(note)}</p>')
    if comp.empty:
        out.append('<p class="note">No task of this folder is in the paper\'s Table 2.</p>')
    for name, t in comp.groupby("table", sort=False):
        key = str(t["metric_key"].iloc[0]) if "metric_key" in t and isinstance(t["metric_key"].iloc[0], str) else ""
        out.append(f"<h3>{name_html(name, variants)}</h3><table>")
        out.append(
            '<tr><th rowspan="2">S</th><th rowspan="2">method</th><th colspan="2">total batch</th>'
            f'<th colspan="3">validation metric{f" ({E(key)})" if key else ""}</th><th colspan="3">training loss</th>'
            '<th colspan="3">iterations</th><th rowspan="2">seeds</th></tr>'
        )
        out.append("<tr>" + "<th>ours</th><th>paper</th>" + "<th>ours</th><th>paper</th><th>Δ</th>" * 3 + "</tr>")
        prev = None
        for r in t.itertuples():
            cls = ' class="group-start"' if prev is not None and r.scale != prev else ""
            prev = r.scale
            tds = [_td(r.scale, "label"), _td(label(r.method), "label")]
            tds += [_td(fmt_iterations(r.total_batch_ours)), _td(fmt_iterations(r.total_batch_paper))]
            for short in ("metric", "loss", "iterations"):
                it = short == "iterations"
                ours, paper, diff = (getattr(r, f"{short}_{k}") for k in ("ours", "paper", "diff"))
                for val, status in ((ours, r.status_ours), (paper, r.status_paper)):
                    if status == "na" and not it:
                        tds.append(_td(NA, "na"))
                    elif status == "missing" or not math.isfinite(val):
                        tds.append(_td(MISSING, "missing"))
                    else:
                        tds.append(_td(_fmt(val, it)))
                d = _diff(diff, paper, it)
                tds.append(_td(d, "missing" if d == MISSING else "num"))
            tds.append(_td(str(r.n_seeds)))
            out.append(f"<tr{cls}>" + "".join(tds) + "</tr>")
        out.append("</table>")
    if len(comp):
        out.append('<p class="legend">Δ = ours − paper. N/A: diverged. –: no value on that side.</p>')
    if tasks_without_paper:
        out.append(f'<p class="note">Not in the paper\'s Table 2: {E(", ".join(tasks_without_paper))}.</p>')
    return "\n".join(out)


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
            out.append(
                f"<figure>{img_tag(f.path, f.title)}<figcaption><b>{title}.</b> {E(own)} "
                f"<code>{E(f.path.name)}</code></figcaption></figure>"
            )
    return "\n".join(out)


def shared_caption(captions: list[str]) -> str:
    """The sentences every caption of a figure family begins with ("" for one figure or none in common)."""
    if len(captions) < 2:
        return ""
    common = os.path.commonprefix(captions)
    cut = common.rfind(". ") + 1 if not all(c == common for c in captions) else len(common)
    return common[:cut] if cut > 0 else ""


def sweep_table_html(st: pd.DataFrame) -> str:
    if st.empty:
        return ""
    out = []
    for task, t in st.groupby("task"):
        methods = list(dict.fromkeys(t["method"]))
        out.append(f"<h4>{E(str(task))}: epochs to target</h4><table><tr><th>batch</th>")
        out.append("".join(f"<th>{E(str(m))}</th>" for m in methods) + "</tr>")
        for batch, b in t.groupby("batch"):
            tds = [_td(str(batch), "label")]
            for m in methods:
                r = b[b["method"] == m]
                if r.empty:
                    tds.append(_td(MISSING, "missing"))
                elif not bool(r["reached"].iloc[0]):
                    tds.append(_td("not reached", "na"))
                else:
                    tds.append(_td(f"{r['epochs_to_target'].iloc[0]:.2f}"))
            out.append("<tr>" + "".join(tds) + "</tr>")
        out.append("</table>")
    return "\n".join(out)


def meta_html(root: Path, runs: pd.DataFrame, n_warnings: int, generated: str) -> str:
    counts = runs["status"].value_counts().to_dict() if not runs.empty else {}
    order = ["completed", "diverged", "failed", "running", "pending", "unreadable"]
    status = ", ".join(f"{counts[k]} {k}" for k in order if k in counts) or "none"
    rows = [
        ("results folder", f"<code>{E(str(Path(root).resolve()))}</code>"),
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


_STATUS_CLASS = {
    "holds": "holds",
    "does not hold": "fails",
    "inconclusive": "seeds",
    "not testable here": "notrun",
    "not run": "notrun",
}


def findings_html(f: pd.DataFrame, legend: str, variants: dict[str, str] | None = None) -> str:
    """The paper's findings as checks: one table, a heading row per task (with its B_simple) and a row per
    check under it; a fixed layout of the page's width, so a long name or detail wraps instead of widening it."""
    if f.empty:
        return '<p class="note">No Table 2 runs: nothing to check.</p>'
    out = [
        '<table class="findings"><colgroup><col style="width: 27%"><col style="width: 10.5em"><col></colgroup>',
        "<tr><th>finding</th><th>status</th><th>what was compared</th></tr>",
    ]
    for table, t in f.groupby("table", sort=False):
        head = t.iloc[0]
        noise = (
            f'<span class="detail">noise scale {E(str(head.get("noise", "")))}; largest S·b '
            f"{E(_num(head.get('max_total_batch', math.nan), ',.0f'))}; margin {E(str(head.get('margin_rule', '')))}"
            "</span>"
        )
        out.append(f'<tr class="task group-start"><th colspan="3">{name_html(table, variants)} — {noise}</th></tr>')
        for r in t.itertuples():
            out.append(
                f"<tr><td>({E(r.check)}) {E(r.finding)}</td>"
                f'<td class="{_STATUS_CLASS.get(r.status, "")}">{E(r.status)}</td>'
                f'<td class="detail">{E(r.detail)}</td></tr>'
            )
    out.append("</table>")
    out.append(f'<p class="legend">{E(legend)}</p>')
    return "\n".join(out)


def _num(v: float, fmt: str) -> str:
    return MISSING if v is None or not isinstance(v, int | float) or not math.isfinite(v) else format(v, fmt)


def scalefree_html(sf: pd.DataFrame, variants: dict[str, str] | None = None) -> str:
    """Δmetric, speed-up and efficiency per (table, method, S), ours beside the paper's."""
    if sf.empty:
        return '<p class="note">No Table 2 runs.</p>'
    out = [
        '<p class="legend">Δmetric: mean validation metric at S against S = 1 of the same method, + = better '
        "(a higher accuracy, a lower loss). Quality ✗: the cell misses S = 1's metric by more than the findings' "
        "margin Δ, or diverged; its speed-up is no success. Speed-up: T1 / "
        "iterations (S = 1 runs T1 iterations; ours: the runs' T1, the paper's: its S = 1 row). Efficiency: "
        "T1 / (S · iterations), 1 = perfect linear scaling. These ratios compare across run sizes, so tiny "
        "runs are compared with the paper here (and only here). Diverged cells: N/A, their speed-up from the "
        "planned iterations. A grey paper Δmetric: the paper's own degraded cell (below −Δ of its preset's "
        "margin).</p>"
    ]
    for table, t in sf.groupby("table", sort=False):
        paper_margin = NI.card_margin(str(t["task"].iloc[0]), "paper")[0]  # Δ of the paper preset, on its points
        out.append(f"<h3>{name_html(table, variants)}</h3><table>")
        out.append(
            '<tr><th rowspan="2">method</th><th rowspan="2">S</th><th rowspan="2">seeds</th>'
            '<th colspan="2">Δmetric (+ better)</th><th colspan="2">speed-up</th><th colspan="2">efficiency</th>'
            '<th rowspan="2">quality</th></tr>'
        )
        out.append("<tr>" + "<th>ours</th><th>paper</th>" * 3 + "</tr>")
        prev = None
        d_ours, d_paper = _delta(t["d_metric"], t["diverged"]), _delta(t["paper_d_metric"], t["paper_diverged"])
        for k, r in enumerate(t.itertuples()):
            cls = ' class="group-start"' if prev is not None and r.method != prev else ""
            prev = r.method
            tds = [
                _td(label(r.method), "label"),
                _td(str(r.scale), "label"),
                _td(_num(r.n_seeds, ".0f")),
            ]
            tds.append(_td(d_ours[k], "na" if d_ours[k] == NA else "missing" if d_ours[k] == MISSING else "num"))
            tds.append(_paper_delta(d_paper[k], r.paper_d_metric, paper_margin))
            for a, b in ((r.speedup, r.paper_speedup), (r.efficiency, r.paper_efficiency)):
                for v in (a, b):
                    text = _num(v, ".2f")
                    tds.append(_td(text, "missing" if text == MISSING else "num"))
            flag = r.quality if isinstance(r.quality, str) else ""
            tds.append(_td(f"✗ {flag}" if flag else "", "fails" if flag else "label"))
            out.append(f"<tr{cls}>" + "".join(tds) + "</tr>")
        out.append("</table>")
    return "\n".join(out)


def _paper_delta(text: str, value: float, margin: float | None) -> str:
    """The paper's Δmetric cell, grey where the paper's own cell is worse than its S = 1 by more than the paper
    preset's margin (the degradations the paper reports, cifar10 LSW S = 64's −17.50 among them)."""
    if text in (NA, MISSING):
        return _td(text, "na" if text == NA else "missing")
    if not paper_quality(value, False, margin):  # the rule the efficiency figure crosses its cells by
        return _td(text)
    return f'<td class="grey num" title="the paper\'s own degraded cell: below −Δ = −{margin:g}">{E(text)}</td>'


def absolute_html(
    comp: pd.DataFrame, note: str, tasks_without_paper: Sequence[str], variants: dict[str, str] | None = None
) -> str:
    """The absolute comparison, for runs of the `paper` preset only; tiny runs are said to be left out."""
    paper_runs = comp[comp["preset"] == "paper"] if not comp.empty else comp
    left_out = sorted(set(comp["preset"].dropna()) - {"paper"}) if not comp.empty else []
    out = []
    if left_out:
        out.append(
            f'<p class="caveat">Runs of the {E(", ".join(p or "?" for p in left_out))} preset are left out here: '
            "small models on small data, a few hundred iterations — their absolute metrics, losses and "
            "iteration counts say nothing about the paper's. They are compared on scale-free terms above.</p>"
        )
    if paper_runs.empty:
        if not left_out:
            out.append(comparison_html(paper_runs, note, tasks_without_paper, variants))
        elif tasks_without_paper:
            out.append(f'<p class="note">Not in the paper\'s Table 2: {E(", ".join(tasks_without_paper))}.</p>')
        return "\n".join(out)
    out.append(comparison_html(paper_runs, "", tasks_without_paper, variants))
    return "\n".join(out)


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
