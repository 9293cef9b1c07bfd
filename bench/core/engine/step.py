"""One iteration as a function: `step(parts, state, scale, batches, observer)` takes what the run built once
(`Parts`), the loop's `State` and this rank's micro-batches, and leaves the next State: ḡ taken, the
statistics folded, the gain, the rule's step, the metrics record and the clocks advanced. As torch.optim keeps
a functional `sgd` under its `SGD` class, the Engine (bench.core.engine.loop) holds the parts and calls this; the
numbers a step leaves on the host come back as `Stepped`, so nothing of one iteration lives on the Engine.

    η_t = m_t · w_t · lr(⌊τ_t⌋),   τ_{t+1} = τ_t + p_t.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from torch import nn

from bench.core.algo.gain import AdaptDLGain, moments
from bench.core.algo.rules import Rule, adam_hyper, extra_warmup
from bench.core.engine import adamwstep, sgdstep
from bench.core.engine.accumulate import StopVote, accumulate, dropout_seeds
from bench.core.engine.batched import BatchedMicrobatches
from bench.core.engine.data import to_device
from bench.core.engine.distributed import Dist
from bench.core.engine.gradstats import GradientObserver
from bench.core.engine.loopstate import State
from bench.core.engine.precond import PreconditionedNorms
from bench.core.engine.reduction import SplitInvariance
from bench.core.engine.signals import Abandoned, stop_requested
from bench.core.engine.task import Task

# A training record's keys (docs/design.md §4), in the order metrics.jsonl has them; with statistics at
# S > 1 the estimator's two moving averages follow (UnbiasedGain.averages).
TRAIN_KEYS = ("iteration", "tau", "scale", "gain", "lr", "loss", "sum_sq", "mean_sq", "progress", "warmup")


@dataclass
class Parts:
    """What a step reads and never replaces: built once per run (Engine._build), the same for every step. The
    spec's values a step reads are here too, looked up once (the hot path: see `adascale-bench perf`)."""

    model: nn.Module  # DDP's wrapper at W > 1, else the module
    loss_task: Task  # the task, under bf16 autocast where the spec asks (bench.core.engine.amp)
    params: list[nn.Parameter]
    split: SplitInvariance
    batched: BatchedMicrobatches | None
    optimizer: Any  # torch.optim.SGD or AdamW, stepped by bench.core.engine.sgdstep / adamwstep
    rule: Rule
    lr: Callable[[int], float]
    estimator: Any  # bench.core.algo.gain's estimator of the spec
    precond: PreconditionedNorms | None  # AdamScale's preconditioned statistics
    precond_gain: AdaptDLGain | None
    dist: Dist
    log_row: Callable[[tuple[str, ...], tuple[Any, ...]], None]  # a metrics record, made without a dict
    seed: int
    track: bool
    warmup: int | None
    adamw: tuple[tuple[float, float], float] | None  # AdamW's (betas, eps); None: SGD
    keys_stats: tuple[str, ...] = TRAIN_KEYS  # a training record's keys at S > 1 with statistics (the averages')


@dataclass(frozen=True)
class Stepped:
    """What an iteration leaves on the host: the progress bar's and heartbeat's numbers, and whether any rank
    asked to stop (the vote that rode on the iteration's gather)."""

    scale: int
    gain: float
    loss: float
    lr: float
    stop: bool


def step(
    parts: Parts, state: State, scale: int, batches: Iterator[Any], observer: GradientObserver | None
) -> Stepped | None:
    """One iteration at scale S on this rank's next A micro-batches from `batches`: gradients, statistics, gain,
    the rule's step, the metrics record, and the clocks. None if it diverged (nothing is stepped then)."""
    if parts.precond is not None:  # at S = 1 AdamScale's gain is 1: its hooks take nothing
        parts.precond.begin(on=scale > 1)
    vote = StopVote(stop_requested())  # answered by this iteration's gather
    loss_v, sum_sq_v, mean_sq_v = gradients(parts, state, scale, batches, observer, vote)
    if diverged(parts, state, scale, loss_v, sum_sq_v, mean_sq_v):
        return None
    track = parts.track
    gain = parts.estimator.update(sum_sq_v, mean_sq_v, scale) if track else 1.0
    if parts.precond is not None and parts.precond_gain is not None and scale > 1:  # the gain AdamScale reads
        gain = parts.precond_gain.update(*parts.precond.take(parts.dist), scale)
    lr, p, w = apply(parts, state, scale, gain)
    values = (state.iteration, state.tau, scale, gain, lr, loss_v, sum_sq_v if track else None, mean_sq_v, p, w)
    if track and scale > 1:  # and the estimator's two moving averages
        parts.log_row(parts.keys_stats, values + parts.estimator.averaged())
    else:
        parts.log_row(TRAIN_KEYS, values)
    advance(state, scale, gain, p, sum_sq_v, mean_sq_v, track)
    return Stepped(scale, gain, loss_v, lr, vote.anyone)


def gradients(
    parts: Parts, state: State, scale: int, batches: Iterator[Any], observer: GradientObserver | None, vote: StopVote
) -> tuple[float, float, float]:
    """ḡ in every parameter's .grad from this rank's A micro-batches, the same for every split S = W × A,
    and (loss, sum_sq, mean_sq) on the host: the iteration's one synchronisation."""
    dist = parts.dist
    accum = scale // dist.world
    micro: Iterable[Any] = microbatches(batches, accum, dist)  # one at a time
    seeds = dropout_seeds(parts.seed, state.microbatch + dist.rank * accum, accum)
    parts.split.begin(accum)  # the same ḡ and BatchNorm statistics for every split S = W × A
    result = None
    bn = parts.split.bn
    try:
        if parts.batched is not None and accum > 1:  # spec microbatch_mode=batched (bench.core.engine.batched)
            micro = list(micro)
            result = parts.batched.accumulate(micro, scale, parts.track, bn)
            vote.anyone = vote.mine  # (W = 1 only)
        if result is None:
            result = accumulate(
                parts.model, parts.loss_task, micro, seeds, parts.params, observer, scale, dist, vote, bn
            )
    except BaseException:
        parts.split.abandon()  # the BatchNorm layers' own buffers back
        raise
    parts.split.end()
    return result


def microbatches(batches: Iterator[Any], accum: int, dist: Dist) -> Iterator[Any]:
    """This rank's A micro-batches of the iteration, each on the device as it is reached. At W = 1 a stop
    signal is honoured before each (Abandoned: at a huge S the iteration would never end, SIGTERM with it);
    at W > 1 a rank cannot drop the iteration alone (the others would wait in its all-reduce for ever), so
    the signal waits for the vote on the iteration's gather."""
    device, alone = dist.device, dist.world == 1
    for _ in range(accum):
        if alone and stop_requested():
            raise Abandoned("stopped by signal between two micro-batches")
        yield to_device(next(batches), device)


def diverged(parts: Parts, state: State, scale: int, loss_v: float, sum_sq_v: float, mean_sq_v: float) -> bool:
    """Whether the iteration's loss or statistics are not finite; then its record says so and nothing steps."""
    finite = math.isfinite(loss_v) and math.isfinite(mean_sq_v)
    if finite and not (parts.track and scale > 1 and not math.isfinite(sum_sq_v)):
        return False
    record = {"iteration": state.iteration, "tau": state.tau, "scale": scale, "loss": loss_v}
    record |= {"mean_sq": mean_sq_v, "diverged": True}
    parts.log_row(tuple(record), tuple(record.values()))
    return True


def apply(parts: Parts, state: State, scale: int, gain: float) -> tuple[float, float, float]:
    """The rule's factors at this iteration, and the optimizer's step at η = m·w·lr(⌊τ⌋): (η, p, w)."""
    m, p, w = parts.rule.factors(state.iteration, scale, gain)
    w *= extra_warmup(state.iteration, parts.warmup)
    lr = m * w * parts.lr(math.floor(state.tau))
    if parts.adamw is None:
        sgdstep.step(parts.optimizer, lr)  # optimizer.step() and zero_grad(), without their wrapper (see there)
    else:  # AdamW: β₁, β₂ and ε as the rule sets them at this iteration (most leave them as given)
        betas, eps = adam_hyper(parts.rule, state.iteration, scale, *parts.adamw)
        adamwstep.step(parts.optimizer, lr, betas, eps)
    return lr, p, w


def advance(state: State, scale: int, gain: float, p: float, sum_sq_v: float, mean_sq_v: float, track: bool) -> None:
    """The clocks (τ, the iteration, the stream's micro-batch) and the summary's running sums, in record order."""
    if state.gain_sum is not None and state.gain_count is not None:
        state.gain_sum += gain  # in record order: the same float sum as over the file's records
        state.gain_count += 1
    fold = track and scale >= 2 and math.isfinite(sum_sq_v) and math.isfinite(mean_sq_v)
    if fold and state.var_sum is not None and state.sqr_sum is not None and state.moments_count is not None:
        var, sqr = moments(sum_sq_v, mean_sq_v, scale)  # as bench.core.algo.gain.b_simple_average folds them
        state.var_sum += var
        state.sqr_sum += sqr
        state.moments_count += 1
    state.tau += p
    state.iteration += 1
    state.microbatch += scale
