"""`adascale-bench report DIR`: rebuild every table and figure of a results folder from its run files.

    build_report(DIR, ["md", "tex", "html", "csv", "txt"]) -> DIR/report/report.html

Writes under DIR/report/ what the formats ask for (default: all), nothing else: report.html (html: one
self-contained file, with the figures as PNG beside it), findings.txt and rules.txt (txt: the findings table
and the rules at a glance that `report` prints), table2.md (md), table2.tex (tex), table2.csv,
paper_comparison.csv, scalefree.csv, findings.csv, rule_verdicts.csv, rules_at_a_glance.csv, sweep.csv,
time_to_target.csv, speedup.csv, b_crit.csv (every critical-batch fit, with its bootstrap interval) and
figure2.csv (online, offline, lag-matched and exact gains at the kept checkpoints) (csv); and its caches
under report/cache/.
Unreadable or partial files never stop the build: they are skipped, named in a warning
(`collect.ReportWarning`) and listed in the HTML. Also runnable as
`python -m reports.build DIR [--format md,tex,html,csv] [--std]`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench.core import safefs
from bench.core.errors import UserError
from reports.rundata.collect import load
from reports.rundata.memo import FORMATS, REPORT_DIR
from reports.rundata.workers import WORKERS

if TYPE_CHECKING:
    import pandas as pd

    from reports.assemble import Built


@safefs.rooted  # nothing below `out` is reached through a link (bench.core.safefs)
def build_report(out: Path, formats: list[str] | None = None, std: bool = False) -> Path:
    """Write the report of the results folder `out` under `out/report/` (every format unless `formats`
    names some); return the path of report.html, or of the report folder when no HTML was asked for."""
    built = build(out, formats, std)
    return built.html or built.folder


def build(out: Path, formats: list[str] | None = None, std: bool = False) -> Built:
    """The report in the formats asked for (default: all), and nothing else (reports.assemble): md → table2.md,
    tex → table2.tex, csv → the CSV tables, txt → findings.txt, html → report.html with its figures (PNG)."""
    formats = list(FORMATS if not formats else formats)
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"unknown report format(s) {', '.join(unknown)}; expected some of {', '.join(FORMATS)}")
    out = Path(out)
    dest = _report_dir(out)
    res = load(out)
    with res.warming(WORKERS if "html" in formats else 1):  # the first report's scan of every metrics file, in
        from reports import assemble  # parallel; the tables' and figures' libraries are imported meanwhile

    return assemble.assemble(out, dest, res, formats, std)


def _report_dir(out: Path) -> Path:
    """OUT/report, made; refused in one line where it or its cache is a link (a planted link would have figures
    written, and stale ones deleted, there)."""
    dest = out / REPORT_DIR
    for folder in (dest, dest / "cache"):
        if folder.is_symlink():
            raise UserError(
                f"{folder} is a link (to {os.readlink(folder)}): report writes and deletes files in it; remove the link"
            )
    dest.mkdir(parents=True, exist_ok=True)
    return dest


@safefs.rooted
def build_sweep(out: Path) -> tuple[pd.DataFrame, list[Path]]:
    """The sweep's table and figure for `adascale-bench sweep`: OUT/sweep.csv and OUT/sweep_<task>.png,
    from the same table the report uses."""
    from reports import assemble

    return assemble.sweep(load(Path(out)), Path(out))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reports.build", description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path, help="results folder")
    p.add_argument("--format", default=",".join(FORMATS), help=f"comma-separated: {','.join(FORMATS)}")
    p.add_argument("--std", action="store_true", help="cells as mean ± std over seeds")
    args = p.parse_args(argv)
    if not args.dir.is_dir():
        print(f"error: {args.dir} is not a folder", file=sys.stderr)
        return 2
    built = build(args.dir, [f.strip() for f in args.format.split(",") if f.strip()], std=args.std)
    print(built.html or "\n".join(str(p) for p in built.written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
