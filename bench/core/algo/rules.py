"""The learning-rate scaling rules of docs/design.md §1 as per-iteration factors of one loop, and the method
table: the one home of a method.

Every method is the same loop:  η_t = m_t · w_t · lr(⌊τ_t⌋),  τ_{t+1} = τ_t + p_t,  stop when τ_t ≥ T1.
A rule only says what m_t (lr multiplier), p_t (progress on τ) and w_t (warm-up factor) are: an object with
a `name` and `factors(t, S, gain) -> (m, p, w)` (the `Rule` protocol); under AdamW it may also set β₁, β₂ and ε
(`adam(t, S, betas, eps)`, read by `adam_hyper`). A rule is one piece, a `ScalingRule` class: its facts (label,
pace, what it needs, ...) are class attributes, its `build` makes one run's rule; `METHODS` holds one row per
class (`Method.of`), what the suite reads before (or without) running it. A user's rule is such a class in the
user's own module, named `package.module:NAME`: loading, preview and provenance are policy, not math, and live
above this module (bench.core.methods).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol, runtime_checkable

from bench.core.algo.schedules import ScaleSchedule
from bench.core.algo.tau import advance as advance  # re-exported: plan reads it here
from bench.core.algo.tau import finished as finished  # re-exported: the engine's loop reads it here
from bench.core.algo.tau import iterations_for, tau_after
from bench.core.errors import UserError

WARMUP_FRACTION = 0.055  # Goyal et al. 2017's warm-up, as a fraction of the run's iterations (5 of 90 epochs)
# LEGW's base warm-up (its warm-up at S = 1) as a fraction of T1: the value at which its warm-up at S = 32 spans
# Goyal et al.'s 5.5 % of the run, at the batch (32 × 256 = 8 192) where that warm-up was calibrated.
LEGW_BASE_WARMUP = WARMUP_FRACTION / 32

Pace = Literal["scale", "gain", "one"]
Needs = Literal["T_AS", "T"]
PACES: tuple[str, ...] = ("scale", "gain", "one")
NEEDS: tuple[str, ...] = ("T_AS", "T")
OPTIMIZERS: tuple[str, ...] = ("sgd", "adamw")  # the spec's `optimizer` values (bench.core.runspec.Settings)


def extra_warmup(iteration: int, n: int | None) -> float:
    """The textbook's extra ramp (spec `warmup_iterations`): iteration k uses (k + 1) / n of its lr for k < n."""
    return min(1.0, (iteration + 1) / n) if n else 1.0


def adam_hyper(
    rule: Rule, t: int, scale: int, betas: tuple[float, float], eps: float
) -> tuple[tuple[float, float], float]:
    """AdamW's (β₁, β₂) and ε at iteration t at scale S: the rule's `adam(t, S, betas, eps)` where it has one
    (sqrt-sde; a user's rule may), else the spec's as given. Checked: β in [0, 1), ε > 0 and finite."""
    adam = getattr(rule, "adam", None)
    if adam is None:
        return betas, eps
    (b1, b2), e = adam(t, scale, betas, eps)
    b1, b2, e = float(b1), float(b2), float(e)
    if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0 and 0.0 < e < math.inf):
        raise UserError(
            f"rule {rule.name}: adam() at S = {scale} gave betas ({b1}, {b2}) and eps {e}; "
            "expected betas in [0, 1) and a finite eps > 0"
        )
    return (b1, b2), e


# The names of the methods the suite itself reasons about (the paper's findings judge AdaScale and LSW, the
# sweep and the heat maps run identity and scaled SGD, LSW+ and scaled SGD chain on AdaScale's runs): written
# here and nowhere else (tests/test_method_names.py); any other method is known only by its row.
ADASCALE, LSW, LSW_PLUS, IDENTITY, SCALED = "adascale", "lsw", "lsw+", "identity", "scaled"


# -- the rules --------------------------------------------------------------------------------------------------
@runtime_checkable
class Rule(Protocol):
    """What the engine asks of a rule, once per iteration t at scale S with the gain r_t (1 where statistics
    are not tracked): the lr multiplier m_t, the progress p_t on τ and the warm-up factor w_t."""

    name: str

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]: ...


@dataclass(frozen=True)
class RuleContext:
    """What a rule's `build` is given: the run's scale schedule, T1, and the counts other runs supply
    (T_AS: its AdaScale twin's iterations; T: its heat map grid's), where its method `needs` them."""

    scales: ScaleSchedule
    T1: float
    T_AS: float | None = None
    T: float | None = None


class ScalingRule:
    """A rule in one piece, as AdaptDL's scaling rules are: a class whose facts are class attributes (what the suite
    knows of it before, or without, running it: `Method.of` reads them into the method table) and whose `factors`
    is the rule; `build` makes the rule of one run (default: the class without arguments). A rule of yours is such
    a class in a module of yours (docs/design.md, "Your own rule")."""

    name: ClassVar[str] = ""  # the --method value (a rule of yours: package.module:NAME, set when it is loaded)
    label: ClassVar[str] = ""  # Table 2's column label (default: the name)
    title: ClassVar[str] = ""  # in figures, panels and prose (default: the label)
    # τ's progress per iteration, which bounds how many iterations a run takes before it runs: "scale" p_t = S_t
    # (exactly iterations_for), "one" p_t = 1 (T1), "gain" anywhere in between (AdaScale's r_t ∈ [1, S_t], and
    # the runs that take its count: LSW+'s T_AS, scaled SGD's T)
    pace: ClassVar[str] = ""
    table2: ClassVar[bool] = True  # a column of Table 2 (and of the rule comparison)
    # equals identity scaling at S = 1 (m = p = w = 1, T1 iterations): then a matrix runs its S = 1 cell once for
    # every such rule, as the shared AdaScale run (SHARED_AT_S1); False is always safe (its own S = 1 run)
    identity_at_s1: ClassVar[bool] = False
    uses_gain: ClassVar[bool] = False  # reads AdaScale's gain: needs the gradient statistics (spec track_stats)
    needs: ClassVar[str | None] = None  # the spec key another run supplies: T_AS (its AdaScale twin) or T (its grid's)
    paper: ClassVar[bool] = False  # one of the paper's methods (its Table 2's columns; the findings are about them)
    optimizers: ClassVar[tuple[str, ...]] = OPTIMIZERS  # the spec `optimizer`s it applies to (refused with others)
    # the rule this one stands in for under its optimizers (adamscale for adascale under AdamW): that rule is
    # refused there, naming this one
    replaces: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        """A class that does not name itself is named as a user names it, `module:Class`."""
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = f"{cls.__module__}:{cls.__qualname__}"

    @classmethod
    def build(cls, ctx: RuleContext) -> Rule:
        return cls()

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        raise NotImplementedError(f"{type(self).__name__} defines no factors(t, scale, gain)")


@dataclass(frozen=True)
class Identity(ScalingRule):
    """Single-batch SGD's rule (and plain large-batch SGD with the S = 1 schedule): m = p = w = 1."""

    name = IDENTITY
    label = title = "identity"
    pace = "one"
    table2 = False

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return 1.0, 1.0, 1.0


@dataclass(frozen=True)
class AdaScale(ScalingRule):
    """m = p = r_t: the gain stretches both the step and the clock."""

    name = ADASCALE
    label, title = "AS", "AdaScale"
    pace = "gain"
    identity_at_s1 = uses_gain = paper = True

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return gain, gain, 1.0


@dataclass(frozen=True)
class LinearScalingWarmup(ScalingRule):
    """LSW: m = p = S_t, with w_t ramping linearly from 1/S_t to 1 over the first 5.5 % of the run's
    `total_iterations`. LSW+ (`LinearScalingWarmupPlus`) is the same with p = T1 / T_AS so that it runs T_AS
    iterations."""

    total_iterations: int
    progress: float | None = None  # None: p_t = S_t (LSW); else the constant T1 / T_AS (LSW+)
    name = LSW
    label = title = "LSW"
    pace = "scale"
    identity_at_s1 = paper = True

    @classmethod
    def build(cls, ctx: RuleContext) -> LinearScalingWarmup:
        return cls(iterations_for(ctx.scales, ctx.T1))

    @property
    def warmup_iterations(self) -> float:
        return WARMUP_FRACTION * self.total_iterations

    def warmup(self, t: int, scale: int) -> float:
        wu = self.warmup_iterations
        if wu <= 0 or t >= wu:
            return 1.0
        return 1.0 / scale + (1.0 - 1.0 / scale) * (t / wu)

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        p = float(scale) if self.progress is None else self.progress
        return float(scale), p, self.warmup(t, scale)


@dataclass(frozen=True)
class LinearScalingWarmupPlus(LinearScalingWarmup):
    """LSW+: LSW's lr and warm-up over T_AS iterations, its AdaScale run's count, with p = T1 / T_AS."""

    name = LSW_PLUS
    label = title = "LSW+"
    pace = "gain"
    needs = "T_AS"

    @classmethod
    def build(cls, ctx: RuleContext) -> LinearScalingWarmupPlus:
        if not ctx.T_AS or ctx.T_AS < 1:
            raise UserError("lsw+ needs T_AS, the iteration count of its AdaScale run (AdamScale's under AdamW)")
        n = int(round(ctx.T_AS))
        return cls(n, progress=ctx.T1 / n)


@dataclass(frozen=True)
class SquareRootScaling(ScalingRule):
    """Square-root scaling (Krizhevsky 2014; AdaptDL's `SqrtScale`): m = √S_t, no warm-up. AdaptDL sets only the
    lr; here p = S_t, the fixed-epoch budget LSW keeps: ⌈T1/S⌉ iterations at a constant S, the S = 1 schedule
    over the same data, so the rule differs from LSW only in its lr multiplier."""

    name = "sqrt"
    label, title = "√S", "square-root scaling"
    pace = "scale"
    identity_at_s1 = True

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return math.sqrt(scale), float(scale), 1.0


@dataclass(frozen=True)
class AdamScale(ScalingRule):
    """AdaptDL's AdamScale (adaptdl 0.2.11, `scaling_rules.AdamScale` with `AdamGradientNoiseScale`), for AdamW:
    m = √r_t, p = r_t. Adam's step −η·m̂/(√v̂ + ε) is, elementwise, of the size of η whatever the gradient's
    size (its denominator normalises it), so a batch S times larger, whose gradient has S times less variance,
    does not get a step S times longer from √v̂; the SDE view (Malladi et al. 2022) gives √S for the lr where
    SGD's gives S. AdamScale takes AdaScale's gain r ∈ [1, S] (the lr SGD would gain from the larger batch at
    this noise) to the power ½: √S where the noise dominates (r = S), 1 where it does not (r = 1). The clock
    advances as AdaScale's, by r_t (AdaptDL's `progress += gain(scale)`): r counts the S = 1 iterations this
    one is worth, which is a statement about the data's noise, not the optimizer. r_t is measured on the
    preconditioned gradient g/P (bench.core.engine.precond) with AdaptDL's averaging (bench.core.algo.gain.AdaptDLGain):
    `statistics` tells the engine so."""

    name = "adamscale"
    label, title = "AdamS", "AdamScale"
    pace = "gain"
    identity_at_s1 = uses_gain = True
    optimizers = ("adamw",)
    replaces = ADASCALE
    statistics = "preconditioned"

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return math.sqrt(gain), gain, 1.0


@dataclass(frozen=True)
class SqrtSDE(ScalingRule):
    """The square-root scaling rule for Adam of Malladi, Lyu, Panigrahi and Arora, "On the SDEs and Scaling Rules
    for Adaptive Gradient Algorithms" (NeurIPS 2022): a batch κ = S times larger keeps the same SDE with
    η → √κ·η, 1 − β₁ → κ(1 − β₁), 1 − β₂ → κ(1 − β₂) and ε → ε/√κ. Each step is worth κ steps of the base
    batch (p = S_t: the fixed-epoch budget, ⌈T1/S⌉ iterations, as `sqrt`). The rule needs κ(1 − β) < 1: past
    it β would be negative, and the run is refused at its first step (bench.core.algo.rules.adam_hyper)."""

    name = "sqrt-sde"
    label, title = "√S-SDE", "square-root SDE scaling"
    pace = "scale"
    identity_at_s1 = True
    optimizers = ("adamw",)

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return math.sqrt(scale), float(scale), 1.0

    def adam(self, t: int, scale: int, betas: tuple[float, float], eps: float) -> tuple[tuple[float, float], float]:
        b1, b2 = (1.0 - scale * (1.0 - b) for b in betas)
        if b1 < 0 or b2 < 0:
            raise UserError(
                f"sqrt-sde at S = {scale}: 1 − S(1 − β) is {min(b1, b2):.3g} < 0 for betas {tuple(betas)}; the SDE "
                f"rule needs S(1 − β) < 1 (here S < {1 / (1 - min(betas)):.4g})"
            )
        return (b1, b2), eps / math.sqrt(scale)


@dataclass(frozen=True)
class LEGW(ScalingRule):
    """LEGW, linear-epoch gradual warm-up (You et al. 2019, "Large-Batch Training for LSTM and Beyond",
    arXiv:1901.08256): when the batch grows by S the lr grows by √S and the warm-up's length in epochs by S.
    Followed here as AdaptDL's `LEGWScale` states it: lr factor √S_t · min(1, τ_t / (S_t·τ_w)), a linear ramp
    from 0 over S_t·τ_w of τ, i.e. S_t times the base warm-up's epochs of data (τ counts S = 1 iterations, so
    τ_w is the base warm-up in epochs × N/b). p = S_t as `SquareRootScaling`, so at a constant S the ramp lasts
    τ_w iterations. τ_w = `base_warmup`, in τ (default LEGW_BASE_WARMUP·T1). At S = 1 it is an ordinary warm-up
    of τ_w iterations: not identity scaling there, so LEGW runs its own S = 1."""

    scales: ScaleSchedule
    base_warmup: float  # τ_w: the warm-up at S = 1, in iterations of S = 1 (= τ)
    name = "legw"
    label = title = "LEGW"
    pace = "scale"

    @classmethod
    def build(cls, ctx: RuleContext) -> LEGW:
        return cls(ctx.scales, LEGW_BASE_WARMUP * ctx.T1)

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        span = scale * self.base_warmup
        w = min(1.0, tau_after(self.scales, t) / span) if span > 0 else 1.0
        return math.sqrt(scale), float(scale), w


@dataclass(frozen=True)
class ScaledSGD(ScalingRule):
    """Plain SGD at scale S with its own schedule compressed into T iterations: m = 1, p = T1 / T."""

    progress: float
    name = SCALED
    label = title = "scaled SGD"
    pace = "gain"
    table2 = False
    needs = "T"

    @classmethod
    def build(cls, ctx: RuleContext) -> ScaledSGD:
        if not ctx.T or ctx.T < 1:
            raise UserError("scaled needs T, its number of iterations (--set T=...)")
        return cls(ctx.T1 / int(round(ctx.T)))

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return 1.0, self.progress, 1.0


# -- the method table ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Method:
    """One row of the method table: a rule's facts as `Method.of` reads them off its class (or, for a run folder's
    rule, as its spec recorded them: bench.core.methods.recorded): how a run of it is made, how long it is planned to
    take, what it needs and how it is shown. The CLI, the matrix, `plan`, `status`, the submitter and the reports
    read it; a new method is a `ScalingRule` class, its line in METHODS and its test."""

    name: str  # the --method value, the run folder's method, the spec's `method`
    label: str
    title: str
    build: Callable[[RuleContext], Rule]
    pace: Pace  # ScalingRule.pace
    table2: bool = True
    identity_at_s1: bool = False
    uses_gain: bool = False
    needs: Needs | None = None
    paper: bool = False
    optimizers: tuple[str, ...] = OPTIMIZERS
    replaces: str | None = None

    @classmethod
    def of(cls, rule: type[ScalingRule], name: str | None = None) -> Method:
        """The row of a rule class (named `name`: a rule of yours by the name it was loaded as)."""
        name = name or rule.name
        return cls(
            name=name,
            label=rule.label or name,
            title=rule.title or rule.label or name,
            build=rule.build,
            pace=rule.pace,  # type: ignore[arg-type]  # checked where a rule of yours is loaded (methods.check_row)
            table2=rule.table2,
            identity_at_s1=rule.identity_at_s1,
            uses_gain=rule.uses_gain,
            needs=rule.needs,  # type: ignore[arg-type]
            paper=rule.paper,
            optimizers=tuple(rule.optimizers),
            replaces=rule.replaces,
        )


# The one table of methods, in the order tables, figures and status list them: one line per rule class.
METHODS: dict[str, Method] = {
    m.name: m
    for m in map(
        Method.of,
        (
            AdaScale,
            AdamScale,
            LinearScalingWarmup,
            LinearScalingWarmupPlus,
            SquareRootScaling,
            SqrtSDE,
            LEGW,
            Identity,
            ScaledSGD,
        ),
    )
}
SHARED_AT_S1 = ADASCALE  # the one run that stands, at S = 1, for every Table 2 rule that is identity there


def shares_s1(row: Method) -> bool:
    """Whether a matrix runs this method's S = 1 cell as the shared AdaScale run."""
    return row.table2 and row.identity_at_s1


def refusal(row: Method, optimizer: str) -> str | None:
    """Why a method does not run with the spec's `optimizer` (one line), or None: an optimizer its row does not
    name, or one under which another row `replaces` it (adascale under AdamW: adamscale)."""
    instead = [r.name for r in METHODS.values() if r.replaces == row.name and optimizer in r.optimizers]
    if instead:
        return f"method {row.name} is not for optimizer {optimizer}: use {' or '.join(instead)}"
    if optimizer not in row.optimizers:
        twin = f"; with {optimizer} use {row.replaces}" if row.replaces else ""
        return f"method {row.name} is for optimizer {' or '.join(row.optimizers)} only{twin}"
    return None


def shared_at_s1(optimizer: str = "sgd") -> str:
    """The run that stands at S = 1 for the rules that share it, under `optimizer`: the first such row of the
    table that runs with it (adascale for SGD, SHARED_AT_S1; adamscale for AdamW)."""
    return next(n for n, r in METHODS.items() if shares_s1(r) and refusal(r, optimizer) is None)


def gain_rule(optimizer: str = "sgd") -> str:
    """AdaScale, or the row that stands for it under `optimizer` (adamscale under AdamW): the run whose iteration
    count LSW+ takes (T_AS) under that optimizer, and the rule `perf` times against identity."""
    return next((n for n, r in METHODS.items() if r.replaces == ADASCALE and optimizer in r.optimizers), ADASCALE)


def shared_runs() -> tuple[str, ...]:
    """The methods of the shared S = 1 runs, one per optimizer (adascale, adamscale)."""
    return tuple(dict.fromkeys(shared_at_s1(o) for o in OPTIMIZERS))


def table2_methods() -> tuple[str, ...]:
    """The built-in Table 2 rules, in the table's order; read when called, so a row added to METHODS shows
    without anything else changing."""
    return tuple(name for name, m in METHODS.items() if m.table2)


def paper_methods() -> tuple[str, ...]:
    """The paper's methods, in the table's order."""
    return tuple(name for name, m in METHODS.items() if m.paper)


def method_order(name: str) -> int:
    """A method's place in tables, figures and status (a user's rule after the built-in ones)."""
    return list(METHODS).index(name) if name in METHODS else len(METHODS)


def planned_iterations(
    method: str | Method, scales: ScaleSchedule, T1: float, T_AS: float | None = None, T: float | None = None
) -> float | None:
    """The iterations a run is planned to take, known before it runs (the paper prints it for a diverged
    cell): the count its `needs` key carries (LSW+'s T_AS, scaled SGD's T), else its pace's (LSW's
    iterations_for, identity's T1); None where only the run can tell (AdaScale's). A name is looked up among
    the built-in rows only; a user's rule is passed as its row (`recorded`)."""
    m = method if isinstance(method, Method) else METHODS[method]
    if m.needs is not None:
        given = {"T_AS": T_AS, "T": T}[m.needs]
        return float(given) if given is not None else None
    if m.pace == "gain":
        return None
    return float(iterations_for(scales, T1, None if m.pace == "scale" else 1.0))
