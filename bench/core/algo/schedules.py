"""Schedules over the scale-invariant clock τ: the single-batch learning rate lr(τ) and the scale S(τ)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench.core.errors import UserError

if TYPE_CHECKING:  # the type only: what imports the math (the report) does not load pydantic for it
    from bench.core.runspec import Schedule


@dataclass(frozen=True)
class ExponentialDecay:
    """lr(τ) = lr0 · d^(τ/T1), d the total decrease over the run."""

    lr0: float
    decay: float
    T1: float

    def __call__(self, tau: float) -> float:
        return self.lr0 * self.decay ** (tau / self.T1)


@dataclass(frozen=True)
class StepDecay:
    """lr(τ) = lr0 · γ^k, k the number of milestones (fractions of T1) already reached."""

    lr0: float
    gamma: float
    milestones: tuple[float, ...]
    T1: float

    def __call__(self, tau: float) -> float:
        k = sum(1 for m in self.milestones if tau >= m * self.T1)
        return self.lr0 * self.gamma**k


@dataclass(frozen=True)
class Constant:
    lr0: float

    def __call__(self, tau: float) -> float:
        return self.lr0


def lr_schedule(cfg: Schedule, T1: float) -> ExponentialDecay | StepDecay | Constant:
    """Build lr(τ) from the spec's `lr_schedule` (its kind and keys checked by the schema)."""
    if cfg.kind == "exponential":
        return ExponentialDecay(float(cfg.lr0), float(cfg.decay), float(T1))
    if cfg.kind == "step":
        return StepDecay(float(cfg.lr0), float(cfg.gamma), tuple(float(m) for m in cfg.milestones), float(T1))
    return Constant(float(cfg.lr0))


ELASTIC = ("elastic-up", "elastic-down")  # the scale names of a preset's `elastic` schedules (up, down)


@dataclass(frozen=True)
class ScaleSchedule:
    """S as a step function of τ: `steps` are (τ at which it starts, S), the first at τ = 0."""

    steps: tuple[tuple[float, int], ...]

    @classmethod
    def constant(cls, scale: int) -> ScaleSchedule:
        return cls(((0.0, int(scale)),))

    @classmethod
    def from_fractions(cls, steps: Sequence[Sequence[float]], T1: float) -> ScaleSchedule:
        pairs = tuple((float(f) * T1, int(s)) for f, s in steps)
        if not pairs or pairs[0][0] != 0.0 or any(s < 1 for _, s in pairs):
            raise UserError(f"elastic schedule {list(steps)!r}: expected [[0, S0], [fraction, S1], ...]")
        return cls(pairs)

    def __call__(self, tau: float) -> int:
        scale = self.steps[0][1]
        for start, s in self.steps:
            if tau >= start:
                scale = s
        return scale

    @property
    def is_elastic(self) -> bool:
        return len({s for _, s in self.steps}) > 1

    @property
    def scales(self) -> list[int]:
        return [s for _, s in self.steps]

    def max_scale(self) -> int:
        return max(self.scales)


def ceil_div(a: float, b: float) -> int:
    return int(math.ceil(a / b - 1e-12))


def scale_steps(scale: int | str, elastic: Mapping[str, Any]) -> list[tuple[float, int]]:
    """(fraction of T1 at which it starts, S) of a spec's `scale`: one step for a constant S, else the preset's
    `elastic` steps. The one reader of `elastic`: the engine and `plan` (scale_schedule), the submitter's
    rank choice and the reports use it."""
    if not isinstance(scale, str):
        return [(0.0, int(scale))]
    if scale not in ELASTIC:
        raise UserError(f"scale {scale!r} is not a positive integer or one of {', '.join(ELASTIC)}")
    steps = elastic[scale.removeprefix("elastic-")]
    return [(float(f), int(s)) for f, s in steps]


def scale_schedule(scale: int | str, elastic: Mapping[str, Any], T1: float) -> ScaleSchedule:
    """The S schedule of a spec's `scale`: a constant S, or the preset's `elastic` steps over τ (T1 long)."""
    if isinstance(scale, str):
        return ScaleSchedule.from_fractions(scale_steps(scale, elastic), T1)
    return ScaleSchedule.constant(scale)
