"""`adascale-bench advise`: what more GPUs buy a task, predicted from short probes before the runs are paid
for, and the matrix that checks the prediction.

**The probes.** AdaScale runs at S_hi (by default the largest S asked: the S past the efficiency knee, where the
decision falls, are then measured, not extrapolated), S_hi/4 and S_hi/16 (bench.core.algo.transfer.probe_scales),
each with seeds of their own (pilot seeds: two, more while the high probe's counts leave their mean unsure,
`seeds_enough`). Why AdaScale runs and not an S = 1 run with kept weights and the offline estimator: AdaScale
already measures the per-micro-batch moments (σ², μ²) at every iteration from its S micro-batches, at no cost beyond
the run, over all of training on the scale-invariant clock τ; it lasts T1/gain iterations, fewer than S = 1's T1;
and it is resumable like any run. The offline estimator would need an S = 1 run (T1 iterations) plus extra gradient
passes at each kept checkpoint. Why three: the noise a run follows moves with its S, by a different law on each model
(bench.core.algo.transfer); one probe cannot see how, two read its mean slope, three its bend.

**The prediction** is the one finding (iii)'s evidence makes from advise's probes in a table: what the nearer probe's
engine folded, its per-iteration (σ̂², μ̂²) clamped as the engine clamps them per hundredth of τ
(reports.stats.noise.folded), its σ² moved by the slope between the probes (bench.core.algo.transfer), fed to
bench.core.algo.predict.iterations_following at each S — at each probe's own S it reproduces that probe's count
(self-consistency, printed). Its interval joins two errors: a delete-a-group jackknife over the nearer probe's
records (G interleaved groups, each spanning all of τ: the uncertainty of the measured profile) and the model's
error away from that probe, a noise scale the run at S follows that the transfer did not predict, whose spread
grows with the distance in octaves and is calibrated on measured runs of the shipped tasks (`model_error`,
stats/prediction_errors.csv; docs/design.md §4 says which and checks it on runs it was not fitted on). Seed-to-seed
spread of the runs predicted is not in it ((iii)'s tolerance is).

**Per S**: iterations, speed-up T1/iterations, efficiency = speed-up/S; the largest S whose efficiency stays
≥ ½ (at the estimate and at the interval's ends); AdaScale's steady gain at the late noise scale
S(B/b + 1)/(B/b + S), and whether LSW's multiplier S runs past it by more than finding (ii)'s resolution
(where LSW is expected to lose S = 1's quality); GPU-hours priced as `plan` prices a run.

**Verification.** verify.yaml: the S asked up to the largest efficient one and one past it (or `--verify-scales`),
for AdaScale, LSW and any rule named, with the probes' seed declared a pilot seed and the data folder the probes
read. Its seeds per side come from a power calculation (the positive control's rule: 80 % power of `within` Δ at
a true difference of 0) on the seed spread of the folder's runs with the probe's settings — or, the probe being
one seed, a spread assumed as wide as the card's margin, said so. `submit` runs it into the same folder; `report`
then judges (iii) at each S from the probes (other S of the same table) — the numbers advice.csv printed.

**The probe is found by its full resolved spec** (its run folder, `bench.run.spec.run_name`, checked by
`check_same`): a second advise with other settings into the same folder reads its own probe, never the first.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bench.core.algo import transfer
from bench.core.algo.gain import steady_gain
from bench.core.algo.predict import iterations_following
from bench.core.algo.rules import ADASCALE, LSW
from bench.core.algo.transfer import REACH
from reports.stats import noise
from reports.stats.noninferiority import DECIDE_POWER as POWER
from reports.stats.noninferiority import MIN_SEEDS, MOST_SEEDS, Margin, seeds_for, table_margin
from reports.verdicts.findings import GAIN_RESOLUTION

EFFICIENCY = 0.5  # "worth it": at least half the ideal speed-up S
GROUPS = 10  # jackknife groups of the probe's records
# The probes' seeds (advise --probe-seeds, more up to --most-probe-seeds): the prediction at the high probe's S is the
# mean of its seeds' counts, and a run's count there varies seed to seed by up to ≈ 8 % (the user's GRU, 111 … 132 at
# S = 128; docs/design.md §4). One more seed (all probes) while z × the standard error of that mean exceeds
# SEED_PRECISION of it: the seeds' own luck held to half the 10 % a prediction is judged by (issue 54), the other half
# left to the transfer and the predictor.
SEED_PRECISION = 0.05
MOST_PROBE_SEEDS = 4


Profile = tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Row:
    """One scale's prediction."""

    scale: int
    iterations: float
    lo: float  # the interval's ends (fewer iterations: lo)
    hi: float
    speedup: float
    efficiency: float
    efficiency_lo: float
    efficiency_hi: float
    steady_gain: float  # AdaScale's gain at the late noise scale
    lsw_past_gain: bool  # LSW's multiplier S past that gain by more than (ii)'s resolution
    gpu_hours: float  # NaN where no rate is known


def seeds_enough(counts: Sequence[float], z: float = 1.96) -> bool:
    """Whether the high probe's seeds pin its count: z × the standard error of their mean within SEED_PRECISION of
    the mean (two seeds at least; a count that is no positive number never does)."""
    x = np.asarray(counts, float)
    if len(x) < 2 or not (np.all(np.isfinite(x)) and np.all(x > 0)):
        return False
    return z * float(np.std(x, ddof=1)) / math.sqrt(len(x)) <= SEED_PRECISION * float(np.mean(x))


def jackknife_profiles(train: pd.DataFrame, T1: float, groups: int = GROUPS) -> list[Profile]:
    """The probe's folded profile (reports.stats.noise.folded) with each of `groups` interleaved groups of its
    records left out in turn (records i ≡ g mod groups): what the jackknife interval is computed from."""
    positions = np.arange(len(train))
    outs = (noise.folded(train[positions % groups != g], T1) for g in range(groups))
    return [p for p in outs if p is not None]


def jackknife_interval(estimate: float, leave_outs: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """estimate ± z·SE, SE the delete-a-group jackknife's: sqrt((G−1)/G · Σ (x_g − x̄)²); (NaN, NaN) below
    two finite leave-outs."""
    x = np.asarray([v for v in leave_outs if math.isfinite(v)], float)
    if len(x) < 2 or not math.isfinite(estimate):
        return math.nan, math.nan
    se = math.sqrt((len(x) - 1) / len(x) * float(np.sum((x - x.mean()) ** 2)))
    return estimate - z * se, estimate + z * se


# ------------------------------------------------------------------------------------- the model's error
#
# The probes at S_hi, S_hi/4 and S_lo predict every S through bench.core.algo.transfer (the nearer probe's profile with
# σ² × c, log c the slope of the segment between neighbouring probes per octave). What that misses — f's bend within a
# segment, f past the probes, the probes' own seeds — acts as a further noise scale the run at S follows: log c ~
# N(0, (MODEL_ERROR · d)²), d the distance in octaves from the nearer probe, MODEL_ERROR the RMS of the residual log c
# per octave over measured sets (ERRORS: in each calibration folder, every chain of completed AdaScale runs at the
# folder's largest S, S/4 and S/16 used as the probes of the mean of every other S, `prediction_errors`). The interval
# at S is then the prediction at c = e^{±1.96·sd} on the transferred profile: wide where the count depends on the
# noise (S·b near B and past it), narrow where it hardly does (S·b ≪ B, where any c gives ≈ T1/S).

ERRORS = Path(__file__).with_name("stats") / "prediction_errors.csv"


@functools.cache
def model_error() -> tuple[float, int, str]:
    """(MODEL_ERROR per octave, the pairs it is fitted on, the settings they come from) from ERRORS."""
    e = pd.read_csv(ERRORS)
    if not {"distance", "log_c", "setting"} <= set(e.columns):
        raise RuntimeError(f"{ERRORS}: no distance, log_c and setting columns (a damaged installation)")
    octaves = pd.to_numeric(e["distance"], errors="coerce").to_numpy(float)
    log_c = np.clip(pd.to_numeric(e["log_c"], errors="coerce").to_numpy(float), -REACH, REACH)
    ok = np.isfinite(log_c) & np.isfinite(octaves) & (octaves != 0)  # a count no profile reaches says nothing of c
    if not np.sum(octaves[ok] ** 2) > 0:
        raise RuntimeError(f"{ERRORS}: no usable calibration pairs (a damaged installation)")
    per_octave = math.sqrt(float(np.sum(log_c[ok] ** 2)) / float(np.sum(octaves[ok] ** 2)))
    return per_octave, int(ok.sum()), "; ".join(sorted(set(e["setting"][ok])))


def low_noise(scale: int, probe_scale: int, z: float = 1.96) -> float:
    """The multiplier c on σ² at the interval's low-noise end at S, past the transfer from the nearer probe at
    `probe_scale`: e^{−z·MODEL_ERROR·|log2(S/S_p)|} (1 at S_p). Its high-noise end is 1/c."""
    return math.exp(-z * model_error()[0] * abs(math.log2(scale / probe_scale)))


def interval(
    count_at: Callable[[float], float], its: float, leave_outs: Sequence[float], scale: int, probe_scale: int,
    z: float = 1.96, seed_error: float = 0.0,
) -> tuple[float, float]:  # fmt: skip
    """The prediction's interval: the jackknife's (the probes' sampling), the seeds' (z × `seed_error`, the standard
    error over the probes' seeds: `Probes.seed_error`) and the model's (the prediction with the transferred σ² ×
    e^{∓z·MODEL_ERROR·|log2(S/S_p)|}, `count_at(c)`, S_p the nearer probe's S), their distances from the estimate
    joined in quadrature on each side."""
    lo, hi = jackknife_interval(its, leave_outs, z)
    if not (math.isfinite(lo) and its > 0):
        return lo, hi
    c = low_noise(scale, probe_scale, z)
    more, fewer = count_at(c), count_at(1 / c)  # less noise: a smaller gain, more iterations
    seeds = z * seed_error
    return its - math.hypot(its - lo, its - fewer, seeds), its + math.hypot(hi - its, more - its, seeds)


def prediction_errors(out: object, setting: str) -> pd.DataFrame:
    """The calibration's rows from one results folder: every chain of completed fixed-S AdaScale runs at the table's
    largest S and the probes' S below it (bench.core.algo.transfer.probe_scales: S/4, S/16) as advise's probes,
    predicting the mean iterations of every other S with ≥ 2 completed runs of its table (the probes left out):
    log(predicted/measured), the distance in octaves from the nearer probe and the log c past the transfer that meets
    the mean — how ERRORS was measured (docs/design.md §4)."""
    import itertools

    from reports.rundata.collect import load

    res = load(out)  # type: ignore[arg-type]
    r = res.runs
    r = r[(r["method"] == ADASCALE) & (r["status"] == "completed")]
    r = r[pd.to_numeric(r["scale"], errors="coerce").notna()].assign(_S=lambda d: d["scale"].astype(int))
    rows = []
    for _, table in r.groupby("variant"):
        present = set(table["_S"])  # a folder without one of the probes' S: a chain of those it has
        scales = [S for S in transfer.probe_scales(int(table["_S"].max())) if S in present]
        tiers = [[row for _, row in table[table["_S"] == S].iterrows()] for S in scales]
        for chain in itertools.product(*tiers):
            rows += _chain_rows(res, table, chain, setting)
    cols = ["setting", "probe_scales", "probe_seeds", "scale", "distance", "measured", "predicted", "log_error",
            "log_c"]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


def _chain_rows(res: object, table: pd.DataFrame, probes: Sequence[pd.Series], setting: str) -> list[tuple]:
    """`prediction_errors`' rows of one chain of probes (one run per probe S, high to low)."""
    T1 = float(probes[0]["T1"])
    folded = [noise.folded(res.metrics(p["run_dir"])[0], T1) for p in probes]  # type: ignore[attr-defined]
    if any(f is None for f in folded):
        return []
    chain = transfer.Chain(
        tuple(transfer.Anchor(int(p["_S"]), f, float(p["iterations"])) for p, f in zip(probes, folded, strict=True)), T1
    )
    used = {p["run_dir"] for p in probes}
    names = ("/".join(str(int(p["_S"])) for p in probes), "/".join(str(int(p["seed"])) for p in probes))
    rows = []
    for S, cell in table.groupby("_S"):
        rest = cell[~cell["run_dir"].isin(used)]
        its = pd.to_numeric(rest["iterations"], errors="coerce").dropna()
        mean = float(its[its > 0].mean()) if (its > 0).sum() >= 2 else math.nan  # a count of 0: damaged
        if S < 2 or not math.isfinite(mean):
            continue
        at = functools.partial(chain.iterations, int(S))
        near = chain.scales[transfer.nearest(chain.scales, int(S))]
        pred = at()
        rows.append((setting, *names, int(S), math.log2(S / near), mean, pred, math.log(pred / mean),
                     transfer.solved(at, mean)))  # fmt: skip
    return rows


def predict_rows(probes: Probes, scales: Sequence[int], hours_per_example: float = math.nan) -> list[Row]:
    """One Row per scale (S = 1: T1 iterations, efficiency 1) from the probes (bench.core.algo.transfer), its interval
    the nearer probe's sampling and the model's error at its distance from that probe (`interval`); AdaScale's steady
    gain at the high probe's late noise scale (`Probe.late_B`: the one number advice.md prints)."""
    high = probes.high
    T1, batch_size, B_late = high.T1, high.batch_size, high.late_B
    rows = []
    for S in scales:
        its = float(T1) if S == 1 else probes.iterations(S)
        if S == 1:
            lo, hi = its, its
        else:
            at = functools.partial(probes.iterations, S)
            lo, hi = interval(at, its, probes.leave_outs(S), S, probes.near_scale(S), seed_error=probes.seed_error(S))
        lo = max(lo, T1 / S) if math.isfinite(lo) else lo  # never fewer than ⌈T1/S⌉'s bound
        eff = T1 / its / S if its > 0 else math.nan
        r = steady_gain(B_late, batch_size, S) if math.isfinite(B_late) else math.nan
        rows.append(
            Row(
                scale=int(S),
                iterations=its,
                lo=lo,
                hi=hi,
                speedup=T1 / its if its > 0 else math.nan,
                efficiency=eff,
                efficiency_lo=T1 / hi / S if hi > 0 else math.nan,
                efficiency_hi=min(T1 / lo / S, 1.0) if lo > 0 else math.nan,
                steady_gain=r,
                lsw_past_gain=bool(S > GAIN_RESOLUTION * r) if math.isfinite(r) else False,
                gpu_hours=its * S * batch_size * hours_per_example,
            )
        )
    return rows


def largest_efficient(rows: Sequence[Row], attr: str = "efficiency") -> int | None:
    """The largest S whose efficiency (`attr`: the estimate, or an end of its interval) is ≥ EFFICIENCY, every
    smaller S's too (efficiency falls with S; a scale past a gap is not advised); None if not even S = 1's."""
    best = None
    for r in sorted(rows, key=lambda r: r.scale):
        if not getattr(r, attr) >= EFFICIENCY:
            break
        best = r.scale
    return best


def frame(rows: Sequence[Row]) -> pd.DataFrame:
    """advice.csv's table."""
    return pd.DataFrame(
        {
            "S": [r.scale for r in rows],
            "iterations": [r.iterations for r in rows],
            "iterations_lo": [r.lo for r in rows],
            "iterations_hi": [r.hi for r in rows],
            "speedup": [r.speedup for r in rows],
            "efficiency": [r.efficiency for r in rows],
            "efficiency_lo": [r.efficiency_lo for r in rows],
            "efficiency_hi": [r.efficiency_hi for r in rows],
            "adascale_steady_gain": [r.steady_gain for r in rows],
            "lsw_past_gain": [r.lsw_past_gain for r in rows],
            "gpu_hours": [r.gpu_hours for r in rows],
        }
    )


# ------------------------------------------------------------------------------------------------- the probe
@dataclass(frozen=True)
class Spread:
    """The seed-to-seed spread of the final metric the verification's seed count is planned from: pooled within
    the cells (rule, S) of the folder's completed runs with the probe's task, preset and settings that hold two
    seeds or more; `runs` 0 where none does (the probe alone is one seed: nothing measured)."""

    sd: float
    runs: int
    cells: int


@dataclass(frozen=True)
class Probe:
    """The probe run as read back: its folder, S, seed, T1, batch and noise profile with its leave-outs, its final
    metric, the margin Δ of its table (reports.stats.noninferiority.table_margin, the probe standing for S = 1) and the
    seed spread measured beside it."""

    run_dir: str
    scale: int
    seed: int
    T1: float
    batch_size: float
    profile: Profile  # (σ², μ²) per tenth of τ, corrected (reports.stats.noise.profile): the rule advice's gain at τ
    folded: Profile  # what its engine folded (reports.stats.noise.folded): the prediction's input
    leave_outs: list[Profile]  # `folded` with each jackknife group left out
    noise: list[tuple[str, float, float, float]]  # (window, B, lo, hi) over thirds of τ (reports.stats.noise.WINDOWS)
    margin: Margin
    spread: Spread
    iterations: float = math.nan  # the probe's own iterations (its cost, and its self-consistency)
    ran: tuple[tuple[float, float], ...] = ()  # (τ, lr) of each record; empty where it diverged or collapsed

    @property
    def late_B(self) -> float:
        """The late noise scale (the last third of τ, as the report's B_late): what AdaScale's gain settles at."""
        return next(B for name, B, _, _ in self.noise if name == noise.WINDOWS[-1][0])


@dataclass(frozen=True)
class Probes:
    """The probes as read back, one chain per seed (bench.core.algo.transfer.Chain): tiers of probes high to low (the
    largest S asked, S/4 and S/16 by default), each tier the same seeds in the same order, each seed its own slopes
    and its own prediction at each S, the prediction their mean — so that at a probe's S it is the mean of its seeds'
    counts (a profile pooled over seeds is not: the count is not linear in the moments). The first seed's high probe
    serves the rule advice's kept weights and the seed plan (its margin and spread)."""

    tiers: tuple[tuple[Probe, ...], ...]  # high to low; one tier: one probe per seed

    @property
    def highs(self) -> tuple[Probe, ...]:
        """Each seed's high probe."""
        return self.tiers[0]

    @property
    def lows(self) -> tuple[Probe, ...]:
        """Each seed's low probe; () for one probe."""
        return self.tiers[-1] if len(self.tiers) > 1 else ()

    @property
    def high(self) -> Probe:
        """The first seed's high probe."""
        return self.highs[0]

    @property
    def each(self) -> tuple[Probe, ...]:
        """Every probe run, the high ones first."""
        return tuple(p for tier in self.tiers for p in tier)

    @functools.cached_property
    def chains(self) -> list[transfer.Chain]:
        """Each seed's probes as one bench.core.algo.transfer.Chain (its slopes read once)."""
        return [
            transfer.Chain(tuple(transfer.Anchor(p.scale, p.folded, p.iterations) for p in seed), seed[0].T1)
            for seed in zip(*self.tiers, strict=True)
        ]

    @property
    def slopes(self) -> list[float]:
        """Each seed's mean slope of log c per octave from its high probe to its low one (0 with one probe)."""
        return [c.per_octave for c in self.chains]

    def noise_at(self, scale: int) -> list[tuple[str, float, float, float]]:
        """The noise windows the rule advice judges a rule at `scale` against: the nearer probe's (its first seed's),
        the noise scale a run sees moving with its S (bench.core.algo.transfer)."""
        firsts = [tier[0] for tier in self.tiers]
        return firsts[transfer.nearest([p.scale for p in firsts], scale)].noise

    def near_scale(self, scale: int) -> int:
        """The S of the probe a run at `scale` is predicted from (the nearer in log S)."""
        scales = [tier[0].scale for tier in self.tiers]
        return scales[transfer.nearest(scales, scale)]

    def each_seed(self, scale: int, c: float = 1.0) -> list[float]:
        """Each seed's prediction at `scale` (bench.core.algo.transfer.Chain), σ² × `c` (the model's ends)."""
        return [chain.iterations(scale, c) for chain in self.chains]

    def iterations(self, scale: int, c: float = 1.0) -> float:
        """The prediction at `scale`: the mean over the seeds of each seed's."""
        return float(np.mean(self.each_seed(scale, c)))

    def seed_error(self, scale: int) -> float:
        """The standard error over the seeds of the prediction at `scale`: sd/√K; 0 for one seed (not measured: the
        interval then holds no seed term, said so in advice.md)."""
        its = self.each_seed(scale)
        return float(np.std(its, ddof=1) / math.sqrt(len(its))) if len(its) > 1 else 0.0

    @functools.cached_property
    def _leave_outs(self) -> list[tuple[int, transfer.Chain]]:
        """(seed, its chain) with one jackknife group of one of that seed's probes left out, each in turn (the slope
        that probe's profile reads read again; the counts, which the slopes read, whole)."""
        out = []
        for i, chain in enumerate(self.chains):
            for t, tier in enumerate(self.tiers):
                out += [(i, chain.with_profile(t, part)) for part in tier[i].leave_outs]
        return out

    def leave_outs(self, scale: int) -> list[float]:
        """The jackknife's leave-outs of the prediction at `scale`: one group of one probe of one seed left out in
        turn, that seed's prediction from the rest and the other seeds' as they are, averaged."""
        whole = self.each_seed(scale)
        outs = []
        for i, chain in self._leave_outs:
            one = chain.iterations(scale)
            outs.append(float(np.mean([one if j == i else w for j, w in enumerate(whole)])))
        return outs

    def profile_at(self, scale: int) -> Profile:
        """The profile a run at `scale` follows as the rule advice reads its gain: the seeds' transferred profiles
        pooled (bench.core.algo.transfer.pooled)."""
        return transfer.pooled([c.profile_at(scale) for c in self.chains])

    @property
    def per_octave(self) -> float:
        """The seeds' mean slope (what advice.md prints)."""
        return float(np.mean(self.slopes))

    @property
    def ran(self) -> tuple[tuple[float, float], ...]:
        """(τ, lr) of every record of every probe that completed (the rule advice's evidence)."""
        return tuple(x for p in self.each for x in p.ran)

    @property
    def scales(self) -> str:
        """'128, 32 and 8', as advice.md names them."""
        names = [str(tier[0].scale) for tier in self.tiers]
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def read_probes(out: object, tiers: Sequence[Sequence[object]]) -> Probes:
    """The probes (`read_probe`): one sequence of run folders per tier, high to low, each seed in the same order."""
    return Probes(tuple(tuple(read_probe(out, d) for d in tier) for tier in tiers))


def window_noise(train: pd.DataFrame, T1: float, m: float, b: float, groups: int = GROUPS) -> list:
    """(window, B, lo, hi) of the probe per third of τ (reports.stats.noise.windows), with the jackknife interval of
    the same groups as the prediction's, taken on 1/B (linear in μ², which late in training sits near its
    noise: B's own interval would reach below 0) and inverted; hi = inf where 1/B's reaches 0."""
    positions = np.arange(len(train))
    whole = noise.windows(train, b, T1, m)
    outs = [noise.windows(train[positions % groups != g], b, T1, m) for g in range(groups)]
    inverse = lambda B: 1.0 / B if B > 0 else math.nan  # noqa: E731  μ²/(b·σ²): linear in μ², near 0 late
    rows = []
    for (name, _, _), col in zip(noise.WINDOWS, noise.WINDOW_COLUMNS, strict=True):
        lo, hi = jackknife_interval(inverse(whole[col]), [inverse(o[col]) for o in outs])
        rows.append((name, whole[col], 1.0 / hi if hi > 0 else math.nan, 1.0 / lo if lo > 0 else math.inf))
    return rows


def seed_spread(runs: pd.DataFrame, probe: pd.Series) -> Spread:
    """The pooled within-cell sd of the final metric over the completed runs that share the probe's task, preset
    and settings (its variant), cell by cell (rule, S): what a rerun of advise after the verification measures."""
    same = runs[
        (runs["task"] == probe["task"]) & (runs["preset"] == probe["preset"]) & (runs["variant"] == probe["variant"])
    ]
    same = same[same["status"] == "completed"]
    squares, dof, n, cells = 0.0, 0, 0, 0
    for _, cell in same.groupby(["method", same["scale"].astype(str)]):
        x = pd.to_numeric(cell["val_metric"], errors="coerce").to_numpy(float)
        x = x[np.isfinite(x)]
        if len(x) >= 2:
            squares, dof, n, cells = (
                squares + float(np.sum((x - x.mean()) ** 2)),
                dof + len(x) - 1,
                n + len(x),
                cells + 1,
            )
    return Spread(math.sqrt(squares / dof) if dof else math.nan, n, cells)


def read_probe(out: object, run_dir: object) -> Probe:
    """The completed probe in `run_dir` (the folder of its full resolved spec: bench.cli.advise finds it by its
    identity, never by task, S and seed alone) under `out`, its noise profile measured (reports.stats.noise); a
    UserError in one line where it is missing or measured no statistics."""
    from bench.core.errors import UserError
    from reports.rundata.collect import load

    res = load(out)  # type: ignore[arg-type]
    r = res.runs
    where = Path(str(run_dir)).resolve()
    hit = r[[Path(str(d)).resolve() == where for d in r["run_dir"]]] if len(r) else r
    hit = hit[(hit["method"] == ADASCALE) & (hit["status"] == "completed")]
    if hit.empty:
        raise UserError(f"{run_dir}: no completed AdaScale probe with these settings there")
    row = hit.iloc[0]
    train, evals = res.metrics(row["run_dir"])
    T1, b = float(row["T1"]), float(row["batch_size"])
    m = noise.per_epoch(train, float(pd.to_numeric(row["epochs"], errors="coerce")))
    profile = noise.profile(train, T1, m)
    if profile is None:
        raise UserError(f"{row['run_dir']}: the probe recorded no gradient statistics in some tenth of τ")
    own = noise.folded(train, T1)
    if own is None:
        raise UserError(f"{row['run_dir']}: the probe recorded no gradient statistics")
    value = np.array([pd.to_numeric(row["val_metric"], errors="coerce")], float)
    margin = table_margin(
        str(row["task"]), str(row["preset"] or ""), bool(row["higher_is_better"]), value[np.isfinite(value)],
        [evals], T1,
    )  # fmt: skip
    return Probe(
        str(row["run_dir"]), int(row["scale"]), int(row["seed"]), T1, b, profile, own, jackknife_profiles(train, T1),
        window_noise(train, T1, m, b), margin, seed_spread(r, row),
        float(pd.to_numeric(row["iterations"], errors="coerce")),
        () if bool(row.get("collapsed")) or row["status"] != "completed" else _ran(train),
    )  # fmt: skip


def _ran(train: pd.DataFrame) -> tuple[tuple[float, float], ...]:
    """(τ, lr) of each of the probe's records: the lr it ran at through the weights it kept (the rule advice's
    evidence against a stability bound it went past and on)."""
    if not {"tau", "lr"} <= set(train.columns):
        return ()
    d = train[["tau", "lr"]].apply(pd.to_numeric, errors="coerce").dropna()
    return tuple(zip(d["tau"].astype(float).tolist(), d["lr"].astype(float).tolist(), strict=True))


# ------------------------------------------------------------------------------------------ seeds to decide


@dataclass(frozen=True)
class Seeds:
    """The seeds per side of the verification: the fewest with POWER chance of `within` Δ at a true difference of
    0 (reports.stats.noninferiority.seeds_for, the positive control's rule), from the spread measured or assumed."""

    per_side: int  # MOST_SEEDS + 1: none up to MOST_SEEDS; 0: no margin to plan against
    sd: float
    delta: float
    why: str  # where the spread (and Δ) come from, in words

    @property
    def usable(self) -> int:
        """What verify.yaml runs when --seeds is not given: the count, capped at MOST_SEEDS; MIN_SEEDS unplanned."""
        return min(self.per_side, MOST_SEEDS) if self.per_side else MIN_SEEDS


def planned_seeds(probe: Probe) -> Seeds:
    """Seeds per side from the probe's folder's measured spread, or, where none is measured, a spread assumed as
    wide as the card's margin Δ (said so: the probe is one seed, and a card states no spread)."""
    delta = probe.margin.delta
    if not (math.isfinite(delta) and delta > 0):
        return Seeds(0, math.nan, delta, f"no margin to plan against ({probe.margin.rule})")
    sp = probe.spread
    if sp.runs and math.isfinite(sp.sd):
        sd = sp.sd
        why = f"seed sd {sd:.3g} measured over {sp.runs} runs in {sp.cells} cell(s) with the probe's settings"
    else:
        sd = delta
        why = (  # Δ's value is the seeds line's own (one number per quantity): said there, not again here
            "no seed spread measured (the probe is one seed): sd assumed equal to Δ, the card's margin; run advise "
            "again after the verification to measure it"
        )
    n = seeds_for(sd, delta, POWER, 0.0, MOST_SEEDS) if sd > 0 else MIN_SEEDS
    return Seeds(n, sd, delta, why)


def seeds_line(seeds: Seeds, used: int) -> str:
    """advice.md's (and advise's stdout's) one line on the seeds: the count planned, why, and what is run."""
    if not seeds.per_side:
        return f"Seeds per side: {used} ({seeds.why}; no power calculation)."
    need = f"more than {MOST_SEEDS}" if seeds.per_side > MOST_SEEDS else str(seeds.per_side)
    line = (
        f"Seeds per side for {POWER:.0%} power at a true difference of 0 against Δ = {seeds.delta:.3g}: {need} "
        f"({seeds.why}); verify.yaml runs {used}."
    )
    return line + (
        f" Warning: {used} is fewer: a rule as good as S = 1 may read inconclusive." if used < seeds.per_side else ""
    )


# ------------------------------------------------------------------------------------------------ the cost
# A Hessian-vector product's cost in gradients (double backward through the graph of the first): 3.7, measured on
# tiny cifar10's ResNet (1.19 s against 0.32 s a micro-batch, docs/design.md §4); more than the 1.5 of its passes.
HVP_GRADIENTS = 3.7


@dataclass(frozen=True)
class Cost:
    """What advise itself spent: the probe's iterations and examples, the sharpness's Hessian-vector products
    (each one forward and two backward passes over half the sample: HVP_GRADIENTS example-gradients per item, counted
    as such), and the GPU-hours of both at the rate `plan` uses (NaN where none is known, `rate` says why)."""

    iterations: float
    examples: float
    where: str  # the probes' iterations per S, in words: "130 at S = 128, 420 at S = 8"
    products: int
    product_items: float  # items per product (half the sample)
    hours_per_example: float
    rate: str

    @property
    def sharpness_examples(self) -> float:
        """The sharpness's work in example-gradients: products × items × HVP_GRADIENTS."""
        return HVP_GRADIENTS * self.products * self.product_items

    @classmethod
    def of(cls, probes: Probes, products: int, product_items: float, hours_per_example: float, rate: str) -> Cost:
        """The probes' iterations and examples (each S × b per iteration) with the sharpness's products."""
        groups = [g for g in probes.tiers if g]
        where = ", ".join(
            f"{_num(sum(p.iterations for p in g))} at S = {g[0].scale}"
            + (f" over {len(g)} seeds" if len(g) > 1 else "")
            for g in groups
        )
        return cls(
            sum(p.iterations for p in probes.each), sum(p.iterations * p.scale * p.batch_size for p in probes.each),
            where, products, product_items, hours_per_example, rate,
        )  # fmt: skip

    def line(self) -> str:
        """advice.md's line on the cost."""
        h = self.hours_per_example
        gpu = lambda n: f"{_num(n * h)} GPU-hours" if math.isfinite(h) else "GPU-hours –"  # noqa: E731
        sharp = (
            f"; sharpness: {self.products} Hessian-vector products over {self.product_items:,.0f} items each "
            f"(≈ {self.sharpness_examples:,.0f} example-gradients, {gpu(self.sharpness_examples)})"
            if self.products
            else ""
        )
        return (
            f"Cost of this advice: the probes, {_num(self.iterations)} iterations ({self.where}), "
            f"{self.examples:,.0f} examples ({gpu(self.examples)}){sharp}. Rate: {self.rate}."
        )


# ------------------------------------------------------------------------------------------------ the files
def _num(x: float, digits: int = 3) -> str:
    if x == math.inf:
        return "∞"
    return "–" if not math.isfinite(x) else f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:,.0f}"


def markdown(
    task: str, probes: Probes, rows: Sequence[Row], verified: Sequence[int], seeds: str, command: str,
    verdicts: Sequence = (), points: int = 0, cost: Cost | None = None,
) -> str:  # fmt: skip
    """advice.md: the table and what it says, in words; each quantity once; the rule advice
    (reports.verdicts.ruleadvice.Verdict) below it, LSW's verdict in the table."""
    from reports.verdicts.ruleadvice import markdown_lines

    lsw = {v.scale: v.verdict for v in verdicts if v.rule == LSW}
    best, safe = largest_efficient(rows), largest_efficient(rows, "efficiency_lo")
    probe = probes.high
    lines = [
        f"# Advice for {task}",
        "",
        *(
            f"Probe: AdaScale at S = {p.scale}, seed {p.seed} ({p.run_dir}); T1 = {p.T1:g} iterations at "
            f"b = {p.batch_size:g}."
            for p in probes.each
        ),
        *([cost.line()] if cost is not None else []),
        _method_line(probes),
        *(self_consistency(p) for p in probes.each),
        "",
        "Noise scale B = b·σ²/μ² over training (jackknife interval; the late one sets AdaScale's steady gain): "
        + "; ".join(f"{w} {_num(v)} [{_num(lo)}, {_num(hi)}]" for w, v, lo, hi in probe.noise)
        + ".",
        "",
        "| S | iterations | speed-up | efficiency | AdaScale steady gain | LSW (rule advice) | GPU-hours |",
        "|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.scale} | {_num(r.iterations)} [{_num(r.lo)}, {_num(r.hi)}] | {_num(r.speedup)}× | "
            f"{_num(r.efficiency, 2)} [{_num(r.efficiency_lo, 2)}, {_num(r.efficiency_hi, 2)}] | "
            f"{_num(r.steady_gain)} | {lsw.get(r.scale, '–' if r.scale > 1 else 'S = 1')} | {_num(r.gpu_hours)} |"
        )
    lines += [
        "",
        f"Largest S with efficiency ≥ {EFFICIENCY:g}: {best} (at the interval's lower end: {safe}).",
        "",
        *markdown_lines(verdicts, points),
        seeds,
        f"Verification matrix: verify.yaml (S = {', '.join(map(str, verified))}); run it with",
        "",
        f"    {command}",
        "",
        "then `adascale-bench report` on the same folder: finding (iii) puts the measured iterations beside this "
        "prediction.",
    ]
    return "\n".join(lines) + "\n"


def _method_line(probes: Probes) -> str:
    """advice.md's line on how the prediction and its interval were made (one probe: what it cannot see)."""
    probe = probes.high
    return (
        "Predicted AdaScale iterations: the mean over the probes' seeds of each seed's prediction from what its nearer "
        "probe's engine folded, "
        + (
            f"its noise scale moved by the slopes between its probes (log c {probes.per_octave:+.3f} per octave from "
            "the high probe to the low one, the seeds' mean; "
            if probes.lows
            else "its noise scale as it measured it (one probe: no slope read, and the model error below is two "
            "probes' — with one it is understated where the noise moves with S, docs/design.md §4; "
        )
        + "bench.core.algo.transfer; finding (iii)'s evidence does the same); intervals: a "
        f"jackknife over {len(probe.leave_outs)} groups of the nearer probes' records, "
        + (f"the standard error over the {len(probes.highs)} seeds, " if len(probes.highs) > 1 else "")
        + "and the model's error away from the nearer probe, a noise scale off by a factor c with sd(log c) = "
        f"{model_error()[0]:.3f} per octave (calibrated on {model_error()[1]} measured predictions: {model_error()[2]})"
        + ("" if len(probes.highs) > 1 else "; not seed-to-seed spread (one seed: run with --probe-seeds 2 or more)")
        + "."
    )


def self_consistency(probe: Probe) -> str:
    """advice.md's line on the one S whose truth a probe itself measured: its own iterations beside the prediction
    from what its engine folded at its own S, and the signed error — a check of the predictor's arithmetic (the
    moving average, the clamp, the windows), not of the model away from the probes (the intervals')."""
    own = iterations_following(probe.folded, probe.scale, probe.T1)
    if not (math.isfinite(own) and probe.iterations > 0):
        return f"The probe at S = {probe.scale} (seed {probe.seed}): its own iterations not recorded."
    return (
        f"Self-consistency: the probe took {probe.iterations:,.0f} iterations at S = {probe.scale} (seed "
        f"{probe.seed}); the prediction from what its engine folded there is {own:,.0f} "
        f"({own / probe.iterations - 1:+.1%}): the predictor's error at the one S measured."
    )


def verify_scales(rows: Sequence[Row], asked: Sequence[int]) -> list[int]:
    """The S the verification checks by default: every S asked up to the largest efficient one (at the interval's
    lower end; the smallest S past 1 where none is), and the next S asked past it."""
    scales = sorted({r.scale for r in rows} | set(asked))
    top = largest_efficient(rows, "efficiency_lo") or 1
    top = top if top > 1 else min([s for s in scales if s > 1], default=2)
    past = [s for s in scales if s > top][:1]
    return sorted({1, *(s for s in scales if s <= top), *past, top})


@dataclass(frozen=True)
class Verification:
    """What verify.yaml runs: the task and its preset, settings and data folder (the one the probe used), the
    seeds, the probe's seed (a pilot), the S and the rules asked beyond AdaScale and LSW."""

    task: str
    preset: str
    overrides: dict
    data_root: str | None
    seeds: tuple[int, ...]
    probe_seeds: tuple[int, ...]
    scales: tuple[int, ...]
    methods: tuple[str, ...]


def verify_matrix(v: Verification) -> str:
    """verify.yaml: the S asked for AdaScale, LSW and each rule named, the probe's seed a pilot seed, the data
    folder the probe read (a task's data_roots entry: `submit` then reads the same data)."""
    import yaml

    doc: dict = {"preset": v.preset, "seeds": list(v.seeds), "pilot_seeds": {v.task: list(v.probe_seeds)}}
    if v.data_root:
        doc["data_roots"] = {v.task: v.data_root}
    if v.overrides:
        doc["set"] = v.overrides
    rules = list(dict.fromkeys([ADASCALE, LSW, *v.methods]))
    doc["experiments"] = [{"table2": {"tasks": [v.task], "methods": rules, "scales": sorted({1, *v.scales})}}]
    head = (
        f"# Written by `adascale-bench advise --task {v.task}`: the runs that check its prediction. The probes\n"
        f"# (AdaScale, seeds {', '.join(map(str, v.probe_seeds))}) are pilot runs: no confirmatory cell uses their "
        "seeds.\n"
    )
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, allow_unicode=True)


def figure(task: str, probes: Probes, rows: Sequence[Row], chosen: int) -> bytes:
    """advice.png: predicted speed-up against S with its interval, the ideal S and half of it."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    S = np.array([r.scale for r in rows], float)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    try:
        ax.plot(S, S, color="0.6", lw=1, label="ideal (speed-up S)")
        ax.plot(S, EFFICIENCY * S, color="0.6", lw=1, ls=":", label=f"efficiency {EFFICIENCY:g}")
        sp = np.array([r.speedup for r in rows])
        T1 = probes.high.T1
        lo = np.array([T1 / r.hi if r.hi > 0 else np.nan for r in rows])
        hi = np.array([T1 / r.lo if r.lo > 0 else np.nan for r in rows])
        ax.fill_between(S, lo, hi, color="C0", alpha=0.25, lw=0, label="interval (jackknife, model error)")
        ax.plot(S, sp, "o-", color="C0", label="AdaScale, predicted")
        label = f"largest S with efficiency ≥ {EFFICIENCY:g} at the interval's lower end: {chosen}"  # as advice.md
        ax.axvline(chosen, color="C3", lw=1, ls="--", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("scale S (× the batch)")
        ax.set_ylabel("speed-up in iterations over S = 1")
        ax.set_title(f"{task}: predicted from the AdaScale probes at S = {probes.scales}")
        ax.legend(loc="upper left", fontsize=8, frameon=False)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, facecolor="white")
    finally:
        plt.close(fig)
    return buf.getvalue()
