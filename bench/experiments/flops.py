"""`adascale-bench flops`: the work of one training micro-batch of each preset, counted, for `plan`.

Counted with torch.utils.flop_counter.FlopCounterMode over `task.loss(model, batch)` and its
`backward()` on one micro-batch of the preset's real shapes (tasks.synthetic: 32×32 and
224×224 images, 2 048-token max-tokens batches, 12.3 s LibriSpeech-length utterances, 416×416 VOC
images). FlopCounterMode counts what tensor cores do: matmuls, convolutions, attention (2 FLOPs per
multiply-add), forward and backward. Not counted: elementwise work (BatchNorm, activations, the loss
itself, and the optimizer: SGD with momentum and weight decay is ~6 FLOPs per parameter per iteration,
the `params` column gives it), which is memory-bound on a GPU and at most a few % of the counted work.

How: on fake tensors (torch._subclasses.FakeTensorMode: shapes only, no arithmetic, seconds per model)
at the full micro-batch, averaged over DRAWS micro-batches where the shapes vary (transformer sentence
lengths). Where the loss reads data on the host (speech's packed sequences) fake tensors cannot run it;
there the micro-batch is counted on real CPU tensors with k of its b examples at their real shapes and
multiplied by b/k, which is exact because every counted op is linear in the number of examples
(per-example convolutions; an LSTM over packed frames) — the `counted` column says which. One
micro-batch of S = 1; an iteration at scale S is S of them.
"""

from __future__ import annotations

import csv
import io
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench.core import safefs
from bench.core.algo.rules import ADASCALE
from bench.core.errors import UserError
from bench.core.files import atomic_write_bytes
from bench.core.runspec import RunSpec
from bench.experiments.costtables import FLOPS, FLOPS_COLUMNS
from bench.run.spec import resolve
from tasks.synthetic import SyntheticData

DRAWS = 4  # micro-batches averaged over on fake tensors (their shapes vary for the max-tokens batches)
# tasks whose batch_size counts examples that each cost the same whatever else is in the micro-batch, so that
# counting k of them and multiplying by b / k is exact (not the transformer: b counts tokens of whole sentences)
LINEAR = ("cifar10", "imagenet", "speech", "yolo", "logreg")
PAPER_TASKS = ("cifar10", "imagenet", "speech", "transformer", "yolo", "logreg")


def _fake(x: Any, mode: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return mode.from_tensor(x)
    if isinstance(x, dict):
        return {k: _fake(v, mode) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_fake(v, mode) for v in x)
    return x


def _loss_flops(task: Any, model: torch.nn.Module, batch: Any) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        task.loss(model, batch).backward()
    return int(counter.get_total_flops())


def _batches(task: Any, spec: RunSpec, draws: int) -> list[Any]:
    train = task.train_set(spec, Path(spec.data_root) if spec.data_root else None)
    k = task.items_per_microbatch(spec)
    return [train.collate([train[(d * k + i, d * k + i)] for i in range(k)]) for d in range(draws)]


def count_on_fake(task: Any, spec: RunSpec, draws: int = DRAWS) -> float:
    """Mean counted FLOPs of forward + backward of `draws` micro-batches, on fake tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch.manual_seed(0)
    model = task.build_model(spec).train()
    batches = _batches(task, spec, draws)  # drawn outside the fake mode: their values decide their shapes
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    total = 0
    with mode:
        for batch in batches:
            total += _loss_flops(task, model, _fake(batch, mode))
    return total / draws


def count_per_example(task: Any, spec: RunSpec, examples: int = 1) -> float:
    """FLOPs of a micro-batch of b examples from real CPU tensors of `examples` of them, times b / examples."""
    b = int(spec.batch_size)
    small = spec.replace(batch_size=examples)
    torch.manual_seed(0)
    model = task.build_model(small).train()
    (batch,) = _batches(task, small, 1)
    return _loss_flops(task, model, batch) * b / examples


def count(name: str, preset: str = "paper", data_root: str | None = None) -> dict[str, Any]:
    """One row of the FLOPs table for a task's preset (see the module docstring). A task without synthetic data
    (a task of yours, unless it defines `synthetic_set`) is counted on its own data: `data_root`, or for the
    tiny preset its tiny set, written on first use."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

    from bench.core.engine.distributed import Dist
    from bench.run.dataroot import prepare_data
    from tasks import get_task

    own = get_task(name)
    synthetic = data_root is None and (not own.needs_data or hasattr(own, "synthetic_set"))
    task = SyntheticData(own) if synthetic else own
    with tempfile.TemporaryDirectory(prefix="flops-") as tmp:
        spec = resolve(task, ADASCALE, 1, 0, preset, tmp if synthetic else data_root)
        if not synthetic:
            prepare_data(own, spec, Dist(device=torch.device("cpu")))
        try:
            flops, how = count_on_fake(task, spec), f"fake tensors, full micro-batch, mean of {DRAWS}"
        except (DataDependentOutputException, DynamicOutputShapeException):
            if name not in LINEAR:
                raise
            flops, how = count_per_example(task, spec), "CPU tensors, 1 example x b (linear in examples)"
        if not synthetic:
            how += f", on its data ({spec.data_root})"
    params = sum(p.numel() for p in task.build_model(spec).parameters() if p.requires_grad)
    return {
        "task": name,
        "preset": preset,
        "batch_size": int(spec.batch_size),
        "flops_per_microbatch": f"{flops:.6g}",
        "params": params,
        "counted": how,
        "torch": torch.__version__.split("+")[0],
    }


def write_flops(path: Path, rows: list[dict[str, Any]]) -> None:
    """Add or replace the rows of these (task, preset) in the table at `path`, keeping the others."""
    path = Path(path)
    kept: list[dict[str, str]] = []
    if path.exists():
        new = {(r["task"], r["preset"]) for r in rows}
        kept = [
            r
            for r in csv.DictReader(io.StringIO(safefs.read_text(path, 16 << 20)))
            if (r.get("task"), r.get("preset")) not in new
        ]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FLOPS_COLUMNS, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows([*kept, *rows])
    atomic_write_bytes(path, buf.getvalue().encode())


@dataclass(frozen=True)
class FlopsOptions:
    """`adascale-bench flops`'s options, typed."""

    task: list[str] | None = None  # the tasks to count (default: the five paper tasks)
    preset: str = "paper"  # whose shapes
    data_root: str | None = None  # count a task without synthetic data on this data set
    write: str | bool | None = None  # None: print only; True: the shipped table plan reads; a path: that table


def flops(args: FlopsOptions) -> int:
    """Count every requested task's micro-batch FLOPs and print them; with --write, put them in the table plan
    reads (--write alone) or in the table named."""
    from tasks import known, unknown_task

    names = list(args.task) if args.task else list(PAPER_TASKS)
    unknown = [n for n in names if not known(n)]
    if unknown:
        raise UserError(f"flops: {unknown_task(unknown[0])}")
    if args.data_root is not None and len(names) > 1:
        raise UserError("flops --data-root: one data set, so one --task")
    rows = []
    for name in names:
        row = count(name, args.preset, args.data_root)
        tflop = float(row["flops_per_microbatch"]) / 1e12
        print(
            f"{name:<12} b={row['batch_size']:<6} {tflop:9.3f} TFLOP per micro-batch"
            f"  ({row['params'] / 1e6:.1f} M parameters; {row['counted']})",
            flush=True,
        )
        rows.append(row)
    if args.write is None:  # the shipped table changes only when asked
        print(f"flops: not written (--write: update {FLOPS}, the table plan reads; --write CSV: another table)")
        return 0
    path = FLOPS if args.write is True else Path(args.write)
    write_flops(path, rows)
    print(f"flops: {path} (forward + backward of one micro-batch; matmuls, convolutions, attention)")
    return 0
