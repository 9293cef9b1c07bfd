"""report.html's tables: Table 2, the paper's findings as checks, the scale-free comparison, the absolute
comparison with the paper (its `paper` preset runs only) and the sweep's epochs to target."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from bench.core.methods import label, title
from reports.page import words as W
from reports.page.layout import E, _td, name_html
from reports.speed.scalefree import _delta, paper_quality
from reports.stats import noninferiority as NI
from reports.stats import numbers as N
from reports.stats.numbers import decimals, fmt_iterations, fmt_value
from reports.tables.table2 import LEGEND, MISSING, NA, NO_RUNS, views
from reports.verdicts import findings as FD


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
        if v.pilot:
            out.append(f'<p class="legend">{E(v.pilot)}</p>')
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


def sweep_table_html(st: pd.DataFrame) -> str:
    if st.empty:
        return ""
    out = []
    for task, t in st.groupby("task"):
        methods = list(dict.fromkeys(t["method"]))
        out.append(f"<h4>{E(str(task))}: epochs to target</h4><table><tr><th>batch</th>")
        out.append("".join(f"<th>{E(title(str(m)))}</th>" for m in methods) + "</tr>")
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
            said = W.claim_word(r.check, r.status)
            out.append(
                f"<tr><td>({E(r.check)}) {E(r.finding)}</td>"
                f'<td class="v {said.colour}">{E(W.with_reason(said.word, r.status, r.detail))}</td>'
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
                _td(title(r.method), "label"),
                _td(str(r.scale), "label"),
                _td(_num(r.n_seeds, ".0f")),
            ]
            tds.append(_td(d_ours[k], "na" if d_ours[k] == NA else "missing" if d_ours[k] == MISSING else "num"))
            tds.append(_paper_delta(d_paper[k], r.paper_d_metric, paper_margin))
            for v, fmt in ((r.speedup, N.speedup), (r.paper_speedup, N.speedup)):
                tds.append(_td(fmt(v), "missing" if fmt(v) == N.MISSING else "num"))
            for v in (r.efficiency, r.paper_efficiency):
                tds.append(_td(N.efficiency(v), "missing" if N.efficiency(v) == N.MISSING else "num"))
            flag = r.quality if isinstance(r.quality, str) else ""
            tds.append(_td(f"✗ {flag}" if flag else "", f"v {W.RULE[FD.FAILS].colour}" if flag else "label"))
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
