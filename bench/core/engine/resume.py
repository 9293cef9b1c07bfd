"""A run's checkpoint, resume and kept weights: what the Engine writes so that a run stopped anywhere continues
bit for bit (`checkpoint`, `restore`), and the weights offline measurements read (`keep`). Functions of the
run's `Saved` parts, so the loop (bench.core.engine.loop) only says when."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from bench.core.algo.gain import AdaptDLGain
from bench.core.engine.checkpoint import load_checkpoint, save_checkpoint
from bench.core.engine.distributed import Dist
from bench.core.engine.loopstate import State, checkpoint_misfit, odd_state_field
from bench.core.errors import UserError
from bench.core.files import CHECKPOINT, KEPT, METRICS, MetricsLog, kept_name
from bench.core.runspec import RunSpec


@dataclass
class Saved:
    """What a checkpoint carries and where: the run folder, its spec, and the objects whose state it holds."""

    run_dir: Path
    spec: RunSpec
    dist: Dist
    module: nn.Module
    optimizer: Any
    estimator: Any
    precond_gain: AdaptDLGain | None
    metrics: MetricsLog


def restore(s: Saved) -> State:
    """The State of the run's checkpoint, with the model, optimizer and estimators loaded from it and
    metrics.jsonl cut back to it; a fresh State (and an empty metrics file) where there is none."""
    path = s.run_dir / CHECKPOINT
    if s.dist.is_main and (s.run_dir / KEPT).is_symlink():
        raise UserError(f"{s.run_dir / KEPT}: is a symbolic link; refusing to write kept weights through it")
    if not s.dist.broadcast(path.exists()):  # every rank follows rank 0's view
        s.metrics.truncate(0)
        s.dist.barrier()  # nobody writes a checkpoint before every rank has looked
        return State()
    ckpt = load_checkpoint(path, s.dist.device)
    try:
        unknown = dict.fromkeys(("gain_sum", "gain_count", "var_sum", "sqr_sum", "moments_count"))
        state = State(**{**unknown, **ckpt["state"]})
    except TypeError:
        raise UserError(f"checkpoint {path} holds an unknown state; delete it to start the run over") from None
    odd = odd_state_field(state)
    if odd:
        raise UserError(f"checkpoint {path}: state field {odd!r} is not a number; delete it to start the run over")
    damage = _damage(s, ckpt.get("spec"), state) if s.dist.is_main else None
    damage = s.dist.broadcast(damage)  # every rank stops, not rank 0 alone
    if damage:
        raise UserError(f"run folder damaged: {damage} {path} to start the run over")
    s.dist.barrier()
    misfit = checkpoint_misfit(s.module, s.optimizer, ckpt)
    if misfit is None:
        try:
            s.estimator.load_state_dict(ckpt["estimator"])
            if s.precond_gain is not None:
                s.precond_gain.load_state_dict(ckpt["precond_gain"])
        except (KeyError, TypeError, ValueError, IndexError) as e:
            misfit = f"the gain estimator's state: {type(e).__name__} {str(e)[:80]}"
    if misfit:
        raise UserError(f"checkpoint {path} does not fit this run ({misfit}); delete it to start the run over")
    s.metrics.truncate(state.metrics_offset, state.metrics_records)
    return state


def _damage(s: Saved, saved: dict[str, Any] | None, state: State) -> str | None:
    """Why the checkpoint cannot continue this run here: another run's spec, or metrics cut short."""
    if isinstance(saved, dict):
        differ = s.spec.differs_from(saved)  # the one identity (bench.core.identity.identity_of)
        if differ:
            return f"{CHECKPOINT} belongs to another run (differs in: {', '.join(differ)}); delete"
    why = s.metrics.damage(state.metrics_offset, state.metrics_records)
    return why and f"{why}; restore {METRICS} or delete"


def checkpoint(s: Saved, state: State) -> None:
    """The run's checkpoint (rank 0, atomically), then every rank waits for it."""
    if s.dist.is_main:
        state.metrics_offset = s.metrics.offset()
        state.metrics_records = s.metrics.records
        save_checkpoint(
            s.run_dir / CHECKPOINT,
            {
                "model": s.module.state_dict(),
                "optimizer": s.optimizer.state_dict(),
                "estimator": s.estimator.state_dict(),
                **({"precond_gain": s.precond_gain.state_dict()} if s.precond_gain is not None else {}),
                "state": vars(state).copy(),
                "spec": s.spec.to_json(),
            },
        )
    s.dist.barrier()


def keep(s: Saved, state: State, scale: int) -> None:
    """Keep a copy of the model's weights as checkpoints/iter<N>.pt (rank 0; no optimizer): the weights at
    which iteration N's gradients are taken, at its scale S, for offline measurements (`adascale-bench gain`)."""
    if s.dist.is_main:
        kept = s.run_dir / KEPT
        if kept.is_symlink():  # a planted link would have the weights written wherever it points
            raise UserError(f"{kept}: is a symbolic link; refusing to write kept weights through it (remove it)")
        save_checkpoint(
            kept / kept_name(state.iteration),
            {
                "model": s.module.state_dict(),
                "iteration": state.iteration,
                "tau": state.tau,
                "scale": scale,  # the S of iteration N
                "spec": s.spec.to_json(),
            },
        )
