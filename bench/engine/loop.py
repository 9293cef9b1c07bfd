"""The one training engine: every task, every method, every scale (docs/design.md §1).

One iteration at scale S: W ranks each run A = S/W micro-batches (forward and backward per
micro-batch, so BatchNorm normalises over each micro-batch alone), every micro-batch gradient g_i is
observed (bench.engine.gradstats, bench.engine.reduction), `.grad` ends as ḡ = (1/S) Σ g_i, the gain estimator folds in
sum_sq = Σ||g_i||² and mean_sq = ||ḡ||², and the rule's (m_t, p_t, w_t) set the step:

    η_t = m_t · w_t · lr(⌊τ_t⌋),   τ_{t+1} = τ_t + p_t,   stop when τ_t ≥ T1.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import torch
from torch import nn
from tqdm import tqdm

from bench.algo.gain import ESTIMATORS, AdaptDLGain, moments
from bench.algo.rules import adam_hyper, extra_warmup, finished, make_rule
from bench.algo.schedules import lr_schedule, scale_schedule
from bench.engine import adamwstep, sgdstep
from bench.engine.accumulate import StopVote, accumulate, dropout_seeds
from bench.engine.allocator import retain_freed_memory
from bench.engine.amp import cuda_speed_knobs, with_amp
from bench.engine.batched import BatchedMicrobatches
from bench.engine.checkpoint import load_checkpoint, save_checkpoint
from bench.engine.data import ItemStream, RankSampler, build_set, loader, shared_samples, to_device
from bench.engine.distributed import Dist, ranks_for
from bench.engine.evaluation import evaluate, is_sharded
from bench.engine.gradstats import GradientObserver
from bench.engine.heartbeat import Heartbeat
from bench.engine.loopstate import Outcome, State, checkpoint_misfit, odd_state_field
from bench.engine.precond import PreconditionedNorms
from bench.engine.reduction import SplitInvariance
from bench.engine.signals import Abandoned, Interrupted, RanksChange, stop_requested
from bench.engine.task import Task
from bench.engine.tensorboard_sink import TensorBoardSink
from bench.errors import UserError
from bench.files import CHECKPOINT, KEPT, METRICS, MetricsLog, kept_name
from bench.runspec import RunSpec

# A training record's keys (docs/design.md §4), in the order metrics.jsonl has them; with statistics at
# S > 1 the estimator's two moving averages follow (UnbiasedGain.averages).
TRAIN_KEYS = ("iteration", "tau", "scale", "gain", "lr", "loss", "sum_sq", "mean_sq", "progress", "warmup")


@dataclass
class AtScale:
    """Iterations at one scale S, driven one at a time: the public one-iteration API. Engine.run makes one
    per S of the schedule; `perf` makes one per benchmark loop and hands each step its micro-batches."""

    engine: Engine
    state: State
    scale: int
    batches: Iterator[Any]  # this rank's micro-batches at S, from the stream cursor on
    observer: GradientObserver | None  # observes every g_i at S (bench.engine.reduction); None: not tracking

    def step(self, batches: Iterator[Any] | None = None) -> bool:
        """One iteration on the next A micro-batches (of `batches`, else of the stream); False if it diverged."""
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
    (bench.engine.sgdstep, bench.engine.adamwstep); it holds the state a checkpoint saves."""
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
        if spec.estimator not in ESTIMATORS:
            names = ", ".join(ESTIMATORS)
            raise UserError(f"unknown estimator {spec.estimator!r}; expected one of: {names}")
        self.estimator = ESTIMATORS[spec.estimator]()
        self.lr = lr_schedule(spec.lr_schedule, self.T1)
        self.vote = StopVote(False)  # the last iteration's stop vote (Engine.step)
        self.sink: TensorBoardSink | None = None  # spec tensorboard: the records as TensorBoard events (run())
        # the spec's values `step` reads every iteration, looked up once (the hot path: see `adascale-bench perf`)
        self._track, self._seed = bool(spec.track_stats), spec.seed
        self._warmup = spec.warmup_iterations
        self._adamw = ((spec.betas[0], spec.betas[1]), spec.eps) if spec.optimizer == "adamw" else None
        for s in self.scales.scales if self._adamw is not None else ():  # a rule's betas and eps, before any step
            adam_hyper(self.rule, 0, s, *self._adamw)
        # AdamScale's gain: AdaptDL's estimator on the preconditioned statistics (bench.engine.precond)
        self.precond: PreconditionedNorms | None = None
        self.precond_gain = AdaptDLGain() if getattr(self.rule, "statistics", None) == "preconditioned" else None
        if self.precond_gain is not None and (self._adamw is None or spec.microbatch_mode == "batched"):
            raise UserError(
                f"{spec.method} measures the gain on AdamW's preconditioned micro-batch gradients: it needs "
                "optimizer=adamw and microbatch_mode=sequential"
            )
        self._keys_stats = (*TRAIN_KEYS, *self.estimator.averages)  # a training record's keys at S > 1 with statistics
        for s in self.scales.scales:
            ranks_for(spec, s, self.dist.world)  # S must split into W ranks, or into a fixed accumulation

    # -- set-up -------------------------------------------------------------------------------------------
    def _build(self) -> None:
        spec, dist = self.spec, self.dist
        retain_freed_memory()  # no page faults for every iteration's tensors (bench.engine.allocator)
        if spec.threads:
            torch.set_num_threads(int(spec.threads))
        torch.manual_seed(spec.seed)
        self.module = cuda_speed_knobs(self.task.build_model(spec).to(dist.device), dist.device)
        self.loss_task = with_amp(self.task, spec, dist.device)  # spec amp: bf16 autocast of the loss
        self.model: nn.Module = self.module
        if dist.world > 1:
            ids = [dist.device.index] if dist.device.type == "cuda" else None
            # Each rank keeps its own BatchNorm statistics; self.split merges them into the W = 1 ones.
            self.model = nn.parallel.DistributedDataParallel(self.module, device_ids=ids, broadcast_buffers=False)
        self.params = [p for p in self.module.parameters() if p.requires_grad]
        self.split = SplitInvariance(self.model, self.module, self.params, dist, spec.reduction)
        self.batched = BatchedMicrobatches.for_spec(spec, self.module, self.loss_task, dist.world)
        self.optimizer = make_optimizer(spec, self.params)
        if self.precond_gain is not None:
            self.precond = PreconditionedNorms(self.params, self.optimizer, spec.betas[1], spec.eps)
        # rank 0 reads the sample lists (an index, a folder walk) and the other ranks receive them
        self.train = build_set(
            self.task.train_set, spec, self.root, shared_samples(self.task, spec, self.root, "train", dist)
        )
        if is_sharded(self.task):  # every rank evaluates its shard
            samples = shared_samples(self.task, spec, self.root, "eval", dist)
            self.evalset = build_set(self.task.eval_set, spec, self.root, samples)
        else:
            self.evalset = self.task.eval_set(spec, self.root) if dist.is_main else None
        self.stream = ItemStream(len(self.train), self.task.items_per_microbatch(spec), spec.seed)
        self.metrics = MetricsLog(self.run_dir / METRICS, enabled=dist.is_main)

    def _restore(self) -> State:
        path = self.run_dir / CHECKPOINT
        if self.dist.is_main and (self.run_dir / KEPT).is_symlink():
            raise UserError(f"{self.run_dir / KEPT}: is a symbolic link; refusing to write kept weights through it")
        if not self.dist.broadcast(path.exists()):  # every rank follows rank 0's view
            self.metrics.truncate(0)
            self.dist.barrier()  # nobody writes a checkpoint before every rank has looked
            return State()
        ckpt = load_checkpoint(path, self.dist.device)
        try:
            unknown = dict.fromkeys(("gain_sum", "gain_count", "var_sum", "sqr_sum", "moments_count"))
            state = State(**{**unknown, **ckpt["state"]})
        except TypeError:
            raise UserError(f"checkpoint {path} holds an unknown state; delete it to start the run over") from None
        odd = odd_state_field(state)
        if odd:
            raise UserError(f"checkpoint {path}: state field {odd!r} is not a number; delete it to start the run over")
        damage = self._damage(ckpt.get("spec"), state) if self.dist.is_main else None
        damage = self.dist.broadcast(damage)  # every rank stops, not rank 0 alone
        if damage:
            raise UserError(f"run folder damaged: {damage} {path} to start the run over")
        self.dist.barrier()
        misfit = checkpoint_misfit(self.module, self.optimizer, ckpt)
        if misfit is None:
            try:
                self.estimator.load_state_dict(ckpt["estimator"])
                if self.precond_gain is not None:
                    self.precond_gain.load_state_dict(ckpt["precond_gain"])
            except (KeyError, TypeError, ValueError, IndexError) as e:
                misfit = f"the gain estimator's state: {type(e).__name__} {str(e)[:80]}"
        if misfit:
            raise UserError(f"checkpoint {path} does not fit this run ({misfit}); delete it to start the run over")
        self.metrics.truncate(state.metrics_offset, state.metrics_records)
        return state

    def _damage(self, saved: dict[str, Any] | None, state: State) -> str | None:
        """Why the checkpoint cannot continue this run here: another run's spec, or metrics cut short."""
        if isinstance(saved, dict):
            differ = self.spec.differs_from(saved)  # the one identity (bench.identity.identity_of)
            if differ:
                return f"{CHECKPOINT} belongs to another run (differs in: {', '.join(differ)}); delete"
        why = self.metrics.damage(state.metrics_offset, state.metrics_records)
        return why and f"{why}; restore {METRICS} or delete"

    def _checkpoint(self, state: State) -> None:
        if self.dist.is_main:
            state.metrics_offset = self.metrics.offset()
            state.metrics_records = self.metrics.records
            save_checkpoint(
                self.run_dir / CHECKPOINT,
                {
                    "model": self.module.state_dict(),
                    "optimizer": self.optimizer.state_dict(),
                    "estimator": self.estimator.state_dict(),
                    **({"precond_gain": self.precond_gain.state_dict()} if self.precond_gain is not None else {}),
                    "state": vars(state).copy(),
                    "spec": self.spec.to_json(),
                },
            )
        self.dist.barrier()

    def _keep(self, state: State) -> None:
        """Keep a copy of the model's weights as checkpoints/iter<N>.pt (rank 0; no optimizer): the
        weights at which iteration N's gradients are taken, for offline measurements (`adascale-bench gain`)."""
        if self.dist.is_main:
            kept = self.run_dir / KEPT
            if kept.is_symlink():  # a planted link would have the weights written wherever it points
                raise UserError(f"{kept}: is a symbolic link; refusing to write kept weights through it (remove it)")
            save_checkpoint(
                kept / kept_name(state.iteration),
                {
                    "model": self.module.state_dict(),
                    "iteration": state.iteration,
                    "tau": state.tau,
                    "scale": self.scales(state.tau),  # the S of iteration N
                    "spec": self.spec.to_json(),
                },
            )

    def step(self, state: State, scale: int, batches: Iterator[Any], observer: GradientObserver | None) -> bool:
        """One iteration at scale S on this rank's next A micro-batches from `batches`: gradients,
        statistics, gain, the rule's step, the metrics record, and the clocks. False if it diverged
        (nothing is stepped then). As torch.optim's SGD.step, a shell over its named steps."""
        if self.precond is not None:  # at S = 1 AdamScale's gain is 1: its hooks take nothing
            self.precond.begin(on=scale > 1)
        loss_v, sum_sq_v, mean_sq_v = self._gradients(state, scale, batches, observer)
        if self._diverged(state, scale, loss_v, sum_sq_v, mean_sq_v):
            return False
        track = self._track
        gain = self.estimator.update(sum_sq_v, mean_sq_v, scale) if track else 1.0
        if self.precond is not None and self.precond_gain is not None and scale > 1:  # the gain AdamScale reads
            gain = self.precond_gain.update(*self.precond.take(self.dist), scale)
        lr, p, w = self._apply(state, scale, gain)
        values = (state.iteration, state.tau, scale, gain, lr, loss_v, sum_sq_v if track else None, mean_sq_v, p, w)
        if track and scale > 1:  # and the estimator's two moving averages
            self._log_row(self._keys_stats, values + self.estimator.averaged())
        else:
            self._log_row(TRAIN_KEYS, values)
        self._advance(state, scale, gain, p, sum_sq_v, mean_sq_v)
        self._last = (scale, gain, loss_v, lr)  # on the host already: the progress bar's and heartbeat's numbers
        return True

    def _gradients(
        self, state: State, scale: int, batches: Iterator[Any], observer: GradientObserver | None
    ) -> tuple[float, float, float]:
        """ḡ in every parameter's .grad from this rank's A micro-batches, the same for every split S = W × A,
        and (loss, sum_sq, mean_sq) on the host: the iteration's one synchronisation."""
        dist = self.dist
        accum = scale // dist.world
        micro: Iterable[Any] = self._microbatches(batches, accum)  # one at a time
        seeds = dropout_seeds(self._seed, state.microbatch + dist.rank * accum, accum)
        self.split.begin(accum)  # the same ḡ and BatchNorm statistics for every split S = W × A
        result = None
        self.vote.mine, self.vote.anyone = stop_requested(), False  # answered by this iteration's gather
        bn = self.split.bn
        try:
            if self.batched is not None and accum > 1:  # spec microbatch_mode=batched (bench.engine.batched)
                micro = list(micro)
                result = self.batched.accumulate(micro, scale, self._track, bn)
                self.vote.anyone = self.vote.mine  # (W = 1 only)
            if result is None:
                model, task, params = self.model, self.loss_task, self.params
                result = accumulate(model, task, micro, seeds, params, observer, scale, dist, self.vote, bn)
        except BaseException:
            self.split.abandon()  # the BatchNorm layers' own buffers back
            raise
        self.split.end()
        return result

    def _microbatches(self, batches: Iterator[Any], accum: int) -> Iterator[Any]:
        """This rank's A micro-batches of the iteration, each on the device as it is reached. At W = 1 a stop
        signal is honoured before each (Abandoned: at a huge S the iteration would never end, SIGTERM with it);
        at W > 1 a rank cannot drop the iteration alone (the others would wait in its all-reduce for ever), so
        the signal waits for the vote on the iteration's gather."""
        device, alone = self.dist.device, self.dist.world == 1
        for _ in range(accum):
            if alone and stop_requested():
                raise Abandoned("stopped by signal between two micro-batches")
            yield to_device(next(batches), device)

    def _diverged(self, state: State, scale: int, loss_v: float, sum_sq_v: float, mean_sq_v: float) -> bool:
        """Whether the iteration's loss or statistics are not finite; then its record says so and nothing steps."""
        finite = math.isfinite(loss_v) and math.isfinite(mean_sq_v)
        if finite and not (self._track and scale > 1 and not math.isfinite(sum_sq_v)):
            return False
        record = {"iteration": state.iteration, "tau": state.tau, "scale": scale, "loss": loss_v}
        self._log(record | {"mean_sq": mean_sq_v, "diverged": True})
        return True

    def _apply(self, state: State, scale: int, gain: float) -> tuple[float, float, float]:
        """The rule's factors at this iteration, and the SGD step at η = m·w·lr(⌊τ⌋): (η, p, w)."""
        m, p, w = self.rule.factors(state.iteration, scale, gain)
        w *= extra_warmup(state.iteration, self._warmup)
        lr = m * w * self.lr(math.floor(state.tau))
        if self._adamw is None:
            sgdstep.step(self.optimizer, lr)  # optimizer.step() and zero_grad(), without their wrapper (see there)
        else:  # AdamW: β₁, β₂ and ε as the rule sets them at this iteration (most leave them as given)
            betas, eps = adam_hyper(self.rule, state.iteration, scale, *self._adamw)
            adamwstep.step(self.optimizer, lr, betas, eps)
        return lr, p, w

    def _advance(self, state: State, scale: int, gain: float, p: float, sum_sq_v: float, mean_sq_v: float) -> None:
        """The clocks (τ, the iteration, the stream's micro-batch) and the summary's running sums, in record order."""
        if state.gain_sum is not None and state.gain_count is not None:
            state.gain_sum += gain  # in record order: the same float sum as over the file's records
            state.gain_count += 1
        fold = self._track and scale >= 2 and math.isfinite(sum_sq_v) and math.isfinite(mean_sq_v)
        if fold and state.var_sum is not None and state.sqr_sum is not None and state.moments_count is not None:
            var, sqr = moments(sum_sq_v, mean_sq_v, scale)  # as bench.algo.gain.b_simple_average folds them
            state.var_sum += var
            state.sqr_sum += sqr
            state.moments_count += 1
        state.tau += p
        state.iteration += 1
        state.microbatch += scale

    def _log(self, record: dict[str, Any]) -> None:
        """A metrics record to metrics.jsonl (rank 0's MetricsLog) and, when asked for, to TensorBoard."""
        self._log_row(tuple(record), tuple(record.values()))

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
        bar = self._bar(state)
        self.model.train()
        try:
            if state.iteration == 0 and state.initial_eval is None:  # once per run, never again on a resume
                self._evaluate(state, initial=True)
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
                self._show(bar, beat, state, before)
                self._after_step(state, cadence, started, before, epochs_before)
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

    def _bar(self, state: State) -> Any:
        """The progress bar over τ (rank 0, on a terminal, when asked for)."""
        spec = self.spec
        return tqdm(
            total=self.T1,
            initial=min(state.tau, self.T1),
            unit="τ",
            dynamic_ncols=True,
            disable=not (self.progress and self.dist.is_main) or None,
            leave=False,
            desc=f"{spec.task} {spec.method} {spec.scale} seed{spec.seed}",
            bar_format="{desc}: {percentage:3.0f}%|{bar}| τ {n:.0f}/{total:.0f} [{elapsed}<{remaining}{postfix}]",
        )

    def _at_new_scale(self, state: State, scale: int, here: AtScale | None, started: float) -> AtScale:
        """The stream's slice and the observer for a new S; a checkpoint and RanksChange where S needs another W."""
        ranks = ranks_for(self.spec, scale, self.dist.world)
        if ranks != self.dist.world:
            state.wall_time = time.perf_counter() - started
            self._checkpoint(state)
            raise RanksChange(
                ranks,
                f"S = {scale} at τ = {state.tau:.1f} needs {ranks} ranks (accumulation "
                f"{self.spec.accumulation}); checkpoint saved, run it again with --ranks {ranks}",
            )
        batches = self.batches(state, scale)
        if here is not None:
            here.close()
        return self.at_scale(state, scale, batches)

    def _show(self, bar: Any, beat: Heartbeat | None, state: State, before: float) -> None:
        """The progress bar and the heartbeat, from the numbers the step left on the host."""
        bar.update(min(state.tau, self.T1) - min(before, self.T1))
        if state.iteration % 10 == 0:
            bar.set_postfix_str("S={} gain={:.2f} loss={:.3f}".format(*self._last[:3]), refresh=False)
        if beat is not None:
            s_, gain_, loss_, lr_ = self._last
            beat.beat(state.iteration, state.tau, s_, loss=loss_, gain=gain_, lr=lr_)

    def _after_step(self, state: State, c: Cadence, started: float, before: float, epochs_before: float) -> None:
        """What follows an iteration: an evaluation when its clock crossed a period (or the run ended), kept
        weights, and on a stop signal or at the checkpoint period a checkpoint (Interrupted after a signal's)."""
        clock, clock_before = (self.epochs(state), epochs_before) if c.by_epochs else (state.tau, before)
        if self._done(state) or math.floor(clock / c.eval_every) > math.floor(clock_before / c.eval_every):
            self._evaluate(state)
        done = self._done(state)
        if c.keep_every and state.iteration % c.keep_every == 0 and state.tau <= c.keep_until:
            self._keep(state)
        # W = 1: the signal as it stands now; W > 1: every rank stops in the same iteration, on the vote
        # that rode on this iteration's gather (a signal that came during the step: at the next one)
        if self.vote.anyone or (self.dist.world == 1 and stop_requested()):
            self._stop(state, started)
        if c.ckpt_every and state.iteration % c.ckpt_every == 0 and not done:
            state.wall_time = time.perf_counter() - started
            self._checkpoint(state)

    def _stop(self, state: State, started: float) -> NoReturn:
        """Checkpoint `state` (the end of the last whole iteration: a dropped one left no trace but its
        gradients, cleared here) and raise Interrupted, the resume's cue."""
        for p in self.params:
            p.grad = None
        state.wall_time = time.perf_counter() - started
        self._checkpoint(state)
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

    def _reached(self, value: float) -> bool:
        target = self.spec.target
        if target is None:
            return False
        return value <= target if not self.task.higher_is_better else value >= target

    def _evaluate(self, state: State, initial: bool = False) -> None:
        """An evaluation record in metrics.jsonl (rank 0); `initial`: the untrained model's, at iteration 0, kept as
        state.initial_eval (a seed that ends no better has collapsed: reports.rundata.failedseeds), never a target's
        stop."""
        self.module.eval()
        with torch.no_grad():  # every rank its shard; the metrics on rank 0 (bench.engine.evaluation)
            result = evaluate(self.task, self.module, self.evalset, self.spec, self.dist)
        self.module.train()
        if result is not None and initial:
            state.initial_eval = result
        elif result is not None:
            state.last_eval = result
        if result is not None:
            self._log(
                {
                    "eval": True,
                    "iteration": state.iteration,
                    "tau": state.tau,
                    "epochs": self.epochs(state),
                    # seconds of the run so far, resumed runs included; not deterministic, so every
                    # exact comparison of records leaves it out
                    "wall_time_s": round(time.perf_counter() - self._started, 3),
                    "metric": result[self.task.metric],
                    **result,
                }
            )
            self.metrics.flush()
            if not initial and self._reached(result[self.task.metric]):
                state.target_epochs = self.epochs(state)
        state.target_epochs = self.dist.broadcast(state.target_epochs)

    def _finish(self, state: State, status: str) -> Outcome:
        """Flush everything, drop the checkpoint of a finished run, and say how it ended."""
        noise = None
        if status == "completed" and self.spec.track_stats and self.estimator.updates:
            noise = self.estimator.noise_scale(self.spec.batch_size)
        outcome = Outcome(status, state, self.epochs(state), noise)
        self.dist.barrier()
        return outcome
