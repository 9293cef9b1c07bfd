"""guards.per_frame and guards.float_columns: a run's metrics frame is read once per frame object, never by its
contents, and its columns come back as `floats` reads them, read-only."""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pytest

from reports.rundata.guards import float_columns, floats, per_frame


def test_a_frame_is_computed_once_while_it_lives_and_never_by_its_contents() -> None:
    calls: list[int] = []

    @per_frame
    def width(df: pd.DataFrame) -> int:
        calls.append(len(df.columns))
        return len(df.columns)

    a = pd.DataFrame({"x": [1.0, 2.0]})
    assert width(a) == width(a) == 1 and len(calls) == 1
    twin = a.copy()  # the same contents, another frame: computed for itself
    assert width(twin) == 1 and len(calls) == 2
    twin["y"] = 3.0
    assert width(twin) == 1  # identity, not contents: why a frame is never changed once read (read-only views)
    del a, twin
    gc.collect()
    b = pd.DataFrame({"x": [1.0], "y": [2.0], "z": [3.0]})  # may reuse a dead frame's id: not its entry
    assert width(b) == 3 and len(calls) == 3


def test_float_columns_are_floats_of_each_column_read_only() -> None:
    plain = pd.DataFrame({"tau": [0.0, 1.5, np.nan], "loss": [2.0, np.inf, 1.0]})
    got = float_columns(plain)
    for c in plain:
        np.testing.assert_array_equal(got[c], floats(plain[c]))
    with pytest.raises(ValueError):
        got["tau"][0] = 9.0  # a view of the frame's block: writing through it would change the frame
    mixed = pd.DataFrame({"tau": [0.0, 1.0], "note": ["a", "2.5"], "ok": [True, False], "n": [3, 4]})
    got = float_columns(mixed)
    np.testing.assert_array_equal(got["note"], [np.nan, 2.5])
    np.testing.assert_array_equal(got["n"], [3.0, 4.0])
    np.testing.assert_array_equal(got["ok"], floats(mixed["ok"]))
    assert float_columns(mixed) is got  # once per frame


def test_a_name_held_twice_is_no_column_and_no_crash() -> None:
    """A frame with one name twice (no engine writes one; a hand-built frame may): float_columns leaves the name
    out, and the noise statistics and the warm-up read the frame as one without them, not a KeyError."""
    from reports.stats.noise import _stats
    from reports.verdicts.warmup import warmup

    twice = pd.DataFrame([[0.0, 1.0, 2.0, 4.0, 5.0]] * 8, columns=["tau", "scale", "scale", "sum_sq", "mean_sq"])
    assert "scale" not in float_columns(twice) and _stats(twice) == {}
    gain_twice = pd.DataFrame([[0.0, 1.5, 1.6]] * 8, columns=["tau", "gain", "gain"])
    assert warmup(gain_twice, 4, 100.0).why == "no gain records"
