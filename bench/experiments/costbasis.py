"""What `plan` prices a task's GPU time at: examples/s on one GPU, with its basis and its source.

In order of precedence, per task and preset:

1. **measured** — examples/s at S = 1 measured on the user's own GPUs: `throughput.csv`, written by a
   rehearsal's or `perf`'s `--write-throughput`.
2. **published** (the default basis) — a training throughput for one accelerator that a public source
   measured, from the shipped table `published_throughput.csv` (model, examples/s, unit, accelerator,
   precision, framework, source, url, date). A row whose `flops_per_example` is empty measured the task's
   own model; it is used as it stands. A row that names another model (no public figure exists for the
   task's exact model) gives a **proxy**: that model's published rate × its counted FLOPs per example ÷
   the task's counted FLOPs per example (`flops.csv`), i.e. the task is assumed to reach the FLOP rate
   the published model reached on the same accelerator at the same precision. The precision follows
   the run: `amp: bf16` reads the `mixed` rows, `amp: none` the `tf32` rows (PyTorch runs convolutions and
   cuDNN recurrent layers in TF32 by default; its matmuls stay FP32 unless
   `torch.backends.cuda.matmul.allow_tf32` is set, so a TF32 figure is optimistic for matmul-bound models).
3. **FLOPs** — counted FLOPs per example (`flops.csv`'s micro-batch ÷ the b it was counted at) at an
   assumed fraction of the accelerator's dense peak (`--basis flops`, or where the table has no row for
   the task on that accelerator).

A published row that would put its model above the accelerator's dense peak at that precision is
refused: a typo cannot price a matrix below what the hardware can do.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.errors import UserError
from bench.core.runspec import RunSpec

PUBLISHED = Path(__file__).with_name("published_throughput.csv")
PUBLISHED_COLUMNS = [
    "task",
    "preset",
    "model",
    "examples_per_s",
    "unit",
    "accelerator",
    "precision",
    "framework",
    "source",
    "url",
    "date",
    "flops_per_example",
]
BASES = ("published", "flops")
# Dense (no structured sparsity) tensor-core peaks in FLOP/s, from NVIDIA's datasheets: H100 SXM5 (H100 Tensor Core
# GPU datasheet, 2023: TF32 989 and BF16 1 979 TFLOPS *with sparsity*, halved here; FP32 67) and A100 SXM4 80 GB
# (A100 datasheet, 2021: TF32 156, BF16 312, FP32 19.5). fp32: no tensor cores (CUDA cores). Which applies: amp=bf16
# runs the forward in bf16; amp=none runs convolutions in TF32 (PyTorch's default cudnn.allow_tf32 = True) but
# matmuls in FP32 (cuda.matmul.allow_tf32 = False), so tf32 is optimistic for the transformer and speech there.
PEAKS: dict[str, dict[str, float]] = {
    "h100": {"bf16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12},
    "a100": {"bf16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
}
DEVICE_NAMES = {"h100": "H100 SXM", "a100": "A100 SXM"}
PRECISION_OF_AMP = {"none": "tf32", "bf16": "mixed"}  # which published rows a run's arithmetic reads
PEAK_OF_PRECISION = {"tf32": "tf32", "mixed": "bf16"}  # mixed: fp16 or bf16, the same tensor-core peak


@dataclass(frozen=True)
class Published:
    """One row of the published table: what a public source measured, as it measured it."""

    task: str
    preset: str  # the preset whose model the row prices (the paper's: the published models are paper-size)
    model: str
    examples_per_s: float
    unit: str
    accelerator: str
    precision: str
    framework: str
    source: str
    url: str
    date: str
    flops_per_example: float | None  # the row's model's counted FLOPs per unit; None: it is the task's model

    @property
    def device(self) -> str:
        """The PEAKS key of the accelerator ("A100 80GB SXM" -> "a100"), or "" when it is none of them."""
        name = self.accelerator.lower()
        return next((d for d in PEAKS if name.startswith(d)), "")

    def citation(self) -> str:
        return f"{self.source} ({self.date}), {self.url}"


def positive_number(raw: str | None, what: str, where: str, optional: bool = False) -> float | None:
    """A table's field as a positive finite number (None when empty and `optional`); else one line naming it."""
    raw = (raw or "").strip()
    if not raw and optional:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{where}: {what} {raw!r} is not a positive number")
    return value


def read_published(path: Path) -> dict[tuple[str, str, str, str], Published]:
    """(task, preset, device, precision) -> its row. One line per damaged field; a row above its peak is refused."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise UserError(f"published throughput table {path}: {e.strerror or e}") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in PUBLISHED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise UserError(
            f"published throughput table {path}: no column {missing[0]} (expected {','.join(PUBLISHED_COLUMNS)})"
        )
    out: dict[tuple[str, str, str], Published] = {}
    for i, row in enumerate(reader, 2):
        where = f"published throughput table {path}, line {i}"
        eps = positive_number(row["examples_per_s"], "examples_per_s", where)
        fpe = positive_number(row["flops_per_example"], "flops_per_example", where, optional=True)
        entry = Published(
            **{
                k: (row.get(k) or "").strip()
                for k in PUBLISHED_COLUMNS
                if k not in ("examples_per_s", "flops_per_example")
            },
            examples_per_s=eps,  # type: ignore[arg-type]
            flops_per_example=fpe,
        )
        if not entry.device or entry.precision not in PEAK_OF_PRECISION:
            raise UserError(
                f"{where}: accelerator {entry.accelerator!r} / precision {entry.precision!r}: expected an accelerator "
                f"starting with one of {', '.join(d.upper() for d in PEAKS)} and one of {', '.join(PEAK_OF_PRECISION)}"
            )
        if fpe is not None and eps * fpe > PEAKS[entry.device][PEAK_OF_PRECISION[entry.precision]]:
            raise UserError(f"{where}: {eps:g} {entry.unit}/s × {fpe:g} FLOPs is above the {entry.accelerator}'s peak")
        out[(entry.task, entry.preset, entry.device, entry.precision)] = entry
    return out


@dataclass(frozen=True)
class Rate:
    """Examples/s on one GPU for a task, where the figure comes from, and how to say it in a line."""

    examples_per_s: float
    basis: str  # measured | published | proxy | FLOPs
    note: str


def rate_for(
    task: str,
    preset: str,
    spec: RunSpec,
    measured: dict[tuple[str, str], dict[str, Any]],
    published: dict[tuple[str, str, str, str], Published],
    flops: dict[tuple[str, str], float],
    peak: Any,
    unit: str,
) -> Rate | None:
    """The rate a run of this spec is priced at (module docstring), or None when nothing is known."""
    own = flops.get((task, preset))  # the task's counted FLOPs per example (plan.read_flops)
    mine = measured.get((task, preset)) or {}
    eps = mine.get("examples_per_s") if mine.get("amp") in (None, "", spec.amp) else None  # a run of its own amp
    if eps:
        parts = (f"amp {mine.get('amp')}", f"torch {mine.get('torch')}", mine.get("measured"))
        how = ", ".join(p for p, have in zip(parts, ("amp", "torch", "measured"), strict=True) if mine.get(have))
        where = f"{mine.get('device') or 'its GPU'}{f' ({how})' if how else ''}"
        return Rate(eps, "measured", f"{eps:,.4g} {unit}/s measured on {where} (--write-throughput)")
    precision = PRECISION_OF_AMP.get(spec.amp, "tf32")
    row = published.get((task, preset, peak.device, precision)) if peak is not None else None
    if row is not None and (row.flops_per_example is None or own):
        peak_flops = PEAKS[row.device][PEAK_OF_PRECISION[row.precision]]
        setup = f"1× {row.accelerator}, {row.precision}, {row.framework}"
        if row.flops_per_example is None:
            rate, basis = row.examples_per_s, "published"
            how = f"{row.model}, {setup}"
            if own and rate * own > peak_flops:
                raise UserError(
                    f"published throughput table: {task}'s {rate:g} {row.unit}/s × its counted {own:g} FLOPs per "
                    f"example is above the {row.accelerator}'s peak"
                )
        else:
            rate, basis = row.examples_per_s * row.flops_per_example / own, "proxy"  # type: ignore[operator]
            how = (
                f"{row.model}'s {row.examples_per_s:,.0f} {row.unit}/s on {setup}, × its "
                f"{row.flops_per_example / 1e9:.3g} GFLOP per {row.unit.rstrip('s')} ÷ the {own / 1e9:.3g} GFLOP "
                "counted for this model (the same FLOP rate; no public figure for this model)"
            )
        used = f"; {rate * own / peak_flops:.0%} of the dense {row.precision} peak" if own else ""
        return Rate(rate, basis, f"{rate:,.4g} {unit}/s ({how}{used}) — {row.citation()}")
    if own and peak is not None:
        return Rate(peak.flops_per_s / own, "FLOPs", f"{peak.flops_per_s / own:,.4g} {unit}/s ({peak.label()})")
    return None
