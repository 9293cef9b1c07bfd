"""The report assembled from a loaded results folder (reports.build runs it once the metrics are scanned): its
tables, its figures (computed, then drawn by processes while the tables are computed) and its page, in the
formats asked for. Kept apart from reports.build so that its libraries (matplotlib, scipy: ~1 s) are imported
while the workers scan the metrics files."""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bench.core.files import atomic_write_bytes
from reports import figures as F
from reports import page as H
from reports.page import glance as G
from reports.page import rulecompare as RC
from reports.page import words as W
from reports.rundata import guards
from reports.rundata.collect import scale_order
from reports.rundata.variants import named
from reports.rundata.workers import WORKERS
from reports.speed import scalefree as SF
from reports.speed import scaling as CT  # B_crit, speed-ups and time to target of any folder
from reports.speed.sweep import noise_by_task, sweep_table
from reports.speed.sweep import write_csv as write_sweep_csv
from reports.stats import lagmatch as LM
from reports.stats.noise import fill as fill_noise
from reports.tables.latex import latex
from reports.tables.paper import COMPARISON_COLUMNS, compare, header_note, load_paper
from reports.tables.table2 import cells_of, markdown, to_csv
from reports.verdicts import findings as FD
from reports.verdicts import graded as GR

FIGURE_INDEX = "figures.json"  # content hashes of the figures drawn (reports.figures.Renderer)


@dataclass
class Built:
    """What a build wrote: the report folder, the files (in the order written) and the findings as text
    (what `report` prints, whether or not findings.txt was asked for)."""

    folder: Path
    written: list[Path] = field(default_factory=list)
    findings: str = ""
    rules: str = ""  # the rules at a glance, printed after the findings
    flags: str = ""  # B_crit fits that disagree, time-to-target speed-ups that are unresolved: printed last
    glance: str = ""  # the verdict grids alone (reports.page.glance), what `report` prints when no txt was asked for

    @property
    def html(self) -> Path | None:
        path = self.folder / "report.html"
        return path if path in self.written else None


def _write(path: Path, text: str, built: Built | None = None) -> None:
    """A report file, whole or not at all (bench.core.files.atomic_write_bytes): a rebuild never leaves half a table."""
    atomic_write_bytes(path, text.encode("utf-8", errors="backslashreplace"))  # a lone surrogate from a JSON escape
    if built is not None:
        built.written.append(path)


def _paper(c: pd.DataFrame, res: Any) -> tuple[pd.DataFrame, pd.DataFrame, set[str]]:
    """(the paper's Table 2, the comparison of the cells with it, the paper's tasks); a broken paper table costs
    the comparison, with a warning, not the report."""
    try:
        paper = load_paper()
        return paper, compare(c, paper, res.runs), set(paper["task"])
    except Exception as e:
        res.warn(f"skipped paper comparison: {type(e).__name__}: {e}")
        return pd.DataFrame(columns=SF.PAPER_COLUMNS), pd.DataFrame(columns=COMPARISON_COLUMNS), set()


def assemble(out: Path, dest: Path, res, formats: list[str], std: bool = False) -> Built:
    """The report of `res` (loaded from `out`, its metrics scanned) into `dest` in `formats`, and nothing else:
    md → table2.md, tex → table2.tex, csv → the CSV tables, txt → findings.txt, html → report.html with its
    figures (PNG)."""
    built = Built(dest)
    fill_noise(res, WORKERS)  # each AdaScale run's noise scale per third of τ: Table 2's notes, the findings
    with _figures(res, dest, "html" in formats) as sections:  # computed first, drawn while the tables are computed
        t = _tables(res, formats, built)
    if "md" in formats:  # a variant by its short name; its overrides in table2.csv's `variant` column
        _write(dest / "table2.md", markdown(named(t.cells, res.variants), std), built)
    if "tex" in formats:
        _write(dest / "table2.tex", latex(named(t.cells, res.variants), std), built)
    if "csv" in formats:
        _csvs(dest, res, t.csv, built)
    if "txt" in formats:
        _write(dest / "findings.txt", built.findings, built)  # what `report` prints
        _write(dest / "rules.txt", built.rules, built)  # and this, after it
    if "html" in formats:
        built.written += [f.path for _, _, figs, _ in sections for f in figs]
        c = t.cells
        tasks = sorted(set(c["task"])) if not c.empty else []
        parts = Parts(c, std, t.found, t.sf, t.comp, [x for x in tasks if x not in t.paper_tasks], tasks, sections)
        parts.rules = (t.glance, t.verdicts)
        _write(dest / "report.html", _html(out, res, parts, t.sweep, t.ttt, t.fits), built)
    return built


def sweep(res, out: Path) -> tuple[pd.DataFrame, list[Path]]:
    """`adascale-bench sweep`'s table and figure of `res`: OUT/sweep.csv and OUT/sweep_<task>.png, from the same
    table the report uses."""
    fill_noise(res)
    table = sweep_table(res)
    written = []
    if not table.empty:
        write_sweep_csv(table, Path(out) / "sweep.csv")
        written.append(Path(out) / "sweep.csv")
    written += [f.path for f in F.sweep(res, Path(out))]
    return table, written


@dataclass
class Tables:
    """What the report computes besides its figures (`_tables`)."""

    cells: pd.DataFrame
    comp: pd.DataFrame
    paper_tasks: set[str]
    sweep: pd.DataFrame
    found: pd.DataFrame
    verdicts: pd.DataFrame
    glance: pd.DataFrame
    sf: pd.DataFrame
    ttt: pd.DataFrame
    fits: pd.DataFrame

    @property
    def csv(self) -> tuple:
        """The tables `_csvs` writes, in its order."""
        return (self.cells, self.comp, self.found, self.sf, self.sweep, self.ttt, self.verdicts, self.glance, self.fits)


def _tables(res, formats: list[str], built: Built) -> Tables:
    """Table 2's cells, the paper comparison, the sweep, the findings, the rules, the scale-free comparison, time
    to target and the critical batches; the findings', the rules' and the flags' text into `built`."""
    c = cells_of(res)
    paper, comp, paper_tasks = _paper(c, res)
    tables = bool({"csv", "html"} & set(formats))  # the sweep's and the time-to-target tables: csv and html
    sweep_tab = sweep_table(res) if tables else pd.DataFrame()
    found = FD.findings(res)
    claims = G.claims_text(found, res)
    built.findings = claims + "\n" + FD.text(W.claims_in_words(named(found, res.variants))) + "\n"
    verdicts = RC.verdicts(res)
    glance = RC.at_a_glance(verdicts, res)
    rules = G.rules_text(verdicts, res)
    graded = GR.text(GR.detection(res))  # the control's graded cut, as a detection curve
    built.rules = rules + "\n" + RC.text(named(glance, res.variants)) + "\n" + (graded + "\n" if graded else "")
    built.glance = claims + rules
    sf = SF.scalefree(c, res.runs, paper)
    ttt = CT.time_to_target(res) if tables else pd.DataFrame()
    fits = CT.critical_table(res, ttt) if tables else pd.DataFrame()
    built.flags = CT.flags_text(fits, CT.ttt_summary(ttt), res.variants) if tables else ""
    return Tables(c, comp, paper_tasks, sweep_tab, found, verdicts, glance, sf, ttt, fits)


def _csvs(dest: Path, res, tables: tuple, built: Built) -> None:
    """The CSV tables: Table 2's cells, the paper comparison, the findings, the scale-free comparison, every
    rule's verdicts and the rules at a glance, the sweep (when it ran), time to target, speed-up, the
    critical batches and Figure 2's gains."""
    c, comp, found, sf, sweep_tab, ttt, verdicts, glance, fits = tables
    v = res.variants  # `table` names a variant by its short name, the `variant` column holds its overrides

    def csv(df: pd.DataFrame) -> pd.DataFrame:
        return named(df, v, keep=True)

    _write(dest / "table2.csv", to_csv(csv(c)), built)
    _write(dest / "paper_comparison.csv", guards.csv_safe(csv(comp)).to_csv(index=False, float_format="%.6g"), built)
    _write(dest / "findings.csv", FD.to_csv(guards.csv_safe(csv(W.claims_in_words(found)))), built)  # no formula
    _write(dest / "scalefree.csv", SF.to_csv(csv(sf)), built)
    _write(dest / "rule_verdicts.csv", RC.to_csv(csv(verdicts)), built)
    _write(dest / "rules_at_a_glance.csv", RC.to_csv(csv(glance)), built)
    if not sweep_tab.empty:
        write_sweep_csv(sweep_tab, dest / "sweep.csv")
        built.written.append(dest / "sweep.csv")
    CT.write_csvs(res, dest, ttt, fits)
    built.written += [dest / "time_to_target.csv", dest / "time_to_target_cells.csv", dest / "speedup.csv"]
    built.written += [dest / "b_crit.csv"]
    LM.write_csv(res, dest / "figure2.csv")  # only where a run has offline gains
    built.written += [dest / "figure2.csv"] if (dest / "figure2.csv").exists() else []


@contextlib.contextmanager
def _figures(res, dest: Path, draw: bool) -> Iterator[list[tuple[str, str, list, str]]]:
    """Every figure kind computed into `dest` and handed to the drawing processes (unchanged ones kept), then the
    body of the `with` (the tables) run while they draw; at its end the figures collected, and PNGs of an earlier
    build that this one did not draw removed. Yields the HTML's sections (anchor, heading, figures, note when
    none), filled by then (none where `draw` is false). The figures' warnings are given after the body's, as
    when the report computed its tables first."""
    sections: list[tuple[str, str, list, str]] = []
    if not draw:
        yield sections
        return
    with contextlib.ExitStack() as stack:
        with res.holding() as later:
            renderer = stack.enter_context(F.rendering(dest / "cache" / FIGURE_INDEX, WORKERS, res.warn))
            sections += [_figure_kind(res, dest, kind, *how) for kind, how in F.KINDS.items()]
        yield sections
        for message in later:
            res.warn(message)
        failed = renderer.flush()  # the deferred figures, drawn in parallel unless unchanged since the last build
    for path, why in failed.items():
        res.warn(f"figure {path.name} failed: {why}")
    sections[:] = [(a, h, [f for f in figs if f.path not in failed], note) for a, h, figs, note in sections]
    kept = {f.path for _, _, figs, _ in sections for f in figs}
    for old in dest.glob("*.png"):  # figures of an earlier build that no longer apply
        if old not in kept:
            old.unlink()


def _figure_kind(res, dest: Path, kind: str, fn, heading: str, empty_note: str) -> tuple[str, str, list, str]:
    """One figure kind's section; its failure a warning, not the others' loss."""
    try:
        figs = fn(res, dest)
    except Exception as e:  # one figure kind failing must not cost the others
        tb = traceback.extract_tb(e.__traceback__)[-1]
        res.warn(f"figure kind {kind!r} failed: {type(e).__name__}: {e} ({Path(tb.filename).name}:{tb.lineno})")
        figs, empty_note = [], f"drawing failed ({type(e).__name__}: {e})"
    return f"fig-{kind}", heading, figs, empty_note


@dataclass
class Parts:
    """The report's tables, computed once, for the HTML page."""

    cells: pd.DataFrame
    std: bool
    findings: pd.DataFrame
    scalefree: pd.DataFrame
    comparison: pd.DataFrame
    without_paper: list[str]
    tasks: list[str]
    sections: list
    rules: tuple = ()  # (rules at a glance, every rule's verdicts): the rules section


SECTIONS = {  # the page's sections, in order: its <h2> ids, each with its link in the nav bar
    "glance": ("At a glance", "At a glance: the paper's claims (i)–(v) and the rules"),
    "findings": ("Findings", "The paper's findings, checked"),
    "table2": ("Table 2", "Table 2"),
    "rules": ("Rules", "The rules compared with S = 1"),
    "scalefree": ("Scale-free", "Scale-free comparison with the paper"),
    "paper": ("Paper comparison", "Comparison with the paper's Table 2 (absolute values)"),
    "differs": ("Differs", "What differs from the paper"),
    "figures": ("Figures", "Figures"),
    "ttt": ("Time to target", "Time to target"),
    "warnings": ("Warnings", "Warnings"),
}


def _presets(runs: pd.DataFrame) -> dict[str, dict[str, list[int]]]:
    """task -> the presets its runs used -> the fixed S they ran at (what "differs from the paper" describes)."""
    out: dict[str, dict[str, list[int]]] = {}
    for (task, preset), g in runs.groupby(["task", "preset"]) if not runs.empty else ():
        if str(preset):
            fixed = {int(v) for k, v in map(scale_order, g["scale"]) if k == 0 and math.isfinite(v) and v.is_integer()}
            out.setdefault(str(task), {})[str(preset)] = sorted(fixed)
    return out


def _h2(key: str, suffix: str = "") -> str:
    return f'<h2 id="{key}">{H.E(SECTIONS[key][1])}{suffix}</h2>'


def _html(out: Path, res, p: Parts, sweep_tab: pd.DataFrame, ttt: pd.DataFrame, fits: pd.DataFrame) -> str:
    generated = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    nav = "".join(f'<a href="#{key}">{H.E(link)}</a>' for key, (link, _) in SECTIONS.items())
    v = res.variants
    beside = f"fig-{F.table2_efficiency.__name__}"  # the figure of the scale-free table's numbers, under it
    drawn = [s for s in p.sections if s[0] == beside]
    body = [
        "<h1>AdaScale SGD benchmark report</h1>",
        f"<nav>{nav}</nav>",
        G.banner_html(res),
        _h2("glance"),
        G.grid_html(p.findings, p.rules[1], res),
        H.meta_html(out, res.runs, len(res.warnings), generated),
        _h2("findings"),
        H.on_demand("what each finding compared, per table", H.findings_html(p.findings, FD.LEGEND, v)),
        _h2("table2"),
        H.table2_html(p.cells, p.std, v),
        H.variants_html(v, p.cells),
        _h2("rules"),
        H.on_demand(
            "every rule at the largest S, with Δ and its interval; every rule × S", RC.glance_html(*p.rules, v)
        ),
        _h2("scalefree"),
        H.scalefree_html(p.scalefree, v),
        H.figures_html(drawn),
        _h2("paper"),
        H.absolute_html(p.comparison, header_note(p.comparison), p.without_paper, v),
        _h2("differs"),
        H.differs_html(p.tasks, _presets(res.runs)),
        _h2("figures"),
        H.figures_html([s for s in p.sections if s[0] != beside]),
        H.sweep_table_html(sweep_tab),
        CT.critical_html(fits, noise_by_task(res), v),
        _h2("ttt"),
        CT.ttt_html(CT.ttt_summary(ttt), v),
        _h2("warnings", f" ({len(res.warnings)})"),
        H.warnings_html(res.warnings),
    ]
    name = H.folder_name(out)
    return H.unrooted(H.page(f"AdaScale report: {name}", "\n".join(body)), out)
