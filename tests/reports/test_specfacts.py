"""The report's one reader of spec.json (reports.rundata.specfacts): typed facts, a damaged field read as absent
with a warning naming the file and the field, and an elastic schedule parsed once, with no `except Exception`
downstream."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from reports.rundata.runrow import _row, planned_iterations
from reports.rundata.specfacts import SpecFacts, read_facts

BASE = {"task": "logreg", "method": "lsw", "preset": "tiny", "seed": 0, "batch_size": 32, "T1": 1000}


def read(tmp_path: Path, **fields: object) -> tuple[SpecFacts | None, str, list[str]]:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(BASE | fields))
    said: list[str] = []
    facts, why = read_facts(path, said.append)
    return facts, why, said


def test_an_elastic_schedule_is_read_once_into_its_steps(tmp_path: Path) -> None:
    facts, _, said = read(tmp_path, scale="elastic-up", elastic={"up": [[0, 2], [0.5, 8]]})
    assert facts is not None and not said
    assert facts.steps == ((0.0, 2), (0.5, 8)) and facts.max_scale == 8.0
    assert facts.schedule is not None and facts.schedule(600.0) == 8
    assert planned_iterations(facts) == 250 + 63  # LSW: 500 of τ at S = 2, 500 at S = 8
    assert _row(tmp_path, facts, None)["max_scale"] == 8.0


@pytest.mark.parametrize(
    "elastic", [{}, {"up": "fast"}, {"up": [["x", 2]]}, {"up": [[0.5, 2]]}, {"up": [[0, 0]]}, {"up": [[0, 1e400]]}]
)
def test_a_damaged_elastic_schedule_is_one_warning_and_no_plan(tmp_path: Path, elastic: dict) -> None:
    facts, _, said = read(tmp_path, scale="elastic-up", elastic=elastic)
    assert facts is not None and facts.steps is None and facts.max_scale is None and facts.schedule is None
    head = f"{tmp_path / 'spec.json'}: field 'elastic' has no usable elastic-up schedule ("
    assert len(said) == 1 and said[0].startswith(head) and said[0].endswith("); ignored"), said
    assert math.isnan(planned_iterations(facts)) and math.isnan(_row(tmp_path, facts, None)["max_scale"])


def test_a_field_of_the_wrong_type_or_range_is_absent_and_an_identity_number_skips_the_run(tmp_path: Path) -> None:
    facts, _, said = read(tmp_path, scale=4, seed="0", T="many", optimizer=3)
    assert facts is not None and (facts.seed, facts.T, facts.optimizer, facts.max_scale) == (None, None, None, 4.0)
    assert sorted(w.split("field ")[1].split(" ")[0] for w in said) == ["'T'", "'optimizer'", "'seed'"]
    facts, why, _ = read(tmp_path, scale=4, T1=0)
    assert facts is None and why.endswith("its spec's T1 out of range (run left out of the tables)")
    (tmp_path / "spec.json").write_text("[1]")
    facts, why = read_facts(tmp_path / "spec.json", print)
    assert facts is None and why == f"skipped {tmp_path / 'spec.json'}: not a JSON object (list)"
