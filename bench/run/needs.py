"""Runs that take a number from other runs: LSW+ runs as many iterations as its AdaScale run (T_AS), the
heat map's scaled SGD as many as its grid's AdaScale runs (T). The method table (bench.algo.rules.METHODS)
says which key a method needs; this module finds its value in the results folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.algo.rules import METHODS
from bench.errors import UserError
from bench.files import SPEC, SUMMARY, read_json
from bench.run.spec import run_name


def resolve_needs(out: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` with the value its method needs from other runs filled in (unless the user set it)."""
    key = METHODS[spec["method"]].needs
    if key is None or spec.get(key):
        return spec
    find = {"T_AS": find_T_AS, "T": find_T}[key]
    return {**spec, key: find(Path(out), spec)}


def adascale_twin(spec: dict[str, Any]) -> dict[str, Any]:
    twin = dict(spec)
    twin["method"] = "adascale"
    return twin


def find_T_AS(out: Path, spec: dict[str, Any]) -> float:
    """LSW+ runs as many iterations as the AdaScale run of the same task, scale and seed; when that
    seed is missing, the mean over the AdaScale seeds that completed."""
    twin = adascale_twin(spec)
    seed_dir = Path(out) / run_name(twin)
    summary = seed_dir / SUMMARY
    if summary.exists():
        s = read_json(summary)
        if s.get("status") != "completed":
            raise UserError(f"lsw+ needs its AdaScale run, but {summary} has status {s.get('status')!r}")
        return float(s["iterations"])
    parent = seed_dir.parent
    suffix = seed_dir.name.split(",", 1)[1] if "," in seed_dir.name else None
    counts = []
    if parent.is_dir():
        for d in sorted(parent.iterdir()):
            other = d.name.split(",", 1)[1] if "," in d.name else None
            if other == suffix and (d / SUMMARY).exists():
                s = read_json(d / SUMMARY)
                if s.get("status") == "completed":
                    counts.append(float(s["iterations"]))
    if not counts:
        raise UserError(
            f"lsw+ needs the AdaScale run {seed_dir} (or another seed of it) to have completed; "
            "run it first or pass --set T_AS=<iterations>"
        )
    return sum(counts) / len(counts)


def find_T(out: Path, spec: dict[str, Any]) -> float:
    """Scaled SGD's own length in a heat map: the mean iteration count of the grid's AdaScale runs that
    reach the grid's threshold (all of its completed AdaScale runs when none does)."""
    from tasks.presets import card  # the metric's direction

    exp = spec.get("experiment") or {}
    if exp.get("kind") != "heatmap":
        raise UserError("scaled needs T, its number of iterations (--set T=...), or a heat map to derive it from")
    higher = card(spec["task"]).higher_is_better
    reached, completed = [], []
    for path in sorted((Path(out) / spec["task"] / "adascale").rglob(SUMMARY)):
        try:
            other_spec, s = read_json(path.parent / SPEC), read_json(path)
        except (OSError, ValueError):
            continue
        if (other_spec.get("experiment") or {}).get("grid") != exp["grid"] or s.get("status") != "completed":
            continue
        completed.append(float(s["iterations"]))
        metric = s.get("val_metric")
        if metric is not None and (metric >= exp["threshold"] if higher else metric <= exp["threshold"]):
            reached.append(float(s["iterations"]))
    counts = reached or completed
    if not counts:
        raise UserError(f"scaled SGD of heat map {exp['grid']!r} needs the grid's AdaScale runs to have completed")
    return sum(counts) / len(counts)
