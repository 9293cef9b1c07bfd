"""The scaling rules compared: every Table 2 rule against S = 1 at each S, and the rules at a glance.

A rule's verdict at S is its non-inferiority to its own S = 1 (the shared run for a rule that is identity
scaling there) by the same rule as the paper's finding (i), through the same code (reports.verdicts.findings:
`compare` and `_non_inferior`): the Welch interval of the difference of the means (positive = better)
against −Δ, ≥ 3 seeds a side; `holds` when `within`, `does not hold` when `worse` or a seed failed (diverged or
collapsed, reports.rundata.failedseeds), else
`inconclusive`; `not run` without an S = 1 run. The paper's findings (i)–(v) stay about AdaScale and LSW.

At a glance, per table (task, preset, variant): each rule at the table's largest fixed S, with Δ to S = 1
and its interval, the speed-up T1/iterations (mean over its completed seeds) and the verdict. Written as
rule_verdicts.csv (every rule × S), rules_at_a_glance.csv, rules.txt (what `report` prints) and in the HTML.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd

from reports.page import words as W
from reports.rundata import guards
from reports.rundata.collect import Results, rule_rows, scale_order
from reports.speed import scalefree as SF
from reports.stats import noninferiority as NI
from reports.stats import numbers as N
from reports.tables.table2 import cells_of, place, table_runs, tables
from reports.verdicts import findings as FD

COLUMNS = [
    "table",
    "task",
    "preset",
    "variant",
    "method",
    "label",
    "title",  # the rule's name in prose and grids (the method table's title: AdaScale, LSW, LSW+)
    "scale",
    "n",
    "n_base",
    "diff",
    "lo",
    "hi",
    "margin",
    "speedup",
    "status",
    "detail",
    "decide",  # an inconclusive verdict: the seeds a side that would decide it (NI.seeds_to_decide), else ""
]


def _speedups(res: Results) -> dict[tuple[str, str, str], float]:
    """(table, method, S) → the cell's speed-up, the one number the scale-free comparison prints
    (reports.stats.numbers.cell_speedup over Table 2's cells): computed there, read here."""
    sf = SF.ours(cells_of(res), res.runs)
    return {(str(r.table), str(r.method), str(r.scale)): float(r.speedup) for r in sf.itertuples()}


def verdicts(res: Results) -> pd.DataFrame:
    """COLUMNS: one row per table, Table 2 rule and fixed S ≠ 1 at which the rule has runs."""
    df = table_runs(res.runs)
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows_of = rule_rows(df)
    speed = _speedups(res)
    rows = []
    for tab in tables(df):
        t, higher = FD.confirmatory(tab.runs)[0], tab.higher
        margin = FD.margin_of(res, t, higher)  # the table's Δ, as finding (i) judges it
        limits = margin.bounds(higher)
        for method in sorted(set(t["method"]), key=place):
            fixed = NI.fixed_scales(t, method)
            base = fixed.get("1")
            for scale, g in fixed.items():
                if scale == "1":
                    continue
                row = {"table": tab.name, "task": tab.task, "preset": tab.preset, "variant": tab.variant}
                row |= {"method": method}
                row |= {"label": rows_of[method].label, "title": rows_of[method].title, "scale": scale}
                row |= {"speedup": speed.get((tab.name, method, str(scale)), math.nan)}
                if base is None:
                    c = NI.compare(NI.metric_values(g), np.array([]), higher, margin.delta, limits, margin.share)
                    status, detail = FD.NOT_RUN, "no S = 1 run to compare with"
                else:
                    c = NI.compare(
                        NI.metric_values(g), NI.metric_values(base), higher, margin.delta, limits, margin.share
                    )
                    status, detail = FD._non_inferior([(f"S = {scale}", g, base)], higher, margin)
                row |= {"n": c.n, "n_base": c.n_base, "diff": c.diff, "lo": c.lo, "hi": c.hi, "margin": c.margin}
                decide = ""
                if status == FD.INCONCLUSIVE and base is not None:
                    decide = NI.decide_text(NI.seeds_to_decide(NI.metric_values(g), NI.metric_values(base), c.margin))
                rows.append(row | {"status": status, "detail": detail, "decide": decide})
    return pd.DataFrame(rows, columns=COLUMNS)


def at_a_glance(v: pd.DataFrame, res: Results) -> pd.DataFrame:
    """Per table, every rule at the table's largest fixed S (a rule without runs there: `not run`)."""
    if v.empty:
        return v
    out = []
    present = table_runs(res.runs)
    for _, t in v.groupby("table", sort=False):
        top = max(t["scale"], key=scale_order)
        first = t.iloc[0]
        mine = present[(present["task"] == first["task"]) & (present["preset"] == first["preset"])]
        mine = mine[mine["variant"] == first["variant"]]
        labels = rule_rows(mine)
        for method in sorted(set(mine["method"]), key=place):
            hit = t[(t["method"] == method) & (t["scale"] == top)]
            if len(hit):
                out.append(hit.iloc[0].to_dict())
                continue
            blank = dict.fromkeys(("n", "n_base", "diff", "lo", "hi", "margin", "speedup"), math.nan) | {"decide": ""}
            out.append(
                {
                    **first.to_dict(),
                    **blank,
                    "method": method,
                    "label": labels[method].label,
                    "title": labels[method].title,
                }
                | {"scale": top}
                | {"status": FD.NOT_RUN, "detail": f"no run at S = {top}"}
            )
    return pd.DataFrame(out, columns=COLUMNS)


def _delta(r: pd.Series) -> str:
    """'+0.10 [−0.52, +0.72]' (the Welch interval of the difference, one-sided 95 % bounds), '–' without one."""
    if not isinstance(r["diff"], float) or not math.isfinite(r["diff"]):
        return "–"
    m = r["margin"]
    d = max(2, math.ceil(-math.log10(m)) + 1) if isinstance(m, float) and math.isfinite(m) and m > 0 else 2
    text = f"{r['diff']:+.{d}f}"
    if math.isfinite(r["lo"]):
        text += f" [{r['lo']:+.{d}f}, {r['hi']:+.{d}f}]"
    return text


def _decide(r: pd.Series) -> str:
    """An inconclusive verdict's '~N seeds a side would decide', '' for any other."""
    return r["decide"] if isinstance(r.get("decide"), str) else ""


def verdict(status: str, detail: str = "") -> str:
    """A rule's verdict in the page's words (reports.page.words): keeps, worse, inconclusive, not testable (its
    reason) or not run."""
    return W.rule_text(status, detail)


def text(glance: pd.DataFrame) -> str:
    """The glance as `report` prints it: one block per table, one line per rule."""
    if glance.empty:
        return "rules at a glance: no Table 2 rule with runs at an S > 1 and at S = 1"
    out = []
    for table, t in glance.groupby("table", sort=False):
        out.append(f"{table}: rules at S = {t['scale'].iloc[0]} against S = 1 (Δ, positive = better; −Δ margin)")
        width = max(len(str(x)) for x in t["label"])
        for _, r in t.iterrows():
            seeds = "" if not math.isfinite(r["n"]) else f"  n={int(r['n'])}/{int(r['n_base'])}"
            said = verdict(r["status"], r["detail"])
            line = f"  {r['label']:<{width}}  {said:<24}  Δ {_delta(r):<24} speed-up {N.speedup(r['speedup'])}"
            out.append(line + seeds + (f"  ({r['decide']})" if _decide(r) else ""))
    return "\n".join(out) + "\n" + LEGEND


LEGEND = (
    "Each rule against its own S = 1 (the shared run where the rule is identity scaling at S = 1) by finding "
    "(i)'s rule: the Welch interval of the difference (one-sided 95 % bounds) against the margin −Δ, "
    f"≥ {NI.MIN_SEEDS} seeds a side: keeps (S = 1's quality: within the margin), worse (below it, or a seed "
    "failed: diverged, or collapsed: no better than untrained or chance), inconclusive (fewer seeds, or an "
    "interval across the margin), "
    "not testable (saturated: S = 1 already at the metric's best), not run. Speed-up: T1 / mean iterations."
)


def glance_html(glance: pd.DataFrame, v: pd.DataFrame, variants: dict[str, str] | None = None) -> str:
    """Per table: the glance at the largest S, then the verdict of every rule at every S (a variant by its
    short name, the overrides on hover: reports.rundata.variants)."""
    from reports.page import name_html

    E = html.escape
    if glance.empty:
        return '<p class="note">No Table 2 rule with runs at S = 1 and at a larger S.</p>'
    out = []
    for table, t in glance.groupby("table", sort=False):
        at = E(str(t["scale"].iloc[0]))
        out.append(f"<h3>{name_html(str(table), variants)} <small>— at S = {at}</small></h3><table>")
        out.append(
            "<tr><th>rule</th><th>Δ to S = 1 [interval]</th><th>speed-up</th><th>verdict</th><th>seeds</th></tr>"
        )
        for _, r in t.iterrows():
            seeds = "–" if not math.isfinite(r["n"]) else f"{int(r['n'])} vs {int(r['n_base'])}"
            cells = [r["title"], _delta(r), N.speedup(r["speedup"])]
            tds = "".join(f'<td class="num">{E(str(c))}</td>' for c in cells[1:])
            cls = W.rule_word(str(r["status"])).colour
            decide = f"<br><small>{E(_decide(r))}</small>" if _decide(r) else ""
            said = (
                f'<td class="v {cls}" title="{E(str(r["detail"]))}">{E(verdict(r["status"], r["detail"]))}{decide}</td>'
            )
            out.append(f'<tr><td class="label">{E(str(cells[0]))}</td>{tds}{said}<td>{E(seeds)}</td></tr>')
        out.append("</table>")
        every = v[v["table"] == table]
        scales = sorted(set(every["scale"]), key=scale_order)
        out.append("<table><tr><th>rule \\ S</th>" + "".join(f"<th>{E(str(s))}</th>" for s in scales) + "</tr>")
        for method in sorted(set(every["method"]), key=place):
            mine = every[every["method"] == method].set_index("scale")
            tds = []
            for s in scales:
                if s not in mine.index:
                    tds.append('<td class="missing">–</td>')
                    continue
                r = mine.loc[s]
                cls = W.rule_word(str(r["status"])).colour
                decide = f"<br><small>{E(_decide(r))}</small>" if _decide(r) else ""
                said = f"{E(verdict(r['status'], r['detail']))}{decide}"
                tds.append(f'<td class="v {cls}" title="{E(str(r["detail"]))}">{said}</td>')
            out.append(f'<tr><td class="label">{E(str(mine["title"].iloc[0]))}</td>{"".join(tds)}</tr>')
        out.append("</table>")
    note = f"{LEGEND} Hover a verdict for its numbers; every rule × S in rule_verdicts.csv."
    out.append(f'<p class="legend">{E(note)}</p>')
    return "\n".join(out)


def to_csv(f: pd.DataFrame) -> str:
    """rule_verdicts.csv, rules_at_a_glance.csv: the status in the page's words (reports.page.words)."""
    if not f.empty:
        f = f.assign(status=[verdict(s, d) for s, d in zip(f["status"], f["detail"], strict=True)])
    return guards.csv_safe(f).to_csv(index=False, float_format="%.6g")  # no cell a formula
