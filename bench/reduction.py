"""Pairwise reduction: ḡ = (1/S) Σ_i g_i with the same bits however S = W × A is split.

Floating-point addition is not associative, so the usual reductions give a different rounding of ḡ
for every split: autograd adds a rank's A micro-batch gradients one after another, ((g1 + g2) + g3) + g4,
and the ring all-reduce adds the W rank sums in an order of its own. The difference is ~1e-7 relative,
and training amplifies it (tiny cifar10 turns 1e-8 into 1e-3 within five iterations), so runs that
should be the same run drift apart. Here both levels add as one balanced binary tree over the S
micro-batches in index order, which every power-of-two split builds identically:

- inside a rank, `PairwiseGrads` takes each micro-batch's gradient out of `.grad` as soon as autograd
  has accumulated it (a post-accumulate-grad hook, which runs before DDP's reducer reads `.grad`) and
  adds it into a binary counter of partial sums; after the last micro-batch `.grad` holds the subtree
  sum of the rank's A consecutive micro-batches (needed only for A ≥ 3: A ≤ 2 is already a tree);
- across ranks, `pairwise_allreduce_hook` (a DDP communication hook) combines the W subtree sums by
  recursive doubling: at step k rank r exchanges its partial with rank r XOR 2^k and both add the two,
  so after log2(W) steps every rank holds the whole tree, bit for bit the same on all ranks.

Dividing by W and then by A is exact for powers of two, so .grad ends bit-identical to W = 1. The
price is log2(W) exchanges of the gradient instead of the ring's 2: nothing for W ≤ 4, more at large
W, where `--set reduction=native` (autograd's order and DDP's own all-reduce) is the faster choice.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

REDUCTIONS = ("pairwise", "native")


class PairwiseGrads:
    """Accumulates each parameter's micro-batch gradients as a balanced binary tree instead of
    autograd's running sum. `begin(A)` before every iteration's A backward passes, `end()` after."""

    def __init__(self, params: list[nn.Parameter]) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.accum = 1
        self._handles: list[Any] = []
        self._stacks: dict[nn.Parameter, list[tuple[int, torch.Tensor]]] = {}
        self._seen: dict[nn.Parameter, int] = {}

    def begin(self, accum: int) -> None:
        """Hooks only when A ≥ 3: for A ≤ 2 autograd's sum already is the tree, at no cost."""
        self.accum = accum
        self._stacks.clear()
        self._seen.clear()
        if accum > 2 and not self._handles:
            self._handles = [p.register_post_accumulate_grad_hook(self._hook) for p in self.params]
        elif accum <= 2 and self._handles:
            self.remove()

    @torch.no_grad()
    def _hook(self, p: nn.Parameter) -> None:
        node, level = p.grad, 0  # this micro-batch's gradient alone (.grad was None before it)
        p.grad = None
        stack = self._stacks.setdefault(p, [])
        while stack and stack[-1][0] == level:  # a binary counter: equal subtrees merge
            node = stack.pop()[1].add_(node)
            level += 1
        stack.append((level, node))
        seen = self._seen[p] = self._seen.get(p, 0) + 1
        if seen == self.accum:  # the last micro-batch: hand the rank's sum to DDP's reducer / the step
            p.grad = self._fold(stack)

    @staticmethod
    def _fold(stack: list[tuple[int, torch.Tensor]]) -> torch.Tensor:
        """Merge what is left (A not a power of two), smaller subtrees first; then the stack is empty."""
        node = stack.pop()[1]
        while stack:
            node = stack.pop()[1].add_(node)
        return node

    def end(self) -> None:
        """Check that every parameter got a gradient from every micro-batch (else its sum would never
        have reached `.grad` before it was used)."""
        if not self._handles:
            return
        short = [n for p, n in self._seen.items() if n != self.accum]
        self._stacks.clear()
        self._seen.clear()
        if short:
            raise RuntimeError(
                f"reduction=pairwise: a parameter got gradients from {short[0]} of {self.accum} micro-batches; "
                "it needs every parameter used by every micro-batch (use --set reduction=native)"
            )

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def pairwise_allreduce_hook(group, bucket):  # unannotated: DDP checks them against dist.GradBucket
    """DDP communication hook: the mean of the ranks' bucket by recursive doubling (W a power of two),
    the pairwise tree over ranks in rank order, identical on every rank."""
    group = group if group is not None else dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    mine = bucket.buffer()
    theirs = torch.empty_like(mine)
    step = 1
    while step < world:
        peer = dist.get_global_rank(group, rank ^ step)
        ops = [dist.P2POp(dist.isend, mine, peer, group), dist.P2POp(dist.irecv, theirs, peer, group)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        mine.add_(theirs)  # a + b == b + a exactly: both peers hold the same bits
        step *= 2
    mine.div_(world)  # exact for a power of two
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(mine)
    return fut


def install(ddp: nn.parallel.DistributedDataParallel, world: int, reduction: str) -> None:
    """Give DDP the pairwise all-reduce when the spec asks for it and W is a power of two (for other
    W no split can match another one bit for bit anyway, so DDP's own all-reduce stays)."""
    if reduction == "pairwise" and is_power_of_two(world) and world > 1:
        ddp.register_comm_hook(None, pairwise_allreduce_hook)


class SplitInvariance:
    """What the engine calls around each iteration's accumulate() so that nothing depends on the split
    S = W × A: the pairwise gradient sum (spec `reduction`) and, for W > 1, the merge of the ranks'
    BatchNorm running statistics (bench.batchnorm)."""

    def __init__(self, model: nn.Module, module: nn.Module, params: list[nn.Parameter], dist_: Any, reduction: str):
        from .batchnorm import RunningStatsMerge

        if reduction not in REDUCTIONS:
            from .errors import UserError

            raise UserError(f"reduction {reduction!r}: expected one of {', '.join(REDUCTIONS)}")
        if isinstance(model, nn.parallel.DistributedDataParallel):
            install(model, dist_.world, reduction)
        self.grads = PairwiseGrads(params) if reduction == "pairwise" else None
        self.bn = RunningStatsMerge.for_model(module, dist_)

    def begin(self, accum: int) -> None:
        if self.grads is not None:
            self.grads.begin(accum)
        if self.bn is not None:
            self.bn.begin()

    def end(self) -> None:
        if self.grads is not None:
            self.grads.end()
        if self.bn is not None:
            self.bn.end()  # BatchNorm statistics as if one model had seen all S micro-batches
