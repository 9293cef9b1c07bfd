"""The loops `adascale-bench perf` times, apart from how it times them (bench.experiments.perf): the real engine
driven one iteration at a time, the hand-written PyTorch loop it is compared with, and one (task, S) cell's
variants built on the same pre-fetched micro-batches, so that every variant does the same work."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench.core.algo.rules import ADASCALE, IDENTITY, extra_warmup, gain_rule
from bench.core.algo.schedules import lr_schedule
from bench.core.engine.accumulate import dropout_seeds, seed_generators
from bench.core.engine.amp import cuda_speed_knobs
from bench.core.engine.data import to_device
from bench.core.engine.distributed import Dist
from bench.core.engine.loop import Engine
from bench.core.engine.step import Stepped
from bench.core.errors import UserError
from bench.core.runspec import RunSpec
from bench.run.dataroot import prepare_data
from bench.run.spec import resolve
from tasks.synthetic import SyntheticData

VARIANTS = (ADASCALE, IDENTITY, "bare")
# optional variants of the adascale engine, measured in the same interleaving when asked for:
# `batched` (spec microbatch_mode=batched, perf --microbatch-mode both) and `bf16` (spec amp=bf16, --amp both)
EXTRA_VARIANTS = ("batched", "bf16")
EXTRA_SETS: dict[str, dict[str, Any]] = {"batched": {"microbatch_mode": "batched"}, "bf16": {"amp": "bf16"}}
BIG = "big"  # the bare loop over one batch of S·b examples (see bench.experiments.perf's docstring)
DISTINCT = 2  # iterations' worth of micro-batches pre-fetched and cycled through


class BareLoop:
    """What one would write by hand: the model, torch.optim.SGD (or AdamW, as the spec says) and the loop,
    nothing else."""

    def __init__(self, task: Any, spec: RunSpec, device: torch.device, engine_layout: bool = False) -> None:
        self.task, self.spec, self.device = task, spec, device
        torch.manual_seed(spec.seed)  # the engine's initial weights
        self.model = task.build_model(spec).to(device)
        if engine_layout:  # the engine's CUDA knobs (channels-last for conv nets); nothing on a CPU
            self.model = cuda_speed_knobs(self.model, device)
        self.model.train()
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer: torch.optim.Optimizer
        if spec.optimizer == "adamw":  # decoupled weight decay; β and ε the spec's
            betas = (spec.betas[0], spec.betas[1])
            self.optimizer = torch.optim.AdamW(
                self.params, lr=0.0, betas=betas, eps=spec.eps, weight_decay=spec.weight_decay, foreach=True
            )
        else:
            self.optimizer = torch.optim.SGD(
                self.params, lr=0.0, momentum=spec.momentum, weight_decay=spec.weight_decay, foreach=True
            )
        self.lr = lr_schedule(spec.lr_schedule, float(spec.T1))
        self.iteration = 0
        self.microbatch = 0

    def step(self, micro: list[Any]) -> float:
        accum = len(micro)
        seeds = dropout_seeds(self.spec.seed, self.microbatch, accum)  # the engine's, for the same arithmetic
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        for a, batch in enumerate(micro):
            # the engine's dropout seeds, so the two do the same arithmetic (see tests/test_perf.py)
            seed_generators(seeds[a], self.device)
            loss = self.task.loss(self.model, to_device(batch, self.device))
            loss.backward()
            loss_sum += loss.detach()
        if accum > 1:
            torch._foreach_div_([p.grad for p in self.params if p.grad is not None], accum)
        lr = self.lr(self.iteration) * extra_warmup(self.iteration, self.spec.warmup_iterations)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.iteration += 1
        self.microbatch += accum
        return (loss_sum / accum).item()


class EngineLoop:
    """The real engine, driven one iteration at a time through its public API (Engine.at_scale), as
    Engine.run drives it; each step gets the benchmark's micro-batches instead of the stream's."""

    def __init__(self, spec: RunSpec, task: Any, run_dir: Path, data_root: Path, dist: Dist) -> None:
        self.engine = Engine(spec, task, run_dir, data_root, dist=dist, progress=False)
        self.state = self.engine.setup()
        self.engine.model.train()
        self.scale = int(spec.scale)
        self.iterating = self.engine.at_scale(self.state, self.scale, iter(()))
        self.last: Stepped | None = None  # the last iteration's host numbers (gain, loss): bench.experiments.stepchecks

    @property
    def model(self) -> torch.nn.Module:
        return self.engine.module

    def step(self, micro: list[Any]) -> None:
        self.last = self.iterating.step(iter(micro))
        if not self.last:
            raise UserError(f"{self.engine.spec.task} diverged at S = {self.scale} during the benchmark")

    def flush_us_per_iteration(self) -> float:
        """Flush what the metrics log holds (serialise, write, fsync) and return the wall µs per record:
        what a run pays per iteration for its metrics, outside the timed medians."""
        start = time.perf_counter()
        n = self.engine.flush_metrics()
        return (time.perf_counter() - start) * 1e6 / n if n else math.nan

    def close(self) -> None:
        self.iterating.close()
        self.engine.flush_metrics()


@dataclass
class Setup:
    """The variants of one (task, S) cell and the micro-batches they share."""

    loops: dict[str, EngineLoop | BareLoop]
    iterations: list[list[Any]]  # DISTINCT iterations of S micro-batches each, already on the device
    examples: int
    big: list[list[Any]] = field(default_factory=list)  # the same iterations as one batch each, for `big`
    notices: list[str] = field(default_factory=list)  # one line each, printed with the cell's result

    def step(self, variant: str, i: int) -> None:
        data = self.big if variant == BIG else self.iterations
        self.loops[variant].step(data[i % len(data)])

    def drop_big(self, why: str) -> None:
        self.loops.pop(BIG, None)
        self.big = []
        self.notices.append(why)

    def close(self) -> None:
        for loop in self.loops.values():
            if isinstance(loop, EngineLoop):
                loop.close()


def specs(task: Any, scale: int, preset: str, data_root: str | None, optimizer: str = "sgd") -> tuple[RunSpec, RunSpec]:
    """The adaptive rule's spec (AdaScale; AdamScale under AdamW) and its identity twin without statistics: the
    same preset and optimizer otherwise (AdamW: the task card's AdamW setting, as a run takes it)."""
    chosen = {"optimizer": optimizer} if optimizer != "sgd" else {}
    adaptive = resolve(task, gain_rule(optimizer), scale, 0, preset, data_root, chosen)
    identity = resolve(task, IDENTITY, scale, 0, preset, data_root, {"track_stats": False, **chosen})
    return adaptive, identity


def build(
    task: Any,
    scale: int,
    preset: str,
    data_root: str | None,
    dist: Dist,
    tmp: Path,
    extras: tuple[str, ...] = (),
    synthetic: bool = False,
    optimizer: str = "sgd",
) -> Setup:
    """Build the variants of one cell (the three, plus `extras` of EXTRA_VARIANTS, plus `big` where the
    task's items are examples) and pre-fetch DISTINCT iterations of micro-batches (and of big batches).
    `synthetic`: random data of the preset's real shapes instead of a dataset; `optimizer`: every variant's
    (the `adascale` variant then runs the optimizer's gain-following rule, `bench.core.algo.rules.gain_rule`)."""
    if synthetic:
        task = SyntheticData(task)
        data_root = str(tmp / "synthetic")
    spec_a, spec_b = specs(task, scale, preset, data_root, optimizer)
    root = prepare_data(task, spec_a, dist)  # (the tiny dataset is written on first use, as for a run)
    here = tmp / task.name / f"s{scale}"
    loops: dict[str, EngineLoop | BareLoop] = {
        ADASCALE: EngineLoop(spec_a, task, here / ADASCALE, root, dist),
        IDENTITY: EngineLoop(spec_b, task, here / IDENTITY, root, dist),
    }
    loops["bare"] = BareLoop(task, spec_b, dist.device)
    for v in extras:
        chosen = {"optimizer": optimizer} if optimizer != "sgd" else {}
        spec_v = resolve(task, spec_a.method, scale, 0, preset, data_root, {**EXTRA_SETS[v], **chosen})
        loops[v] = EngineLoop(spec_v, task, here / v, root, dist)
    first = loops[ADASCALE]
    assert isinstance(first, EngineLoop)
    stream = first.engine.batches(first.state, scale)
    micro = [to_device(next(stream), dist.device) for _ in range(DISTINCT * scale)]
    del stream  # stops a paper preset's loader workers
    iterations = [micro[i * scale : (i + 1) * scale] for i in range(DISTINCT)]
    setup = Setup(loops, iterations, scale * int(spec_a.batch_size))
    if task.items_per_microbatch(spec_b) != int(spec_b.batch_size):
        setup.notices.append(
            f"{task.name}: no `{BIG}` variant (its items are whole batches, not examples): "
            "simulated_over_big_batch left empty"
        )
        return setup
    loops[BIG] = BareLoop(task, spec_b, dist.device, engine_layout=True)
    setup.big = [[to_device(big_batch(first.engine, i * scale, scale), dist.device)] for i in range(DISTINCT)]
    return setup


def big_batch(engine: Engine, first: int, count: int) -> Any:
    """Micro-batches first … first + count − 1 of the engine's stream (one rank) as ONE batch: the
    TrainSet's collate over all their items, so the same examples with the same augmentation keys."""
    train = engine.train
    items = engine.items(first, count)
    return train.collate([train[item] for item in items])
