"""A matrix may name the variant its `set` makes (`variant: NAME`): the name rides in each run's experiment
(not its identity), and the report shows it (reports.rundata.variants)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.core.errors import UserError
from bench.experiments.matrix import load

BODY = "preset: tiny\nseeds: [0]\nexperiments:\n  - table2:\n      tasks: [logreg]\n      methods: [adascale]\n"


def write(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(BODY + "      scales: [1, 4]\n" + extra)
    return path


def test_a_named_variant_reaches_every_run_of_its_experiment(tmp_path: Path) -> None:
    m = load(write(tmp_path, "      set: {data.conditioning: 10.0}\n      variant: ill-conditioned\n"))
    assert [r.experiment.get("variant") for r in m.runs] == ["ill-conditioned", "ill-conditioned"]
    assert all(r.overrides == {"data.conditioning": 10.0} for r in m.runs)
    plain = load(write(tmp_path, "      set: {data.conditioning: 10.0}\n"))
    assert [r.key for r in plain.runs] == [r.key for r in m.runs]  # the same runs: a name is not an identity
    assert all("variant" not in r.experiment for r in plain.runs)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ("      variant: lonely\n", "a `set` beside it"),
        ("      set: {data.conditioning: 10.0}\n      variant: 'a name far too long to be a short name'\n", "1–32"),
        ("      set: {data.conditioning: 10.0}\n      variant: [x]\n", "1–32"),
        ("      set: {data.conditioning: 10.0}\n      variant: '<b>'\n", "1–32"),
    ],
)
def test_a_bad_variant_name_is_one_line(tmp_path: Path, extra: str, needle: str) -> None:
    with pytest.raises(UserError, match=needle) as e:
        load(write(tmp_path, extra))
    assert "\n" not in str(e.value) and "variant" in str(e.value)
