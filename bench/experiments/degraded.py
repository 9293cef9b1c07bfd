"""A rule degraded by a known amount, for the positive control (control.yaml): AdaScale that stops at a
fraction f of its τ budget at every S ≥ 2 — the reviewer's "T1 cut" — and is AdaScale itself at S = 1, so
that its S = 1 is the shared run and its cells are judged against the undegraded S = 1 by finding (i)'s rule
(reports.rulecompare). The control must say `does not hold` on it: it shows that the suite sees a failure
near the margin, not only a collapse.

The size, fixed before the confirmatory runs from pilots on disjoint seeds (control.yaml's logreg, κ = 10,
lr0 1, constant lr, pilot seeds 0–2): S = 1's full loss at τ = 2000 (T1) was 0.25403, 0.25609, 0.25459
(excess over the optimum 0.2466 ≈ 0.0083: Δ = 0.25 × 0.0083 ≈ 0.0021), at τ = 1250 0.25908, 0.26084, 0.2637,
at τ = 1500 0.25667, 0.25818, 0.25746. A first cut at f = 0.7 (τ = 1400, interpolated +0.0040 ≈ 1.9Δ) ended
AdaScale S = 16 at 0.2567, 0.2570, 0.2600: +0.0030 ≈ 1.45Δ, three quarters of S = 1's rise at the same τ.
f = 0.65 (τ = 1300: S = 1 +0.0051, three quarters of it ≈ 0.0038 ≈ 1.8Δ) is the cut of about 2Δ.

A rule of the user kind (`bench.experiments.degraded:CUT`, docs/design.md §3 "Adding a method"), not a row of
the method table: it exists to test the detector, not to be compared as a scaling rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.algo.rules import Method, RuleContext

FRACTION = 0.65  # of the τ budget: ≈ 2Δ on the control's logreg (module docstring)


@dataclass(frozen=True)
class CutAdaScale:
    """m = r_t, p = r_t / f for S ≥ 2 (the run stops at f·T1 of S = 1's progress); (1, 1, 1) at S = 1."""

    name = "bench.experiments.degraded:CUT"
    fraction: float = FRACTION

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        if scale == 1:
            return 1.0, 1.0, 1.0
        return gain, gain / self.fraction, 1.0


def build(ctx: RuleContext) -> CutAdaScale:
    return CutAdaScale()


CUT = Method(
    name="bench.experiments.degraded:CUT",
    label="AS cut",
    title="AdaScale stopped at 0.65 of its budget (degraded on purpose)",
    build=build,
    pace="gain",
    identity_at_s1=True,  # at S = 1 the shared AdaScale run stands for it
    uses_gain=True,
)
