"""report.html and the grids at its top: one self-contained file (inline CSS, figures inlined as base64 PNG,
no external links).

Its parts: `layout` (the CSS, the page, escaping, names, metadata, warnings, figures), `tables` (Table 2, the
findings, the scale-free and absolute comparisons, the sweep), `differs` (what differs from the paper), `glance`
(the first screen's grids), `rulecompare` (rules compared per S) and `words` (the one vocabulary of statuses).
Every name assemble.py reads from the page is here too, as `H.X`.

May import: reports.figures, reports.verdicts, reports.speed and everything below them.
"""

from reports.page.differs import differs_html, preset_lines
from reports.page.layout import (
    CSS,
    MAX_PNG,
    E,
    figures_html,
    folder_name,
    img_tag,
    meta_html,
    name_html,
    on_demand,
    page,
    shared_caption,
    unrooted,
    variants_html,
    warnings_html,
)
from reports.page.tables import (
    absolute_html,
    comparison_html,
    findings_html,
    scalefree_html,
    sweep_table_html,
    table2_html,
)

__all__ = [
    "CSS",
    "MAX_PNG",
    "E",
    "absolute_html",
    "comparison_html",
    "differs_html",
    "figures_html",
    "findings_html",
    "folder_name",
    "img_tag",
    "meta_html",
    "name_html",
    "on_demand",
    "page",
    "preset_lines",
    "scalefree_html",
    "shared_caption",
    "sweep_table_html",
    "table2_html",
    "unrooted",
    "variants_html",
    "warnings_html",
]
