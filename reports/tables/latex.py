"""Table 2 as a LaTeX fragment: one booktabs `table` per task, grey cells via \\cellcolor{gray!25}.

The fragment is meant for \\input in a document whose preamble has
    \\usepackage{booktabs}
    \\usepackage[table]{xcolor}   % loads colortbl, which provides \\cellcolor
"""

from __future__ import annotations

import re

import pandas as pd

from reports.tables.table2 import MISSING, NO_RUNS, Cell, views

PREAMBLE = "% Needs: \\usepackage{booktabs} and \\usepackage[table]{xcolor} (xcolor + colortbl for \\cellcolor)\n"
_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "↑": r"$\uparrow$",
    "↓": r"$\downarrow$",
    "±": r"$\pm$",
    "–": "--",
    "†": r"$^\dagger$",
    "≥": r"$\geq$",
    "·": r"$\cdot$",
    "√": r"$\surd$",
    "σ": r"$\sigma$",
    "μ": r"$\mu$",
    "²": r"$^2$",
    "∞": r"$\infty$",
    "→": r"$\rightarrow$",
    "τ": r"$\tau$",
}
_RE = re.compile("|".join(re.escape(k) for k in _SPECIAL))


def escape(text: str) -> str:
    return _RE.sub(lambda m: _SPECIAL[m.group(0)], str(text))


def _cell(c: Cell) -> str:
    text = escape(c.text) + (f"\\textsuperscript{{{c.note}}}" if c.note else "")
    text += f"\\,{{\\scriptsize({escape(c.seeds)})}}" if c.seeds else ""
    return f"\\cellcolor{{gray!25}}{text}" if c.grey else text


def latex(c: pd.DataFrame, std: bool = False) -> str:
    """The whole fragment (an empty-table comment when there are no Table 2 runs)."""
    out = [PREAMBLE]
    if c.empty:
        return "".join(out) + f"% {NO_RUNS}\n"
    for v in views(c, std):
        label = re.sub(r"[^A-Za-z0-9]+", "-", v.name).strip("-")
        groups = [escape(g) for g in v.groups]
        n = len(v.methods)
        lines = [
            "\\begin{table}[htbp]",
            "\\centering",
            "\\small",
            "\\setlength{\\tabcolsep}{4pt}",
            "\\begin{tabular}{lr" + "r" * n * len(groups) + "}",
            "\\toprule",
            " & & " + " & ".join(f"\\multicolumn{{{n}}}{{c}}{{{g}}}" for g in groups) + " \\\\",
            " ".join(f"\\cmidrule(lr){{{3 + i * n}-{2 + (i + 1) * n}}}" for i in range(len(groups))),
            "$S$ & total batch & " + " & ".join(escape(lab) for _ in groups for _, lab in v.methods) + " \\\\",
            "\\midrule",
        ]
        elastic_started = False
        for scale, total, cells in v.rows:
            if scale.startswith("elastic") and not elastic_started:
                lines.append("\\midrule")
                elastic_started = True
            lines.append(" & ".join([escape(scale), escape(total), *(_cell(x) for x in cells)]) + " \\\\")
        direction = "higher" if v.higher_is_better else "lower"
        caption = (
            f"Table 2, {escape(v.name)}: validation {escape(v.metric_label)} ({direction} is better), training "
            f"loss and iterations; mean over seeds. Grey: significantly worse than $S=1$ of the same method "
            f"(one-sided Welch $t$-test, 0.95), or a seed collapsed (no better than untrained or chance; a note "
            f"names it). N/A: diverged (iterations: the planned count). "
            f"{escape(MISSING)}: not run. n: the seeds a cell averages."
        )
        caption += f" {escape(v.noise)}" if v.noise else ""
        caption += f" {escape(v.pilot)}" if v.pilot else ""
        caption += "".join(f" \\textsuperscript{{{n}}}{escape(note)}." for n, note in enumerate(v.notes, 1))
        lines += [
            "\\bottomrule",
            "\\end{tabular}",
            f"\\caption{{{caption}}}",
            f"\\label{{tab:table2-{label}}}",
            "\\end{table}",
            "",
        ]
        out.append("\n".join(lines) + "\n")
    return "".join(out)
