"""A rule degraded by a known amount, for the positive control (control.yaml): AdaScale that stops at a
fraction f of its τ budget at every S ≥ 2 — the reviewer's "T1 cut" — and is AdaScale itself at S = 1, so
that its S = 1 is the shared run and its cells are judged against the undegraded S = 1 by finding (i)'s rule
(reports.page.rulecompare). The control must say `does not hold` on it: it shows that the suite sees a failure
near the margin, not only a collapse.

The size, fixed before the confirmatory runs from pilots on disjoint seeds (control.yaml's logreg, κ = 10,
lr0 1, constant lr, pilot seeds 0–2): S = 1's full loss at τ = 2000 (T1) was 0.25403, 0.25609, 0.25459
(excess over the optimum 0.2466 ≈ 0.0083: Δ = 0.25 × 0.0083 ≈ 0.0021), at τ = 1250 0.25908, 0.26084, 0.2637,
at τ = 1500 0.25667, 0.25818, 0.25746. A first cut at f = 0.7 (τ = 1400, interpolated +0.0040 ≈ 1.9Δ) ended
AdaScale S = 16 at 0.2567, 0.2570, 0.2600: +0.0030 ≈ 1.45Δ, three quarters of S = 1's rise at the same τ.
f = 0.65 (τ = 1300: S = 1 +0.0051, three quarters of it ≈ 0.0038 ≈ 1.8Δ) was the cut of about 2Δ; the
control realised it at 2.9Δ (−0.0055 at S = 16, 12 seeds).

The graded cut (issue 53.7), sized on pilot seeds 0–4 (logreg's pilot seeds; a local `submit` of a pilot matrix
with cuts at f = 0.65, 0.75, 0.80, 0.85 at S = 16 and AdaScale S = 1, the control's logreg settings): S = 1's
final loss 0.25403, 0.25609, 0.25459, 0.25524, 0.25267 (Δ = 0.25 × excess = 0.00199); the cuts' mean rise over
it in Δ: 2.58 (f = 0.65), 1.02 (0.75), 1.09 (0.80), 0.29 (0.85). A line through them (−10.8Δ per unit of f)
puts 2Δ at f = 0.693, 1.5Δ at 0.739, 1.25Δ at 0.762: the grades below. Five seeds a side leave each pilot point
±0.3Δ, so the sizes are approximate; the report prints each grade's realised size (reports.verdicts.graded).

A rule of the user kind (`bench.experiments.degraded:CUT`, docs/design.md §3 "Adding a method"), not a row of
the method table: it exists to test the detector, not to be compared as a scaling rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench.core.algo.rules import ScalingRule

FRACTION = 0.69  # of the τ budget: ≈ 2Δ on the control's logreg (module docstring)
# The graded cut (issue 53.7): fractions of the τ budget sized on pilot seeds to cost ≈ 1.25Δ, 1.5Δ and 2Δ on the
# control's logreg at S = 16 (module docstring), by name, with the planned size in Δ the report's detection curve
# judges each against (reports.verdicts.graded)
GRADES: dict[str, tuple[float, float]] = {}  # name → (fraction, planned size in Δ), filled by each cut's class


@dataclass(frozen=True)
class CUT(ScalingRule):
    """m = r_t, p = r_t / f for S ≥ 2 (the run stops at f·T1 of S = 1's progress); (1, 1, 1) at S = 1."""

    fraction: ClassVar[float] = FRACTION
    size: ClassVar[float] = 2.0  # planned, in Δ
    pace = "gain"
    identity_at_s1 = True  # at S = 1 the shared AdaScale run stands for it
    uses_gain = True

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls._grade()

    @classmethod
    def _grade(cls) -> None:
        """Label and title from the cut's fraction and size, and its line in GRADES (by its name, module:Class)."""
        cls.label = f"AS cut {cls.fraction:g}"
        cls.title = f"AdaScale stopped at {cls.fraction:g} of its budget (degraded on purpose, ≈ {cls.size:g}Δ)"
        GRADES[cls.name] = (cls.fraction, cls.size)

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        if scale == 1:
            return 1.0, 1.0, 1.0
        return gain, gain / self.fraction, 1.0


CUT._grade()


@dataclass(frozen=True)
class CUT_150(CUT):  # noqa: N801  # the name a matrix gives: bench.experiments.degraded:CUT_150
    fraction = 0.74
    size = 1.5


@dataclass(frozen=True)
class CUT_125(CUT):  # noqa: N801
    fraction = 0.76
    size = 1.25
