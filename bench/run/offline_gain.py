"""The offline gain (the paper's Figure 2): the gain estimated afresh at a kept checkpoint's weights, to
check the online estimate that AdaScale's moving averages give during training.

At the weights w_t of checkpoints/iter<t>.pt (spec keep_checkpoints_every), n independent micro-batches
of the run's batch size b are drawn from the training set (the engine's data path, with a stream seed of
their own), each micro-batch gradient g_i is taken as the engine takes it (bench.engine.loop.accumulate:
train mode, BatchNorm over the micro-batch alone, the task's loss, the run's dropout seeding), and

    sum_sq = Σ_i ||g_i||²,  mean_sq = ||(1/n) Σ_i g_i||²,
    σ², μ² = bench.algo.gain.moments(sum_sq, mean_sq, n),  r = gain_from(σ², μ², S)   (clamped as online)

with S the run's scale at iteration t. Nothing is trained: the gradients are taken on a copy of the
model, whose BatchNorm statistics are thrown away, and nothing is stepped.

Its uncertainty: a delete-one-group jackknife over the micro-batches, in GROUPS round-robin groups
(the micro-batches are independent draws, so the groups are too). Each group k keeps its gradient sum
T_k and Σ||g_i||² (Q_k); leaving group k out gives sum_sq = Σ_{l≠k} Q_l and
mean_sq = (1ᵀH1 − 2(H1)_k + H_kk)/(n − n_k)² with H_kl = T_k·T_l, and the gain as above; `gain_lo`,
`gain_hi` = r ± 1.96·SE_jack, within [1, S]. Not a bootstrap with replacement: a resample that repeats a
group hands the unbiased moments two copies of the same micro-batches as if independent, which biases
every replicate's σ² down — on the smoke's logreg run the point estimates fell outside their own
percentile intervals (6.00 against [4.42, 5.97] at 32 micro-batches). Memory: GROUPS gradient copies.
"""

from __future__ import annotations

import copy
import csv
import fnmatch
import io
import itertools
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bench import safefs
from bench.algo.gain import clamp, gain_from, moments
from bench.engine.checkpoint import load_weights
from bench.engine.data import ItemStream, RankSampler, loader, to_device
from bench.engine.distributed import Dist, pick_device
from bench.engine.loop import accumulate, dropout_seeds
from bench.engine.seeding import mix
from bench.errors import UserError
from bench.files import (
    KEPT,
    METRICS,
    OFFLINE_GAIN,
    atomic_write_bytes,
    identity_differs,
    read_jsonl,
)
from bench.run.data import prepare_data
from bench.run.spec import read_spec

OFFLINE_STREAM = 0x0FF1  # the offline micro-batches' stream: mix(run seed, iteration, OFFLINE_STREAM)
BATCHES = {"paper": 1000, "tiny": 256}  # n by preset (`--batches` overrides): tiny's μ² stands above its noise
COLUMNS = ("iteration", "tau", "offline_gain", "gain_lo", "gain_hi", "var", "sqr", "batches", "scale")
GROUPS = 32  # jackknife groups of micro-batches


def _gain(sum_sq: float, mean_sq: float, n: int, scale: int) -> float:
    return gain_from(*clamp(*moments(sum_sq, mean_sq, n)), scale) if scale > 1 else 1.0


def jackknife(q: torch.Tensor, h: torch.Tensor, sizes: torch.Tensor, scale: int) -> tuple[float, float]:
    """The 95 % delete-one-group jackknife interval of the gain, within [1, S]: q the groups' Σ||g_i||², h
    their gradient sums' Gram matrix, sizes their micro-batch counts (float64, CPU). NaN below 2 groups
    or at S = 1."""
    g = len(q)
    if g < 2 or scale == 1:
        return math.nan, math.nan
    n, total_sq, total_mean = float(sizes.sum()), float(q.sum()), float(h.sum())
    point = _gain(total_sq, total_mean / n**2, int(n), scale)
    rows = h.sum(1)
    gains = []
    for k in range(g):
        m = n - float(sizes[k])
        if m < 2:
            return math.nan, math.nan
        mean_sq = (total_mean - 2 * float(rows[k]) + float(h[k, k])) / m**2
        gains.append(_gain(total_sq - float(q[k]), mean_sq, int(m), scale))
    x = torch.tensor(gains, dtype=torch.float64)
    se = math.sqrt((g - 1) / g * float(((x - x.mean()) ** 2).sum()))
    return max(1.0, point - 1.96 * se), min(float(scale), point + 1.96 * se)


def microbatches(task: Any, train: Any, spec: dict[str, Any], n: int, seed: int) -> Iterator[Any]:
    """n micro-batches of the run's batch size from the training set: the first n of a stream seeded
    with `seed` (the engine's ItemStream, so what a micro-batch holds and its augmentation keys are
    drawn exactly as in training)."""
    stream = ItemStream(len(train), task.items_per_microbatch(spec), seed)
    return itertools.islice(iter(loader(train, RankSampler(stream, 0, 1, 1, 0))), n)


def measure(
    task: Any,
    model: nn.Module,
    batches: Iterator[Any],
    seed: int,
    scale: int,
    device: torch.device,
    step: Callable[[], None] | None = None,
) -> dict[str, float]:
    """The unbiased σ², μ² and the gain at scale S from the gradients of `batches` at `model`'s weights
    (one micro-batch gradient at a time through the engine's accumulate, on a copy of the model).
    `step` is called after every micro-batch (a progress bar)."""
    model = copy.deepcopy(model)  # BatchNorm's running statistics change in train mode: not the caller's
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    width = sum(p.numel() for p in params)
    sums = torch.zeros(GROUPS, width, dtype=torch.float64, device=device)  # each group's gradient sum T_k
    group_sq = [0.0] * GROUPS
    sizes = [0] * GROUPS
    dist = Dist(device=device)
    squares: list[float] = []
    for i, batch in enumerate(batches):
        for p in params:
            p.grad = None
        _, sq, _ = accumulate(model, task, [to_device(batch, device)], dropout_seeds(seed, i, 1), params, None, 1, dist)
        squares.append(sq)  # ||g_i||² (S = 1: sum_sq = mean_sq, squared in float64 from the float32 norm)
        k = i % GROUPS  # round-robin: the groups stay balanced whatever n is
        grads = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), device=device) for p in params]
        sums[k].add_(torch.cat(grads).to(torch.float64))
        group_sq[k] += sq
        sizes[k] += 1
        if step is not None:
            step()
    n = len(squares)
    if n < 2:
        raise UserError(f"the offline gain needs at least 2 micro-batches, got {n}")
    used = [k for k in range(GROUPS) if sizes[k]]
    t = sums[used]
    sum_sq = math.fsum(squares)
    mean_sq = float(torch.sum((t.sum(0) / n) ** 2))
    var, sqr = moments(sum_sq, mean_sq, n)
    h = (t @ t.T).cpu()
    q = torch.tensor([group_sq[k] for k in used], dtype=torch.float64)
    lo, hi = jackknife(q, h, torch.tensor([float(sizes[k]) for k in used], dtype=torch.float64), scale)
    return {
        "offline_gain": gain_from(*clamp(var, sqr), scale) if scale > 1 else 1.0,
        "gain_lo": lo,
        "gain_hi": hi,
        "var": var,
        "sqr": sqr,
        "sum_sq": sum_sq,
        "mean_sq": mean_sq,
        "batches": n,
    }


def kept_checkpoints(run_dir: Path) -> list[Path]:
    """checkpoints/iter*.pt, listed without following a link (a linked folder or file is refused on read)."""
    folder = Path(run_dir) / KEPT
    try:
        names = safefs.entries(folder)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise UserError(f"{folder}: cannot list it ({e.strerror})") from None
    return [folder / n for n, _ in names if fnmatch.fnmatch(n, "iter*.pt")]


def check_kept(path: Path, kept: dict[str, Any], spec: dict[str, Any]) -> None:
    """A kept checkpoint belongs to the run folder it sits in: the run identity it carries (the spec of the
    run that wrote it, bench.files.identity_of) must be the folder's, or its gains would be another run's."""
    saved = kept.get("spec")
    if not isinstance(saved, dict):
        raise UserError(f"kept checkpoint {path} carries no run identity (no spec); it cannot be checked, delete it")
    diff = identity_differs(spec, saved)
    if diff:
        raise UserError(
            f"kept checkpoint {path} belongs to another run (differs in: {', '.join(diff)}); "
            "move it to its own run folder or delete it"
        )


def offline_gains(
    run_dir: Path, batches: int | None = None, progress: bool = True, device: str | None = None
) -> list[dict[str, Any]]:
    """The offline gain at every kept checkpoint of the run in `run_dir`, also written (atomically) as
    its offline_gain.csv. One-line UserError when the run has no kept checkpoints."""

    run_dir = Path(run_dir)
    with safefs.confined(run_dir):  # below the run folder no link is followed (bench.safefs)
        return _offline_gains(run_dir, batches, progress, device)


def _offline_gains(run_dir: Path, batches: int | None, progress: bool, device: str | None) -> list[dict[str, Any]]:
    from tqdm import tqdm

    from tasks import get_task

    spec = read_spec(run_dir)  # checked: a seed or thread count that is a string is one line
    paths = kept_checkpoints(run_dir)
    if not paths:
        raise UserError(
            f"{run_dir} has no kept checkpoints ({KEPT}/iter*.pt): run it with --set keep_checkpoints_every=K"
        )
    n = int(batches or BATCHES.get(spec.get("preset"), BATCHES["paper"]))
    if n < 2:
        raise UserError(f"--batches {n}: the offline gain needs at least 2 micro-batches")
    task = get_task(spec["task"])
    dist = Dist(device=pick_device(device or spec.get("device", "auto")))
    root = prepare_data(task, spec, dist)
    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    torch.manual_seed(spec["seed"])
    model = task.build_model(spec).to(dist.device)
    train = task.train_set(spec, root)
    rows = []
    with tqdm(
        total=len(paths) * n,
        unit="batch",
        dynamic_ncols=True,
        leave=False,
        disable=not progress or None,
        desc=f"offline gain {run_dir.name}",
    ) as bar:
        for path in paths:
            kept = load_weights(path, dist.device)
            check_kept(path, kept, spec)
            try:
                model.load_state_dict(kept["model"])
                it = int(kept["iteration"])
                scale = int(kept["scale"])
                tau = float(kept["tau"])
            except (RuntimeError, TypeError, ValueError) as e:
                first = " ".join(str(e).split())[:160]
                raise UserError(f"kept checkpoint {path} does not fit this run's model ({first})") from None
            seed = mix(int(spec["seed"]), it, OFFLINE_STREAM)
            est = measure(task, model, microbatches(task, train, spec, n, seed), seed, scale, dist.device, bar.update)
            rows.append({"iteration": it, "tau": tau, "scale": scale, **est})
    write_csv(run_dir / OFFLINE_GAIN, rows)
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    atomic_write_bytes(path, buf.getvalue().encode())


def online_gains(run_dir: Path) -> dict[int, float]:
    """iteration -> the online gain recorded in metrics.jsonl."""
    return {
        int(r["iteration"]): float(r["gain"])
        for r in read_jsonl(Path(run_dir) / METRICS)
        if not r.get("eval") and r.get("gain") is not None and "iteration" in r
    }


def table(rows: list[dict[str, Any]], online: dict[int, float]) -> str:
    """iteration, τ, online and offline gain with the offline 95 % bootstrap interval and the gap
    online − offline, one line per kept checkpoint (online: the record of that iteration, or of the last
    one before it when the run ended there); `*` marks an online gain outside the offline interval."""
    lines = [
        f"{'iteration':>9}  {'tau':>9}  {'S':>4}  {'online':>8}  {'offline':>8}  {'95 % interval':>15}  {'gap':>7}"
    ]
    known = sorted(online)
    for r in rows:
        it = r["iteration"]
        before = [k for k in known if k <= it]
        on = online[before[-1]] if before else math.nan
        lo, hi = r.get("gain_lo", math.nan), r.get("gain_hi", math.nan)
        ci = f"[{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) else "–"
        mark = "*" if math.isfinite(lo) and math.isfinite(on) and not lo <= on <= hi else ""
        lines.append(
            f"{it:>9}  {r['tau']:>9.1f}  {r['scale']:>4}  {on:>8.3f}  {r['offline_gain']:>8.3f}  {ci:>15}  "
            f"{on - r['offline_gain']:>+7.3f}{mark}"
        )
    return "\n".join(lines)
