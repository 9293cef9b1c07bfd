"""The offline gain (the paper's Figure 2): the gain estimated afresh at a kept checkpoint's weights, to
check the online estimate that AdaScale's moving averages give during training.

At the weights w_t of checkpoints/iter<t>.pt (spec keep_checkpoints_every), n micro-batches of the run's
batch size b are drawn, each micro-batch gradient g_i is taken as the engine takes it
(bench.core.engine.accumulate: train mode, BatchNorm over the micro-batch alone, the task's loss, the
run's dropout seeding), and

    sum_sq = Σ_i ||g_i||²,  mean_sq = ||(1/n) Σ_i g_i||²,
    σ², μ² = bench.core.algo.gain.moments(sum_sq, mean_sq, n),  r = gain_from(σ², μ², S)   (clamped as online)
    B = b·σ²/μ²  (bench.core.algo.gain.b_simple: the noise scale, in examples)

with S the run's scale at iteration t. Nothing is trained: the gradients are taken on a copy of the
model, whose BatchNorm statistics are thrown away, and nothing is stepped.

Why the draws are with replacement. Micro-batch j holds b items drawn independently and uniformly from
the N training items (numpy's generator seeded by (seed, j): reproducible, and the same micro-batch
whatever n is), with the augmentation keys of the engine's stream at those positions (`Draws`). Then
the g_i are i.i.d. with E g_i = G (the full-data gradient) and E||g_i − G||² = tr Σ/b (Σ the per-example
gradient covariance over the N items as the population, 1/N), so

    E[sum_sq] = n(tr Σ/b + |G|²),  E[mean_sq] = tr Σ/(nb) + |G|²
    E[σ²] = (E[sum_sq] − n·E[mean_sq])/(n − 1) = tr Σ/b,  E[μ²] = E[mean_sq] − E[σ²]/n = |G|²

— both unbiased, and B estimates tr Σ/|G|². Drawn without replacement instead (disjoint micro-batches of
one permutation, as training draws them), ḡ is the mean of nb distinct items, whose variance carries the
finite-population factor (N − nb)/(N − 1), and E[μ²] = |G|² − tr Σ/(N − 1): at n = 256, b = 32, N = 20 000
that is |G|² − 0.67·|G|² late in the smoke's logreg run (B = 13 354 there), which tripled the offline B and
biased the gain up (tests/run/test_offline_gain.py holds both estimators to the exact oracle).

Its uncertainty: a delete-one-group jackknife over the micro-batches, in GROUPS round-robin groups
(the micro-batches are independent draws, so the groups are too). Each group k keeps its gradient sum
T_k and Σ||g_i||² (Q_k); leaving group k out gives sum_sq = Σ_{l≠k} Q_l and
mean_sq = (1ᵀH1 − 2(H1)_k + H_kk)/(n − n_k)² with H_kl = T_k·T_l, hence the leave-one-out σ²_k, μ²_k.
`gain_lo`, `gain_hi` = r ± 1.96·SE_jack of the gains, within [1, S]; `B_lo`, `B_hi` from the jackknife of
the signal-to-noise ratio 1/B = μ²/(b·σ²) (finite and smooth even where μ² ≈ 0): its interval [a, c]
inverted, B_hi = inf where a ≤ 0 (the data cannot tell μ² from 0). Not a bootstrap with replacement: a
resample that repeats a group hands the unbiased moments two copies of the same micro-batches as if
independent, which biases every replicate's σ² down — on the smoke's logreg run the point estimates fell
outside their own percentile intervals (6.00 against [4.42, 5.97] at 32 micro-batches). Memory: GROUPS
gradient copies.

Where the task has an exact oracle (`Task.exact_moments`: logreg), each row also carries the exact
`exact_sqr` = |G|², `exact_trace` = tr Σ, `exact_var` = tr Σ/b, `exact_B` = tr Σ/|G|² and
`exact_gain` = (tr Σ/b + |G|²)/(tr Σ/(bS) + |G|²) at the same weights (empty for other tasks).
"""

from __future__ import annotations

import copy
import csv
import fnmatch
import io
import itertools
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bench.core import safefs
from bench.core.algo.gain import b_simple, clamp, gain_from, moments
from bench.core.algo.schedules import scale_schedule
from bench.core.engine.accumulate import accumulate, dropout_seeds
from bench.core.engine.checkpoint import load_weights
from bench.core.engine.data import ItemStream, loader, to_device
from bench.core.engine.distributed import Dist, pick_device
from bench.core.engine.seeding import mix, mix_array
from bench.core.errors import UserError
from bench.core.files import (
    KEPT,
    METRICS,
    OFFLINE_GAIN,
    atomic_write_bytes,
    finite_float,
    finite_number,
    iter_jsonl,
    kept_name,
)
from bench.core.runspec import RunSpec
from bench.core.usercode import is_user_name
from bench.run import independent
from bench.run.dataroot import prepare_data
from bench.run.spec import read_spec

OFFLINE_STREAM = 0x0FF1  # the offline micro-batches' stream: mix(run seed, iteration, OFFLINE_STREAM)
REFERENCE_STREAM = 0x0EF1  # the independent reference's micro-batches (bench.run.independent), drawn apart
BATCHES = {"paper": 1000, "tiny": 256}  # n by preset (`--batches` overrides): tiny's μ² stands above its noise
EXACT = ("exact_gain", "exact_B", "exact_var", "exact_sqr", "exact_trace")
COLUMNS = (
    "iteration",
    "tau",
    "offline_gain",
    "gain_lo",
    "gain_hi",
    "var",
    "sqr",
    "batches",
    "scale",
    "offline_B",
    "B_lo",
    "B_hi",
    "batch_size",
    *EXACT,
    *independent.COLUMNS,
)
GROUPS = 32  # jackknife groups of micro-batches
Z95 = 1.96


def _gain(var: float, sqr: float, scale: int) -> float:
    return gain_from(*clamp(var, sqr), scale) if scale > 1 else 1.0


def leave_one_out(q: torch.Tensor, h: torch.Tensor, sizes: torch.Tensor) -> list[tuple[float, float]] | None:
    """(σ²_k, μ²_k) with group k left out, for every group: q the groups' Σ||g_i||², h their gradient sums'
    Gram matrix, sizes their micro-batch counts (float64, CPU). None below 2 groups or when a group
    leaves fewer than 2 micro-batches."""
    g = len(q)
    if g < 2:
        return None
    n, total_sq, total_mean = float(sizes.sum()), float(q.sum()), float(h.sum())
    rows = h.sum(1)
    out = []
    for k in range(g):
        m = n - float(sizes[k])
        if m < 2:
            return None
        mean_sq = (total_mean - 2 * float(rows[k]) + float(h[k, k])) / m**2
        out.append(moments(total_sq - float(q[k]), mean_sq, int(m)))
    return out


def _se(values: list[float]) -> float:
    """The delete-one-group jackknife standard error of a statistic from its leave-one-out values."""
    x = np.asarray(values, dtype=np.float64)
    g = len(x)
    return math.sqrt((g - 1) / g * float(((x - x.mean()) ** 2).sum()))


def jackknife(q: torch.Tensor, h: torch.Tensor, sizes: torch.Tensor, scale: int) -> tuple[float, float]:
    """The 95 % delete-one-group jackknife interval of the gain, within [1, S] (arguments as
    `leave_one_out`). NaN below 2 groups or at S = 1."""
    loo = leave_one_out(q, h, sizes) if scale > 1 else None
    if loo is None:
        return math.nan, math.nan
    n = float(sizes.sum())
    point = _gain(*moments(float(q.sum()), float(h.sum()) / n**2, int(n)), scale)
    se = _se([_gain(v, s, scale) for v, s in loo])
    return max(1.0, point - Z95 * se), min(float(scale), point + Z95 * se)


def noise_interval(q: torch.Tensor, h: torch.Tensor, sizes: torch.Tensor, batch_size: float) -> tuple[float, float]:
    """The 95 % delete-one-group jackknife interval of B = b·σ²/μ² (arguments as `leave_one_out`): the
    jackknife of 1/B = μ²/(b·σ²), finite and smooth through μ² = 0 where B is not, its interval [a, c]
    inverted to [1/c, 1/a]; B_hi = inf where a ≤ 0 (μ² = 0 not excluded), both NaN where c ≤ 0 too."""
    loo = leave_one_out(q, h, sizes)
    if loo is None:
        return math.nan, math.nan
    n = float(sizes.sum())
    var, sqr = moments(float(q.sum()), float(h.sum()) / n**2, int(n))
    if not var > 0:
        return math.nan, math.nan
    se = _se([s / (batch_size * max(v, 0.0)) if v > 0 else math.inf for v, s in loo])
    point = sqr / (batch_size * var)
    lo, hi = point - Z95 * se, point + Z95 * se
    if not hi > 0:
        return math.nan, math.nan
    return 1.0 / hi, (1.0 / lo if lo > 0 else math.inf)


class Draws:
    """The offline micro-batches: micro-batch j holds k items drawn independently and uniformly from the
    n training items, with replacement (numpy's generator seeded by (seed, j)), each with the
    augmentation key of its stream position mix(seed, position), as bench.core.engine.data.ItemStream keys
    them. An iterable of micro-batches (a DataLoader batch sampler), from j = 0 on, without end."""

    def __init__(self, n_items: int, items_per_microbatch: int, seed: int) -> None:
        self.n, self.k, self.seed = int(n_items), int(items_per_microbatch), int(seed)

    def microbatch(self, j: int) -> list[tuple[int, int]]:
        items = np.random.default_rng([self.seed, j]).integers(self.n, size=self.k)
        keys = mix_array(self.seed, np.arange(j * self.k, (j + 1) * self.k, dtype=np.int64))
        return list(zip(items.tolist(), keys.tolist(), strict=True))

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        return (self.microbatch(j) for j in itertools.count())


def microbatches(task: Any, train: Any, spec: RunSpec, n: int, seed: int) -> Iterator[Any]:
    """n micro-batches of the run's batch size from the training set, each drawn with replacement
    (`Draws`, keyed by `seed`), through the engine's loader and the task's collate function."""
    draws = Draws(len(train), task.items_per_microbatch(spec), seed)
    return itertools.islice(iter(loader(train, draws)), n)  # type: ignore[arg-type]


def _estimates(
    sums: torch.Tensor, group_sq: list[float], sizes: list[int], squares: list[float], scale: int, batch_size: float
) -> dict[str, float]:
    """`measure`'s numbers from the groups' gradient sums, their squared norms and sizes, and every micro-batch's
    ||g_i||²: the unbiased moments, the gain at S and B, each with its jackknife interval over the groups."""
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
    counts = torch.tensor([float(sizes[k]) for k in used], dtype=torch.float64)
    lo, hi = jackknife(q, h, counts, scale)
    b_lo, b_hi = noise_interval(q, h, counts, batch_size) if math.isfinite(batch_size) else (math.nan, math.nan)
    return {
        "offline_gain": _gain(var, sqr, scale),
        "gain_lo": lo,
        "gain_hi": hi,
        "var": var,
        "sqr": sqr,
        "sum_sq": sum_sq,
        "mean_sq": mean_sq,
        "batches": n,
        "offline_B": b_simple(var, sqr, batch_size) if math.isfinite(batch_size) else math.nan,
        "B_lo": b_lo,
        "B_hi": b_hi,
    }


def measure(
    task: Any,
    model: nn.Module,
    batches: Iterator[Any],
    seed: int,
    scale: int,
    device: torch.device,
    step: Callable[[], None] | None = None,
    batch_size: float = math.nan,
) -> dict[str, float]:
    """The unbiased σ², μ², the gain at scale S and B = b·σ²/μ² (b = `batch_size`; NaN without it), each
    with its 95 % jackknife interval, from the gradients of `batches` at `model`'s weights (one
    micro-batch gradient at a time through the engine's accumulate, on a copy of the model). `step` is
    called after every micro-batch (a progress bar)."""
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
    return _estimates(sums, group_sq, sizes, squares, scale, batch_size)


def exact(task: Any, model: nn.Module, spec: RunSpec, scale: int) -> dict[str, float]:
    """The EXACT columns from the task's oracle at `model`'s weights (NaN where the task has none):
    σ² = tr Σ/b, μ² = |G|², B = tr Σ/|G|² and the gain of S from them (`gain_from`, unclamped: exact)."""
    oracle = getattr(task, "exact_moments", None)
    m = oracle(model, spec) if oracle is not None else None
    if m is None:
        return dict.fromkeys(EXACT, math.nan)
    b = float(spec.batch_size)
    var = m.trace / b
    return {
        "exact_gain": gain_from(var, m.sqr, scale) if scale > 1 else 1.0,
        "exact_B": b_simple(var, m.sqr, b),
        "exact_var": var,
        "exact_sqr": m.sqr,
        "exact_trace": m.trace,
    }


def reference(task: Any, model: nn.Module, train: Any, spec: RunSpec, it: int, n: int, device: Any) -> dict[str, Any]:
    """The independent reference's columns at `model`'s weights (bench.run.independent): the task's oracle
    where it has one — over the items left in the epoch's permutation that iteration `it` draws from, where the
    run's scale is fixed (the engine's stream, bench.core.engine.data.ItemStream, positions it·S·k on) and they hold
    its S micro-batches; else over the whole set —, else n micro-batches of its own stream through torch.func."""
    scale = spec.scale if isinstance(spec.scale, int) else 0  # fixed S (elastic runs: the whole set)
    k = int(task.items_per_microbatch(spec))
    stream = ItemStream(len(train), k, int(spec.seed))
    epoch, offset = divmod(it * scale * k, len(train))
    if scale >= 2 and len(train) - offset >= scale * k:
        m = task.exact_moments_of(model, spec, stream.permutation(epoch)[offset:])
        if m is not None:
            return independent.from_drawn(m.sqr, m.trace, m.trace_sq, m.spread, len(train) - offset, spec.batch_size)
    oracle = getattr(task, "exact_moments", None)
    m = oracle(model, spec) if oracle is not None else None
    if m is not None:
        return independent.from_oracle(m.sqr, m.trace, m.trace_sq, m.spread, float(spec.batch_size)).row()
    draws = microbatches(task, train, spec, max(n, 3), mix(int(spec.seed), it, REFERENCE_STREAM))
    return independent.measure(task, model, draws, device).row()


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


def check_kept(path: Path, kept: dict[str, Any], spec: RunSpec) -> None:
    """A kept checkpoint belongs to the run folder it sits in: the run identity it carries (the spec of the
    run that wrote it, bench.core.identity.identity_of) must be the folder's, or its gains would be another run's."""
    saved = kept.get("spec")
    if not isinstance(saved, dict):
        raise UserError(f"kept checkpoint {path} carries no run identity (no spec); it cannot be checked, delete it")
    diff = spec.differs_from(saved)
    if diff:
        raise UserError(
            f"kept checkpoint {path} belongs to another run (differs in: {', '.join(diff)}); "
            "move it to its own run folder or delete it"
        )


def offline_gains(
    run_dir: Path, batches: int | None = None, progress: bool = True, device: str | None = None
) -> list[dict[str, Any]]:
    """The offline gain at the run's initial weights (iteration 0: the model the engine starts from,
    rebuilt from the run's seed) and at every kept checkpoint of the run in `run_dir`, also written
    (atomically) as its offline_gain.csv. One-line UserError when the run has no kept checkpoints.
    The initial row anchors the lag-matched gain (reports.stats.lagmatch), whose moving averages start there."""

    run_dir = Path(run_dir)
    with safefs.confined(run_dir):  # below the run folder no link is followed (bench.core.safefs)
        return _offline_gains(run_dir, batches, progress, device)


def _offline_gains(run_dir: Path, batches: int | None, progress: bool, device: str | None) -> list[dict[str, Any]]:
    from tqdm import tqdm

    from tasks import is_loaded

    spec = read_spec(run_dir)  # checked: a seed or thread count that is a string is one line
    if is_user_name(spec.task) and not is_loaded(spec.task):
        raise UserError(
            f"{run_dir} is a run of the task of yours {spec.task}: name it with --task {spec.task} "
            "(a module named by a run folder is never imported)"
        )
    paths = kept_checkpoints(run_dir)
    if not paths:
        raise UserError(
            f"{run_dir} has no kept checkpoints ({KEPT}/iter*.pt): run it with --set keep_checkpoints_every=K"
        )
    n = int(batches or BATCHES.get(spec.preset, BATCHES["paper"]))
    if n < 2:
        raise UserError(f"--batches {n}: the offline gain needs at least 2 micro-batches")
    task, dist, model, train = open_run(spec, device)
    rows = []
    with tqdm(
        total=(len(paths) + 1) * n,
        unit="batch",
        dynamic_ncols=True,
        leave=False,
        disable=not progress or None,
        desc=f"offline gain {run_dir.name}",
    ) as bar:
        for it, tau, scale in weights_along(model, paths, spec, dist.device):
            seed = mix(int(spec.seed), it, OFFLINE_STREAM)
            b = float(spec.batch_size)
            draws = microbatches(task, train, spec, n, seed)
            est = measure(task, model, draws, seed, scale, dist.device, bar.update, batch_size=b)
            row = {"iteration": it, "tau": tau, "scale": scale, "batch_size": spec.batch_size, **est}
            rows.append(row | exact(task, model, spec, scale) | reference(task, model, train, spec, it, n, dist.device))
    write_csv(run_dir / OFFLINE_GAIN, rows)
    return rows


def open_run(spec: RunSpec, device: str | None) -> tuple[Any, Dist, nn.Module, Any]:
    """(task, Dist, model, training set) of a run folder's spec, the model holding the engine's initial weights
    (bench.core.engine.loop: seed, then build): what a measurement at kept weights starts from (also
    bench.run.sharpness)."""
    from tasks import check_recorded, get_task

    task = get_task(spec.task)
    check_recorded(spec)
    dist = Dist(device=pick_device(device or spec.device))
    root = prepare_data(task, spec, dist)
    if spec.threads:
        torch.set_num_threads(int(spec.threads))
    torch.manual_seed(spec.seed)
    model = task.build_model(spec).to(dist.device)
    return task, dist, model, task.train_set(spec, root)


def weights_along(model: nn.Module, paths: list[Path], spec: RunSpec, device: torch.device) -> Iterator[tuple]:
    """(iteration, τ, S) with `model` holding that iteration's weights: first the initial ones as built,
    then each kept checkpoint's (checked to be this run's)."""
    yield 0, 0.0, scale_schedule(spec.scale, spec.elastic, spec.T1)(0.0)
    for path in paths:
        kept = load_weights(path, device)
        check_kept(path, kept, spec)
        try:
            model.load_state_dict(kept["model"])
        except (RuntimeError, TypeError, ValueError) as e:
            first = " ".join(str(e).split())[:160]
            raise UserError(f"kept checkpoint {path} does not fit this run's model ({first})") from None
        yield kept_point(path, kept, scale_schedule(spec.scale, spec.elastic, spec.T1).max_scale())


def kept_point(path: Path, kept: dict[str, Any], max_scale: float) -> tuple[int, float, int]:
    """(iteration, τ, S) of a kept checkpoint, each checked where it is read: the iteration a count that
    its file name states (iterABC.pt or a copy under another name would duplicate a point), τ finite and
    not negative, S an integer in [1, the run's largest scale]; else one line naming the file and field
    (a scale of 0 gave a gain of 1.000 beside the S = 8 rows)."""
    it, tau, scale = kept.get("iteration"), kept.get("tau"), kept.get("scale")

    def bad(field: str, value: Any, want: str) -> UserError:
        return UserError(f"kept checkpoint {path}: {field} {value!r:.40} is not {want}; delete the file")

    if isinstance(it, bool) or not isinstance(it, int) or it < 0 or path.name != kept_name(it):
        raise bad("iteration", it, f"a count its file name states ({path.name})")
    if not finite_number(tau) or tau < 0:
        raise bad("tau", tau, "a finite number >= 0")
    if not finite_number(scale) or not float(scale).is_integer():
        raise bad("scale", scale, "an integer")
    if not 1 <= scale <= max_scale:
        raise bad("scale", scale, f"in [1, {max_scale:g}] (the run's scales)")
    return it, float(tau), int(scale)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """COLUMNS, one row per kept checkpoint; an unknown value (NaN) as an empty field, inf as inf."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in rows)
    atomic_write_bytes(path, buf.getvalue().encode())


def online_gains(run_dir: Path) -> dict[int, float]:
    """iteration -> the online gain recorded in metrics.jsonl. A training record whose iteration is not a whole
    number >= 0 or whose gain is not a finite number (a bool, a string, 1e400, 10**400, NaN) is left out, with
    one warning naming the file (bench.core.files.finite_float: never True read as 1, never an OverflowError)."""
    path = Path(run_dir) / METRICS
    gains, damaged = {}, 0
    for r in iter_jsonl(path):
        if not isinstance(r, dict) or r.get("eval") or r.get("gain") is None or "iteration" not in r:
            continue
        it, gain = finite_float(r["iteration"]), finite_float(r["gain"])
        if it is None or gain is None or it < 0 or not it.is_integer():
            damaged += 1
            continue
        gains[int(it)] = gain
    if damaged:
        print(
            f"adascale-bench: warning: {path}: {damaged} record(s) whose iteration or gain is not a number ignored",
            file=sys.stderr,
        )
    return gains


def _interval(lo: float, hi: float, fmt: str) -> str:
    return f"[{lo:{fmt}}, {hi:{fmt}}]" if math.isfinite(lo) else "–"


def table(rows: list[dict[str, Any]], online: dict[int, float]) -> str:
    """iteration, τ, online and offline gain with the offline 95 % jackknife interval and the gap
    online − offline, then the offline noise scale B with its interval, and the exact gain and B where the
    task has an oracle; one line per kept checkpoint (online: the record of that iteration, or of the last
    one before it when the run ended there); `*` marks an online gain outside the offline interval."""
    has_exact = any(math.isfinite(r.get("exact_gain", math.nan)) for r in rows)
    head = (
        f"{'iteration':>9}  {'tau':>9}  {'S':>4}  {'online':>8}  {'offline':>8}  {'95 % interval':>15}  {'gap':>7}  "
        f"{'B':>9}  {'95 % interval':>19}"
    )
    lines = [head + (f"  {'exact':>8}  {'exact B':>9}" if has_exact else "")]
    known = sorted(online)
    for r in rows:
        it = r["iteration"]
        before = [k for k in known if k <= it]
        on = online[before[-1]] if before else math.nan
        lo, hi = r.get("gain_lo", math.nan), r.get("gain_hi", math.nan)
        mark = "*" if math.isfinite(lo) and math.isfinite(on) and not lo <= on <= hi else " "
        b_ci = _interval(r.get("B_lo", math.nan), r.get("B_hi", math.nan), ".0f")
        line = (
            f"{it:>9}  {r['tau']:>9.1f}  {r['scale']:>4}  {on:>8.3f}  {r['offline_gain']:>8.3f}  "
            f"{_interval(lo, hi, '.3f'):>15}  {on - r['offline_gain']:>+7.3f}{mark} "
            f"{r.get('offline_B', math.nan):>9.0f}  {b_ci:>19}"
        )
        if has_exact:
            line += f"  {r['exact_gain']:>8.3f}  {r['exact_B']:>9.0f}"
        lines.append(line)
    return "\n".join(lines)
