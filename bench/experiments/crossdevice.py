"""Whether a run on one device is the same run on another: the agreement a first CUDA run owes the CPU's.

CUDA's kernels sum in other orders than the CPU's, so a run there is not bit-identical; what it owes is agreement
to within rounding, which the bugs it is there for (a lost micro-batch, a stream race, autocast where none was
asked) exceed by far. The bound is calibrated on changes of the same kind as a device's, not on the outcome judged:
on the tiny logreg run (AdaScale, S = 4, seed 0; 666 iterations) the engine's own change of summation order
(microbatch_mode batched) moves the final loss by 2e-9 relative; bf16 autocast, whose rounding (2⁻⁸) is coarser
than anything float32 on CUDA does (2⁻²⁴; TF32's 2⁻¹¹ only in cuDNN's convolutions, which logreg has none of),
moves the loss by 4e-6, the mean gain and τ by 2e-5 and the iteration count by none; another seed moves the loss by
1e-3, the mean gain by 7e-3 and the count by 5. RELATIVE = 1e-4 sits above the bf16 effect (4x on the gain) and
below a seed's (10x on the loss): agreement under it is agreement to rounding. τ ends near T1 whatever the seed, so
its bound catches only gross faults. Both sides are tests (tests/experiments/test_crossdevice.py), and the CUDA
side is `pytest -m gpu` (scripts/gpu_check.sh). Accuracy moves by a few test examples under either change, so it is
held only to ACCURACY_POINTS, a bound a broken run (chance: 50 %) fails and rounding does not.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.core.errors import UserError
from bench.core.files import SUMMARY, read_json_object

RELATIVE = 1e-4  # on the final loss, the mean gain and τ (see the module docstring for why)
ACCURACY_POINTS = 0.5  # percent points of final accuracy
EXACT = ("status", "iterations")
CLOSE = ("eval.loss", "mean_gain", "tau")


def summary(run_dir: Path) -> dict[str, Any]:
    """A run folder's summary.json, or a one-line error naming it."""
    found = read_json_object(Path(run_dir) / SUMMARY)
    if found is None:
        raise UserError(f"{Path(run_dir) / SUMMARY}: no summary to compare (absent, damaged or not a JSON object)")
    return found


def _field(s: dict[str, Any], key: str) -> Any:
    head, _, rest = key.partition(".")
    value = s.get(head)
    return _field(value, rest) if rest and isinstance(value, dict) else (None if rest else value)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def disagreements(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """How summary `b` is not the run of summary `a` (one line each; empty: the same run to rounding)."""
    out = [f"{k}: {_field(a, k)!r} vs {_field(b, k)!r}" for k in EXACT if _field(a, k) != _field(b, k)]
    for k in CLOSE:
        x, y = _number(_field(a, k)), _number(_field(b, k))
        rel = abs(x - y) / max(abs(x), abs(y), 1e-300)
        if not rel <= RELATIVE:  # NaN (a missing or non-finite field) fails too
            out.append(f"{k}: {x!r} vs {y!r} (relative difference {rel:.2g} > {RELATIVE:g})")
    x, y = _number(_field(a, "eval.accuracy")), _number(_field(b, "eval.accuracy"))
    if not (math.isnan(x) and math.isnan(y)) and not abs(x - y) <= ACCURACY_POINTS:
        out.append(f"eval.accuracy: {x!r} vs {y!r} (more than {ACCURACY_POINTS:g} points apart)")
    return out
