"""Runs that take a number from other runs: LSW+ runs as many iterations as its AdaScale run (T_AS), the
heat map's scaled SGD as many as its grid's AdaScale runs (T). The method table (bench.core.algo.rules)
says which key a method needs; this module finds its value in the results folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core.algo.rules import ADASCALE, gain_rule
from bench.core.errors import UserError
from bench.core.files import SPEC, SUMMARY, finite_float, read_json_object
from bench.core.identity import identity_of
from bench.core.methods import method, title
from bench.core.runspec import RunSpec
from bench.run.spec import run_name


def resolve_needs(out: Path, spec: RunSpec) -> RunSpec:
    """`spec` with the value its method needs from other runs filled in (unless the user set it)."""
    key = method(spec.method).needs
    if key is None or getattr(spec, key):
        return spec
    find = {"T_AS": find_T_AS, "T": find_T}[key]
    return spec.replace(**{key: find(Path(out), spec)})


def gain_twin(spec: RunSpec) -> RunSpec:
    """The spec of the AdaScale run of the same experiment (AdamScale's under AdamW: bench.core.algo.rules.gain_rule; a
    user's rule's record is not AdaScale's)."""
    return spec.replace(drop=("rule",), method=gain_rule(spec.optimizer))


def _same_experiment(run_dir: Path, twin: RunSpec, seed: bool = True) -> bool:
    """Whether the run in `run_dir` is `twin`'s experiment (its whole identity: task, preset, scale
    schedule, every override that changes training; the seed too unless `seed` is False)."""
    other = read_json_object(run_dir / SPEC)
    if other is None:
        return False
    mine, theirs = dict(twin.identity), identity_of(other)
    if not seed:
        mine.pop("seed", None), theirs.pop("seed", None)
    return mine == theirs


def find_T_AS(out: Path, spec: RunSpec) -> float:
    """LSW+ runs as many iterations as the AdaScale run of the same experiment and seed; when that seed
    is missing, the mean over the AdaScale seeds of the same experiment that completed. A folder whose
    spec.json is another experiment (another preset, other overrides) is never taken."""
    twin = gain_twin(spec)
    seed_dir = Path(out) / run_name(twin)
    summary = read_json_object(seed_dir / SUMMARY)
    if summary is not None and _same_experiment(seed_dir, twin):
        if summary.get("status") != "completed":
            raise UserError(
                f"lsw+ needs its {title(twin.method)} run, but {seed_dir / SUMMARY} has status "
                f"{summary.get('status')!r}"
            )
        return _iterations(summary, seed_dir / SUMMARY)
    counts = []
    if seed_dir.parent.is_dir():
        for d in sorted(seed_dir.parent.iterdir()):
            s = read_json_object(d / SUMMARY)
            if s is not None and s.get("status") == "completed" and _same_experiment(d, twin, seed=False):
                counts.append(_iterations(s, d / SUMMARY))
    if not counts:
        raise UserError(
            f"lsw+ needs the {title(twin.method)} run {seed_dir} (or another seed of the same experiment) to have "
            "completed; run it first or pass --set T_AS=<iterations>"
        )
    return sum(counts) / len(counts)


def _iterations(summary: dict[str, Any], path: Path) -> float:
    """A completed AdaScale run's iteration count, LSW+'s T_AS: a finite number >= 1 (bench.core.files.finite_float),
    else one line naming the file (a true there was T_AS = 1, a 10**400 an OverflowError)."""
    value = finite_float(summary.get("iterations"))
    if value is None or value < 1:
        raise UserError(f"{path}: field 'iterations' is {str(summary.get('iterations'))[:40]}, not a count >= 1")
    return value


def _number(value: Any) -> bool:
    """A finite number (bench.core.files.finite_float): no bool, NaN, inf or 10**400."""
    return finite_float(value) is not None


def find_T(out: Path, spec: RunSpec) -> float:
    """Scaled SGD's own length in a heat map: the mean iteration count of the grid's AdaScale runs that
    reach the grid's threshold (all of its completed AdaScale runs when none does)."""
    from tasks.presets import card_of_run  # the metric's direction (a task of yours: as its spec recorded it)

    exp = spec.experiment or {}
    if exp.get("kind") != "heatmap":
        raise UserError("scaled needs T, its number of iterations (--set T=...), or a heat map to derive it from")
    higher = card_of_run(spec.task, spec.user_task).higher_is_better
    reached, completed = [], []
    for path in sorted((Path(out) / spec.task / ADASCALE).rglob(SUMMARY)):
        other_spec, s = read_json_object(path.parent / SPEC), read_json_object(path)
        if other_spec is None or s is None:  # unreadable, or not an object: not one of the grid's runs
            continue
        other = other_spec.get("experiment")
        if not isinstance(other, dict) or other.get("grid") != exp["grid"] or s.get("status") != "completed":
            continue
        if not _number(s.get("iterations")):
            continue
        completed.append(float(s["iterations"]))
        metric = s.get("val_metric")
        if _number(metric) and (metric >= exp["threshold"] if higher else metric <= exp["threshold"]):
            reached.append(float(s["iterations"]))
    counts = reached or completed
    if not counts:
        raise UserError(f"scaled SGD of heat map {exp['grid']!r} needs the grid's AdaScale runs to have completed")
    return sum(counts) / len(counts)
