"""Checkpoints: written atomically (a crash mid-write leaves the previous one), read with one-line errors."""

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
