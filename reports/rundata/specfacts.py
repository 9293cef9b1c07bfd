"""spec.json as the report reads it: one frozen type, `SpecFacts`, read once per run folder by `read_facts`.

A results folder may hold anything (someone else's runs, a damaged file), so the report does not read a run's spec
as bench.run.spec.read_spec does (refusing the file at its first problem): it reads it field by field. Each field
is checked for a type the report can use (`SPEC_FIELDS`) and a range (reports.rundata.guards.SPEC_RANGES); one
that fails is a warning naming the file and the field and is read as absent (None), the rest of the run is kept.
The elastic schedule is parsed here too, so that no reader downstream walks a damaged `elastic` mapping under
`except Exception`. A spec that is not a JSON object, or whose identity numbers (scale, T1, batch size) are out of
range, is no run of the tables: `read_facts` says why instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.algo.schedules import ScaleSchedule, scale_steps
from bench.core.errors import UserError
from reports.rundata import guards
from reports.rundata.jsonfields import NUMBER, checked, read_object

# The fields the report reads, with the types it can use: any other type is dropped with a warning naming the
# file and the field (as if absent), never a traceback later on.
SPEC_FIELDS: dict[str, tuple[type, ...]] = {
    "task": (str,),
    "method": (str,),
    "scale": (int, str),
    "seed": (int,),
    "preset": (str,),
    "batch_size": NUMBER,
    "T1": NUMBER,
    "T_AS": NUMBER,
    "T": NUMBER,
    "max_epochs": NUMBER,
    "lr_schedule": (dict,),
    "overrides": (dict,),
    "experiment": (dict, str),
    "elastic": (dict,),
    "rule": (dict,),
    "user_task": (dict,),
    "ttt_target": NUMBER,
    "ranks": (int,),
    "accumulation": (int,),
    "optimizer": (str,),
}


@dataclass(frozen=True)
class SpecFacts:
    """One run's spec.json, every field of a usable type and range or None (absent or damaged)."""

    task: str | None = None
    method: str | None = None
    scale: int | str | None = None  # an S, or an elastic schedule's name
    seed: int | None = None
    preset: str | None = None
    batch_size: float | None = None
    T1: float | None = None
    T_AS: float | None = None
    T: float | None = None
    max_epochs: float | None = None
    ttt_target: float | None = None
    ranks: int | None = None
    accumulation: int | None = None
    optimizer: str | None = None
    lr_schedule: Mapping[str, Any] = field(default_factory=dict)
    overrides: Mapping[str, Any] = field(default_factory=dict)
    experiment: Mapping[str, Any] = field(default_factory=dict)  # {} for an ad-hoc run; a bare string is its kind
    rule: Mapping[str, Any] | None = None  # a user's rule as its spec recorded it (bench.core.methods.record)
    user_task: Mapping[str, Any] | None = None  # a task of yours as its spec recorded it
    steps: tuple[tuple[float, int], ...] | None = None  # (fraction of T1, S) of its scale: one, or the elastic steps

    @property
    def schedule(self) -> ScaleSchedule | None:
        """The S schedule over T1, where the scale and T1 give one."""
        if self.steps is None or self.T1 is None:
            return None
        return ScaleSchedule.from_fractions(self.steps, self.T1)

    @property
    def max_scale(self) -> float | None:
        """The largest S of the run: its scale, or the largest step of its elastic schedule."""
        return float(max(s for _, s in self.steps)) if self.steps is not None else None

    @property
    def rule_json(self) -> str | None:
        return json.dumps(self.rule, sort_keys=True, default=str) if self.rule is not None else None


def _steps(doc: dict[str, Any], path: Path, warn: Callable[[str], None]) -> tuple[tuple[float, int], ...] | None:
    """The run's (fraction of T1, S) steps, or None where its scale is absent; a damaged elastic schedule (no steps
    for its scale, steps that are no [fraction, S] pairs, or none from 0) is one warning."""
    scale = doc.get("scale")
    if scale is None:
        return None
    try:
        steps = tuple(scale_steps(scale, doc.get("elastic") or {}))
        ScaleSchedule.from_fractions(steps, 1.0)  # the schedule's own checks: from 0, every S >= 1
    except (KeyError, TypeError, ValueError, OverflowError, UserError) as e:
        warn(f"{path}: field 'elastic' has no usable {scale} schedule ({type(e).__name__}); ignored")
        return None
    return steps


def facts_of(doc: dict[str, Any], path: Path, warn: Callable[[str], None]) -> SpecFacts:
    """The facts of a spec object whose fields have passed `checked` and guards.check."""
    exp = doc.get("experiment")
    return SpecFacts(
        task=doc.get("task"),
        method=doc.get("method"),
        scale=doc.get("scale"),
        seed=doc.get("seed"),
        preset=doc.get("preset"),
        **{k: None if doc.get(k) is None else float(doc[k]) for k in ("batch_size", "T1", "T_AS", "T", "max_epochs")},
        ttt_target=None if doc.get("ttt_target") is None else float(doc["ttt_target"]),
        ranks=doc.get("ranks"),
        accumulation=doc.get("accumulation"),
        optimizer=doc.get("optimizer"),
        lr_schedule=doc.get("lr_schedule") or {},
        overrides=doc.get("overrides") or {},
        experiment={"kind": exp} if isinstance(exp, str) else exp or {},
        rule=doc.get("rule"),
        user_task=doc.get("user_task"),
        steps=_steps(doc, path, warn),
    )


def read_facts(path: Path, warn: Callable[[str], None]) -> tuple[SpecFacts | None, str]:
    """(the facts of the spec.json at `path`, "") or (None, the warning that skips its run)."""
    doc, why = read_object(path)
    if doc is None:
        return None, f"skipped {path}: {why}"
    doc = checked(doc, SPEC_FIELDS, path, warn)
    doc, dropped = guards.check(doc, guards.SPEC_RANGES, path, warn)  # finite, in range
    if set(dropped) & set(guards.IDENTITY):
        return None, f"skipped {path.parent}: its spec's {', '.join(dropped)} out of range (run left out of the tables)"
    return facts_of(doc, path, warn), ""
