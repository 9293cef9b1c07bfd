"""Checkpoints: written atomically (a crash mid-write leaves the previous one), read with one-line errors.
The resume checkpoint (checkpoint.pt) carries everything; a kept one (checkpoints/iter<N>.pt, spec
keep_checkpoints_every) only the model's weights, for offline measurements such as `adascale-bench gain`."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch

from bench.errors import UserError
from bench.files import atomic_write_bytes


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def load_checkpoint(path: Path, device: torch.device) -> dict[str, Any]:
    try:
        ckpt = torch.load(path, map_location=device, weights_only=False)
    except Exception as e:  # torch raises many types for a damaged file
        raise UserError(
            f"checkpoint {path} is unreadable ({type(e).__name__}); delete it to start the run over"
        ) from None
    if not isinstance(ckpt, dict) or not {"model", "optimizer", "estimator", "state"} <= ckpt.keys():
        raise UserError(f"checkpoint {path} is not an adascale-bench checkpoint; delete it to start over")
    return ckpt


def load_weights(path: Path, device: torch.device) -> dict[str, Any]:
    """A kept checkpoint (checkpoints/iter<N>.pt: the model's weights, iteration, τ and scale)."""
    try:
        kept = torch.load(path, map_location=device, weights_only=False)
    except Exception as e:  # torch raises many types for a damaged file
        raise UserError(f"kept checkpoint {path} is unreadable ({type(e).__name__})") from None
    if not isinstance(kept, dict) or not {"model", "iteration", "tau", "scale"} <= kept.keys():
        raise UserError(f"{path} is not a kept adascale-bench checkpoint (model, iteration, tau, scale)")
    return kept
