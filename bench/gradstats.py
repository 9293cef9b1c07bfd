"""Per-micro-batch gradient statistics from parameter hooks.

A hook registered on a parameter tensor fires with that micro-batch's gradient g_i of the parameter
before it is accumulated into `.grad` and before DDP's reducer sees it (DDP hooks the accumulation
that follows). So Σ_i ||g_i||² is observed without a second backward pass, the way fairscale's
AdaScale does it. The squared norms stay on the device until the iteration ends.
"""

from __future__ import annotations

import torch
from torch import nn


class SquaredNormHooks:
    """Sums ||g||² over every hooked parameter gradient seen since the last `pop()`."""

    def __init__(self, params: list[nn.Parameter]) -> None:
        self._parts: list[torch.Tensor] = []
        self._handles = [p.register_hook(self._hook) for p in params if p.requires_grad]

    def _hook(self, grad: torch.Tensor) -> None:
        self._parts.append(torch.linalg.vector_norm(grad, dtype=torch.float32).square())

    def pop(self) -> torch.Tensor:
        """Σ_i ||g_i||² over the micro-batches since the last call (a device scalar)."""
        total = torch.stack(self._parts).sum(dtype=torch.float64)
        self._parts.clear()
        return total

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._parts.clear()


def squared_norm(tensors: list[torch.Tensor]) -> torch.Tensor:
    """||concat(tensors)||² as a float64 device scalar, with one fused multi-tensor norm."""
    norms = torch._foreach_norm(tensors)
    return torch.stack(norms).to(torch.float64).square().sum()
