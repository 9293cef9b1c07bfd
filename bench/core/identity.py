"""A run's identity: the parts of its spec that decide its results (the folder name, the same-run check,
the engine's resume check, the dependency lookups, status and the report's variants all use it), and the
spec document they are computed from."""

from __future__ import annotations

from typing import Any

# A spec.json as read from a run folder, unchecked. What reads many run folders (report, status, the lookups
# of the runs a run depends on) takes each field as it finds it, so that a folder written by another version,
# by hand or damaged is shown with a warning, not refused; a run being made or trained holds the checked,
# typed bench.core.runspec.RunSpec, whose `to_json` is this document.
SpecDocument = dict[str, Any]

# Spec keys that do not change what a run computes: where its data lives, how it is spread over
# processes, threads and devices, which matrix it came from, and T_AS / T (derived from the runs it
# depends on, which are part of the identity). The one definition of a run's identity: the folder
# name, the same-run check on a folder, dependency lookups, status and the report's variants use it.
NOT_IDENTITY = (
    "data_root",
    "device",
    "T_AS",
    "T",
    "experiment",
    "threads",
    "num_workers",
    "ranks",
    "collective_timeout_s",
    "heartbeat_s",
    "tensorboard",
    "ttt_target",  # what the report counts time to target against, not what the run computes
)


# Settings added after runs were recorded, with the value a spec written before them means: such a spec
# is the same run as one at this value (bench.core.runspec.Settings takes these defaults from here).
# The optimizer (issue 60) is one: every spec before it ran momentum SGD, and keeps its identity and folder.
LATE_SETTINGS: dict[str, Any] = {
    "microbatch_mode": "sequential",
    "amp": "none",
    "optimizer": "sgd",
    "betas": [0.9, 0.999],
    "eps": 1e-8,
}


def in_identity(key: str) -> bool:
    """Whether a spec key (or a dotted override key) is part of a run's identity."""
    return key.split(".", 1)[0] not in NOT_IDENTITY


def identity_of(spec: SpecDocument) -> dict[str, Any]:
    """The one identity of a run: the parts of its spec that decide its results. Where it runs (and the
    overrides saying so) is left out, and a setting added later counts only off its default. The folder
    name, the same-run check, the engine's resume check, LSW+'s lookup and the reports all use it."""
    overrides = spec.get("overrides") if isinstance(spec.get("overrides"), dict) else {}
    return canonical(
        {
            k: v
            for k, v in spec.items()
            if in_identity(k) and k != "overrides" and not (k in LATE_SETTINGS and v == LATE_SETTINGS[k])
        }
        | {"overrides": {k: v for k, v in overrides.items() if in_identity(k)}}
    )


def canonical(value: Any) -> Any:
    """One form per number: a float that is a whole number is that int (T1=2000.0 is T1=2000: one run,
    one folder name, one report variant), inside mappings and lists too; booleans stay booleans."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    return value


def differing(x: dict[str, Any], y: dict[str, Any]) -> list[str]:
    """The keys in which two identities (identity_of) differ."""
    return sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))


def code_key(record: object) -> str:
    """The short key of what a run recorded of the user's own code (a spec's `user_task`: its source's sha256 and
    its card): `<source sha256, 12 hex>.<card digest, 6 hex>`. Runs of one task name with two keys ran two codes
    or were judged by two cards: each is a run folder of its own (bench.run.spec.run_name, so submit never takes
    one source's runs for another's) and the report shows them apart (reports.rundata.collect), never pooled in one
    cell."""
    import hashlib
    import json

    facts = record if isinstance(record, dict) else {}
    card = json.dumps(canonical(facts.get("card")), sort_keys=True, default=str)
    return f"{str(facts.get('sha256'))[:12]}.{hashlib.sha256(card.encode()).hexdigest()[:6]}"
