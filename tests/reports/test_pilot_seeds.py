"""Pilot seeds (issue 55.7a, 59.3): a seed declared pilot anywhere in a folder is never confirmatory there —
not in a finding, not in Table 2's cells (said under the table) — whichever matrix, or plain `run`, made it."""

from __future__ import annotations

from pathlib import Path

from bench.cli import main
from reports.tables.table2 import cells

from .test_reports import quiet_load, write_run


def test_table2_leaves_a_pilot_seed_out_as_the_findings_do(tmp_path: Path) -> None:
    """The probe's pilot seed is not averaged into its cell (n = 3, not 4), and the table says so."""
    exp = {"kind": "table2", "pilot_seeds": [1000]}
    for k, v in enumerate([74.0, 74.1, 73.9]):
        write_run(tmp_path, "cifar10", "adascale", 16, k, val=v, T1=100, iterations=30, experiment=exp)
    write_run(tmp_path, "cifar10", "adascale", 16, 1000, val=10.0, T1=100, iterations=30, experiment=exp)
    c = cells(quiet_load(tmp_path).runs)
    r = c[c["scale"] == "16"].iloc[0]
    assert int(r["n_seeds"]) == 3 and abs(float(r["val_metric"]) - 74.0) < 1e-9, r
    assert "pilot seed(s) 1000" in r["pilot_left"] and "findings" in r["pilot_left"]


def test_a_seed_declared_pilot_by_one_matrix_is_pilot_for_a_plain_run_into_the_folder(tmp_path: Path) -> None:
    """Through the CLI: a matrix declares seed 5 a pilot seed; a plain `run` of seed 5 into the same folder (it
    declares nothing itself) is still left out of Table 2's cell, and the page says so."""
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "preset: tiny\nseeds: [0]\npilot_seeds: {logreg: [5]}\n"
        "experiments:\n  - table2:\n      tasks: [logreg]\n      methods: [adascale]\n      scales: [2]\n"
    )
    out = tmp_path / "out"
    assert main(["submit", str(matrix), "--executor", "debug", "--out", str(out)]) == 0
    run = ["run", "--task", "logreg", "--method", "adascale", "--scale", "2", "--seed", "5", "--preset", "tiny"]
    assert main([*run, "--out", str(out)]) == 0
    assert main(["report", str(out)]) == 0
    md = (out / "report" / "table2.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| 2 |"))
    assert "(n=1)" in row and "(n=2)" not in row, row
    assert "pilot seed(s) 5" in md and "pilot seed(s) 5" in (out / "report" / "report.html").read_text()
