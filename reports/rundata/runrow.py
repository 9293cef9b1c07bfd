"""One run folder's spec (reports.rundata.specfacts, read field by field) and summary.json, into its row of the runs
table (reports.rundata.collect walks the folders): every field the report reads is checked for a type it can use, so
a damaged file costs a warning naming it, never a traceback later on."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.core.files import CHECKPOINT, METRICS, finite_float
from bench.core.identity import identity_of
from reports.rundata.failedseeds import collapsed
from reports.rundata.jsonfields import NUMBER
from reports.rundata.specfacts import SpecFacts
from reports.rundata.variants import label_of

# summary.json's numbers, as they go into a run's row
SUMMARY_NUMBERS = (
    "val_metric",
    "train_loss",
    "iterations",
    "tau",
    "wall_time_s",
    "epochs",
    "target_epochs",
    "mean_gain",
    "noise_scale",
    "B_simple",
)
RUN_COLUMNS = [
    "task",
    "method",
    "scale",
    "seed",
    "preset",
    "status",
    *SUMMARY_NUMBERS,
    "metric",
    "metric_label",
    "higher_is_better",
    "batch_size",
    "T1",
    "T_AS",
    "max_scale",
    "planned_iterations",
    "max_epochs",
    "lr_kind",
    "lr0",
    "decay",
    "experiment_kind",
    "grid",
    "panel",
    "threshold",
    "sweep_batch",
    "sweep_method",
    "sweep_target",
    "ttt_target",
    "ranks",
    "accumulation",
    "optimizer",
    "overrides",
    "variant",
    "variant_label",
    "variant_name",
    "pilot",
    "collapsed",
    "rule",
    "git_commit",
    "versions",
    "error",
    "eval",
    "has_metrics",
    "has_checkpoint",
    "run_dir",
]


SUMMARY_FIELDS: dict[str, tuple[type, ...]] = {
    "status": (str,),
    **dict.fromkeys(SUMMARY_NUMBERS, NUMBER),
    "metric": (str,),
    "metric_label": (str,),
    "higher_is_better": (bool,),
    "git_commit": (str,),
    "versions": (dict,),
    "error": (str,),
}


def _num(value: Any) -> float:
    """A finite float, or NaN for anything else (None, bools, strings, inf, 10**400): bench.core.files.finite_float."""
    number = finite_float(value)
    return math.nan if number is None else number


def _str(value: Any) -> str | None:
    """A label from a nested field: strings only (a list or mapping there would break the grouping)."""
    return value if isinstance(value, str) else None


def scale_str(scale: Any) -> str:
    """Scales as table labels: "8", "elastic-up"."""
    if isinstance(scale, float) and scale.is_integer():
        scale = int(scale)
    return str(scale)


def variant_of(overrides: Mapping[str, Any]) -> str:
    """The overrides that make a run differ from its preset, as a stable string ("" for none)."""
    keep = identity_of({"overrides": dict(overrides)})["overrides"]
    return ",".join(f"{k}={json.dumps(v, sort_keys=True)}" for k, v in sorted(keep.items()))


def planned_iterations(spec: SpecFacts) -> float:
    """The iterations a run was planned to take, as the paper prints for a diverged cell: the method
    table's plan (bench.core.algo.rules.planned_iterations: LSW's ⌈T1/S⌉ on its scale schedule, LSW+'s T_AS);
    NaN for AdaScale (its count is only known once it has run: somewhere in T1/S … T1) and anything else, and
    where the spec lacks its method, T1 or scale schedule. A user's rule is read as its spec recorded it
    (bench.core.methods.recorded): nothing is imported."""
    from bench.core.algo.rules import planned_iterations as plan
    from bench.core.methods import recorded

    schedule = spec.schedule
    if spec.method is None or spec.T1 is None or schedule is None:
        return math.nan
    return _num(plan(recorded(spec.method, spec.rule), schedule, spec.T1, spec.T_AS, spec.T))


def _pilot_seeds(pilot_seeds: Any) -> tuple[int, ...]:
    """The seeds a run's matrix declared pilot for its task (bench.experiments.matrix: pilot_seeds); the
    folder's rule (reports.rundata.collect.folder_pilots) makes each a pilot seed for every run of the task."""
    if not isinstance(pilot_seeds, list):
        return ()
    return tuple(s for s in pilot_seeds if isinstance(s, int) and not isinstance(s, bool))


def _row(run_dir: Path, spec: SpecFacts, summary: dict | None) -> dict[str, Any]:
    exp, sched = spec.experiment, spec.lr_schedule
    row: dict[str, Any] = {
        "task": spec.task or "?",
        "method": spec.method or "?",
        "scale": scale_str("?" if spec.scale is None else spec.scale),
        "seed": spec.seed,
        "preset": spec.preset or "",
        "batch_size": _num(spec.batch_size),
        "T1": _num(spec.T1),
        "T_AS": _num(spec.T_AS),
        "max_scale": _num(spec.max_scale),
        "max_epochs": _num(spec.max_epochs),
        "lr_kind": _str(sched.get("kind")),
        "lr0": _num(sched.get("lr0")),
        "decay": _num(sched.get("decay")),
        "experiment_kind": _str(exp.get("kind")),
        "grid": _str(exp.get("grid")),
        "panel": _str(exp.get("panel")),
        "threshold": _num(exp.get("threshold")),
        "sweep_batch": _num(exp.get("batch")),
        "sweep_method": _str(exp.get("method")),
        "sweep_target": _num(exp.get("target")),
        "ttt_target": _num(spec.ttt_target),  # time to target's threshold, fixed before the run
        "ranks": _num(spec.ranks),
        "accumulation": _num(spec.accumulation),
        "optimizer": spec.optimizer or "sgd",  # a spec before the key ran SGD
        "overrides": json.dumps(spec.overrides, sort_keys=True, default=str),
        "variant": variant_of(spec.overrides),
        "variant_label": label_of(exp),
        "collapsed": False,
        "pilot": False,  # the folder's rule sets it (reports.rundata.collect.folder_pilots)
        "_pilot_seeds": _pilot_seeds(exp.get("pilot_seeds")),
        "rule": spec.rule_json,
        "has_metrics": (run_dir / METRICS).exists(),
        "has_checkpoint": (run_dir / CHECKPOINT).exists(),
        "run_dir": str(run_dir),
    }
    if summary is not None:
        row["status"] = summary["status"]
        for k in SUMMARY_NUMBERS:
            row[k] = _num(summary.get(k))
        row["metric"] = summary.get("metric")
        row["metric_label"] = summary.get("metric_label")
        row["higher_is_better"] = summary.get("higher_is_better")
        row["git_commit"] = summary.get("git_commit")
        versions = summary.get("versions")
        row["versions"] = json.dumps(versions, sort_keys=True) if isinstance(versions, dict) else None
        row["error"] = summary.get("error")
        last_eval = summary.get("eval")
        row["eval"] = json.dumps(last_eval, sort_keys=True) if isinstance(last_eval, dict) else None
        row["collapsed"] = collapsed(
            spec, summary
        )  # no better than untrained or chance: failed (reports.rundata.failedseeds)
        if summary["status"] == "diverged":  # only there: the plan stands in for the iterations (Table 2)
            row["planned_iterations"] = planned_iterations(spec)
    return row
