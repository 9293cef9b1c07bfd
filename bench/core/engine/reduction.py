"""Pairwise reduction: ḡ = (1/S) Σ_i g_i with the same bits however S = W × A is split.

Floating-point addition is not associative, so the usual reductions give a different rounding of ḡ
for every split: autograd adds a rank's A micro-batch gradients one after another, ((g1 + g2) + g3) + g4,
and the ring all-reduce adds the W rank sums in an order of its own. The difference is ~1e-7 relative,
and training amplifies it (tiny cifar10 turns 1e-8 into 1e-3 within five iterations), so runs that
should be the same run drift apart. Here both levels add as one balanced binary tree over the S
micro-batches in index order, which every power-of-two split builds identically:

- inside a rank, each micro-batch's gradient is taken out of `.grad` and added into a binary counter
  of partial sums; after the last micro-batch `.grad` holds the subtree sum of the rank's A consecutive
  micro-batches (needed only for A ≥ 3: A ≤ 2 is already a tree). In one process (`TreeSum`) that
  happens between backward passes, with fused multi-tensor adds; under DDP (`PairwiseGrads`) in a
  post-accumulate-grad hook, which runs before DDP's reducer reads `.grad` in the last pass;
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

from bench.core.engine import tree
from bench.core.engine.gradstats import GradientObserver, SquaredNormHooks

REDUCTIONS = ("pairwise", "native")
# TreeSum keeps every g_i of an iteration to its end while A·(the model's parameters) stays within this many
# numbers (256 KiB in float32): that saves ops (one fused norm at the end instead of one per pass, log2(A) fused
# adds instead of A − 1), which is what a tiny model's iteration is made of, but the kept g_i and the tree's
# out-of-place partial sums stay in the caches through the next backward passes. Measured on a 2-core Xeon
# (2 MiB L2 a core), S = 4, interleaved in one process: tiny logreg (120 numbers kept) is 2.5 % faster
# keeping, tiny cifar10 (311 k numbers) 1 % faster norming each g_i right after its pass, while it is hot.
KEEP_BUDGET = 1 << 16
Node = list[torch.Tensor]  # a node of the tree: one tensor per parameter


class TreeSum:
    """The pairwise sum in one process (W = 1), without hooks: after each backward pass (`end_backward`)
    the micro-batch's gradients leave `.grad` in one Python pass over the parameters and merge into the
    tree with fused multi-tensor adds, instead of a hook call and an add per parameter and micro-batch
    (hooks and ops inside backward cost several times more on a CPU, see bench.core.engine.gradstats). With
    `track` the taken gradients are g_i alone, so they give the statistics too, and no SquaredNormHooks
    are needed: within KEEP_BUDGET the g_i are kept for accumulate's one fused norm at the end and added
    by `take()` out of place, one fused add per level of the tree (tree.by_levels: log2(A) ops); past it
    they are normed after each pass (one fused op) and merged into the binary counter in place, as
    bench.core.engine.gradstats does. Without `track` autograd's own accumulation adds each pair of
    micro-batches (the tree's first level), and only every second pass takes `.grad` out (`_pairs`).
    A GradientObserver: `take()` leaves the sum in `.grad`."""

    synced = False

    def __init__(self, params: list[nn.Parameter], accum: int, track: bool, keep_budget: int = KEEP_BUDGET) -> None:
        if accum < 2:
            raise ValueError(f"TreeSum sums A ≥ 2 micro-batches, got A = {accum}")
        self.params = [p for p in params if p.requires_grad]
        self.accum = accum
        self.tracks = track
        self._keep = track and accum * sum(p.numel() for p in self.params) <= keep_budget
        self._kept: list[list[torch.Tensor]] = []  # a small model's g_i, per pass
        self._stack: list[tuple[int, list[torch.Tensor]]] = []  # (level, partial sums), levels decreasing
        self._norms: list[torch.Tensor] = []
        self._passes = 0

    def end_backward(self) -> None:  # (gradients do not require grad: no no_grad() needed, ~3 µs a call)
        self._passes += 1
        if not self.tracks:
            self._pairs()
            return
        grads = self._out_of_grad(self._passes)
        if self._keep:  # added at take(), a level of the tree at a time
            self._kept.append(grads)
            return
        self._norms.extend(torch._foreach_norm(grads))
        tree.push(self._stack, grads, self._add)

    def _out_of_grad(self, first: int) -> list[torch.Tensor]:
        """Every parameter's `.grad` (of micro-batches first … this pass), taken out (left None); refused
        where a parameter got none. (One plain loop: it runs after every backward pass.)"""
        grads = []
        for p in self.params:
            g = p.grad
            if g is None:
                which = "micro-batch" if first == self._passes else f"micro-batches {first} and"
                raise RuntimeError(
                    f"reduction=pairwise: a parameter got no gradient from {which} {self._passes} of {self.accum}; "
                    "it needs every parameter used by every micro-batch (use --set reduction=native)"
                )
            grads.append(g)
            p.grad = None
        return grads

    def _pairs(self) -> None:
        """Without statistics: autograd's own accumulation adds each odd micro-batch's gradient into the even
        one before it (g_2k + g_2k+1, the tree's first level: the counter merges every such pair at once,
        and an add is the same bits either way round), so only every second pass takes `.grad` out, as a
        level-1 node; the last pass's `.grad` stays for `take`. Half the passes and the adds of TreeSum's
        tracking path, for the same tree."""
        if self._passes % 2 or self._passes == self.accum:
            return  # the next pass adds into .grad (or take() folds it, the newest node)
        grads = self._out_of_grad(self._passes - 1)
        tree.push(self._stack, grads, self._add, level=1)

    def take(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Fold what is left, smaller subtrees first, into `.grad`; return (the g_i kept, the norms taken).
        A small model's kept g_i are added here, one fused out-of-place add per level of the tree."""
        if self._keep:
            node = tree.by_levels(self._kept, self._add_pairs)
            kept = [g for grads in self._kept for g in grads]
        else:
            node = tree.fold(self._stack, self._add, [p.grad for p in self.params] if not self.tracks else None)
            kept = []
        for p, g in zip(self.params, node, strict=True):
            p.grad = g
        norms = self._norms
        self._kept, self._norms, self._passes = [], [], 0
        return kept, norms

    def _add(self, older: list[torch.Tensor], newer: list[torch.Tensor]) -> list[torch.Tensor]:
        """older + newer, in place into older (a larger model's partial sums, whose g_i are normed already)."""
        torch._foreach_add_(older, newer)
        return older

    def _add_pairs(self, olders: list[list[torch.Tensor]], newers: list[list[torch.Tensor]]) -> list[Node]:
        """Each older + newer pair of one tree level, out of place (the kept g_i are normed later), in one
        fused op over every parameter of every pair."""
        k = len(self.params)
        flat = torch._foreach_add([t for node in olders for t in node], [t for node in newers for t in node])
        return [list(flat[i : i + k]) for i in range(0, len(flat), k)]

    def remove(self) -> None:
        self._stack.clear()
        self._kept, self._norms, self._passes = [], [], 0


class PairwiseGrads:
    """Accumulates each parameter's micro-batch gradients as a balanced binary tree instead of
    autograd's running sum, in hooks (for DDP, whose reducer reads `.grad` inside the last backward
    pass). `begin(A)` before every iteration's A backward passes, `end()` after."""

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
        node = p.grad  # this micro-batch's gradient alone (.grad was None before it)
        p.grad = None
        stack = self._stacks.setdefault(p, [])
        tree.push(stack, node, _add_into)
        seen = self._seen[p] = self._seen.get(p, 0) + 1
        if seen == self.accum:  # the last micro-batch: hand the rank's sum to DDP's reducer / the step
            p.grad = tree.fold(stack, _add_into)  # what is left when A is no power of two

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


def _add_into(older: torch.Tensor, newer: torch.Tensor) -> torch.Tensor:
    return older.add_(newer)


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
    S = W × A: the pairwise gradient sum (spec `reduction`) and the BatchNorm running statistics replayed
    per micro-batch in index order (bench.core.engine.batchnorm; `bn` rides on accumulate's gather)."""

    def __init__(self, model: nn.Module, module: nn.Module, params: list[nn.Parameter], dist_: Any, reduction: str):
        from bench.core.engine.batchnorm import RunningStats

        if reduction not in REDUCTIONS:
            from bench.core.errors import UserError

            raise UserError(f"reduction {reduction!r}: expected one of {', '.join(REDUCTIONS)}")
        if isinstance(model, nn.parallel.DistributedDataParallel):
            install(model, dist_.world, reduction)
        self.params, self.world, self.reduction = params, dist_.world, reduction
        self.grads = PairwiseGrads(params) if reduction == "pairwise" and dist_.world > 1 else None
        self.bn = RunningStats.for_model(module)

    def observer(self, scale: int, track: bool) -> GradientObserver | None:
        """What observes (and, in one process, sums) the micro-batch gradients at scale S: TreeSum for
        the pairwise sum at W = 1 (unless A ≤ 2 without statistics: autograd's sum is the tree), else
        SquaredNormHooks when statistics are tracked at S > 1, else nothing."""
        accum = scale // self.world
        if self.world == 1 and self.reduction == "pairwise" and accum >= 2 and (track or accum >= 3):
            return TreeSum(self.params, accum, track)
        return SquaredNormHooks(self.params) if track and scale > 1 else None

    def begin(self, accum: int) -> None:
        if self.grads is not None:
            self.grads.begin(accum)
        if self.bn is not None:
            self.bn.begin(accum)

    def end(self) -> None:
        if self.grads is not None:
            self.grads.end()
        if self.bn is not None:
            self.bn.end()  # BatchNorm statistics as one model updates them over the S micro-batches in order

    def abandon(self) -> None:
        """An iteration that raised: the BatchNorm layers get their own buffers back."""
        if self.bn is not None:
            self.bn.abandon()
