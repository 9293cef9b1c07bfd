"""The curves' bands read each seed's columns as arrays (reports.figures.bands): the same numbers as the frame
of the two columns, made numeric, that they read before — strings, booleans, NaN, ±inf and unsorted τ included."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reports.figures import bands


def numeric(d: pd.DataFrame) -> pd.DataFrame:
    """The columns as numbers (anything else NaN), as the bands' frames were made before they read arrays."""
    if all(pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in d.dtypes):
        return d
    return d.apply(pd.to_numeric, errors="coerce")


def _curve_by_frame(df: pd.DataFrame, y: str) -> tuple[np.ndarray, np.ndarray] | None:
    d = numeric(df[["tau", y]]).dropna().sort_values("tau").drop_duplicates("tau", keep="last")
    return (d["tau"].to_numpy(float), d[y].to_numpy(float)) if len(d) else None


def _eval_by_frame(e: pd.DataFrame, y: str) -> tuple[np.ndarray, np.ndarray]:
    d = numeric(e[["tau", y]]).dropna()
    d = d if d["tau"].is_monotonic_increasing else d.sort_values("tau", kind="stable")
    return d["tau"].to_numpy(float), d[y].to_numpy(float)


FRAMES = [
    pd.DataFrame({"tau": [0.0, 1.0, 2.0], "loss": [3.0, 2.0, 1.0]}),
    pd.DataFrame({"tau": [2.0, 0.0, 1.0, 1.0], "loss": [1.0, 3.0, 2.0, 2.5]}),  # unsorted, a τ twice
    pd.DataFrame({"tau": [0, 1, 2], "loss": [True, False, True]}),  # integers, booleans
    pd.DataFrame({"tau": ["0", "x", 2.0], "loss": [1.0, 2.0, "3"]}, dtype=object),  # strings: numbers or NaN
    pd.DataFrame({"tau": [0.0, np.nan, np.inf, -np.inf], "loss": [np.inf, 1.0, 2.0, np.nan]}),
    pd.DataFrame({"tau": [0.0, 1.0], "loss": [None, None]}, dtype=object),  # nothing numeric: no curve
]


@pytest.mark.parametrize("df", FRAMES)
def test_a_seeds_curve_is_what_the_frame_of_its_columns_gives(df: pd.DataFrame) -> None:
    got, want = bands._curve(df, "loss"), _curve_by_frame(df, "loss")
    assert (got is None) == (want is None)
    if got is not None and want is not None:
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("df", FRAMES)
def test_an_evaluation_band_is_what_the_frames_of_its_columns_give(df: pd.DataFrame) -> None:
    e = df.rename(columns={"loss": "metric"})
    other = pd.DataFrame({"tau": [0.5, 1.5, 2.5, 3.5], "metric": [1.0, 2.0, 3.0, 4.0]})
    got = bands.eval_band([e, other])
    seqs = [s for s in (_eval_by_frame(f, "metric") for f in (e, other)) if len(s[0])]
    if not all(t[0] == 0 for t, _ in seqs):  # the untrained evaluation at τ = 0 only where every seed has one
        seqs = [s for s in ((t[t != 0], v[t != 0]) for t, v in seqs) if len(s[0])]
    k = min(len(t) for t, _ in seqs)
    ys = np.vstack([v[:k] for _, v in seqs])
    np.testing.assert_array_equal(got["tau"].to_numpy(float), np.vstack([t[:k] for t, _ in seqs]).mean(axis=0))
    np.testing.assert_array_equal(got["mean"].to_numpy(float), ys.mean(axis=0))
    assert (got["n"] == len(seqs)).all()


def test_columns_with_no_number_give_no_curve_and_no_band() -> None:
    """A seed whose quantity holds no number draws nothing (no curve, an empty band), never a traceback (it
    was an IndexError, which cost the whole curves figure kind)."""
    words = pd.DataFrame({"tau": ["a", "b"], "metric": ["c", "d"]})
    assert bands._curve(words.rename(columns={"metric": "loss"}), "loss") is None
    assert bands.eval_band([words]).empty and bands.band([words], "metric").empty
