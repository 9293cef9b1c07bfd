"""The run settings are written once (bench.core.runspec.Settings): their defaults, types and meaning."""

from __future__ import annotations

import pytest

from bench.core.errors import UserError
from bench.core.runspec import PRESET_KEYS, RUN_DEFAULTS, Settings
from bench.run.spec import resolve
from tasks import get_task


def test_every_setting_says_what_it_is_for() -> None:
    undocumented = [name for name, field in Settings.model_fields.items() if not field.description]
    assert undocumented == []


def test_a_resolved_spec_holds_every_default_and_every_preset_key() -> None:
    spec = resolve(get_task("logreg"), "adascale", 2, 0, "tiny")
    preset = get_task("logreg").presets["tiny"]  # a preset may set a setting (logreg: ttt_target)
    assert {k: getattr(spec, k) for k in RUN_DEFAULTS if k != "threads" and k not in preset} == {
        k: v for k, v in RUN_DEFAULTS.items() if k != "threads" and k not in preset
    }
    assert spec.ttt_target == preset["ttt_target"]
    assert spec.threads == 1  # the tiny preset's rule for an unset value
    assert set(PRESET_KEYS) <= set(spec.to_json())


def test_a_setting_is_checked_against_its_one_declaration() -> None:
    with pytest.raises(UserError, match=r"microbatch_mode='fused'.*'sequential' or 'batched'"):
        resolve(get_task("logreg"), "adascale", 2, 0, "tiny", overrides={"microbatch_mode": "fused"})


def test_an_unknown_key_does_not_hide_the_other_mistakes() -> None:
    """Every mistake of a command line in one line: an unknown key and a value out of range together."""
    task = get_task("logreg")
    with pytest.raises(UserError) as e:
        resolve(task, "adascale", 2, 0, "tiny", overrides={"nokey": 1, "T1": -5, "momentum": 3})
    text = str(e.value)
    assert "--set nokey: unknown key" in text and "T1=-5" in text and "momentum=3" in text and "\n" not in text
    with pytest.raises(UserError, match="invalid spec: T1=-5"):  # the schema alone, as before
        resolve(task, "adascale", 2, 0, "tiny", overrides={"T1": -5})


def test_a_task_mapping_that_is_not_a_mapping_is_the_schemas_one_line() -> None:
    """`--set data=5` reached the tiny data folder's name (tiny_variant) before the schema and was a TypeError."""
    with pytest.raises(UserError, match=r"data: expected a mapping, got 5") as e:
        resolve(get_task("cifar10"), "adascale", 2, 0, "tiny", overrides={"data": 5})
    assert "\n" not in str(e.value)


def test_a_tiny_data_setting_has_its_own_default_folder_whether_named_by_task_or_card() -> None:
    """`run` resolves with the task (get_task), a matrix with its card: both must put data written with another
    tiny_noise in a folder of its own (the task's object once lacked the card's tiny_data: the default folder)."""
    from tasks import card_of

    for named in (get_task("cifar10"), card_of("cifar10")):
        harder = resolve(named, "adascale", 2, 0, "tiny", overrides={"data.tiny_noise": 2.0}).data_root
        default = resolve(named, "adascale", 2, 0, "tiny").data_root
        assert harder.endswith("cifar10,tiny_noise=2.0") and default.endswith("cifar10")
