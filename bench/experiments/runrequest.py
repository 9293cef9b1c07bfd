"""A matrix's runs before their specs are resolved (`RunRequest`), and what is read off them apart from the file
they came from: the S = 1 cell several rules share, the order runs start in and the runs each waits for."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bench.core import methods as registry
from bench.core.algo import rules
from bench.core.algo.rules import ADASCALE, SHARED_AT_S1


@dataclass(frozen=True)
class RunRequest:
    """One run of a matrix, before its spec is resolved against the task's preset."""

    task: str
    method: str
    scale: int | str
    seed: int
    overrides: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    experiment: dict[str, Any] = field(default_factory=lambda: {"kind": "table2"}, hash=False, compare=False)

    @property
    def key(self) -> tuple:
        """Hashable even when an override is a list or mapping (an experiment-level `set`)."""
        overrides = json.dumps(self.overrides, sort_keys=True, default=str)
        return (self.task, self.method, self.scale, self.seed, overrides)


def shared_method(method: str, scale: int | str, optimizer: str = "sgd") -> str:
    """The method a Table 2 cell runs: at S = 1 every Table 2 rule that is identity scaling there is the same
    computation (bench.core.algo.rules.shares_s1), run once as adascale (under AdamW as adamscale:
    bench.core.algo.rules.shared_at_s1); any other rule runs its own."""
    if scale == 1 and rules.shares_s1(registry.method(method)):
        return SHARED_AT_S1 if optimizer == "sgd" else rules.shared_at_s1(optimizer)
    return method


def is_shared(method: str, scale: int | str, kind: str | None) -> bool:
    """Whether a run stands for every Table 2 rule that shares S = 1 (the S = 1 adascale run of a table2 cell;
    adamscale's under AdamW)."""
    return method in rules.shared_runs() and str(scale) == "1" and kind in (None, "table2")


def dedupe(runs: list[RunRequest]) -> list[RunRequest]:
    seen, out = set(), []
    for r in runs:
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return out


def order(runs: list[RunRequest]) -> list[RunRequest]:
    """Runs that others depend on first: AdaScale before LSW+ (which needs its iteration count) and before
    the heat map's scaled SGD (whose T is their mean iteration count)."""
    return sorted(runs, key=lambda r: registry.method(r.method).needs is not None)


def depends_on(run: RunRequest, runs: list[RunRequest]) -> list[RunRequest]:
    """The runs that must finish before `run` can start: what its method needs (the method table's
    `needs`): T = its grid's AdaScale runs (a heat map's), T_AS = its AdaScale twin (AdamScale under AdamW: the
    same overrides, so the same optimizer)."""
    needs = registry.method(run.method).needs
    if needs == "T" and run.experiment.get("kind") == "heatmap":
        return [r for r in runs if r.method == ADASCALE and r.experiment.get("grid") == run.experiment["grid"]]
    if needs != "T_AS":
        return []
    twins = {rules.gain_rule(o) for o in rules.OPTIMIZERS}
    return [
        r
        for r in runs
        if r.method in twins
        and r.task == run.task
        and r.scale == run.scale
        and r.seed == run.seed
        and r.overrides == run.overrides
    ]
