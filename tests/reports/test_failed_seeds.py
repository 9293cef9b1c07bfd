"""A collapsed seed is a failed seed (issue 55.4): a seed that ends no better than its task's chance level counts
like a divergence wherever a seed is judged (reports.rundata.failedseeds) — † in Table 2, `worse` in the rules grid,
evidence for (ii) — driven through the real `report`."""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path

import pytest

from bench.cli import main
from reports.rundata.failedseeds import chance_tolerance, collapsed
from reports.rundata.specfacts import SpecFacts
from tasks.presets import EVAL_EXAMPLES, card, check_card

from .test_reports import write_run

EXAMPLES = 5000  # the tiny cifar10's test images: 3 binomial sds of a 10 % guess are 1.27 points


def test_the_tolerance_is_three_binomial_sds_of_a_guess_on_the_evaluation_set() -> None:
    assert math.isclose(chance_tolerance(10.0, EXAMPLES, 0.0, 100.0), 300 * math.sqrt(0.09 / EXAMPLES))
    assert chance_tolerance(10.0, None, 0.0, 100.0) == 0.0  # the size not reported: at or below chance only
    assert card("cifar10").chance == {"tiny": 10.0, "paper": 10.0} and card("imagenet").chance["paper"] == 0.1
    assert card("transformer").chance == {} and card("logreg").chance == {}  # BLEU, a loss: no chance level


@pytest.mark.parametrize("chance", [{"tiny": 200.0}, {"tiny": "10"}, {"tiny": math.nan}, [10.0]])
def test_a_chance_level_outside_the_metrics_range_or_not_a_number_is_a_wrong_card_field(chance) -> None:
    with pytest.raises(ValueError, match="field chance"):
        check_card(replace(card("cifar10"), chance=chance))


def seeds(root: Path, method: str, scale: int, vals: list[float], **kw) -> None:
    for k, v in enumerate(vals):
        last_eval = {"top1": v, EVAL_EXAMPLES: float(EXAMPLES)}
        write_run(root, "cifar10", method, scale, k, val=v, summary_extra={"eval": last_eval}, **kw)


def test_two_of_three_lsw_seeds_at_chance_are_failed_seeds(tmp_path: Path) -> None:
    seeds(tmp_path, "adascale", 1, [74.0, 74.1, 73.9])
    seeds(tmp_path, "adascale", 8, [74.1, 73.8, 74.2], T1=100, iterations=20, b_simple=50.0)
    seeds(tmp_path, "lsw", 8, [10.1, 11.2, 74.0], T1=100, iterations=13)  # 11.2 < 10 + 1.27: still a guess
    assert main(["report", str(tmp_path)]) == 0
    rep = tmp_path / "report"
    with (rep / "rule_verdicts.csv").open() as f:
        row = next(r for r in csv.DictReader(f) if r["scale"] == "8" and r["method"] == "lsw")
    assert row["status"] == "worse" and "2 seed(s) collapsed" in row["detail"], row
    with (rep / "findings.csv").open() as f:
        ii = next(r for r in csv.DictReader(f) if r["check"] == "ii")
    assert ii["status"] == "holds" and "S = 8: 2 seed(s) collapsed" in ii["detail"], ii
    with (rep / "table2.csv").open() as f:
        cell = next(r for r in csv.DictReader(f) if r["scale"] == "8" and r["method"] == "lsw")
    assert cell["grey_metric"] == "True" and cell["n_collapsed"] == "2" and cell["collapsed_at"] == "seed 0, seed 1"
    md = (rep / "table2.md").read_text()
    assert "†" in md and "S = 8 LSW: collapsed (seed 0, seed 1)" in md, md
    assert "or a seed collapsed" in (rep / "table2.tex").read_text()
    assert "cifar10 S = 8: AdaScale keeps, LSW worse" in (rep / "rules.txt").read_text()
    for name in ("scalefree.csv", "speedup.csv"):  # a speed-up bought with failed seeds is flagged as no success
        with (rep / name).open() as f:
            row = next(r for r in csv.DictReader(f) if r["scale"] == "8" and r["method"] == "lsw")
        assert row["quality"] == "a seed collapsed", (name, row)


def test_a_seed_past_the_tolerance_has_learned(tmp_path: Path) -> None:
    """13 % on 5 000 images is 4.5 sds past a 10 % guess: not collapsed, so no failed seed."""
    seeds(tmp_path, "adascale", 1, [74.0, 74.1, 73.9])
    seeds(tmp_path, "lsw", 8, [13.0, 13.0, 74.0], T1=100, iterations=13)
    assert main(["report", str(tmp_path)]) == 0
    with (tmp_path / "report" / "table2.csv").open() as f:
        cell = next(r for r in csv.DictReader(f) if r["scale"] == "8" and r["method"] == "lsw")
    assert cell["n_collapsed"] == "0"


def test_a_damaged_evaluation_size_is_no_size() -> None:
    """A planted `examples: true` (n = 1 would make a 90-point tolerance) reads as no size: only chance counts."""
    spec = SpecFacts(task="cifar10", preset="tiny")
    done = {"status": "completed", "val_metric": 10.5}
    assert not collapsed(spec, done | {"eval": {EVAL_EXAMPLES: True}})
    assert collapsed(spec, done | {"eval": {EVAL_EXAMPLES: 300.0}})  # 300 images: 3 sds of a guess are 5.2 points
    assert not collapsed(spec, done | {"status": "diverged"}) and not collapsed(SpecFacts(task="nope"), done)


def logreg_seeds(root: Path, method: str, scale: int, vals: list[float], initial: float | None = 0.6931, **kw) -> None:
    """logreg seeds (a loss, lower is better: no chance level on its card) whose untrained model's evaluation,
    at iteration 0, scored `initial` (None: a run folder written before the engine recorded it)."""
    for k, v in enumerate(vals):
        extra = {"eval": {"loss": v}} | ({"initial_eval": {"loss": initial}} if initial is not None else {})
        write_run(root, "logreg", method, scale, k, val=v, metric="loss", summary_extra=extra, **kw)


def test_seeds_that_end_no_better_than_their_untrained_model_are_failed_seeds(tmp_path: Path) -> None:
    """A task without a chance level (logreg's loss): two LSW seeds that end at or above their iteration-0 loss have
    collapsed, as seeds at chance have: † in Table 2, 'worse' in the rules grid."""
    assert card("logreg").chance == {}
    logreg_seeds(tmp_path, "adascale", 1, [0.330, 0.331, 0.329])
    logreg_seeds(tmp_path, "adascale", 8, [0.331, 0.330, 0.332], T1=100, iterations=20, b_simple=50.0)
    logreg_seeds(tmp_path, "lsw", 8, [0.7012, 0.6931, 0.331], T1=100, iterations=13)
    assert main(["report", str(tmp_path)]) == 0
    rep = tmp_path / "report"
    with (rep / "table2.csv").open() as f:
        cell = next(r for r in csv.DictReader(f) if r["scale"] == "8" and r["method"] == "lsw")
    assert cell["grey_metric"] == "True" and cell["n_collapsed"] == "2" and cell["collapsed_at"] == "seed 0, seed 1"
    assert "S = 8 LSW: collapsed (seed 0, seed 1)" in (rep / "table2.md").read_text()
    with (rep / "rule_verdicts.csv").open() as f:
        row = next(r for r in csv.DictReader(f) if r["scale"] == "8" and r["method"] == "lsw")
    assert row["status"] == "worse" and "2 seed(s) collapsed" in row["detail"], row
    assert "logreg S = 8: AdaScale keeps, LSW worse" in (rep / "rules.txt").read_text()


def test_seeds_that_improve_on_their_untrained_model_and_old_folders_without_one_read_fine(tmp_path: Path) -> None:
    """The same LSW seeds ending below their iteration-0 loss are no failed seeds; a folder written before the
    iteration-0 evaluation (no initial_eval) still reports, judged by chance alone (none for a loss)."""
    logreg_seeds(tmp_path, "adascale", 1, [0.330, 0.331, 0.329])
    logreg_seeds(tmp_path, "adascale", 8, [0.331, 0.330, 0.332], T1=100, iterations=20, b_simple=50.0, initial=None)
    logreg_seeds(tmp_path, "lsw", 8, [0.329, 0.331, 0.330], T1=100, iterations=13)
    assert main(["report", str(tmp_path)]) == 0
    with (tmp_path / "report" / "table2.csv").open() as f:
        cells = {(r["method"], r["scale"]): r for r in csv.DictReader(f)}
    assert cells[("lsw", "8")]["n_collapsed"] == "0" and cells[("lsw", "8")]["grey_metric"] == "False"
    assert cells[("adascale", "8")]["n_collapsed"] == "0"
    assert "logreg S = 8: AdaScale keeps, LSW keeps" in (tmp_path / "report" / "rules.txt").read_text()


def test_the_untrained_reference_takes_the_binomial_tolerance_of_its_own_level() -> None:
    """An accuracy with its evaluation's size: a final score within 3 binomial sds of the untrained model's (at
    30 % on 5 000 images: 1.94 points) has not learned; one past them has."""
    spec = SpecFacts(task="cifar10", preset="tiny")
    done = {"status": "completed", "eval": {EVAL_EXAMPLES: float(EXAMPLES)}, "initial_eval": {"top1": 30.0}}
    assert math.isclose(chance_tolerance(30.0, EXAMPLES, 0.0, 100.0), 300 * math.sqrt(0.21 / EXAMPLES))
    assert collapsed(spec, done | {"val_metric": 31.9}) and not collapsed(spec, done | {"val_metric": 32.0})
    assert not collapsed(spec, done | {"val_metric": 31.9, "initial_eval": {"top1": "30"}})  # damaged: no reference
