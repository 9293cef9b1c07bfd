"""The loop's state: what a checkpoint carries beyond the model and optimizer to resume exactly, the checks a
restored one must pass, and how a run ended (Outcome)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import nn

from bench.core.files import finite_number


@dataclass
class State:
    """Everything a checkpoint must carry beyond the model and optimizer to resume exactly."""

    iteration: int = 0
    tau: float = 0.0
    microbatch: int = 0  # the global micro-batch cursor
    metrics_offset: int = 0
    metrics_records: int = 0
    wall_time: float = 0.0
    last_eval: dict[str, float] = field(default_factory=dict)
    # the untrained model's evaluation (iteration 0): what a seed must end better than (reports.rundata.failedseeds);
    # None until it is made, and in a checkpoint written before it was recorded
    initial_eval: dict[str, float] | None = None
    target_epochs: float | None = None  # data epochs at the first evaluation that reached spec.target
    # running aggregates of the training records, so the summary need not re-read metrics.jsonl
    # (None: restored from a checkpoint written before they existed; the summary then reads the file)
    gain_sum: float | None = 0.0
    gain_count: int | None = 0
    var_sum: float | None = 0.0  # Σ of the unbiased σ²_t, μ²_t of the iterations with S ≥ 2 (B_simple's average)
    sqr_sum: float | None = 0.0
    moments_count: int | None = 0


MAX_COUNT = 2**63  # a count or file offset a checkpoint may hold: what the OS and torch take as an int64


def _a_float(value: Any) -> bool:
    """A number a float holds (NaN and inf included: an evaluation may give them), not an int past its range."""
    return isinstance(value, float) or (finite_number(value) and isinstance(value, int))


def odd_state_field(state: State) -> str | None:
    """The first State field a checkpoint filled with something other than what the field holds (a count
    for an int field, a finite number for a float one, None where the field allows it, a mapping of numbers
    for last_eval), or None. A NaN τ or a negative offset would otherwise fail later, as a traceback."""
    for f in fields(state):
        value = getattr(state, f.name)
        if f.name == "last_eval" or (f.name == "initial_eval" and value is not None):
            ok = isinstance(value, dict) and all(v is None or _a_float(v) for v in value.values())
        elif value is None:
            ok = "None" in str(f.type)
        elif str(f.type).startswith("int"):
            ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_COUNT
        else:
            ok = finite_number(value) and (value >= 0 or f.name.endswith("_sum"))
        if not ok:
            return f.name
    return None


def checkpoint_misfit(module: nn.Module, optimizer: torch.optim.Optimizer, ckpt: dict[str, Any]) -> str | None:
    """Why the checkpoint's model, optimizer or estimator state does not fit this run, or None: a tensor of
    another shape (which load_state_dict refuses, or, for a momentum buffer, the first step would), a
    missing key, a value of another type, a non-finite estimator number."""
    try:
        module.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
    except (RuntimeError, KeyError, ValueError, TypeError, IndexError, AttributeError) as e:
        return " ".join(str(e).split())[:160] or type(e).__name__
    for group in optimizer.param_groups:
        for p in group["params"]:
            for key, v in optimizer.state.get(p, {}).items():
                if not isinstance(v, torch.Tensor) or (v.dim() and v.shape != p.shape):
                    return f"optimizer state {key!r} of shape {getattr(v, 'shape', type(v).__name__)}, not {p.shape}"
    numbers = _numbers([ckpt["estimator"], ckpt.get("precond_gain", {})])  # (adamscale: its own estimator)
    if numbers is None or not all(finite_number(x) for x in numbers):
        return "the gain estimator's state is not finite numbers"
    return None


def _numbers(obj: Any) -> list[int | float] | None:
    """Every number in a plain container (strings skipped), or None when it holds something else."""
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, list | tuple):
        out: list[int | float] = []
        for v in obj:
            got = _numbers(v)
            if got is None:
                return None
            out += got
        return out
    if isinstance(obj, str):
        return []
    if isinstance(obj, int | float) and not isinstance(obj, bool):
        return [obj]  # (as it is: an int past float's range is no float, and not finite_number)
    return None


@dataclass
class Outcome:
    """How a run ended: `completed` or `diverged`, its final state, epochs of data, and the
    gradient-noise scale B_noise = b·σ²/μ² the estimator ended with (None when not measured)."""

    status: str
    state: State
    epochs: float
    noise_scale: float | None = None
