"""Step-size stability: the largest learning rate at which heavy-ball SGD does not blow up along the sharpest
direction of the loss, the bound `advise` holds each rule's lr against (reports.advice.rule_advice).

**The bound.** Near weights w the loss is a quadratic with Hessian H; along an eigenvector of H with eigenvalue λ
(plus the weight decay ω, whose penalty ω/2·|w|² adds ω to every eigenvalue) the update of torch's SGD with
momentum β, v ← β·v + g, w ← w − η·v, is the heavy-ball recurrence x_{t+1} = x_t − η·λ·x_t + β·(x_t − x_{t−1}).
Its characteristic polynomial is p(z) = z² − (1 + β − η·λ)·z + β. Both roots lie inside the unit circle
(Jury's conditions for a real quadratic z² + a₁z + a₀) iff |a₀| < 1, p(1) > 0 and p(−1) > 0:

    |β| < 1,   p(1) = η·λ > 0,   p(−1) = 2 + 2β − η·λ > 0,

so for 0 ≤ β < 1 and λ > 0 the iteration is stable iff η < 2(1 + β)/λ. At β = 0 that is gradient descent's
η < 2/λ; momentum widens it to 4/λ as β → 1. The sharpest direction (λ_max) binds first, so a rule whose lr at
τ exceeds 2(1 + β)/(λ_max(τ) + ω) grows the error along it geometrically: the run diverges or is thrown into
a flatter region at a worse loss (the mechanism by which LSW fails on logreg at S·lr0 past 2/λ_max).
"""

from __future__ import annotations

import math


def stability_bound(sharpness: float, momentum: float = 0.0, weight_decay: float = 0.0) -> float:
    """The largest stable lr 2(1 + β)/(λ_max + ω) (module docstring); inf where λ_max + ω ≤ 0 (no direction
    curves up: no bound), NaN where λ_max is not a number or β is outside [0, 1)."""
    if not math.isfinite(sharpness) or not 0.0 <= momentum < 1.0:
        return math.nan
    curvature = sharpness + weight_decay
    return 2.0 * (1.0 + momentum) / curvature if curvature > 0 else math.inf


def heavy_ball_stable(lr: float, curvature: float, momentum: float) -> bool:
    """Whether both roots of z² − (1 + β − η·λ)·z + β lie strictly inside the unit circle: the exact test the
    bound stands for (tests/algo/test_stability.py holds the bound to it)."""
    a = 1.0 + momentum - lr * curvature
    disc = complex(a * a - 4.0 * momentum) ** 0.5
    return max(abs((a + disc) / 2), abs((a - disc) / 2)) < 1.0
