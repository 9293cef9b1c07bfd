"""logreg's optimum L*, recorded on its card (tasks.presets.logreg.OPTIMUM) for the findings' loss margin,
recomputed by Newton's method (the loss is convex and smooth): the gradient vanishes there, and rescaling the
features (data.conditioning) leaves the minimum where it is."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.logreg import dataset
from tasks.presets.logreg import OPTIMUM, TARGET_LOSS, TARGET_MARGIN


def newton(conditioning: float) -> tuple[float, float]:
    """(min loss, |gradient| there) of logreg's full loss on the data at κ = conditioning."""
    x, y = dataset(conditioning)
    w = np.zeros(x.shape[1])
    for _ in range(30):
        p = 1 / (1 + np.exp(-(x @ w)))
        hess = (x * (p * (1 - p))[:, None]).T @ x / len(y)
        w -= np.linalg.solve(hess, x.T @ (p - y) / len(y))
    z = x @ w
    grad = x.T @ (1 / (1 + np.exp(-z)) - y) / len(y)
    return float(np.mean(np.logaddexp(0.0, z) - y * z)), float(np.linalg.norm(grad))


@pytest.mark.slow
@pytest.mark.parametrize("kappa", [1.0, 10.0])
def test_the_recorded_optimum_is_the_minimum(kappa: float) -> None:
    loss, grad = newton(kappa)
    assert grad < 1e-12
    assert loss == pytest.approx(OPTIMUM, rel=1e-12, abs=0)


def test_the_sweep_target_sits_just_above_it() -> None:
    assert TARGET_LOSS - TARGET_MARGIN == pytest.approx(OPTIMUM, abs=1e-9)
