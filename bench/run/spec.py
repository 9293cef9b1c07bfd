"""Run specs: a task preset plus the user's choices, resolved into the one typed spec a run is made of
(bench.core.runspec.RunSpec), and read back from a run folder as the same type.

The resolved spec is written as spec.json; a run is a pure function of it (and the data on disk).
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

from bench.core import methods as registry
from bench.core.algo import rules
from bench.core.algo.schedules import ELASTIC
from bench.core.errors import UserError, did_you_mean
from bench.core.files import SPEC, read_json
from bench.core.identity import SpecDocument, code_key
from bench.core.runspec import INT64_MAX, MAX_SCALE, RUN_DEFAULTS, RunSpec, check
from bench.core.yamlsafe import excerpt, load_yaml
from tasks import record as record_task

PRESETS = ("tiny", "paper")


def parse_scale(value: str | int) -> int | str:
    """An integer in [1, MAX_SCALE] or an elastic schedule name."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SCALE:
        return value
    text = str(value).strip()
    if text in ELASTIC:
        return text
    if re.fullmatch(r"[0-9]{1,8}", text) and 1 <= int(text) <= MAX_SCALE:
        return int(text)
    raise UserError(f"scale {excerpt(value)} is not an integer in [1, {MAX_SCALE}] or one of {', '.join(ELASTIC)}")


def scale_label(scale: int | str) -> str:
    return scale if isinstance(scale, str) else f"s{scale}"


def default_data_root(task: str, variant: str = "") -> Path:
    base = os.environ.get("ADASCALE_BENCH_DATA") or Path.home() / ".cache" / "adascale-bench" / "tiny"
    return Path(base) / f"{task}{variant}"


def tiny_variant(task: Any, data: dict[str, Any]) -> str:
    """The ",key=value" suffix of each of the task's tiny-data keys (card.tiny_data) that differs from its tiny preset:
    the default folder of a tiny data set written with other settings, so two data sets never share one."""
    preset = task.presets["tiny"]["data"]
    if not isinstance(data, dict):  # not a mapping (`--set data=5`): the schema says so, in one line
        return ""
    keys = getattr(getattr(task, "card", task), "tiny_data", ())  # a task's card, or the card itself (matrices)
    parts = [f",{k}={data[k]}" for k in keys if k in data and data[k] != preset.get(k)]
    return re.sub(r"[^A-Za-z0-9_.,=+-]", "_", "".join(parts))


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """`key=value` strings (dotted keys reach into nested mappings); values are read as YAML (aliases
    bounded, 1e-3 a number: bench.core.yamlsafe)."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise UserError(f"--set {item!r}: expected key=value")
        key, raw = item.split("=", 1)
        try:
            out[key.strip()] = load_yaml(raw, f"--set {key.strip()}") if raw.strip() else ""
        except UserError as e:
            if "expands to more than" in str(e):
                raise
            out[key.strip()] = raw  # not YAML: the text itself
    return out


def _apply(spec: SpecDocument, key: str, value: Any) -> None:
    parts = key.split(".")
    node = spec
    for i, part in enumerate(parts[:-1]):
        if not isinstance(node.get(part), dict):
            raise UserError(f"--set {key}: {'.'.join(parts[: i + 1])!r} is not a mapping in the spec")
        node = node[part]
    last = parts[-1]
    if last not in node and len(parts) == 1:
        known = ", ".join(sorted(k for k in spec if k not in ("task", "method", "scale", "seed", "preset")))
        raise UserError(f"--set {key}: unknown key; expected one of: {known}")
    node[last] = value


def resolve(
    task: Any,
    method: str,
    scale: int | str,
    seed: int,
    preset: str,
    data_root: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    ranks: int | None = None,
    experiment: dict[str, Any] | None = None,
) -> RunSpec:
    """The full spec of one run, checked and typed."""
    row = registry.method(method)  # a user's rule (package.module:NAME) is imported here: the user named it
    if preset not in task.presets:
        hint = did_you_mean(preset, task.presets)
        raise UserError(
            f"unknown preset {preset!r}{hint} for task {task.name}; expected one of: {', '.join(task.presets)}"
        )
    scale = parse_scale(scale)
    if not isinstance(seed, int) or not 0 <= seed <= INT64_MAX:
        raise UserError(f"seed {excerpt(seed)} is not an integer in [0, 2**63)")
    spec: SpecDocument = {"task": task.name, "method": method, "scale": scale, "seed": seed, "preset": preset}
    spec.update(copy.deepcopy(RUN_DEFAULTS))
    spec.update(copy.deepcopy(task.presets[preset]))
    spec["overrides"] = dict(overrides or {})
    unknown = []
    for key, value in adamw_setting(task, preset, spec, overrides or {}).items():
        _apply(spec, key, value)
    for key, value in (overrides or {}).items():
        try:
            _apply(spec, key, value)
        except UserError as e:  # every mistake in one line: the schema's findings on the others too
            unknown.append(str(e))
    if ranks is not None:
        spec["ranks"] = ranks
    if experiment is not None:  # the matrix experiment the run belongs to
        spec["experiment"] = dict(experiment)
    if spec["threads"] is None and preset == "tiny":
        spec["threads"] = 1  # tiny models are too small for intra-op parallelism to pay
    user_task = record_task(task.name)
    spec["data_root"] = _data_root(task, preset, data_root, spec["data"], user_task)
    if isinstance(scale, str) and scale.removeprefix("elastic-") not in spec.get("elastic", {}):
        raise UserError(f"task {task.name} preset {preset} has no {scale} schedule")
    recorded = registry.record(method)
    if recorded is not None:  # its name and source digest: part of the run's identity
        spec["rule"] = recorded
    if user_task is not None:  # likewise for a task of yours, with its card's facts (report never imports it)
        spec["user_task"] = user_task
    typed, found = check(spec, task.presets[preset])
    if unknown:  # with what the schema finds in the rest, one line
        raise UserError("; ".join([*unknown, *found]))
    if typed is None:
        raise UserError("invalid spec: " + "; ".join(found))
    why = rules.refusal(row, typed.optimizer)  # adascale under AdamW (adamscale), adamscale under SGD, ...
    if why:
        raise UserError(why)
    if row.uses_gain and not typed.track_stats:
        raise UserError(f"{method} reads the gain from the gradient statistics: track_stats must stay true")
    return typed


def adamw_setting(task: Any, preset: str, spec: SpecDocument, overrides: dict[str, Any]) -> dict[str, Any]:
    """The task card's AdamW setting of the preset (tasks.presets.TaskCard.adamw: its tuned lr0, ...) where the run
    is AdamW (its overrides' `optimizer`, else the preset's), less the keys the run sets itself."""
    if overrides.get("optimizer", spec.get("optimizer")) != "adamw":
        return {}
    setting = getattr(getattr(task, "card", task), "adamw", None) or {}
    return {k: v for k, v in (setting.get(preset) or {}).items() if k not in overrides}


def _data_root(task: Any, preset: str, given: str | Path | None, data: Any, user_task: Any) -> str | None:
    """Where the run's data is: none for a task without data, else the folder given (absolute), else for the
    tiny preset its default folder (the paper presets name theirs)."""
    if not task.needs_data:
        return None
    if given is None:
        if preset != "tiny":
            raise UserError(f"--data-root is required for the {preset} preset of {task.name}")
        # a task of yours writes its tiny set with the code of its source: another source, another folder
        source = f",{user_task['sha256'][:12]}" if user_task is not None else ""
        given = default_data_root(task.name, tiny_variant(task, data) + source)
    return str(Path(given).expanduser().resolve())


def run_name(spec: RunSpec) -> str:
    """<task>/<method>/<s8|elastic-up>/seed<k>[,preset=paper][,key=value...][,code=...][,rule=...]: readable,
    and one folder per identity (bench.core.identity.identity_of): a preset other than tiny, every override that
    changes what the run computes and the code of yours it ran (a task's or a rule's recorded source digest
    and card, bench.core.identity.code_key) are in the name; where it runs (threads, workers, devices, ranks) is
    not. So a changed source is another folder: run starts it there, submit submits it there, the report
    shows it apart, and the old source's runs never stand for it."""
    leaf = f"seed{spec.seed}"
    if spec.preset != "tiny":
        leaf += f",preset={spec.preset}"
    for key, value in sorted(spec.identity["overrides"].items()):
        leaf += f",{key}={value}"
    for key, record in (("code", spec.user_task), ("rule", spec.rule)):
        if isinstance(record, dict) and isinstance(record.get("sha256"), str):  # not a preview's stand-in
            leaf += f",{key}={code_key(record)}"
    leaf = re.sub(r"[^A-Za-z0-9_.,=+-]", "_", leaf)
    return f"{spec.task}/{spec.method}/{scale_label(spec.scale)}/{leaf}"


def read_spec(run_dir: Path) -> RunSpec:
    """A run folder's spec.json, checked as `resolve` checks a spec it makes (its task and preset known, the
    schema's types and ranges): a seed or thread count written as a string is one line naming the file,
    not a traceback where it is used."""
    from tasks import known, names_hint
    from tasks.presets import card_of_run

    path = Path(run_dir) / SPEC
    try:
        spec = read_json(path)
    except FileNotFoundError:
        raise UserError(f"{run_dir} is not a run folder (no {SPEC})") from None
    except OSError as e:
        raise UserError(f"{path}: cannot be read: {e.strerror}") from None
    except ValueError as e:
        raise UserError(f"{path}: not JSON ({excerpt(str(e))})") from None
    if not isinstance(spec, dict):
        raise UserError(f"{path}: a JSON {type(spec).__name__}, not a spec")
    task = spec.get("task")
    if not isinstance(task, str) or not known(task):
        raise UserError(f"{path}: task {excerpt(task)} is not a task here; {names_hint()}")
    presets = card_of_run(
        task, spec.get("user_task"), str(path)
    ).presets  # a task of yours: the card its spec recorded, nothing imported
    if spec.get("preset") not in presets:
        raise UserError(f"{path}: preset {excerpt(spec.get('preset'))} is not one of: {', '.join(presets)}")
    typed, found = check(spec, presets[spec["preset"]])
    if typed is None:  # the first three problems: a damaged file can hold many
        raise UserError(f"{path}: not a valid spec ({'; '.join(found[:3])})")
    return typed
