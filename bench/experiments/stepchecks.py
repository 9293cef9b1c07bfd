"""What one training iteration must show on a device before its timings mean anything (`perf --check`).

A benchmark that times a loop producing NaN, a gain outside its range or a host stall per micro-batch times the
wrong thing: on a new device (a first CUDA run, bf16 autocast, another cuDNN) each of these can appear where the
CPU showed none. After a cell is timed, each engine variant that runs the gain rule (`adascale`, and `bf16`,
`batched` when timed) takes one more iteration on the cell's micro-batches under bench.experiments.syncs' count,
and its loss, gain and host synchronisations are recorded in perf.csv and judged:

- a loss that is not finite (what a first bf16 run gets wrong) is the engine's divergence: the iteration is
  not stepped and perf stops with that line (perfloops.EngineLoop), during the timing or here;
- its gain lies in [1, S]: AdaScale's r = (σ² + μ²)/(σ²/S + μ²) lies there for any σ² ≥ 0, μ² ≥ 0 (the
  estimator clamps its moments, bench.core.algo.gain), AdamScale's likewise; 1 exactly at S = 1. On finite
  statistics that holds by construction; what the check catches is a device's arithmetic reaching the gain
  broken (a NaN compares false), and GAIN_SLACK allows the float rounding of the ratio and nothing more;
- its host synchronisations number at most MAX_SYNCS: the engine reads one value per iteration (the loss and
  the statistics ride one transfer, bench.core.engine.accumulate); more stall a GPU's queue once per read
  (a task's loss that reads its value is one such, tests/experiments/test_stepchecks.py).
"""

from __future__ import annotations

from typing import Any

from bench.core.algo.rules import ADASCALE
from bench.experiments.perfloops import EXTRA_VARIANTS, EngineLoop, Setup
from bench.experiments.syncs import count_host_syncs

CHECKED = (ADASCALE, *EXTRA_VARIANTS)  # the engine variants that run the gain rule (perf's variant names)
MAX_SYNCS = 1.0
GAIN_SLACK = 1e-9  # relative: float rounding of the gain's ratio, far below any estimator's error
COLUMNS = [f"{k}_{v}" for v in CHECKED for k in ("loss", "gain", "host_syncs")]


def observe(setup: Setup) -> dict[str, Any]:
    """One more iteration of each checked engine variant on the cell's first micro-batches, counted: the
    columns loss_<v>, gain_<v>, host_syncs_<v> for each variant the cell has."""
    row: dict[str, Any] = {}
    micro = setup.iterations[0]
    for v in CHECKED:
        loop = setup.loops.get(v)
        if not isinstance(loop, EngineLoop):
            continue
        syncs, _ = count_host_syncs(lambda loop=loop: loop.step(micro))
        assert loop.last is not None  # EngineLoop.step raises where the iteration diverged
        row[f"loss_{v}"], row[f"gain_{v}"], row[f"host_syncs_{v}"] = loop.last.loss, loop.last.gain, syncs
    return row


def breaches(row: dict[str, Any]) -> list[str]:
    """The checks a perf.csv row fails, one line each (empty: it passes every one it has data for)."""
    s, where = int(row["scale"]), f"{row['task']} S={row['scale']}"
    out: list[str] = []
    for v in CHECKED:
        if f"loss_{v}" not in row:
            continue
        gain, syncs = float(row[f"gain_{v}"]), float(row[f"host_syncs_{v}"])
        if not (1.0 - GAIN_SLACK <= gain <= s * (1.0 + GAIN_SLACK)):
            out.append(f"{where} {v}: gain {gain!r} outside [1, {s}]")
        if not syncs <= MAX_SYNCS:
            out.append(f"{where} {v}: {syncs:g} host synchronisations per iteration (at most {MAX_SYNCS:g})")
    return out


def line(row: dict[str, Any]) -> str:
    """What the extra iterations showed, for the cell's printed line (a task cut off before perf.csv is
    written still leaves it in the log)."""
    seen = [v for v in CHECKED if f"gain_{v}" in row]
    return "checked " + ", ".join(
        f"{v}: gain {row[f'gain_{v}']:.4g}, {row[f'host_syncs_{v}']:g} sync(s)/it, loss {row[f'loss_{v}']:.4g}"
        for v in seen
    )
