"""Per-micro-batch gradient statistics from parameter hooks.

A hook registered on a parameter tensor fires with that micro-batch's gradient g_i of the parameter
before it is accumulated into `.grad` and before DDP's reducer sees it (DDP hooks the accumulation
that follows). So Σ_i ||g_i||² is observed without a second backward pass, the way fairscale's
AdaScale does it.

Cost matters here (the overhead benchmark, `adascale-bench perf`): on a CPU an op run inside a hook
costs several times what it costs outside backward (measured with torch 2.11: a small norm, 12 µs
against 2.5 µs), a model has tens to hundreds of parameter tensors, and holding gradients across
backward passes grows the process's memory, which costs page faults. So a hook does no arithmetic: it
keeps g_i, and the norms are taken later by one fused multi-tensor op (torch._foreach_norm) over many
gradients at once; they stay on the device until the iteration ends. A kept g_i is never written into
by autograd, but while it is kept autograd cannot adopt it as `.grad` (which it does when `.grad` is
None: the first micro-batch, or every one under the pairwise reduction) and copies it instead. Hence:
- a small model (≤ SMALL_MODEL parameters in all; copies cost less than ops): every g_i is kept to the
  end of the iteration and folded into bench.core.engine.accumulate's one fused norm, with ḡ's tensors;
- a larger one: the gradients of a backward pass are normed right after it (`end_backward()`, one
  fused op per pass), so they are held only briefly; when autograd would adopt one, the hook hands it
  an alias instead (`detach()`: the same storage, no copy), whose values nothing changes before the
  pass ends, except DDP's in-place all-reduce in the last pass (`synced`), where g_i is kept (copied).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
from torch import nn

SMALL_MODEL = 1 << 16  # models up to this many parameters keep every g_i to the end of the iteration


class GradientObserver(Protocol):
    """What bench.core.engine.accumulate calls around an iteration's backward passes: `synced` is set for the
    pass whose .grad DDP all-reduces, `end_backward()` follows every pass, `take()` ends the iteration
    (returning the g_i kept and the norms ||g_i|| taken; `.grad` holds the rank's sum by then). `tracks`:
    whether it observes the g_i at all (Σ||g_i||² is NaN otherwise). Implemented by SquaredNormHooks
    (autograd's sum) and bench.core.engine.reduction.TreeSum (the pairwise sum in one process)."""

    tracks: bool
    synced: bool

    def end_backward(self) -> None: ...

    def take(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]: ...

    def remove(self) -> None: ...


class SquaredNormHooks:
    """Observes the norm of every hooked parameter gradient. Call `end_backward()` after every backward
    pass; `take()` (or `pop()`) at the end of the iteration."""

    tracks = True

    def __init__(self, params: list[nn.Parameter], small_model: int = SMALL_MODEL) -> None:
        self.synced = False  # set for the backward pass whose .grad DDP all-reduces in place
        self._kept: list[torch.Tensor] = []  # to the end of the iteration
        self._pass: list[torch.Tensor] = []  # to the end of this backward pass
        self._norms: list[torch.Tensor] = []
        hooked = [p for p in params if p.requires_grad]
        keep_all = sum(p.numel() for p in hooked) <= small_model
        # list.append is a builtin: no Python frame per call
        self._handles = [p.register_hook(self._kept.append if keep_all else self._hook_for(p)) for p in hooked]

    def _hook_for(self, p: nn.Parameter) -> Callable[[torch.Tensor], torch.Tensor | None]:
        def hook(grad: torch.Tensor) -> torch.Tensor | None:
            self._pass.append(grad)
            if p.grad is None and not self.synced:  # autograd would adopt `grad`: hand it an alias
                return grad.detach()
            return None

        return hook

    def end_backward(self) -> None:
        """Norms of this backward pass's gradients (larger models), before a later pass adds into their
        storage."""
        if self._pass:
            self._norms.extend(torch._foreach_norm(self._pass))
            self._pass = []

    def take(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """What was observed since the last call: (gradients g kept, norms ||g|| already taken), so that
        the caller can fold the kept ones into a fused norm of its own. sum_sq = Σ ||g||² over both."""
        self.end_backward()
        kept, norms = self._kept[:], self._norms
        self._kept.clear()  # the hooks hold this list's append
        self._norms = []
        return kept, norms

    def norms(self) -> list[torch.Tensor]:
        """||g|| of every (micro-batch, parameter) gradient since the last call, as device scalars."""
        kept, norms = self.take()
        return [*norms, *torch._foreach_norm(kept)] if kept else norms

    def pop(self) -> torch.Tensor:
        """Σ_i ||g_i||² over the micro-batches since the last call (a float64 device scalar)."""
        return sum_of_squares(self.norms())

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._kept.clear()
        self._pass, self._norms = [], []


def sum_of_squares(norms: list[torch.Tensor]) -> torch.Tensor:
    """Σ x² over device scalars, in float64 (a float64 zero for an empty list)."""
    if not norms:
        return torch.zeros((), dtype=torch.float64)
    return torch.linalg.vector_norm(torch.stack(norms), dtype=torch.float64).square()


def squared_norm(tensors: list[torch.Tensor]) -> torch.Tensor:
    """||concat(tensors)||² as a float64 device scalar, with one fused multi-tensor norm."""
    return sum_of_squares(list(torch._foreach_norm(tensors)))
