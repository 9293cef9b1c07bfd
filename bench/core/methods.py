"""Which method a name means, and a user's rule as the suite handles it: the policy above the math of
bench.core.algo.rules. A built-in name is a row of METHODS; a user's rule `package.module:NAME` is imported here (by
bench.core.usercode's policy: PYTHONPATH, then the current folder, last), checked, and recorded (its name, its module's
sha256 and its row's facts) so that its run folder says which code ran; a preview (`matrix`, `plan`, `submit
--dry-run`) shows it as named and imports nothing; what reads run folders (`recorded`, `title`, `label`) never
imports anything. Nothing under bench.core.algo imports this module, bench.core.usercode, importlib or hashlib.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from bench.core import usercode
from bench.core.algo.rules import (
    METHODS,
    NEEDS,
    OPTIMIZERS,
    PACES,
    SHARED_AT_S1,
    Method,
    Rule,
    RuleContext,
    ScalingRule,
    method_order,
    shared_runs,
    shares_s1,
)
from bench.core.algo.schedules import ScaleSchedule
from bench.core.errors import UserError, did_you_mean


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


# -- a user's rule: package.module:NAME --------------------------------------------------------------------------
USER_RULE = usercode.USER_NAME
_LOADED: dict[str, Method] = {}  # user rules loaded by this process, by their `module:NAME`
_DIGESTS: dict[str, str] = {}  # the sha256 of each loaded rule's module source


def is_user_rule(name: str) -> bool:
    """Whether a method name is a user's rule (`package.module:NAME`) rather than a row of METHODS."""
    return ":" in name


def load_rule(name: str) -> Method:
    """The row of a user's rule `package.module:NAME`: the `ScalingRule` class the module defines as NAME, imported
    by bench.core.usercode (its policy: PYTHONPATH, then the current folder, last), its facts read by `Method.of` under
    the given name. A `Method` row written by hand (how rules were written before they were one piece) still loads,
    with a FutureWarning. Called only where the user names the rule (run, matrix, plan, submit and the runs they
    start); never by report or status."""
    if name in _LOADED:
        return _LOADED[name]
    found, digest = usercode.import_named("rule", name)
    if isinstance(found, type) and issubclass(found, ScalingRule):
        if found.factors is ScalingRule.factors:
            raise UserError(f"rule {name}: {found.__name__} defines no factors(t, scale, gain) -> (m, p, w)")
        row = Method.of(found, name)
    elif isinstance(found, Method):
        warnings.warn(
            f"rule {name}: a Method row is deprecated; write the rule as one class, a subclass of "
            "bench.core.algo.rules.ScalingRule with its label, title, pace, ... as class attributes (docs/design.md)",
            FutureWarning,
            stacklevel=2,
        )
        row = replace(found, name=name)
    else:
        what = found.__name__ if isinstance(found, type) else type(found).__name__
        raise UserError(
            f"rule {name}: {name.replace(':', '.')} is {what}; expected a subclass of "
            "bench.core.algo.rules.ScalingRule (its factors(t, scale, gain) and its label, title, pace, ... as class "
            "attributes)"
        )
    problem = check_row(row)
    if problem:
        raise UserError(f"rule {name}: {problem}")
    _LOADED[name] = row
    _DIGESTS[name] = digest
    return row


_FLAGS = ("table2", "identity_at_s1", "uses_gain", "paper")


def check_row(row: Method, T1: float = 1000.0) -> str | None:
    """What is wrong with a row, or None: an unknown pace or need, a builder that does not give a Rule, or
    `identity_at_s1` claimed by a rule whose factors at S = 1 are not (1, 1, 1) over a run of T1 iterations
    (built with T_AS = T = T1: the S = 1 counts). A check of the claim, not a proof: a rule could differ at a
    gain other than 1, which S = 1 never produces."""
    if row.pace not in PACES:
        return f"pace {row.pace!r} is not one of {', '.join(PACES)} (a class attribute of the rule)"
    for key in ("label", "title"):
        if not isinstance(getattr(row, key), str):
            return f"{key} is {type(getattr(row, key)).__name__}, not a string"
    for key in _FLAGS:
        if not isinstance(getattr(row, key), bool):
            return f"{key} is {type(getattr(row, key)).__name__}, not True or False"
    if not row.optimizers or any(o not in OPTIMIZERS for o in row.optimizers):
        return f"optimizers {row.optimizers!r} are not among {', '.join(OPTIMIZERS)}"
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
