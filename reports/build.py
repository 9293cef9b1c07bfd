"""`adascale-bench report DIR`: rebuild every table and figure of a results folder from its run files.

    build_report(DIR, ["md", "tex", "html", "csv"]) -> DIR/report/report.html

Writes under DIR/report/: report.html (always: one self-contained file), findings.txt (always: the
findings table `report` prints), table2.md (md), table2.tex (tex), table2.csv, paper_comparison.csv,
scalefree.csv, findings.csv, sweep.csv, time_to_target.csv, speedup.csv, b_crit.csv (every critical-batch
fit, with its bootstrap interval) and figure2.csv (online, offline, lag-matched and exact gains at the kept
checkpoints) (csv), and the figures as PNG.
Unreadable or partial files never stop the build: they are skipped, named in a warning
(`collect.ReportWarning`) and listed in the HTML. Also runnable as
`python -m reports.build DIR [--format md,tex,html,csv] [--std]`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import traceback
from pathlib import Path

import pandas as pd

from bench.errors import UserError
from bench.files import atomic_write_bytes

from . import control as CT
from . import figures as F
from . import findings as FD
from . import html as H
from . import lagmatch as LM
from . import scalefree as SF
from .collect import load
from .latex import latex
from .noise import fill as fill_noise
from .paper import COMPARISON_COLUMNS, compare, header_note, load_paper
from .sweep import noise_by_task, sweep_table
from .sweep import write_csv as write_sweep_csv
from .table2 import cells, markdown, to_csv

FORMATS = ("md", "tex", "html", "csv")
REPORT_DIR = "report"
FIGURE_INDEX = "figures.json"  # content hashes of the figures drawn (reports.figures.Renderer)
FIGURE_WORKERS = min(2, os.cpu_count() or 1)  # processes drawing figures


def _write(path: Path, text: str) -> None:
    """A report file, whole or not at all (bench.files.atomic_write_bytes): a rebuild never leaves half a table."""
    atomic_write_bytes(path, text.encode("utf-8", errors="backslashreplace"))  # a lone surrogate from a JSON escape


def build_report(out: Path, formats: list[str] | None = None, std: bool = False) -> Path:
    """Write the report of the results folder `out` under `out/report/`; return the path of report.html."""
    formats = list(FORMATS if not formats else formats)
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"unknown report format(s) {', '.join(unknown)}; expected some of {', '.join(FORMATS)}")
    out = Path(out)
    dest = out / REPORT_DIR
    for folder in (dest, dest / "cache"):  # a planted link would have figures written, and stale ones deleted, there
        if folder.is_symlink():
            raise UserError(
                f"{folder} is a link (to {os.readlink(folder)}): report writes and deletes files in it; remove the link"
            )
    dest.mkdir(parents=True, exist_ok=True)
    res = load(out)
    res.warm_metrics(FIGURE_WORKERS)  # the first report's scan of every metrics file, in parallel
    fill_noise(res)  # each AdaScale run's training-average B_simple: Table 2's notes and the findings
    c = cells(res.runs)
    try:
        paper = load_paper()
        comp = compare(c, paper, res.runs)
        paper_tasks = set(paper["task"])
    except Exception as e:  # a broken paper table costs the comparison, not the report
        res.warn(f"skipped paper comparison: {type(e).__name__}: {e}")
        comp, paper_tasks = pd.DataFrame(columns=COMPARISON_COLUMNS), set()
        paper = pd.DataFrame(columns=SF.PAPER_COLUMNS)
    sweep_tab = sweep_table(res)
    found = FD.findings(res)
    sf = SF.scalefree(c, res.runs, paper)
    ttt = CT.time_to_target(res)
    fits = CT.critical_table(res, ttt)

    if "md" in formats:
        _write(dest / "table2.md", markdown(c, std))
    if "tex" in formats:
        _write(dest / "table2.tex", latex(c, std))
    if "csv" in formats:
        _write(dest / "table2.csv", to_csv(c))
        _write(dest / "paper_comparison.csv", comp.to_csv(index=False, float_format="%.6g"))
        _write(dest / "findings.csv", FD.to_csv(found))
        _write(dest / "scalefree.csv", SF.to_csv(sf))
        if not sweep_tab.empty:
            write_sweep_csv(sweep_tab, dest / "sweep.csv")
        CT.write_csvs(res, dest, ttt, fits)
        LM.write_csv(res, dest / "figure2.csv")
    _write(dest / "findings.txt", FD.text(found) + "\n")  # what `report` prints

    sections = []
    with F.rendering(dest / "cache" / FIGURE_INDEX, FIGURE_WORKERS, res.warn) as renderer:
        for kind, (fn, heading, empty_note) in {**F.KINDS, **CT.KINDS}.items():
            try:
                figs = fn(res, dest)
            except Exception as e:  # one figure kind failing must not cost the others
                tb = traceback.extract_tb(e.__traceback__)[-1]
                res.warn(f"figure kind {kind!r} failed: {type(e).__name__}: {e} ({Path(tb.filename).name}:{tb.lineno})")
                figs, empty_note = [], f"drawing failed ({type(e).__name__}: {e})"
            sections.append((f"fig-{kind}", heading, figs, empty_note))
        failed = renderer.flush()  # the deferred figures, drawn in parallel unless unchanged since the last build
    for path, why in failed.items():
        res.warn(f"figure {path.name} failed: {why}")
    sections = [(a, h, [f for f in figs if f.path not in failed], note) for a, h, figs, note in sections]
    kept = {f.path for _, _, figs, _ in sections for f in figs}
    for old in dest.glob("*.png"):  # figures of an earlier build that no longer apply
        if old not in kept:
            old.unlink()

    tasks = sorted(set(c["task"])) if not c.empty else []
    without_paper = [t for t in tasks if t not in paper_tasks]
    note = header_note(comp)
    generated = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    body = [
        "<h1>AdaScale SGD benchmark report</h1>",
        H.meta_html(out, res.runs, len(res.warnings), generated),
        '<nav><a href="#findings">Findings</a><a href="#table2">Table 2</a><a href="#scalefree">Scale-free</a>'
        '<a href="#paper">Paper comparison</a><a href="#differs">Differs</a><a href="#figures">Figures</a>'
        '<a href="#warnings">Warnings</a></nav>',
        '<h2 id="findings">The paper\'s findings, checked</h2>',
        H.findings_html(found, FD.LEGEND),
        '<h2 id="table2">Table 2</h2>',
        H.table2_html(c, std),
        '<h2 id="scalefree">Scale-free comparison with the paper</h2>',
        H.scalefree_html(sf),
        '<h2 id="paper">Comparison with the paper\'s Table 2 (absolute values)</h2>',
        H.absolute_html(comp, note, without_paper),
        '<h2 id="differs">What differs from the paper by necessity</h2>',
        H.differs_html(tasks),
        '<h2 id="figures">Figures</h2>',
        H.figures_html(sections),
        H.sweep_table_html(sweep_tab),
        CT.critical_html(fits, noise_by_task(res)),
        '<h2 id="ttt">Time to target</h2>',
        CT.ttt_html(CT.ttt_summary(ttt)),
        f'<h2 id="warnings">Warnings ({len(res.warnings)})</h2>',
        H.warnings_html(res.warnings),
    ]
    report = dest / "report.html"
    _write(report, H.page(f"AdaScale report: {out}", "\n".join(body)))
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reports.build", description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path, help="results folder")
    p.add_argument("--format", default=",".join(FORMATS), help="comma-separated: md,tex,html,csv")
    p.add_argument("--std", action="store_true", help="cells as mean ± std over seeds")
    args = p.parse_args(argv)
    if not args.dir.is_dir():
        print(f"error: {args.dir} is not a folder", file=sys.stderr)
        return 2
    path = build_report(args.dir, [f.strip() for f in args.format.split(",") if f.strip()], std=args.std)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def build_sweep(out: Path) -> tuple[pd.DataFrame, list[Path]]:
    """The sweep's table and figure for `adascale-bench sweep`: OUT/sweep.csv and OUT/sweep_<task>.png,
    from the same table the report uses."""
    res = load(Path(out))
    fill_noise(res)
    table = sweep_table(res)
    written = []
    if not table.empty:
        write_sweep_csv(table, Path(out) / "sweep.csv")
        written.append(Path(out) / "sweep.csv")
    written += [f.path for f in F.sweep(res, Path(out))]
    return table, written
