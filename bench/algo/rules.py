"""The learning-rate scaling rules of docs/design.md §1 as per-iteration factors of one loop, and the method
table: the one home of a method.

Every method is the same loop:  η_t = m_t · w_t · lr(⌊τ_t⌋),  τ_{t+1} = τ_t + p_t,  stop when τ_t ≥ T1.
A rule only says what m_t (lr multiplier), p_t (progress on τ) and w_t (warm-up factor) are: an object with
a `name` and `factors(t, S, gain) -> (m, p, w)` (the `Rule` protocol); under AdamW it may also set β₁, β₂ and ε
(`adam(t, S, betas, eps)`, read by `adam_hyper`). A method is one `Method` row of
`METHODS`: its rule's builder and everything the suite needs to know about it before (or without) running
it. A user's rule is a row in the user's own module, named `package.module:NAME` (`load_rule`); a run
folder records its name and source digest, and nothing that reads run folders ever imports it.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, runtime_checkable

from bench import usercode
from bench.algo.schedules import ScaleSchedule
from bench.algo.tau import advance as advance  # re-exported: plan reads it here
from bench.algo.tau import finished as finished  # re-exported: the engine's loop reads it here
from bench.algo.tau import iterations_for, tau_after
from bench.errors import UserError, did_you_mean

WARMUP_FRACTION = 0.055  # Goyal et al. 2017's warm-up, as a fraction of the run's iterations (5 of 90 epochs)
# LEGW's base warm-up (its warm-up at S = 1) as a fraction of T1: the value at which its warm-up at S = 32 spans
# Goyal et al.'s 5.5 % of the run, at the batch (32 × 256 = 8 192) where that warm-up was calibrated.
LEGW_BASE_WARMUP = WARMUP_FRACTION / 32

Pace = Literal["scale", "gain", "one"]
Needs = Literal["T_AS", "T"]
PACES: tuple[str, ...] = ("scale", "gain", "one")
NEEDS: tuple[str, ...] = ("T_AS", "T")
OPTIMIZERS: tuple[str, ...] = ("sgd", "adamw")  # the spec's `optimizer` values (bench.runspec.Settings)


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


# -- the rules --------------------------------------------------------------------------------------------------
@runtime_checkable
class Rule(Protocol):
    """What the engine asks of a rule, once per iteration t at scale S with the gain r_t (1 where statistics
    are not tracked): the lr multiplier m_t, the progress p_t on τ and the warm-up factor w_t."""

    name: str

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]: ...


@dataclass(frozen=True)
class Identity:
    """Single-batch SGD's rule (and plain large-batch SGD with the S = 1 schedule): m = p = w = 1."""

    name = "identity"

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return 1.0, 1.0, 1.0


@dataclass(frozen=True)
class AdaScale:
    """m = p = r_t: the gain stretches both the step and the clock."""

    name = "adascale"

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return gain, gain, 1.0


@dataclass(frozen=True)
class LinearScalingWarmup:
    """LSW: m = p = S_t, with w_t ramping linearly from 1/S_t to 1 over the first 5.5 % of the run's
    `total_iterations`. LSW+ is the same with p = T1 / T_AS so that it runs T_AS iterations."""

    total_iterations: int
    progress: float | None = None  # None: p_t = S_t (LSW); else the constant T1 / T_AS (LSW+)
    name: str = "lsw"

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
class SquareRootScaling:
    """Square-root scaling (Krizhevsky 2014; AdaptDL's `SqrtScale`): m = √S_t, no warm-up. AdaptDL sets only the
    lr; here p = S_t, the fixed-epoch budget LSW keeps: ⌈T1/S⌉ iterations at a constant S, the S = 1 schedule
    over the same data, so the rule differs from LSW only in its lr multiplier."""

    name = "sqrt"

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return math.sqrt(scale), float(scale), 1.0


@dataclass(frozen=True)
class AdamScale:
    """AdaptDL's AdamScale (adaptdl 0.2.11, `scaling_rules.AdamScale` with `AdamGradientNoiseScale`), for AdamW:
    m = √r_t, p = r_t. Adam's step −η·m̂/(√v̂ + ε) is, elementwise, of the size of η whatever the gradient's
    size (its denominator normalises it), so a batch S times larger, whose gradient has S times less variance,
    does not get a step S times longer from √v̂; the SDE view (Malladi et al. 2022) gives √S for the lr where
    SGD's gives S. AdamScale takes AdaScale's gain r ∈ [1, S] (the lr SGD would gain from the larger batch at
    this noise) to the power ½: √S where the noise dominates (r = S), 1 where it does not (r = 1). The clock
    advances as AdaScale's, by r_t (AdaptDL's `progress += gain(scale)`): r counts the S = 1 iterations this
    one is worth, which is a statement about the data's noise, not the optimizer. r_t is measured on the
    preconditioned gradient g/P (bench.engine.precond) with AdaptDL's averaging (bench.algo.gain.AdaptDLGain):
    `statistics` tells the engine so."""

    name = "adamscale"
    statistics = "preconditioned"

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return math.sqrt(gain), gain, 1.0


@dataclass(frozen=True)
class SqrtSDE:
    """The square-root scaling rule for Adam of Malladi, Lyu, Panigrahi and Arora, "On the SDEs and Scaling Rules
    for Adaptive Gradient Algorithms" (NeurIPS 2022): a batch κ = S times larger keeps the same SDE with
    η → √κ·η, 1 − β₁ → κ(1 − β₁), 1 − β₂ → κ(1 − β₂) and ε → ε/√κ. Each step is worth κ steps of the base
    batch (p = S_t: the fixed-epoch budget, ⌈T1/S⌉ iterations, as `sqrt`). The rule needs κ(1 − β) < 1: past
    it β would be negative, and the run is refused at its first step (bench.algo.rules.adam_hyper)."""

    name = "sqrt-sde"

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
class LEGW:
    """LEGW, linear-epoch gradual warm-up (You et al. 2019, "Large-Batch Training for LSTM and Beyond",
    arXiv:1901.08256): when the batch grows by S the lr grows by √S and the warm-up's length in epochs by S.
    Followed here as AdaptDL's `LEGWScale` states it: lr factor √S_t · min(1, τ_t / (S_t·τ_w)), a linear ramp
    from 0 over S_t·τ_w of τ, i.e. S_t times the base warm-up's epochs of data (τ counts S = 1 iterations, so
    τ_w is the base warm-up in epochs × N/b). p = S_t as `SquareRootScaling`, so at a constant S the ramp lasts
    τ_w iterations. τ_w = `base_warmup`, in τ (default LEGW_BASE_WARMUP·T1). At S = 1 it is an ordinary warm-up
    of τ_w iterations: not identity scaling there, so LEGW runs its own S = 1."""

    scales: ScaleSchedule
    base_warmup: float  # τ_w: the warm-up at S = 1, in iterations of S = 1 (= τ)
    name: str = "legw"

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        span = scale * self.base_warmup
        w = min(1.0, tau_after(self.scales, t) / span) if span > 0 else 1.0
        return math.sqrt(scale), float(scale), w


@dataclass(frozen=True)
class ScaledSGD:
    """Plain SGD at scale S with its own schedule compressed into T iterations: m = 1, p = T1 / T."""

    progress: float
    name = "scaled"

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return 1.0, self.progress, 1.0


# -- the method table ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RuleContext:
    """What a rule's builder is given: the run's scale schedule, T1, and the counts other runs supply
    (T_AS: its AdaScale twin's iterations; T: its heat map grid's), where its method `needs` them."""

    scales: ScaleSchedule
    T1: float
    T_AS: float | None = None
    T: float | None = None


@dataclass(frozen=True, kw_only=True)
class Method:
    """One row of the method table, the one home of a method: how a run of it is made, how long it is planned
    to take, what it needs and how it is shown. The CLI, the matrix, `plan`, `status`, the submitter and the
    reports read it; a new method is a row here (or in the user's module) and its test."""

    name: str  # the --method value, the run folder's method, the spec's `method`
    label: str  # Table 2's column label
    title: str  # in figures, panels and prose
    build: Callable[[RuleContext], Rule]
    # τ's progress per iteration, which bounds how many iterations a run takes before it runs: "scale" p_t = S_t
    # (exactly iterations_for), "one" p_t = 1 (T1), "gain" anywhere in between (AdaScale's r_t ∈ [1, S_t], and
    # the runs that take its count: LSW+'s T_AS, scaled SGD's T)
    pace: Pace
    table2: bool = True  # a column of Table 2 (and of the rule comparison)
    # equals identity scaling at S = 1 (m = p = w = 1, T1 iterations): then a matrix runs its S = 1 cell once for
    # every such rule, as the shared AdaScale run (SHARED_AT_S1); False is always safe (its own S = 1 run)
    identity_at_s1: bool = False
    uses_gain: bool = False  # reads AdaScale's gain: needs the gradient statistics (spec track_stats)
    needs: Needs | None = None  # the spec key another run supplies: T_AS (its AdaScale twin) or T (its grid's)
    paper: bool = False  # one of the paper's methods (its Table 2's columns; the findings are about them)
    optimizers: tuple[str, ...] = OPTIMIZERS  # the spec `optimizer`s it applies to (refused with any other)
    # the rule this one stands in for under its optimizers (adamscale for adascale under AdamW): that rule is
    # refused there, naming this one
    replaces: str | None = None


def _identity(ctx: RuleContext) -> Identity:
    return Identity()


def _adascale(ctx: RuleContext) -> AdaScale:
    return AdaScale()


def _lsw(ctx: RuleContext) -> LinearScalingWarmup:
    return LinearScalingWarmup(iterations_for(ctx.scales, ctx.T1))


def _lsw_plus(ctx: RuleContext) -> LinearScalingWarmup:
    if not ctx.T_AS or ctx.T_AS < 1:
        raise UserError("lsw+ needs T_AS, the iteration count of its AdaScale run (AdamScale's under AdamW)")
    n = int(round(ctx.T_AS))
    return LinearScalingWarmup(n, progress=ctx.T1 / n, name=LSW_PLUS)


def _sqrt(ctx: RuleContext) -> SquareRootScaling:
    return SquareRootScaling()


def _adamscale(ctx: RuleContext) -> AdamScale:
    return AdamScale()


def _sqrt_sde(ctx: RuleContext) -> SqrtSDE:
    return SqrtSDE()


def _legw(ctx: RuleContext) -> LEGW:
    return LEGW(ctx.scales, LEGW_BASE_WARMUP * ctx.T1)


def _scaled(ctx: RuleContext) -> ScaledSGD:
    if not ctx.T or ctx.T < 1:
        raise UserError("scaled needs T, its number of iterations (--set T=...)")
    return ScaledSGD(ctx.T1 / int(round(ctx.T)))


# The names of the methods the suite itself reasons about (the paper's findings judge AdaScale and LSW, the
# sweep and the heat maps run identity and scaled SGD, LSW+ and scaled SGD chain on AdaScale's runs): written
# here and nowhere else (tests/test_method_names.py); any other method is known only by its row.
ADASCALE, LSW, LSW_PLUS, IDENTITY, SCALED = "adascale", "lsw", "lsw+", "identity", "scaled"

# The one table of methods, in the order tables, figures and status list them.
METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            name=ADASCALE,
            label="AS",
            title="AdaScale",
            build=_adascale,
            pace="gain",
            identity_at_s1=True,
            uses_gain=True,
            paper=True,
        ),
        Method(
            name="adamscale",
            label="AdamS",
            title="AdamScale",
            build=_adamscale,
            pace="gain",
            identity_at_s1=True,
            uses_gain=True,
            optimizers=("adamw",),
            replaces=ADASCALE,
        ),
        Method(name=LSW, label="LSW", title="LSW", build=_lsw, pace="scale", identity_at_s1=True, paper=True),
        Method(
            name="lsw+",
            label="LSW+",
            title="LSW+",
            build=_lsw_plus,
            pace="gain",
            identity_at_s1=True,
            needs="T_AS",
            paper=True,
        ),
        Method(name="sqrt", label="√S", title="square-root scaling", build=_sqrt, pace="scale", identity_at_s1=True),
        Method(
            name="sqrt-sde",
            label="√S-SDE",
            title="square-root SDE scaling",
            build=_sqrt_sde,
            pace="scale",
            identity_at_s1=True,
            optimizers=("adamw",),
        ),
        Method(name="legw", label="LEGW", title="LEGW", build=_legw, pace="scale"),
        Method(name=IDENTITY, label="identity", title="identity", build=_identity, pace="one", table2=False),
        Method(
            name=SCALED, label="scaled SGD", title="scaled SGD", build=_scaled, pace="gain", table2=False, needs="T"
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


def title(name: str, facts: Any = None) -> str:
    """A method's name in figures and prose: a user's rule by the title it recorded (`facts`, a spec's `rule`)
    or, loaded in this process, its row's; else by its name. Never imports anything."""
    row = METHODS.get(name) or _LOADED.get(name) or (recorded(name, facts) if facts is not None else None)
    return row.title if row is not None else name


def label(name: str, facts: Any = None) -> str:
    """A method's Table 2 column label (a user's rule as `title` finds it)."""
    row = METHODS.get(name) or _LOADED.get(name) or (recorded(name, facts) if facts is not None else None)
    return row.label if row is not None else name


def shared_note(methods: Iterable[str] | None = None) -> str:
    """What the shared S = 1 run stands for, the one wording `matrix`, `plan` and `status` print: "shared: AS =
    LSW = LSW+ at S = 1", over the rules of `methods` (default: the built-in table) that share it. Names that
    are neither built in nor loaded are left out: this never imports anything."""
    names = list(METHODS) if methods is None else list(dict.fromkeys(methods))
    rows = [r for r in (METHODS.get(n) or _LOADED.get(n) for n in names) if r is not None and shares_s1(r)]
    if not any(r.name in shared_runs() for r in rows):  # the run that stands for them (adamscale's under AdamW)
        rows.insert(0, METHODS[SHARED_AT_S1])
    rows.sort(key=lambda r: method_order(r.name))
    return "shared: " + " = ".join(r.label for r in rows) + " at S = 1"


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


# -- a user's rule: package.module:NAME --------------------------------------------------------------------------
USER_RULE = usercode.USER_NAME
_LOADED: dict[str, Method] = {}  # user rules loaded by this process, by their `module:NAME`
_DIGESTS: dict[str, str] = {}  # the sha256 of each loaded rule's module source


def is_user_rule(name: str) -> bool:
    """Whether a method name is a user's rule (`package.module:NAME`) rather than a row of METHODS."""
    return ":" in name


def load_rule(name: str) -> Method:
    """The row of a user's rule `package.module:NAME`: a `Method` (as the rows of METHODS are written) that
    the module defines as NAME, imported by bench.usercode (its policy: PYTHONPATH, then the current folder,
    last). Its `name` becomes the given string. Called only where the user names the rule (run, matrix, plan,
    submit and the runs they start); never by report or status."""
    if name in _LOADED:
        return _LOADED[name]
    row, digest = usercode.import_named("rule", name)
    if not isinstance(row, Method):
        raise UserError(
            f"rule {name}: {name.replace(':', '.')} is {type(row).__name__}; expected a bench.algo.rules.Method "
            "row (its rule's builder, label, title, pace, ...)"
        )
    row = replace(row, name=name)
    problem = check_row(row)
    if problem:
        raise UserError(f"rule {name}: {problem}")
    _LOADED[name] = row
    _DIGESTS[name] = digest
    return row


def check_row(row: Method, T1: float = 1000.0) -> str | None:
    """What is wrong with a row, or None: an unknown pace or need, a builder that does not give a Rule, or
    `identity_at_s1` claimed by a rule whose factors at S = 1 are not (1, 1, 1) over a run of T1 iterations
    (built with T_AS = T = T1: the S = 1 counts). A check of the claim, not a proof: a rule could differ at a
    gain other than 1, which S = 1 never produces."""
    if row.pace not in PACES:
        return f"pace {row.pace!r} is not one of {', '.join(PACES)}"
    if row.needs is not None and row.needs not in NEEDS:
        return f"needs {row.needs!r} is not one of {', '.join(NEEDS)}"
    rule = row.build(RuleContext(ScaleSchedule.constant(1), T1, T1, T1))
    if not isinstance(rule, Rule):
        return f"its builder gave a {type(rule).__name__}, not a rule (name, factors(t, S, gain))"
    if row.identity_at_s1:
        for t in range(int(T1)):
            factors = tuple(float(v) for v in rule.factors(t, 1, 1.0))
            if factors != (1.0, 1.0, 1.0):
                return f"identity_at_s1 is claimed, but at S = 1 iteration {t} its (m, p, w) is {factors}"
    return None


_PREVIEW: contextvars.ContextVar[bool] = contextvars.ContextVar("rules_preview", default=False)


@contextlib.contextmanager
def previewing() -> Iterator[None]:
    """Inside, a user's rule is shown as named and never imported (`matrix`, `plan`, `submit --dry-run`:
    a preview of a matrix someone else wrote must not run its code): `method` gives a stand-in row."""
    token = _PREVIEW.set(True)
    try:
        yield
    finally:
        _PREVIEW.reset(token)


def _not_imported(ctx: RuleContext) -> Rule:
    raise UserError("a user's rule in a preview is not imported; run or submit the matrix to use it")


def stand_in(name: str) -> Method:
    """A preview's row of a user's rule: its name, no facts of its module (pace "gain": the widest bounds a
    plan can give; its own S = 1 run; needs nothing)."""
    if not USER_RULE.fullmatch(name):
        raise UserError(f"method {name!r}: a user's rule is named package.module:NAME (Python identifiers)")
    return Method(name=name, label=name, title=f"{name} (not imported)", build=_not_imported, pace="gain")


def method(name: str) -> Method:
    """The row of a method: a row of METHODS, or a user's rule (imported: see load_rule; in a preview, a
    stand-in row, nothing imported)."""
    if name in METHODS:
        return METHODS[name]
    if is_user_rule(name) and _PREVIEW.get() and name not in _LOADED:
        return stand_in(name)
    if is_user_rule(name):
        return load_rule(name)
    raise UserError(
        f"unknown method {name!r}{did_you_mean(name, METHODS)}; expected one of: {', '.join(METHODS)}, or a rule "
        "of yours as package.module:NAME"
    )


def record(name: str) -> dict[str, Any] | None:
    """What a spec records of its method: None for a built-in row; for a user's rule its name, the sha256 of its
    module's source and the row's facts, so that its run folder says which code ran and its reports need none."""
    if name in METHODS:
        return None
    row = method(name)
    if name not in _DIGESTS:  # a preview's stand-in: shown as named
        return {"name": name, "sha256": None, "label": row.label, "title": row.title, "preview": "not imported"}
    return {
        "name": name,
        "sha256": _DIGESTS[name],
        "label": row.label,
        "title": row.title,
        "table2": row.table2,
        "identity_at_s1": row.identity_at_s1,
        "uses_gain": row.uses_gain,
        "needs": row.needs,
        "pace": row.pace,
    }


def _not_loaded(ctx: RuleContext) -> Rule:
    raise UserError("a rule read from a run folder is never loaded; run it with --method package.module:NAME")


def recorded(name: str, facts: Any = None) -> Method:
    """The row of a method as a run folder describes it, never importing anything: a built-in row by its name,
    else the facts its spec recorded (`record`), else the name alone (a Table 2 column of unknown pace). Reports
    and status read methods this way."""
    if name in METHODS:
        return METHODS[name]
    f = facts if isinstance(facts, dict) and facts.get("name") == name else {}

    def text(key: str) -> str:
        v = f.get(key)
        return v if isinstance(v, str) and v else name

    def flag(key: str, default: bool) -> bool:
        v = f.get(key)
        return v if isinstance(v, bool) else default

    pace = f.get("pace") if f.get("pace") in PACES else "gain"
    needs = f.get("needs") if f.get("needs") in NEEDS else None
    return Method(
        name=name,
        label=text("label"),
        title=text("title"),
        build=_not_loaded,
        pace=pace,  # type: ignore[arg-type]
        table2=flag("table2", True),
        identity_at_s1=flag("identity_at_s1", False),
        uses_gain=flag("uses_gain", False),
        needs=needs,  # type: ignore[arg-type]
    )


def make_rule(
    name: str,
    scales: ScaleSchedule,
    T1: float,
    T_AS: float | None = None,
    T: float | None = None,
    recorded_as: dict[str, Any] | None = None,
) -> Rule:
    """The rule of a method for one run (LSW+ needs T_AS, scaled SGD T). A user's rule is imported, and its
    source must still be the one its spec recorded (`recorded_as`, the spec's `rule`)."""
    row = method(name)
    if recorded_as is not None:
        usercode.check_recorded("rule", name, recorded_as, _DIGESTS.get(name))
    return row.build(RuleContext(scales, float(T1), T_AS, T))
