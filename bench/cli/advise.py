"""`adascale-bench advise --task T`: run the probes (AdaScale runs at three S, resumable like any), predict what each S
buys from their noise profiles (reports.advice: the prediction finding (iii) uses), and write advice.md,
advice.csv, advice.png and verify.yaml, the matrix that checks the prediction."""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cli.argtypes import (
    probe_seeds,
    scale_int,
    scale_int0,
    seed_count,
    sharpness_examples,
    sharpness_points,
    task_help,
    task_name,
)
from bench.cli.argtypes import seed as seed_type
from bench.core import safefs
from bench.core.algo.rules import ADASCALE
from bench.core.errors import UserError
from bench.core.runspec import RunSpec

DEFAULT_SCALES = (1, 2, 4, 8, 16, 32, 64, 128)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """advise's options (bench.cli registers the command)."""
    p.add_argument("--task", required=True, type=task_name, help=task_help())
    p.add_argument("--preset", default="tiny", choices=("tiny", "paper"), help="the task's preset (default: tiny)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec value (repeatable)")
    probe = "S of the high AdaScale probe (default: the largest of --scales)"
    p.add_argument("--probe-scale", type=scale_int, default=None, help=probe)
    low = "S of the low probe, which reads how the noise moves with S (default: the high one's / 16, ≥ 2; 0: none)"
    p.add_argument("--low-probe-scale", type=scale_int0, default=None, help=low)
    mid = "S of the middle probe, which reads f's bend between them (default: the power of two nearest their "
    mid += "geometric mean where they are 3 octaves apart or more; 0: none)"
    p.add_argument("--mid-probe-scale", type=scale_int0, default=None, help=mid)
    seed = "the probes' first seed, a pilot seed (default: 1000)"
    p.add_argument("--probe-seed", type=seed_type, default=1000, help=seed)
    many = "seeds per probe, from --probe-seed on, all pilot seeds: their luck averaged and measured (default: 2)"
    p.add_argument("--probe-seeds", type=probe_seeds, default=2, help=many)
    most = "more seeds, one at a time, while the high probe's counts leave its mean unsure by more than 5 %% at 95 %% "
    most += "(reports.advice.seeds_enough; default: 4, or --probe-seeds where that is more)"
    p.add_argument("--most-probe-seeds", type=probe_seeds, default=None, help=most)
    p.add_argument("--scales", default=",".join(map(str, DEFAULT_SCALES)), help="comma-separated S to predict")
    cells = "seeds per cell of the verification matrix (default: a power calculation's)"
    p.add_argument("--seeds", type=seed_count, default=None, help=cells)
    ver = "comma-separated S to verify (default: those asked up to the largest efficient one, and one past it)"
    p.add_argument("--verify-scales", default=None, help=ver)
    p.add_argument(
        "--method", action="append", default=[], help="another rule for the verification matrix (repeatable)"
    )
    sharp = "kept checkpoints of the high probe (first seed) for the sharpness (default: 3; 0: none)"
    p.add_argument("--sharpness-points", type=sharpness_points, default=None, help=sharp)
    items = "training items in the sharpness sample (default: 4096, two halves: bench.run.sharpness)"
    p.add_argument("--sharpness-examples", type=sharpness_examples, default=None, help=items)
    rate = "examples/s per task and preset at S = 1 on one GPU, as `plan` reads it (a task of yours: its row)"
    p.add_argument("--throughput", default=None, metavar="CSV", help=rate + " (default: the shipped table)")
    flops = "FLOPs per micro-batch, as `plan` reads it, priced at the A100's bf16 peak × 0.4 (default: shipped)"
    p.add_argument("--flops", default=None, metavar="CSV", help=flops)
    p.add_argument("--data-root", default=None, help="dataset folder (tiny: written on first use if absent)")
    p.add_argument("--out", default=None, help="results folder (default: runs/advise-<task>)")


def _scales(text: str) -> list[int]:
    try:
        scales = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise UserError(f"--scales {text!r}: expected comma-separated positive integers") from None
    if not scales or scales[0] < 1 or scales[-1] > 1024:
        raise UserError(f"--scales {text!r}: expected positive integers up to 1024")
    return sorted({1, *scales})


def _hours_per_example(args: argparse.Namespace, spec: RunSpec) -> tuple[float, str]:
    """GPU-hours per example as `plan` prices a run of this spec (--throughput and --flops, else the shipped
    tables), and where the rate comes from; (NaN, why) where no table knows the task."""
    from bench.experiments import plan
    from bench.experiments.costbasis import PUBLISHED, rate_for, read_published
    from tasks import card_of as card

    rate = rate_for(
        args.task, args.preset, spec, plan.read_throughput(Path(args.throughput or plan.THROUGHPUT)),
        read_published(PUBLISHED), plan.read_flops(Path(args.flops or plan.FLOPS)),
        plan.Peak("a100", "bf16", plan.DEFAULT_MFU), card(args.task).unit,
    )  # fmt: skip
    if rate is None or not rate.examples_per_s > 0:
        return math.nan, f"no rate known for {args.task} ({args.preset}): give --throughput CSV or --flops CSV"
    return 1.0 / (rate.examples_per_s * 3600.0), rate.note


def _probes(
    args: argparse.Namespace, out: Path, overrides: dict[str, Any], scales: Sequence[int], check: bool = True
) -> list[list[RunSpec]]:
    """Run (or resume, or find finished) the probes at `scales` (high to low), each of `_pilots` seeds, into `out`;
    their resolved specs, one list per S. First the task's card against the task on one evaluation batch
    (`_preflight`: advise's one line before anything trains); then every probe over as many worker processes as
    there are cores (bench.experiments.pool: a tiny run trains on one thread), the largest S first, so that the
    cheap ones fill the cores at the end (longest first: the wall time nearest the CPU time over the cores)."""
    from bench.core.engine.signals import install_signal_handlers
    from bench.experiments import matrix as matrices
    from bench.experiments.pool import run_matrix

    install_signal_handlers()  # Ctrl-C: each probe checkpoints and stops, resumable (bench.experiments.pool)
    roots = {args.task: args.data_root} if args.data_root else {}
    meta = {"kind": "table2", "pilot_seeds": _pilots(args)}
    tiers = [[matrices.RunRequest(args.task, ADASCALE, S, seed, {}, meta) for seed in _pilots(args)] for S in scales]
    reqs = [r for tier in tiers for r in tier]
    m = matrices.Matrix(out / "verify.yaml", args.preset, reqs, roots, overrides)
    if "keep_checkpoints_every" not in overrides and _points(args):  # the sharpness's weights (ruleadvice)
        overrides["keep_checkpoints_every"] = max(1, math.ceil(m.spec(reqs[0]).T1 / (scales[0] * _points(args))))
        m = matrices.Matrix(out / "verify.yaml", args.preset, reqs, roots, overrides)
    names = ", ".join(map(str, scales[:-1])) + (" and " if len(scales) > 1 else "") + str(scales[-1])
    print(f"advise: the probes, AdaScale at S = {names} (seeds {meta['pilot_seeds']}), into {out}")
    if check:  # once per advise: a seed added later meets the same card on the same data
        _preflight(m.spec(reqs[-1]))
    jobs = max(1, min(len(reqs), os.cpu_count() or 1))
    counts = run_matrix(m, out, jobs=jobs)
    if counts.get("failed"):
        print(f"advise: {counts['failed']} probe(s) failed (their error.log says why)", file=sys.stderr)
    return [[m.spec(r) for r in tier] for tier in tiers]


def _seeded_probes(
    args: argparse.Namespace, out: Path, overrides: dict[str, Any], scales: Sequence[int]
) -> list[list[RunSpec]]:
    """`_probes` with --probe-seeds seeds, then one more seed at a time (every probe S) while the high probe's counts
    do not pin their mean (reports.advice.seeds_enough), up to --most-probe-seeds; args.probe_seeds says how many."""
    from bench.core.files import read_json_object
    from bench.run.spec import run_name
    from reports import advice as A

    most = max(args.probe_seeds, A.MOST_PROBE_SEEDS if args.most_probe_seeds is None else args.most_probe_seeds)
    checked = False
    while True:
        tiers = _probes(args, out, overrides, scales, check=not checked)
        checked = True
        counts = [_count(read_json_object(out / run_name(spec) / "summary.json")) for spec in tiers[0]]
        if args.probe_seeds >= most or A.seeds_enough(counts) or not all(map(math.isfinite, counts)):
            return tiers
        args.probe_seeds += 1
        its = ", ".join(f"{c:g}" for c in counts)
        print(f"advise: the high probe's counts ({its}) leave their mean unsure by more than "
              f"{A.SEED_PRECISION:.0%}: one more seed")  # fmt: skip


def _count(summary: dict[str, Any] | None) -> float:
    """A finished probe's iterations from its summary.json; NaN where it has none (read_probes then says why)."""
    value = (summary or {}).get("iterations")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return math.nan
    try:
        count = float(value)  # an int past float's range (a planted summary) is an OverflowError
    except OverflowError:
        return math.nan
    return count if math.isfinite(count) and count > 0 else math.nan


def _preflight(spec: RunSpec) -> None:
    """The task's card against the task on one evaluation batch of an untrained model, its data written first where
    a tiny set is absent (bench.run.taskcheck, as `submit` checks before any job): a card the task does not meet is
    advise's one line, and the workers find the data written."""
    import torch

    from bench.core.engine.distributed import Dist
    from bench.run.dataroot import prepare_data
    from bench.run.taskcheck import check_task
    from tasks import check_recorded, get_task

    task = get_task(spec.task)
    check_recorded(spec)  # a task of yours: the source its spec recorded, or one line
    check_task(task, prepare_data(task, spec, Dist(device=torch.device("cpu"))), spec)


def _pilots(args: argparse.Namespace) -> list[int]:
    """The probes' seeds: --probe-seeds of them from --probe-seed on (every one a pilot seed of verify.yaml)."""
    return list(range(args.probe_seed, args.probe_seed + args.probe_seeds))


def _points(args: argparse.Namespace) -> int:
    """--sharpness-points, or bench.run.sharpness's default."""
    from bench.run.sharpness import POINTS

    return POINTS if args.sharpness_points is None else int(args.sharpness_points)


def _rules(args: argparse.Namespace, spec: RunSpec, probes: Any, rows: list, out: Path) -> tuple[list, list]:
    """The rule advice (reports.verdicts.ruleadvice) for AdaScale, LSW and each --method, from the high probe's noise
    windows and the sharpness at its kept weights (bench.run.sharpness; written to sharpness.csv, timed), and its
    points."""
    import time

    from bench.core.algo.rules import LSW
    from bench.core.algo.schedules import lr_schedule
    from bench.run.sharpness import EXAMPLES, kept_checkpoints, sharpness_along
    from reports import advice as A
    from reports.verdicts import ruleadvice as R

    points: list = []
    probe = probes.high
    if _points(args) and kept_checkpoints(Path(probe.run_dir)):
        start = time.monotonic()
        points = sharpness_along(Path(probe.run_dir), _points(args), args.sharpness_examples or EXAMPLES)
        took = time.monotonic() - start
        products = sum(p.products + 1 for p in points)
        print(f"advise: sharpness at {len(points)} points, {products} Hessian-vector products, {took:.1f} s")
        safefs.write_text(out / "sharpness.csv", R.sharpness_csv(points))
    recipe = R.Recipe(
        lr_schedule(spec.lr_schedule, spec.T1), float(spec.momentum), float(spec.weight_decay),
        float(spec.batch_size), float(spec.T1),
    )  # fmt: skip
    # ordered: on a sample of a few micro-batches the halves can disagree past the bracket's own order
    curv = [R.Curvature(p.tau, min(p.sharpness_lo, p.sharpness), max(p.sharpness_lo, p.sharpness)) for p in points]
    T_AS = {r.scale: r.iterations for r in rows}
    verdicts = R.rule_advice([ADASCALE, LSW, *args.method], [r.scale for r in rows], recipe, probes.noise_at,
                             probes.profile_at, curv, T_AS, probes.ran,
                             lambda S: A.low_noise(S, probes.near_scale(S)))  # fmt: skip
    return verdicts, points


def _verified(args: argparse.Namespace, rows: list, scales: list[int]) -> list[int]:
    """--verify-scales, or the default (reports.advice.verify_scales)."""
    from reports import advice as A

    return _scales(args.verify_scales) if args.verify_scales else A.verify_scales(rows, scales)


def _probe_scales(args: argparse.Namespace, scales: list[int]) -> list[int]:
    """The probes' S, high to low: --probe-scale or the largest S asked; --low-probe-scale or high/16; between them
    --mid-probe-scale or bench.core.algo.transfer.probe_scales's (0 for either: none)."""
    from bench.core.algo.transfer import middle_scales, probe_scales

    high = args.probe_scale if args.probe_scale is not None else max(2, scales[-1])
    if high < 2:
        raise UserError("--probe-scale: at least 2 (AdaScale measures the noise from S micro-batches)")
    default = probe_scales(high)
    low = args.low_probe_scale or None
    if args.low_probe_scale is None:
        low = default[-1] if len(default) > 1 else None
    if low is not None and not 2 <= low < high:
        raise UserError(f"--low-probe-scale {low}: from 2 to below the high probe's S = {high} (0: none)")
    if low is None:
        if args.mid_probe_scale:
            raise UserError("--mid-probe-scale: a middle probe needs a low one (--low-probe-scale 0 says none)")
        return [high]
    mid = list(middle_scales(high, low)) if args.mid_probe_scale is None else [args.mid_probe_scale]
    mid = [m for m in mid if m]
    if mid and not low < mid[0] < high:
        raise UserError(f"--mid-probe-scale {mid[0]}: between the low probe's S = {low} and the high one's {high}")
    return [high, *mid, low]


def cmd_advise(args: argparse.Namespace) -> int:
    from bench.run.spec import parse_overrides, run_name
    from reports import advice as A
    from reports.verdicts import ruleadvice as R

    scales = _scales(args.scales)
    out = Path(args.out or f"runs/advise-{args.task.replace(':', '.')}")
    probe_scales = _probe_scales(args, scales)  # where the decision falls, and how the noise moves (reports.advice)
    args.probe_scale = probe_scales[0]
    overrides = parse_overrides(args.set)
    tiers = _seeded_probes(args, out, overrides, probe_scales)
    spec = tiers[0][0]
    hours = _hours_per_example(args, spec)
    # by their full resolved specs: never another advise's probes
    probes = A.read_probes(out, [[out / run_name(x) for x in tier] for tier in tiers])
    rows = A.predict_rows(probes, scales, hours[0])
    verdicts, points = _rules(args, spec, probes, rows, out)
    products = sum(p.products + 1 for p in points)
    half = points[0].examples / 2 if points else 0.0
    cost = A.Cost.of(probes, products, half, *hours)
    verified = _verified(args, rows, scales)
    planned = A.planned_seeds(probes.high)
    n = args.seeds if args.seeds is not None else planned.usable
    seeds = [s for s in range(n + len(_pilots(args))) if s not in _pilots(args)][:n]
    root = str(Path(spec.data_root).resolve()) if spec.data_root else None
    verify = A.verify_matrix(
        A.Verification(args.task, args.preset, overrides, root, tuple(seeds), tuple(_pilots(args)), tuple(verified),
                       tuple(args.method))
    )  # fmt: skip
    submit = (
        f"adascale-bench submit {shlex.quote(str(out / 'verify.yaml'))} --executor local --out {shlex.quote(str(out))}"
    )
    text = A.markdown(args.task, probes, rows, verified, A.seeds_line(planned, n), submit, verdicts, len(points), cost)
    safefs.write_text(out / "verify.yaml", verify)
    from bench.experiments import matrix as matrices

    matrices.load(out / "verify.yaml")  # a rule named by --method that is no rule: one line now, not at submit
    safefs.write_bytes(out / "advice.csv", A.frame(rows).to_csv(index=False, float_format="%.6g").encode())
    safefs.write_text(out / "advice.md", text)
    safefs.write_text(out / "rule_advice.csv", R.csv_text(verdicts))
    safefs.write_bytes(
        out / "advice.png", A.figure(args.task, probes, rows, A.largest_efficient(rows, "efficiency_lo") or 1)
    )
    print(text)
    print(f"advise: {out / 'advice.md'}, advice.csv, advice.png, verify.yaml")
    return 0
