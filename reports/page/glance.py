"""The verdict grid at the top of the report: what a researcher asks first — did the paper's claims reproduce
here, and which rule keeps S = 1's quality at which S — before any detail.

- A banner says what kind of folder this is (pipeline smoke, positive control, paper matrix: from the
  matrices `submit` recorded in matrix.json, else from the presets and variant names of its runs) and what
  it can and cannot show.
- The findings grid: one row per table (task, preset, variant), one cell per claim (i)–(v) with its status in
  one or two words (reports.verdicts.findings' statuses, unchanged), the seeds it rests on under it, and a one-line
  summary of the row.
- The rules grid: one row per table and S, one cell per Table 2 rule — "keeps" (S = 1's quality), "worse",
  "inconclusive" or "not run" (reports.page.rulecompare's verdicts, in the one vocabulary of rules) — and the best
  rule at that S: the fastest that keeps S = 1's quality, with its speed-up.

Both are built from the findings DataFrame and the rule verdicts; nothing here judges anything itself.
"""

from __future__ import annotations

import html
import math
import textwrap
from dataclasses import dataclass

import pandas as pd

from bench.core.algo.rules import ADASCALE, LSW
from bench.core.files import read_json_object
from reports.page import words as W
from reports.rundata.collect import ELASTIC, Results, scale_order
from reports.rundata.variants import display
from reports.stats import numbers as N
from reports.tables.table2 import table_runs, tables
from reports.verdicts import findings as FD

E = html.escape
CHECK_HEADS = {  # the grid's column heads: the claim each check tests, in a few words
    "i": "AdaScale keeps quality",
    "ii": "LSW worse at the largest S",
    "iii": "iterations follow B",
    "iv": "warm-up emerges",
    "v": "elastic keeps quality",
}
SAID = {  # what a decided claim says, for the one-line summary
    ("i", "holds"): "AdaScale keeps S = 1's quality",
    ("i", "does not hold"): "AdaScale loses quality",
    ("ii", "holds"): "LSW worse, as the paper says",
    ("ii", "does not hold"): "LSW keeps quality, unlike the paper",
    ("iii", "holds"): "iterations follow the noise scale",
    ("iii", "does not hold"): "iterations do not follow the noise scale",
    ("iv", "holds"): "the gain warms up",
    ("iv", "does not hold"): "no emergent warm-up",
    ("v", "holds"): "elastic AdaScale keeps quality",
    ("v", "does not hold"): "elastic AdaScale loses quality",
}
LEGEND = (
    "Claims say holds / does not hold (the paper's claim reproduced, or contradicted); rules say keeps / worse "
    "(S = 1's quality kept, or lost); both share inconclusive, not testable (its reason: saturated = S = 1 "
    "already at the metric's best) and not run. One colour per meaning: green kept, red lost, amber undecided, "
    'grey nothing to judge — so claim (ii), which predicts a loss, reads "LSW worse — as the paper says" in red, '
    "as the rules grid shows it. Best: the fastest rule that keeps quality at that S, with its speed-up in "
    "iterations (T1 / mean iterations, not time). Under each cell: the seeds it rests on."
)


@dataclass(frozen=True)
class Kind:
    """What kind of folder this is, and what it can and cannot show."""

    name: str
    can: str
    cannot: str


KINDS = {
    "smoke": Kind(
        "pipeline smoke",
        "that every task, rule and report runs end to end, and that the detector detects (the control cell: "
        "LSW worse than S = 1 where S·b is far past the noise scale, AdaScale not)",
        "whether the paper's claims hold: tiny models on saturating data, 1–3 seeds a cell, one S per task beside "
        "the paper's (S ≤ 16 but for the control cell); most findings stay inconclusive or not testable by design",
    ),
    "control": Kind(
        "positive control",
        "that the findings' tests detect a degradation that is there (LSW past the noise scale) and pass one "
        "that is not (AdaScale), with the seeds a decision needs",
        "whether the paper's claims hold at the paper's scale: tiny tasks, chosen so that the answer is known",
    ),
    "paper": Kind(
        "paper matrix",
        "whether the paper's claims reproduce at its own scale (its presets, S up to 128, the seeds of the matrix)",
        "anything about other models, data or budgets than the paper's",
    ),
    "tiny": Kind(
        "set of tiny runs",
        "how the rules behave against S = 1 on small models and data, where its cells have the seeds to decide",
        "whether the paper's claims hold at the paper's scale",
    ),
    "custom": Kind(
        "custom matrix",
        "the claims its cells reach (each verdict says whether it decided)",
        "the paper's claims where its cells do not reach the paper's S or seeds",
    ),
}


SMOKE_KINDS = 4  # experiment kinds (of table2, elastic, gain, heatmap, sweep) a folder must hold to read as a smoke


def folder_kind(res: Results) -> tuple[str, Kind]:
    """(how the kind was told, the kind): matrix.json's matrix names where `submit` wrote them, else the runs'
    presets and variant names (a smoke has tiny runs of several kinds, a control only its `control` cells)."""
    manifest = read_json_object(res.root / "matrix.json") or {}
    listed = manifest.get("matrices") if isinstance(manifest, dict) else None  # a damaged file names none
    named = [m for m in listed if isinstance(m, str)] if isinstance(listed, list) else []
    stems = sorted({m.rsplit("/", 1)[-1].removesuffix(".yaml") for m in named})
    if len(stems) == 1 and stems[0] in KINDS:
        return f"matrix {stems[0]}", KINDS[stems[0]]
    runs = res.runs
    if runs.empty:
        return "no runs", KINDS["custom"]
    presets = set(runs["preset"].dropna()) - {""}
    t2 = table_runs(runs)
    labels = set(t2["variant_label"].fillna("")) if "variant_label" in t2 else set()
    if presets == {"paper"}:
        return "paper preset", KINDS["paper"]
    if presets == {"tiny"} and labels == {"control"}:
        return "tiny preset, control cells only", KINDS["control"]
    kinds = set(runs["experiment_kind"].dropna())
    if presets == {"tiny"} and len(kinds) >= SMOKE_KINDS:  # a smoke runs every experiment kind
        return f"tiny preset, {len(set(runs['task']))} tasks, {len(kinds)} experiment kinds", KINDS["smoke"]
    if presets == {"tiny"}:
        return "tiny preset", KINDS["tiny"]
    return f"presets {', '.join(sorted(presets)) or '?'}", KINDS["custom"]


def _count(g: pd.DataFrame) -> str:
    """The seeds of some cells: '3 seeds', '1–3 seeds' (per cell, least and most), '' without runs."""
    done = g[g["status"].isin(("completed", "diverged"))]
    if done.empty:
        return ""
    per = done.groupby(["method", "scale"])["seed"].nunique()
    lo, hi = int(per.min()), int(per.max())
    return f"{lo} seed{'s' * (hi > 1)}" if lo == hi else f"{lo}–{hi} seeds"


def seeds_of(t: pd.DataFrame, check: str) -> str:
    """The seeds a check of one table rests on (its runs as the findings read them)."""
    fixed = t[t["scale"].map(lambda s: scale_order(s)[0] == 0)]
    ada = fixed[fixed["method"] == ADASCALE]
    if check == "i":
        return _count(ada)
    if check == "ii":
        lsw = fixed[fixed["method"] == LSW]
        if lsw.empty:
            return ""
        top = max(lsw["scale"], key=scale_order)
        return _count(pd.concat([lsw[lsw["scale"].isin((top, "1"))]]))
    if check in ("iii", "iv"):
        big = ada[ada["scale"] != "1"]
        n = int(big["status"].isin(("completed", "diverged")).sum())
        return f"{n} run{'s' * (n != 1)}" if n else ""
    return _count(t[(t["method"] == ADASCALE) & t["scale"].isin(ELASTIC)])


def summary(rows: pd.DataFrame) -> str:
    """One line per table: what its decided claims say, and how many stay undecided."""
    said = [SAID[(r.check, r.status)] for r in rows.itertuples() if (r.check, r.status) in SAID]
    open_ = int((~rows["status"].isin(("holds", "does not hold"))).sum())
    tail = f"{open_} of {len(rows)} undecided" if open_ else "every claim decided"
    return "; ".join([*said, tail]) if said else f"nothing decided here ({tail})"


def _cell(word: str, cls: str, under: str, title: str = "") -> str:
    hover = f' title="{E(title)}"' if title else ""
    small = f"<small>{E(under)}</small>" if under else ""
    return f'<td class="v {cls}"{hover}>{E(word)}{small}</td>'


def _name(table: str, variants: dict[str, str]) -> str:
    from reports.page import name_html

    return name_html(table, variants)


def findings_grid(found: pd.DataFrame, res: Results) -> str:
    """Task × claim: one word each, coloured, the seeds under it, and the row's summary."""
    if found.empty:
        return '<p class="note">No Table 2 runs: no claim to check.</p>'
    runs = {tab.name: tab.runs for tab in tables(table_runs(res.runs))}
    head = "".join(f"<th>({k})<br><small>{E(v)}</small></th>" for k, v in CHECK_HEADS.items())
    out = [f'<table class="grid"><tr><th>task</th>{head}<th>summary</th></tr>']
    for table, rows in found.groupby("table", sort=False):
        t = runs.get(str(table), pd.DataFrame(columns=["method", "scale", "seed", "status"]))
        tds = []
        for check in CHECK_HEADS:
            hit = rows[rows["check"] == check]
            if hit.empty:
                tds.append(_cell("not run", "none", ""))
                continue
            r = hit.iloc[0]
            said = W.claim_word(check, str(r["status"]))
            detail = str(r["detail"])
            under = seeds_of(t, check)
            why = W.reason(detail) if r["status"] == FD.NOT_TESTABLE else ""
            why = why or ("unresolved" if detail.startswith("unresolved") else "")
            under = f"{why}; {under}" if why and under else why or under
            tds.append(_cell(said.word, said.colour, under, detail))
        line = f'<td class="sum">{E(summary(rows))}</td>'
        out.append(f'<tr><td class="label">{_name(str(table), res.variants)}</td>{"".join(tds)}{line}</tr>')
    out.append("</table>")
    return "\n".join(out)


def best_at(g: pd.DataFrame) -> tuple[str, float]:
    """(title, speed-up) of the fastest rule that keeps S = 1's quality in the verdicts `g` of one S."""
    keep = g[(g["status"] == "holds") & g["speedup"].map(lambda v: isinstance(v, float) and math.isfinite(v))]
    if keep.empty:
        return "", math.nan
    r = keep.loc[keep["speedup"].idxmax()]
    return str(r["title"]), float(r["speedup"])


def best_text(g: pd.DataFrame) -> str:
    """'LSW 8.00×' (the fastest rule that keeps quality), 'none keeps quality' where every rule is worse, else
    'undecided' (no rule shown to keep it, not all shown worse)."""
    label, speed = best_at(g)
    if label:
        return f"{label} {N.speedup(speed)}"
    return "none keeps quality" if (g["status"] == "does not hold").all() else "undecided"


def rules_grid(verdicts: pd.DataFrame, variants: dict[str, str]) -> str:
    """Table and S × rule: keeps / worse / inconclusive / not run, and the best rule at that S."""
    if verdicts.empty:
        return '<p class="note">No Table 2 rule with runs at S = 1 and at a larger S.</p>'
    from reports.tables.table2 import place

    methods = sorted(set(verdicts["method"]), key=place)
    labels = {m: str(verdicts[verdicts["method"] == m]["title"].iloc[0]) for m in methods}
    head = "".join(f"<th>{E(labels[m])}</th>" for m in methods)
    best = "best rule at this S<br><small>speed-up in iterations</small>"
    out = [f'<table class="grid"><tr><th>task</th><th>S</th>{head}<th>{best}</th></tr>']
    for table, t in verdicts.groupby("table", sort=False):
        scales = sorted(set(t["scale"]), key=scale_order)
        for k, scale in enumerate(scales):
            g = t[t["scale"] == scale]
            tds = []
            for m in methods:
                hit = g[g["method"] == m]
                if hit.empty:
                    tds.append('<td class="v blank">–</td>')
                    continue
                r = hit.iloc[0]
                said = W.rule_word(str(r["status"]))
                n = pd.to_numeric(r["n"], errors="coerce")
                under = f"{int(n)} vs {int(r['n_base'])} seeds" if pd.notna(n) else ""
                under += f"; {r['decide']}" if isinstance(r.get("decide"), str) and r["decide"] else ""
                why = W.reason(str(r["detail"])) if r["status"] == FD.NOT_TESTABLE else ""
                under = f"{why}; {under}" if why and under else why or under
                tds.append(_cell(said.word, said.colour, under, str(r["detail"])))
            best = best_text(g)
            name = f'<td class="label" rowspan="{len(scales)}">{_name(str(table), variants)}</td>' if k == 0 else ""
            at = f'<td class="label">S = {E(str(scale))}</td>'
            out.append(f'<tr>{name}{at}{"".join(tds)}<td class="best">{E(best)}</td></tr>')
    out.append("</table>")
    return "\n".join(out)


NEAR_S = 0.8  # a gain at iteration 0 of at least this share of S starts near S: no warm-up at all


def warmup_notes(res: Results) -> list[str]:
    """Where the data contradicts the paper's Figure 3 (the gain starts near 1 and rises): per task and S, the
    AdaScale runs whose first recorded gain is already near S (the lr starts near S·lr0)."""
    t = table_runs(res.runs)
    if t.empty:
        return []
    ada = t[(t["method"] == ADASCALE) & t["scale"].map(lambda s: scale_order(s)[0] == 0 and s != "1")]
    ada = ada[ada["has_metrics"].astype(bool) & ~ada["shared_s1"].astype(bool)]
    notes = []
    for (task, scale), g in ada.groupby(["task", "scale"], sort=True):
        first = []
        for d in g["run_dir"]:
            train = res.metrics(d)[0]
            if "gain" in train and len(train):
                first.append(float(pd.to_numeric(train["gain"], errors="coerce").iloc[0]))
        first = [x for x in first if math.isfinite(x)]
        if first and min(first) >= NEAR_S * float(scale):
            lo, hi = min(first), max(first)
            at = f"{lo:.2f}" if round(lo, 2) == round(hi, 2) else f"{lo:.2f}–{hi:.2f}"
            notes.append(f"{task} S = {scale}: the gain at iteration 0 is {at}, near S (the lr starts near S·lr0)")
    return notes


def extras_html(res: Results) -> str:
    """Under the grids: Figure 2's verdict per run, and where the curves contradict the paper's warm-up."""
    from reports.stats import lagmatch as LM

    out = []
    fig2 = LM.summary_lines(res)
    if fig2:
        items = "".join(f"<li>{E(x)}</li>" for x in fig2)
        out.append(
            '<p class="legend"><b>Figure 2</b> — the online gain against the offline one at kept checkpoints '
            f'(the paper: they align closely):</p><ul class="legend">{items}</ul>'
        )
    warm = warmup_notes(res)
    if warm:
        items = "".join(f"<li>{E(x)}</li>" for x in warm)
        out.append(
            "<p class=\"legend\"><b>Warm-up</b> — against the paper's Figure 3, where AdaScale's gain starts "
            f'near 1 and rises (see the curves):</p><ul class="legend">{items}</ul>'
        )
    return "\n".join(out)


def banner_html(res: Results) -> str:
    """What kind of folder this is, and what it can and cannot show."""
    how, kind = folder_kind(res)
    return (
        f'<div class="banner"><b>This folder is a {E(kind.name)}</b> <small>({E(how)})</small>. '
        f"It can show {E(kind.can)}. It cannot show {E(kind.cannot)}.</div>"
    )


def grid_html(found: pd.DataFrame, verdicts: pd.DataFrame, res: Results) -> str:
    """The top of the page under its heading: the findings grid, the rules grid and one legend."""
    swatches = "".join(f'<span class="sw {cls}">{E(word)}</span>' for word, cls, _ in W.glossary())
    key = f'<p class="key">{swatches}</p>'
    return "\n".join(
        [
            key,
            findings_grid(found, res),
            "<h3>The rules against S = 1, at each S</h3>",
            rules_grid(verdicts, res.variants),
            f'<p class="legend">{E(LEGEND)} Details below; hover a cell for its numbers.</p>',
            extras_html(res),
        ]
    )


def _short(name: str, variants: dict[str, str]) -> str:
    return display(name, variants)[0]


def claims_text(found: pd.DataFrame, res: Results) -> str:
    """The banner and the findings grid as text, for the top of findings.txt (lines ≤ 120 characters)."""
    how, kind = folder_kind(res)
    said = f"This folder is a {kind.name} ({how}). It can show {kind.can}. It cannot show {kind.cannot}."
    out = textwrap.wrap(said, 120)
    if found.empty:
        return "\n".join(out) + "\n"
    names = {t: _short(str(t), res.variants) for t in found["table"].unique()}
    width = max(12, *(len(n) for n in names.values()))
    said = {  # the word only (the reasons are in the details below): lines ≤ 120 characters
        t: {r.check: W.CLAIM.get(r.status, W.Word(r.status, "", "")).word for r in rows.itertuples()}
        for t, rows in found.groupby("table", sort=False)
    }
    col = {k: max(8, *(len(words.get(k, W.NOT_RUN_WORD)) + 2 for words in said.values())) for k in CHECK_HEADS}
    out.append(f"{'claims':<{width}}  " + "".join(f"{'(' + k + ')':<{col[k]}}" for k in CHECK_HEADS).rstrip())
    for table, words in said.items():
        row = "".join(f"{words.get(k, W.NOT_RUN_WORD):<{col[k]}}" for k in CHECK_HEADS)
        out.append(f"{names[table]:<{width}}  {row}".rstrip())
    out.append("(ii) holds = LSW worse than S = 1, as the paper says; details below")
    from reports.stats import lagmatch as LM

    for x in [f"Figure 2: {x}" for x in LM.summary_lines(res)] + [f"warm-up: {x}" for x in warmup_notes(res)]:
        out += textwrap.wrap(x, 120, subsequent_indent="  ")
    return "\n".join(out) + "\n"


def rules_text(verdicts: pd.DataFrame, res: Results) -> str:
    """The rules grid as text, for the top of rules.txt: per table and S each rule's word and the best rule."""
    if verdicts.empty:
        return ""
    out = ["rules against S = 1 (keeps = keeps S = 1's quality); best = the fastest rule that keeps it (speed-up in "]
    out[0] += "iterations):"
    for table, t in verdicts.groupby("table", sort=False):
        for scale in sorted(set(t["scale"]), key=scale_order):
            g = t[t["scale"] == scale]
            cells = ", ".join(f"{r.title} {W.rule_text(r.status, r.detail)}" for r in g.itertuples())
            best = best_text(g)
            best = f"best {best}" if best_at(g)[0] else best
            out.append(f"  {_short(str(table), res.variants)} S = {scale}: {cells}; {best}"[:120])
    return "\n".join(out) + "\n"
