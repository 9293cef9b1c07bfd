"""`report` draws a figure again only when what it shows changed: the second build of unchanged runs keeps
every PNG as it is, a changed run's figure is drawn again, and a damaged figure index is a warning."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from bench.core.files import METRICS
from reports.build import build_report
from reports.rundata.fakeruns import write_run


def pngs(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted((out / "report").glob("*.png"))}


def test_unchanged_figures_are_kept_and_changed_ones_drawn_again(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for method in ("adascale", "lsw"):
        for scale in (1, 2):
            write_run(out, "cifar10", method, scale, 0, 400, eval_every=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_report(out)
        first = pngs(out)
        assert any(name.startswith("curves_") for name in first)
        build_report(out)
        assert pngs(out) == first  # nothing changed: nothing drawn
        with open(out / "cifar10" / "lsw" / "s2" / "seed0" / METRICS, "a") as f:
            f.write(json.dumps({"iteration": 400, "tau": 1e6, "loss": 0.1, "lr": 0.1, "gain": 1.0}) + "\n")
        build_report(out)
    third = pngs(out)
    changed = {name for name in first if third[name] != first[name]}
    assert any("lsw" in name for name in changed)  # the changed run's figure
    assert not any("adascale" in name for name in changed if name.startswith("curves_"))  # not the others


def test_a_damaged_figure_index_is_a_warning_and_every_figure_is_drawn(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, "cifar10", "adascale", 2, 0, 300, eval_every=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_report(out)
        first = pngs(out)
        (out / "report" / "cache" / "figures.json").write_bytes(b'{"version": 1, "figures": [1, 2')
        html = build_report(out).read_text()
    assert "damaged figure index" in html
    assert all(pngs(out)[name] != first[name] for name in first if name.startswith("curves_"))


def test_a_curves_figure_is_titled_by_its_task_and_method(tmp_path: Path) -> None:
    from reports import figures
    from reports.rundata.collect import load

    out = tmp_path / "out"
    write_run(out, "cifar10", "adascale", 2, 0, 300, eval_every=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (fig,) = figures.curves(load(out), tmp_path / "figs")
    assert fig.title == "cifar10: AdaScale" and fig.path.exists()


def test_the_code_digest_covers_the_figures_package(tmp_path: Path) -> None:
    """A figure is drawn again when its drawing code changes: the digest reads reports/figures/*.py too."""
    from reports import figures
    from reports.figures.render import _code, code_sources

    package = set(Path(figures.__file__).parent.glob("*.py"))
    assert len(package) > 1 and package <= set(code_sources())
    (tmp_path / "reports" / "figures").mkdir(parents=True)
    (tmp_path / "reports" / "build.py").write_text("x = 1\n")
    module = tmp_path / "reports" / "figures" / "heatmap.py"
    module.write_text("LEVELS = 15\n")
    before = _code(tmp_path)
    module.write_text("LEVELS = 16\n")  # a change inside the package alone
    changed = _code(tmp_path)
    assert changed != before
    module.rename(module.with_name("curve.py"))  # the same bytes under another name: another module
    assert _code(tmp_path) != changed


def test_the_code_digest_covers_every_module_of_the_packages_not_a_folder_list(tmp_path: Path) -> None:
    """A module the drawing code may import outside reports/, bench/core/algo/ and tasks/presets/ (bench/core/files.py,
    the style constants of another package) changes the digest too: no hand-kept list of folders to miss it."""
    from reports.figures.render import _code, code_sources
    from reports.rundata.memo import PACKAGES

    sources = {p.relative_to(Path(__file__).resolve().parents[2]).as_posix() for p in code_sources()}
    assert {"bench/core/files.py", "bench/core/safefs/read.py", "tasks/base.py", "slurm/job.py"} <= sources
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    module = tmp_path / "bench" / "files.py"
    module.write_text("METRICS = 'metrics.jsonl'\n")
    before = _code(tmp_path)
    module.write_text("METRICS = 'metrics2.jsonl'\n")
    assert _code(tmp_path) != before
