"""The loss's sharpness λ_max (the largest eigenvalue of its Hessian) at a run's initial weights and at a few of
its kept checkpoints: what `advise` holds each rule's lr against (bench.core.algo.stability, reports.advice).

**What is measured.** The training loss as the engine takes it, the mean of the task's loss over micro-batches
of the run's batch size b (train mode: BatchNorm over each micro-batch alone; dropout seeded per micro-batch as
the engine seeds it), over one fixed sample of `examples` training items drawn without replacement (all of them
where `examples` ≥ N: then it is the full-data loss, exactly). Its Hessian H is never formed: Hessian-vector
products Hv = ∇(∇L·v) by autograd's double backward (one forward and two backward passes per micro-batch) drive
a Lanczos iteration (`lanczos`: power iteration's Krylov space, whose top Ritz value is the algebraically
largest eigenvalue, also where the dominant one is a saddle's negative one), at most `iterations` products per
point. tests/run/test_sharpness.py holds the full-data estimate to logreg's exact Hessian (numpy eigvalsh) at
the same weights.

**A bracket, not a point.** A sample's λ_max is biased up: λ_max is convex in H, so E λ_max(Ĥ) ≥ λ_max(E Ĥ)
(on logreg κ = 1 at an S = 8 probe's kept weights, +9 … +17 % at 4 096 examples, +25 … +42 % at 1 024). So the
sample is split in two independent halves: Lanczos on the first half gives λ̂ (upper: biased up) and its
unit eigenvector v̂; the second half's curvature along it, v̂ᵀ·Ĥ₂·v̂, is unbiased for v̂ᵀHv̂ ≤ λ_max given v̂
(lower: biased down). One extra Hessian-vector product on the second half buys it. The rule advice calls a lr
unsafe only past the bound at the lower estimate, at risk past it at the upper one (reports.advice).

**Which weights.** The engine's initial weights (rebuilt from the run's seed, as `gain` rebuilds them) and up to
`points` kept checkpoints spread evenly over the run's kept ones (spec keep_checkpoints_every; advise keeps
them for its probe): λ_max moves along training, and the rule advice needs it where each rule's lr is largest
relative to it. Nothing is trained and nothing is written.

**What it costs.** Each product is one forward and two backward passes per micro-batch of half the sample; a point
takes at most ITERATIONS + 1 of them. The sample is cut (never below two micro-batches) so that the worst case
over all points fits in `seconds` (SECONDS, 60 s, by default) on a nominal CPU core: one product over one
micro-batch is counted, not timed — its FLOPs (torch.utils.flop_counter, as `adascale-bench flops` counts a
training micro-batch) at RATE and its dispatched operators at OP_SECONDS each (what a small model's product is
made of: logreg's is 45 operators and 7 680 FLOPs) — so the sample, and the verdict at a bound's edge, depends on
the model and b alone, never on the machine or its load (timed, the same probe's sample was 1 648 items one day
and 2 000 the next, and the verdict flipped). The two constants are this 2-core machine's one core fitted over
logreg, tiny cifar10 and docs/measurements' Bars and Tally (priced within a factor 2 of their measured CPU time;
FLOPs alone priced Tally's GRU 9× and logreg ~800× too cheap). logreg's 4 096 items fit many times over; a
convolutional net gets a smaller sample and a wider bracket, not a longer wait; on a slower core the worst case
takes longer than `seconds` (`advise` prints the time and the products, advice.md the cost).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from bench.core import safefs
from bench.core.engine.accumulate import dropout_seeds, seed_generators
from bench.core.engine.data import loader, to_device
from bench.core.engine.seeding import mix, mix_array
from bench.run.offline_gain import kept_checkpoints, open_run, weights_along
from bench.run.spec import read_spec

SHARPNESS_STREAM = 0x5A4F  # the sample's stream: mix(run seed, SHARPNESS_STREAM)
EXAMPLES = 4096  # training items in the sample (all of them on a smaller set)
ITERATIONS = 20  # Hessian-vector products at most per point
TOLERANCE = 1e-2  # stop when the Ritz pair's residual is below this share of its value (the bracket is wider)
POINTS = 3  # kept checkpoints measured besides the initial weights
SECONDS = 60.0  # the sample is cut so that the worst case fits in this (advise's budget: small beside its probe)
RATE = 2.0e10  # FLOP/s of a nominal CPU core in these products (module docstring: fitted on this machine)
OP_SECONDS = 4.0e-6  # seconds per dispatched operator on it (the same fit)


@dataclass(frozen=True)
class Point:
    """λ_max at one point of a run: its iteration, τ and S, the estimate, the Hessian-vector products it took
    and the sample's size."""

    iteration: int
    tau: float
    scale: int
    sharpness: float  # λ_max of the first half's Hessian: biased up (an upper estimate)
    sharpness_lo: float  # its top eigenvector's curvature on the second half: biased down (a lower estimate)
    products: int
    examples: int


def hessian_vector(task: Any, model: nn.Module, batches: list[Any], seeds: list[int]) -> Callable:
    """v ↦ H·v of the mean of the task's loss over `batches` (each on the model's device, seeded by its seed
    as the engine seeds a micro-batch), v and H·v flat float64 vectors over the trainable parameters."""
    params = [p for p in model.parameters() if p.requires_grad]
    device = params[0].device

    def product(v: torch.Tensor) -> torch.Tensor:
        parts = list(torch.split(v.to(device, params[0].dtype), [p.numel() for p in params]))
        out = torch.zeros_like(v, dtype=torch.float64, device=device)
        for batch, seed in zip(batches, seeds, strict=True):
            seed_generators(seed, device)
            grads = torch.autograd.grad(task.loss(model, batch), params, create_graph=True)
            dot = sum((g * u.view_as(g)).sum() for g, u in zip(grads, parts, strict=True))
            hv = torch.autograd.grad(dot, params, allow_unused=True)
            out += torch.cat(
                [(h if h is not None else torch.zeros_like(p)).reshape(-1) for h, p in zip(hv, params, strict=True)]
            )
        return out / len(batches)

    return product


def lanczos(
    product: Callable, width: int, seed: int, iterations: int = ITERATIONS, tolerance: float = TOLERANCE
) -> tuple[float, torch.Tensor, int]:
    """The largest eigenvalue of the symmetric operator `product`, its Ritz vector (unit, float64) and the
    products taken: the top Ritz value of
    the Lanczos tridiagonal T_k (full reorthogonalisation) from a seeded Gaussian start. Each step adds H·q_k to
    a Krylov space that holds the power iterate H^k·v, so it is never below power iteration's Rayleigh quotient
    after as many products, and on a clustered top (logreg at κ = 1) it converges where power iteration crawls.
    It stops when the Ritz pair's residual |H·y − θ·y| = β_k·|s_k| (s_k the last entry of T_k's top
    eigenvector) falls below `tolerance`·|θ|: some eigenvalue of H then lies that close to θ."""
    g = torch.Generator().manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
    q = torch.randn(width, generator=g, dtype=torch.float64)
    basis, alphas, betas = [q / q.norm()], [], []
    for k in range(1, iterations + 1):  # noqa: B007  (the count is returned)
        w = product(basis[-1]).cpu().to(torch.float64)
        alphas.append(float(w @ basis[-1]))
        Q = torch.stack(basis)
        for _ in range(2):  # twice is enough (Kahan's "twice is enough")
            w = w - Q.T @ (Q @ w)
        beta = float(w.norm())
        T = np.diag(alphas) + np.diag(betas, 1) + np.diag(betas, -1)
        if not np.isfinite(T).all():
            return math.nan, basis[0], k
        values, vectors = np.linalg.eigh(T)
        top = float(values[-1])
        ritz = Q.T @ torch.from_numpy(vectors[:, -1].copy())
        if beta * abs(vectors[-1, -1]) <= tolerance * abs(top) or beta <= 1e-12 * max(abs(top), 1e-300):
            break
        betas.append(beta)
        basis.append(w / beta)
    return top, ritz / ritz.norm(), k


def sample(task: Any, train: Any, spec: Any, examples: int, device: torch.device) -> tuple[list, list[int], int]:
    """The fixed sample: min(examples, N) items of one seeded permutation in micro-batches of the run's b (the
    last one shorter), with the engine's augmentation keys; the batches on `device`, their dropout seeds and
    the items in them."""
    n, k = len(train), int(task.items_per_microbatch(spec))
    seed = mix(int(spec.seed), SHARPNESS_STREAM)
    items = np.random.default_rng(seed).permutation(n)[: min(int(examples), n)]
    keys = mix_array(seed, np.arange(len(items), dtype=np.int64))
    pairs = list(zip(items.tolist(), keys.tolist(), strict=True))
    groups = [pairs[i : i + k] for i in range(0, len(pairs), k)]
    batches = [to_device(b, device) for b in loader(train, groups)]  # type: ignore[arg-type]
    return batches, dropout_seeds(seed, 0, len(batches)), len(items)


def chosen(paths: list[Path], points: int) -> list[Path]:
    """Up to `points` of the kept checkpoints, spread evenly by iteration (the first and the last among them)."""
    paths = sorted(paths, key=lambda p: p.name)  # iter<NNNNNNN>.pt: zero-padded, so by iteration
    if len(paths) <= points:
        return paths
    return [paths[int(round(i))] for i in np.linspace(0, len(paths) - 1, points)]


def fitted(product_time: float, batches: int, points: int, seconds: float | None) -> int:
    """How many micro-batches of the sample to keep so that the worst case — ITERATIONS + 1 products over half
    of them at each of `points` + 1 points, `product_time` seconds per micro-batch — fits in `seconds` (None: all
    `batches`); at least 2 (one per half)."""
    if seconds is None or not product_time > 0:
        return batches
    most = int(2 * seconds / (product_time * (ITERATIONS + 1) * (points + 1)))
    return max(2, min(batches, most))


class _Operators(TorchDispatchMode):
    """Counts the operators dispatched under it (each one a kernel launch and its Python and dispatcher overhead)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.count += 1
        return func(*args, **(kwargs or {}))


def product_cost(task: Any, model: nn.Module, batch: Any, seed: int, width: int) -> tuple[int, int]:
    """(FLOPs, dispatched operators) of one Hessian-vector product over one micro-batch, counted (FLOPs: matmuls and
    convolutions, forward and both backward passes), so that the sample's size is the same on every machine."""
    from torch.utils.flop_counter import FlopCounterMode

    product = hessian_vector(task, model, [batch], [seed])
    v = torch.ones(width, dtype=torch.float64) / math.sqrt(width)
    flops, operators = FlopCounterMode(display=False), _Operators()
    with flops, operators:
        product(v)
    return int(flops.get_total_flops()), operators.count


def priced(flops: int, operators: int) -> float:
    """Seconds of a nominal CPU core for that much work (RATE, OP_SECONDS)."""
    return flops / RATE + operators * OP_SECONDS


def sharpness_along(
    run_dir: Path, points: int = POINTS, examples: int = EXAMPLES, device: str | None = None,
    seconds: float | None = SECONDS, **kw: Any,
) -> list[Point]:  # fmt: skip
    """λ_max at the run's initial weights and at up to `points` of its kept checkpoints (module docstring), the
    sample cut to what fits in `seconds` at worst on a nominal core (`fitted`, `priced`; None: no limit)."""
    run_dir = Path(run_dir)
    with safefs.confined(run_dir):
        spec = read_spec(run_dir)
        paths = chosen(kept_checkpoints(run_dir), points)
        task, dist, model, train = open_run(spec, device)
        batches, seeds, count = sample(task, train, spec, examples, dist.device)
        model = copy.deepcopy(model)
        model.train()
        width = sum(p.numel() for p in model.parameters() if p.requires_grad)
        cost = priced(*product_cost(task, model, batches[0], seeds[0], width))
        keep = fitted(cost, len(batches), len(paths), seconds)
        if keep < len(batches):
            count = round(count * keep / len(batches))
            batches, seeds = batches[:keep], seeds[:keep]
        half = max(1, len(batches) // 2)
        out = []
        for it, tau, scale in weights_along(model, paths, spec, dist.device):
            first = hessian_vector(task, model, batches[:half], seeds[:half])
            value, vector, taken = lanczos(first, width, mix(int(spec.seed), it, SHARPNESS_STREAM), **kw)
            lo = value
            if len(batches) > half:
                second = hessian_vector(task, model, batches[half:], seeds[half:])
                lo = float(vector @ second(vector).cpu())
            out.append(Point(it, tau, scale, value, lo, taken, count))
    return out
