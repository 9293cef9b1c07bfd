"""The task protocol: what a task supplies to the one training engine, and nothing more.

A task adapter owns its model, its data on disk, its loss and its evaluation. It never owns an
optimizer loop: `bench.core.engine.loop` drives every task the same way.

`cfg` is the run's spec (bench.core.runspec.RunSpec, re-exported here): typed and frozen, read as attributes
(`cfg.seed`, `cfg.batch_size`); the task's own settings are the mappings `cfg.model` and `cfg.data`.

How the engine uses a task (per run):

    task.check_data(root, cfg)                     # one-line UserError if the layout is wrong
    torch.manual_seed(cfg.seed); model = task.build_model(cfg)
    samples = task.samples(cfg, root, "train")     # rank 0 only; None: nothing to share (see below)
    train = task.train_set(cfg, root)              # TrainSet, see below; or (cfg, root, samples=samples)
    evalset = task.eval_set(cfg, root)             # anything; handed back to task.evaluate; likewise "eval"
    for each micro-batch:                          # items picked by bench.core.engine.data, never by the task
        batch = train.collate([train[(index, key)] for (index, key) in microbatch])
        batch = bench.core.engine.data.to_device(batch, device)
        loss = task.loss(model, batch)             # mean over the micro-batch's own examples
    # evaluation, model in eval mode, under no_grad, sharded over the W ranks (bench.core.engine.evaluation):
    stats_r = task.eval_stats(model, evalset, cfg, device, rank, world)   # on every rank r
    metrics = task.metrics_from(combine([stats_0, ..., stats_(W-1)]), cfg) # on rank 0
    metrics[task.metric] is the Table 2 metric; task.evaluate(model, evalset, cfg, device) is the same
    in one process (world = 1)

eval_stats returns sufficient statistics: ints and floats (summed over the shards), lists of numbers
(summed element-wise), FloatSum terms (a float sum's terms: summed once over all shards with math.fsum,
so a loss is the same bits for every W) and bench.core.engine.evaluation.Concat lists (concatenated in rank
order). A rank's shard is `shard(n_batches, rank, world)` of the task's evaluation batches, in the set's fixed order, so
each batch is computed exactly as in one process and the counts come out the same.

Shared sample lists: a task whose data sets start by scanning files (an index of 1.28 M images, a
folder walk, 281 k audio headers) returns that list from `samples(cfg, root, split)` (split "train" or
"eval"; a picklable list). The engine calls it on rank 0 only, broadcasts the result
(bench.core.engine.data.shared_samples) and passes it as `train_set(cfg, root, samples=...)` or
`eval_set(cfg, root, samples=...)` on every rank, so W ranks do not each read the index; the set built
from the list must be the one built without it. The default returns None: then the sets are built with
no `samples` keyword (tasks with nothing worth sharing need not accept it).

`(index, key)`: `index` is the item's position in the training set; `key` is an integer seed that
fixes the item's augmentation randomness (use `seeded(key)` around random transforms). Both depend
only on the run seed and the item's position in the global example stream, so a resumed run, or one
split over a different number of ranks, sees the same items with the same augmentations.
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from bench.core.engine.evaluation import Concat, FloatSum, combine, shard
from bench.core.engine.task import TrainSet
from bench.core.errors import UserError
from bench.core.runspec import RunSpec
from tasks.presets import TaskCard

__all__ = ["Concat", "ExactMoments", "FloatSum", "Task", "TrainSet", "seeded", "shard"]


@dataclass(frozen=True)
class ExactMoments:
    """A task's exact gradient moments at given weights (its optional oracle, `Task.exact_moments`): `sqr` =
    ‖G‖², G the full-data gradient of the mean loss, and `trace` = tr Σ, Σ the per-example gradient
    covariance over the N training examples as the population (1/N). A micro-batch of b examples drawn
    uniformly with replacement then has σ² = tr Σ/b and μ² = ‖G‖², and B_simple = tr Σ/‖G‖². Optional, for
    the spread of the engine's per-iteration estimates (bench.core.algo.predict.engine_moments: the clamp of μ² at 0):
    `trace_sq` = tr Σ² and `spread` = Gᵀ Σ G (NaN where the oracle does not give them)."""

    sqr: float
    trace: float
    trace_sq: float = math.nan
    spread: float = math.nan


class Task(ABC):
    """Base class of task adapters; it satisfies the engine's protocol (bench.core.engine.task.Task). Subclasses
    set `card` (their tasks.presets card: name, metric, presets, as plain data) and define the abstract
    methods; a class missing one cannot be instantiated, so a task is refused when it is loaded (one line
    naming what is missing: tasks.load), not after its first evaluation. The others have defaults."""

    card: ClassVar[TaskCard]
    name: ClassVar[str]
    metric: ClassVar[str]  # key of the Table 2 metric in evaluate()'s result, e.g. "top1"
    metric_label: ClassVar[str]  # human label, e.g. "top-1 %"
    higher_is_better: ClassVar[bool] = True
    needs_data: ClassVar[bool] = True  # False: the data is generated in memory (no data root)
    presets: ClassVar[dict[str, dict[str, Any]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        card = cls.__dict__.get("card")
        if card is not None:  # the card's fields, as class attributes
            cls.name, cls.metric, cls.metric_label = card.name, card.metric, card.metric_label
            cls.higher_is_better, cls.needs_data, cls.presets = card.higher_is_better, card.needs_data, card.presets

    def items_per_microbatch(self, cfg: RunSpec) -> int:
        """How many items of the TrainSet make one micro-batch (b for example-level data, 1 when
        each item is already a batch, e.g. length-bucketed or max-tokens batches)."""
        return int(cfg.batch_size)

    def write_tiny(self, root: Path) -> None:
        """Write the tiny preset's dataset under `root`, in the task's real on-disk format. The default writes
        nothing and says so: a task that reads only the user's own files takes --data-root (or data_roots)."""
        raise UserError(
            f"task {self.name} writes no tiny data set (it defines no write_tiny): give its data folder with "
            "--data-root, or data_roots in a matrix"
        )

    @abstractmethod
    def check_data(self, root: Path, cfg: RunSpec) -> None:
        """Raise UserError naming the path and the expected layout if `root` is not usable."""
        raise NotImplementedError

    def check_paper_data(self, root: Path, cfg: RunSpec) -> list[str]:
        """The paper data check `submit` runs on a paper matrix's data root after check_data: one line per
        way the data is not the paper's full data set (split sizes, an unreadable sample). Default: none."""
        return []

    @abstractmethod
    def build_model(self, cfg: RunSpec) -> nn.Module:
        raise NotImplementedError

    def samples(self, cfg: RunSpec, root: Path, split: str) -> list[Any] | None:
        """The sample list that building split "train" or "eval" scans files for, or None (the default:
        nothing worth reading once and sharing). Called on rank 0 only; see the module docstring."""
        return None

    @abstractmethod
    def train_set(self, cfg: RunSpec, root: Path) -> TrainSet:
        """The training set; a task whose `samples` returns lists also accepts `samples=` (its list)."""
        raise NotImplementedError

    @abstractmethod
    def eval_set(self, cfg: RunSpec, root: Path) -> Any:
        """The evaluation set; `samples=` as for train_set."""
        raise NotImplementedError

    @abstractmethod
    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        """Scalar loss: the mean over this micro-batch's own examples."""
        raise NotImplementedError

    @abstractmethod
    def eval_stats(
        self, model: nn.Module, evalset: Any, cfg: RunSpec, device: torch.device, rank: int = 0, world: int = 1
    ) -> dict[str, Any]:
        """Sufficient statistics of the metrics over shard `rank` of `world` of the evaluation set."""
        raise NotImplementedError

    @abstractmethod
    def metrics_from(self, stats: dict[str, Any], cfg: RunSpec) -> dict[str, float]:
        """Validation metrics as floats from the statistics of the whole set; must contain `self.metric`."""
        raise NotImplementedError

    def evaluate(self, model: nn.Module, evalset: Any, cfg: RunSpec, device: torch.device) -> dict:
        """Validation metrics over the whole set in one process. Called in eval mode, no_grad."""
        return self.metrics_from(combine([self.eval_stats(model, evalset, cfg, device, 0, 1)]), cfg)

    def exact_moments(self, model: nn.Module, cfg: RunSpec) -> ExactMoments | None:
        """Optional, not for the engine: the exact gradient moments at the model's weights where the task can
        compute them (logreg: closed form), for `gain` to print beside its estimates; None (the default)
        where it cannot."""
        return None

    def exact_moments_of(self, model: nn.Module, cfg: RunSpec, items: Sequence[int]) -> ExactMoments | None:
        """Optional: `exact_moments` over the training items `items` alone as the population (the items an
        iteration's micro-batches are drawn from: those left in the epoch's permutation), for finding (iii)'s
        reference (bench.run.offline_gain.reference); None (the default) where the task cannot."""
        return None


@contextlib.contextmanager
def seeded(key: int) -> Iterator[None]:
    """Run random transforms (torchvision, torchaudio) with the global CPU RNG seeded by `key`,
    restoring the previous RNG state afterwards."""
    state = torch.random.get_rng_state()
    torch.default_generator.manual_seed(key)
    try:
        yield
    finally:
        torch.random.set_rng_state(state)
