"""One run folder's spec.json and summary.json, read into its row of the runs table (reports.rundata.collect walks the
folders): every field the report reads is checked for a type it can use, so a damaged file costs a warning naming it,
never a traceback later on."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from bench import safefs
from bench.algo.schedules import ELASTIC, scale_schedule, scale_steps
from bench.files import CHECKPOINT, MAX_JSON_BYTES, METRICS, finite_float, open_regular
from bench.identity import SpecDocument, identity_of
from reports.rundata.failedseeds import collapsed
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


_NUMBER = (int, float)
# The fields the report reads, with the types it can use: any other type is dropped with a warning
# naming the file and the field (as if absent), never a traceback later on.
SPEC_FIELDS: dict[str, tuple[type, ...]] = {
    "task": (str,),
    "method": (str,),
    "scale": (int, str),
    "seed": (int,),
    "preset": (str,),
    "batch_size": _NUMBER,
    "T1": _NUMBER,
    "T_AS": _NUMBER,
    "max_epochs": _NUMBER,
    "lr_schedule": (dict,),
    "overrides": (dict,),
    "experiment": (dict, str),
    "elastic": (dict,),
    "rule": (dict,),
    "user_task": (dict,),
    "ttt_target": _NUMBER,
    "ranks": (int,),
    "accumulation": (int,),
}
SUMMARY_FIELDS: dict[str, tuple[type, ...]] = {
    "status": (str,),
    **dict.fromkeys(SUMMARY_NUMBERS, _NUMBER),
    "metric": (str,),
    "metric_label": (str,),
    "higher_is_better": (bool,),
    "git_commit": (str,),
    "versions": (dict,),
    "error": (str,),
}


def checked(obj: dict, fields: dict[str, tuple[type, ...]], path: Path, warn: Any) -> dict:
    """`obj` less the fields of a type the report cannot use (None is always "absent"), each named in
    a warning; booleans are not numbers."""
    out = dict(obj)
    for key, types in fields.items():
        value = out.get(key)
        if value is None:
            continue
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            warn(f"{path}: field {key!r} is {type(value).__name__}, not {'/'.join(t.__name__ for t in types)}; ignored")
            del out[key]
    return out


def _read_json(path: Path) -> tuple[dict | None, str | None]:
    """(object, None) or (None, why it could not be used)."""
    try:
        with open_regular(path, "rb", MAX_JSON_BYTES) as f:  # no link, no FIFO, bounded (bench.safefs)
            text = f.read().decode("utf-8")
    except OSError as e:
        return None, f"cannot read ({e.strerror or e})"
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 text (byte {e.start})"
    if not text.strip():
        return None, "empty file"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"corrupt JSON ({e.msg}: line {e.lineno}, column {e.colno})"
    except (ValueError, RecursionError):  # a value nested past the parser's depth
        return None, "corrupt JSON (nested too deep)"
    if not isinstance(obj, dict):
        return None, f"not a JSON object ({type(obj).__name__})"
    try:
        safefs.check_shape(obj, path)  # a 980-deep value would crash whatever walks it next
    except OSError as e:
        return None, f"corrupt JSON ({e.strerror})"
    return obj, None


def _num(value: Any) -> float:
    """A finite float, or NaN for anything else (None, bools, strings, inf, 10**400): bench.files.finite_float."""
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


def experiment_of(spec: SpecDocument) -> dict:
    """spec["experiment"] as a dict ({} for ad-hoc runs; a bare string is read as its kind)."""
    exp = spec.get("experiment")
    if isinstance(exp, str):
        return {"kind": exp}
    return exp if isinstance(exp, dict) else {}


def variant_of(overrides: dict) -> str:
    """The overrides that make a run differ from its preset, as a stable string ("" for none)."""
    keep = identity_of({"overrides": overrides or {}})["overrides"]
    return ",".join(f"{k}={json.dumps(v, sort_keys=True)}" for k, v in sorted(keep.items()))


def max_scale(spec: SpecDocument) -> float:
    """The largest S of a run: its scale, or the largest step of its elastic schedule."""
    scale = spec.get("scale")
    if isinstance(scale, str) and scale in ELASTIC:
        try:
            return float(max(s for _, s in scale_steps(scale, spec.get("elastic"))))
        except Exception:  # a damaged schedule: no largest S to show
            return math.nan
    return _num(scale)


def planned_iterations(spec: SpecDocument) -> float:
    """The iterations a run was planned to take, as the paper prints for a diverged cell: the method
    table's plan (bench.algo.rules.planned_iterations: LSW's ⌈T1/S⌉ on its scale schedule, LSW+'s T_AS);
    NaN for AdaScale (its count is only known once it has run: somewhere in T1/S … T1) and anything else.
    A user's rule is read as its spec recorded it (bench.methods.recorded): nothing is imported."""
    from bench.algo.rules import planned_iterations as plan
    from bench.methods import recorded

    try:
        row = recorded(str(spec["method"]), spec.get("rule"))
        T1 = float(spec["T1"])
        planned = plan(row, scale_schedule(spec["scale"], spec.get("elastic"), T1), T1, spec.get("T_AS"), spec.get("T"))
    except Exception:  # an incomplete spec: no plan to show
        return math.nan
    return _num(planned)


def _pilot_seeds(pilot_seeds: Any) -> tuple[int, ...]:
    """The seeds a run's matrix declared pilot for its task (bench.experiments.matrix: pilot_seeds); the
    folder's rule (reports.rundata.collect.folder_pilots) makes each a pilot seed for every run of the task."""
    if not isinstance(pilot_seeds, list):
        return ()
    return tuple(s for s in pilot_seeds if isinstance(s, int) and not isinstance(s, bool))


def _row(run_dir: Path, spec: SpecDocument, summary: dict | None) -> dict[str, Any]:
    exp = experiment_of(spec)
    sched = spec.get("lr_schedule") if isinstance(spec.get("lr_schedule"), dict) else {}
    overrides = spec.get("overrides") if isinstance(spec.get("overrides"), dict) else {}
    row: dict[str, Any] = {
        "task": str(spec.get("task", "?")),
        "method": str(spec.get("method", "?")),
        "scale": scale_str(spec.get("scale", "?")),
        "seed": spec.get("seed"),
        "preset": str(spec.get("preset") or ""),
        "batch_size": _num(spec.get("batch_size")),
        "T1": _num(spec.get("T1")),
        "T_AS": _num(spec.get("T_AS")),
        "max_scale": max_scale(spec),
        "max_epochs": _num(spec.get("max_epochs")),
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
        "ttt_target": _num(spec.get("ttt_target")),  # time to target's threshold, fixed before the run
        "ranks": _num(spec.get("ranks")),
        "accumulation": _num(spec.get("accumulation")),
        "optimizer": _str(spec.get("optimizer")) or "sgd",  # a spec before the key ran SGD
        "overrides": json.dumps(overrides, sort_keys=True, default=str),
        "variant": variant_of(overrides),
        "variant_label": label_of(exp),
        "collapsed": False,
        "pilot": False,  # the folder's rule sets it (reports.rundata.collect.folder_pilots)
        "_pilot_seeds": _pilot_seeds(exp.get("pilot_seeds")),
        "rule": json.dumps(spec["rule"], sort_keys=True, default=str) if isinstance(spec.get("rule"), dict) else None,
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
