"""The one training engine: every task, every method, every scale (docs/design.md §1).

One iteration at scale S: W ranks each run A = S/W micro-batches (forward and backward per
micro-batch, so BatchNorm normalises over each micro-batch alone), every micro-batch gradient g_i is
observed (bench.core.engine.gradstats, bench.core.engine.reduction), `.grad` ends as ḡ = (1/S) Σ g_i, the gain
estimator folds in sum_sq = Σ||g_i||² and mean_sq = ||ḡ||², and the rule's (m_t, p_t, w_t) set the step:

    η_t = m_t · w_t · lr(⌊τ_t⌋),   τ_{t+1} = τ_t + p_t,   stop when τ_t ≥ T1.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import torch
from torch import nn

from bench.core.algo.gain import ESTIMATORS, AdaptDLGain
from bench.core.algo.rules import adam_hyper, finished
from bench.core.algo.schedules import lr_schedule, scale_schedule
from bench.core.engine import resume
from bench.core.engine.allocator import retain_freed_memory
from bench.core.engine.amp import cuda_speed_knobs, with_amp
from bench.core.engine.batched import BatchedMicrobatches
from bench.core.engine.data import RankSampler, loader, run_sets
from bench.core.engine.distributed import Dist, ranks_for
from bench.core.engine.evaluation import evaluate_run, is_sharded
from bench.core.engine.gradstats import GradientObserver
from bench.core.engine.heartbeat import Heartbeat, progress_bar
from bench.core.engine.loopstate import Outcome, State
from bench.core.engine.precond import PreconditionedNorms
from bench.core.engine.reduction import SplitInvariance
from bench.core.engine.signals import Abandoned, Interrupted, RanksChange, stop_requested
from bench.core.engine.step import TRAIN_KEYS, Parts, Stepped, step
from bench.core.engine.task import Task
from bench.core.engine.tensorboard_sink import TensorBoardSink
from bench.core.errors import UserError
from bench.core.files import METRICS, MetricsLog
from bench.core.methods import make_rule
from bench.core.runspec import RunSpec


@dataclass
class AtScale:
    """Iterations at one scale S, driven one at a time: the public one-iteration API. Engine.run makes one
    per S of the schedule; `perf` makes one per benchmark loop and hands each step its micro-batches."""

    engine: Engine
    state: State
    scale: int
    batches: Iterator[Any]  # this rank's micro-batches at S, from the stream cursor on
    observer: GradientObserver | None  # observes every g_i at S (bench.core.engine.reduction); None: not tracking

    def step(self, batches: Iterator[Any] | None = None) -> Stepped | None:
        """One iteration on the next A micro-batches (of `batches`, else of the stream); None if it diverged."""
        return self.engine.step(self.state, self.scale, self.batches if batches is None else batches, self.observer)

    def close(self) -> None:
        if self.observer is not None:
            self.observer.remove()
            self.observer = None


@dataclass(frozen=True)
class Cadence:
    """When a run evaluates, keeps weights and checkpoints: its spec's values, read once per run."""

    eval_every: float
    by_epochs: bool
    ckpt_every: int
    keep_every: int
    keep_until: float  # τ past which no more weights are kept

    @classmethod
    def of(cls, spec: RunSpec, T1: float) -> Cadence:
        return cls(
            eval_every=float(spec.eval_every),
            by_epochs=spec.eval_unit == "epochs",
            ckpt_every=int(spec.checkpoint_every),
            keep_every=int(spec.keep_checkpoints_every or 0),
            keep_until=float(spec.keep_checkpoints_until or 1.0) * T1,
        )


def make_optimizer(spec: RunSpec, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """The run's optimizer (spec `optimizer`): momentum SGD (the paper's; weight decay coupled, in the gradient) or
    AdamW (decoupled weight decay). Its lr (and AdamW's betas and eps) are set at every step
    (bench.core.engine.sgdstep, bench.core.engine.adamwstep); it holds the state a checkpoint saves."""
    if spec.optimizer == "adamw":
        betas = (spec.betas[0], spec.betas[1])
        return torch.optim.AdamW(
            params, lr=0.0, betas=betas, eps=spec.eps, weight_decay=spec.weight_decay, foreach=True
        )
    return torch.optim.SGD(params, lr=0.0, momentum=spec.momentum, weight_decay=spec.weight_decay, foreach=True)


class Engine:
    """Trains one run described by a resolved spec (bench.run.spec.resolve) into `run_dir`."""

    def __init__(
        self,
        spec: RunSpec,
        task: Task,
        run_dir: Path,
        data_root: Path | None = None,
        dist: Dist | None = None,
        progress: bool = True,
        check: Callable[[nn.Module, Any], None] | None = None,
    ) -> None:
        self.spec = spec
        self.check = check  # called with the built model and evaluation set before any training (bench.run.taskcheck)
        self.run_dir = Path(run_dir)
        self._started = time.perf_counter()  # run() resets it to the run's own start (resumed wall time included)
        self.dist = dist or Dist()
        self.progress = progress
        self.task = task
        self.root = Path(data_root) if data_root is not None else Path()
        self.T1 = float(spec.T1)
        self.scales = scale_schedule(spec.scale, spec.elastic, spec.T1)
        self.rule = make_rule(spec.method, self.scales, self.T1, spec.T_AS, spec.T, spec.rule)
        self.estimator = ESTIMATORS[spec.estimator]()  # a name the schema allows (bench.core.runspec)
        self.lr = lr_schedule(spec.lr_schedule, self.T1)
        self.sink: TensorBoardSink | None = None  # spec tensorboard: the records as TensorBoard events (run())
        # AdamW's (β₁, β₂) and ε as the spec gives them (None under SGD): what a rule's `adam` adjusts per S
        self.adamw = ((spec.betas[0], spec.betas[1]), spec.eps) if spec.optimizer == "adamw" else None
        for s in self.scales.scales if self.adamw is not None else ():  # a rule's betas and eps, before any step
            adam_hyper(self.rule, 0, s, *self.adamw)
        # AdamScale's gain: AdaptDL's estimator on the preconditioned statistics (bench.core.engine.precond)
        self.precond_gain = AdaptDLGain() if getattr(self.rule, "statistics", None) == "preconditioned" else None
        if self.precond_gain is not None and (self.adamw is None or spec.microbatch_mode == "batched"):
            raise UserError(
                f"{spec.method} measures the gain on AdamW's preconditioned micro-batch gradients: it needs "
                "optimizer=adamw and microbatch_mode=sequential"
            )
        for s in self.scales.scales:
            ranks_for(spec.accumulation, s, self.dist.world)  # S must split into W ranks, or into a fixed accumulation

    # -- set-up -------------------------------------------------------------------------------------------
    def _build(self) -> None:
        """The model, optimizer and data of the run, and the parts a step reads (bench.core.engine.step.Parts)."""
        spec, dist = self.spec, self.dist
        retain_freed_memory()  # no page faults for every iteration's tensors (bench.core.engine.allocator)
        if spec.threads:
            torch.set_num_threads(int(spec.threads))
        torch.manual_seed(spec.seed)
        self.module = cuda_speed_knobs(self.task.build_model(spec).to(dist.device), dist.device)
        self.loss_task = with_amp(self.task, spec.amp, dist.device)  # spec amp: bf16 autocast of the loss
        self.model: nn.Module = self.module
        if dist.world > 1:
            ids = [dist.device.index] if dist.device.type == "cuda" else None
            # Each rank keeps its own BatchNorm statistics; self.split merges them into the W = 1 ones.
            self.model = nn.parallel.DistributedDataParallel(self.module, device_ids=ids, broadcast_buffers=False)
        self.params = [p for p in self.module.parameters() if p.requires_grad]
        self.split = SplitInvariance(self.model, self.module, self.params, dist, spec.reduction)
        self.batched = BatchedMicrobatches.for_mode(spec.microbatch_mode, self.module, self.loss_task, dist.world)
        self.optimizer = make_optimizer(spec, self.params)
        self.precond: PreconditionedNorms | None = None
        if self.precond_gain is not None:
            self.precond = PreconditionedNorms(self.params, self.optimizer, spec.betas[1], spec.eps)
        self.train, self.evalset, self.stream = run_sets(self.task, spec, self.root, dist, is_sharded(self.task))
        self.metrics = MetricsLog(self.run_dir / METRICS, enabled=dist.is_main)
        self.saved = resume.Saved(
            self.run_dir, spec, dist, self.module, self.optimizer, self.estimator, self.precond_gain, self.metrics
        )
        self.parts = Parts(
            self.model, self.loss_task, self.params, self.split, self.batched, self.optimizer, self.rule, self.lr,
            self.estimator, self.precond, self.precond_gain, dist, self._log_row, spec.seed, bool(spec.track_stats),
            spec.warmup_iterations, self.adamw, (*TRAIN_KEYS, *self.estimator.averages),
        )  # fmt: skip

    def _restore(self) -> State:
        return resume.restore(self.saved)

    def checkpoint(self, state: State) -> None:
        """The run's checkpoint as it stands at `state` (bench.core.engine.resume)."""
        resume.checkpoint(self.saved, state)

    def step(
        self, state: State, scale: int, batches: Iterator[Any], observer: GradientObserver | None
    ) -> Stepped | None:
        """One iteration at S on this rank's next A micro-batches (bench.core.engine.step); None if it diverged."""
        return step(self.parts, state, scale, batches, observer)

    def _log_row(self, keys: tuple[str, ...], values: tuple[Any, ...]) -> None:
        """The record {keys[i]: values[i]}: every iteration's, made without a dict (the hot path)."""
        self.metrics.append_row(keys, values)
        if self.sink is not None:
            self.sink.write(dict(zip(keys, values, strict=True)))

    # -- the loop -------------------------------------------------------------------------------------------
    def setup(self) -> State:
        """Build model, optimizer and data, and restore the checkpoint if there is one."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._build()
        if self.check is not None:
            self.check(self.module, self.evalset)
        return self._restore()

    def batches(self, state: State, scale: int) -> Iterator[Any]:
        """This rank's micro-batches from the stream cursor on, at scale S (each yielded once, in order)."""
        sampler = RankSampler(self.stream, state.microbatch, scale, self.dist.world, self.dist.rank)
        pin = self.dist.device.type == "cuda"
        return iter(loader(self.train, sampler, int(self.spec.num_workers), pin_memory=pin))

    def at_scale(self, state: State, scale: int, batches: Iterator[Any] | None = None) -> AtScale:
        """Start iterating at S: this rank's micro-batches of the stream (or `batches`) and a new observer."""
        batches = self.batches(state, scale) if batches is None else batches
        return AtScale(self, state, scale, batches, self.split.observer(scale, bool(self.spec.track_stats)))

    def items(self, first: int, count: int) -> list[Any]:
        """The TrainSet items of micro-batches first … first + count − 1 of the run's example stream."""
        return [item for j in range(first, first + count) for item in self.stream.microbatch(j)]

    def flush_metrics(self) -> int:
        """Write what the metrics log holds (serialise, write, fsync); returns how many records that was."""
        n = self.metrics.pending()
        self.metrics.flush()
        return n

    def run(self) -> Outcome:
        """Train to the end (or to divergence); raises Interrupted on a stop signal. The run layer writes
        the summary from the Outcome (bench.run.summary)."""
        state = self.setup()
        started = time.perf_counter() - state.wall_time
        self._started = started  # evaluation records carry the run's wall-clock time (time to target)
        cadence = Cadence.of(self.spec, self.T1)
        status, here, scale = "completed", None, 0
        beat = Heartbeat.for_run(self.spec, self.dist.is_main)  # stdout not a terminal (a job log): a line every N s
        if beat is not None:
            beat.start(state.iteration, state.tau)
        self.sink = TensorBoardSink.for_run(self.spec, self.run_dir, self.dist.is_main, state.iteration)
        bar = progress_bar(self.spec, self.T1, state.tau, self.progress and self.dist.is_main)
        self.model.train()
        try:
            if state.iteration == 0 and state.initial_eval is None:  # once per run, never again on a resume
                self.evaluate(state, initial=True)
            while not self._done(state):
                s = self.scales(state.tau)
                if s != scale:  # a new S: a new slice of the stream for this rank, and a new observer
                    here, scale = self._at_new_scale(state, s, here, started), s
                before, epochs_before = state.tau, self.epochs(state)
                try:
                    stepped = here.step()
                except Abandoned:  # (W = 1) the iteration under way dropped: stop where it began
                    self._stop(state, started)
                if not stepped:
                    status = "diverged"
                    break
                self._show(bar, beat, state, before, stepped)
                self._after_step(state, cadence, started, before, epochs_before, stepped.stop)
        finally:
            bar.close()
            if here is not None:
                here.close()
            self.metrics.flush()
            if self.sink is not None:
                self.sink.close()
                self.sink = None
        state.wall_time = time.perf_counter() - started
        return self._finish(state, status)

    def _at_new_scale(self, state: State, scale: int, here: AtScale | None, started: float) -> AtScale:
        """The stream's slice and the observer for a new S; a checkpoint and RanksChange where S needs another W."""
        ranks = ranks_for(self.spec.accumulation, scale, self.dist.world)
        if ranks != self.dist.world:
            state.wall_time = time.perf_counter() - started
            self.checkpoint(state)
            raise RanksChange(
                ranks,
                f"S = {scale} at τ = {state.tau:.1f} needs {ranks} ranks (accumulation "
                f"{self.spec.accumulation}); checkpoint saved, run it again with --ranks {ranks}",
            )
        batches = self.batches(state, scale)
        if here is not None:
            here.close()
        return self.at_scale(state, scale, batches)

    def _show(self, bar: Any, beat: Heartbeat | None, state: State, before: float, last: Stepped) -> None:
        """The progress bar and the heartbeat, from the numbers the step left on the host."""
        bar.update(min(state.tau, self.T1) - min(before, self.T1))
        if state.iteration % 10 == 0:
            bar.set_postfix_str(f"S={last.scale} gain={last.gain:.2f} loss={last.loss:.3f}", refresh=False)
        if beat is not None:
            beat.beat(state.iteration, state.tau, last.scale, loss=last.loss, gain=last.gain, lr=last.lr)

    def _after_step(
        self, state: State, c: Cadence, started: float, before: float, epochs_before: float, vote: bool
    ) -> None:
        """What follows an iteration: an evaluation when its clock crossed a period (or the run ended), kept
        weights, and on a stop signal or at the checkpoint period a checkpoint (Interrupted after a signal's)."""
        clock, clock_before = (self.epochs(state), epochs_before) if c.by_epochs else (state.tau, before)
        if self._done(state) or math.floor(clock / c.eval_every) > math.floor(clock_before / c.eval_every):
            self.evaluate(state)
        done = self._done(state)
        if c.keep_every and state.iteration % c.keep_every == 0 and state.tau <= c.keep_until:
            resume.keep(self.saved, state, self.scales(state.tau))
        # W = 1: the signal as it stands now; W > 1: every rank stops in the same iteration, on the vote
        # that rode on this iteration's gather (a signal that came during the step: at the next one)
        if vote or (self.dist.world == 1 and stop_requested()):
            self._stop(state, started)
        if c.ckpt_every and state.iteration % c.ckpt_every == 0 and not done:
            state.wall_time = time.perf_counter() - started
            self.checkpoint(state)

    def _stop(self, state: State, started: float) -> NoReturn:
        """Checkpoint `state` (the end of the last whole iteration: a dropped one left no trace but its
        gradients, cleared here) and raise Interrupted, the resume's cue."""
        for p in self.params:
            p.grad = None
        state.wall_time = time.perf_counter() - started
        self.checkpoint(state)
        raise Interrupted(
            f"stopped by signal at iteration {state.iteration} (τ = {state.tau:.1f}); "
            "checkpoint saved, run the same command to resume"
        )

    def epochs(self, state: State) -> float:
        """Epochs of training data consumed so far."""
        return state.microbatch * self.stream.k / self.stream.n

    def _done(self, state: State) -> bool:
        max_epochs = self.spec.max_epochs
        return (
            finished(state.tau, self.T1)
            or (max_epochs is not None and self.epochs(state) >= max_epochs * (1 - 1e-12))
            or state.target_epochs is not None
        )

    def evaluate(self, state: State, initial: bool = False) -> None:
        """An evaluation record at `state` (evaluation.evaluate_run); `initial`: the untrained model's."""
        evaluate_run(self.task, self.module, self.evalset, self.spec, self.dist, state, self.epochs(state),
                     lambda: time.perf_counter() - self._started, self._evaluated, initial)  # fmt: skip

    def _evaluated(self, record: dict[str, Any]) -> None:
        self._log_row(tuple(record), tuple(record.values()))
        self.metrics.flush()

    def _finish(self, state: State, status: str) -> Outcome:
        """Flush everything, drop the checkpoint of a finished run, and say how it ended."""
        stats = status == "completed" and self.spec.track_stats and self.estimator.updates
        outcome = Outcome(
            status, state, self.epochs(state), self.estimator.noise_scale(self.spec.batch_size) if stats else None
        )
        self.dist.barrier()
        return outcome
