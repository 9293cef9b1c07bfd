"""`adascale-bench advise --task T`: run the probe (one AdaScale run, resumable like any), predict what each S
buys from its noise profile (reports.advice: the prediction finding (iii) uses), and write advice.md,
advice.csv, advice.png and verify.yaml, the matrix that checks the prediction."""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path
from typing import Any

from bench import safefs
from bench.algo.rules import ADASCALE
from bench.cli.argtypes import scale_int, seed_count, sharpness_examples, sharpness_points, task_help, task_name
from bench.cli.argtypes import seed as seed_type
from bench.errors import UserError
from bench.runspec import RunSpec

DEFAULT_SCALES = (1, 2, 4, 8, 16, 32, 64, 128)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """advise's options (bench.cli registers the command)."""
    p.add_argument("--task", required=True, type=task_name, help=task_help())
    p.add_argument("--preset", default="tiny", choices=("tiny", "paper"), help="the task's preset (default: tiny)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec value (repeatable)")
    probe = "S of the AdaScale probe (default: half the largest of --scales)"
    p.add_argument("--probe-scale", type=scale_int, default=None, help=probe)
    seed = "the probe's seed, a pilot seed (default: 1000)"
    p.add_argument("--probe-seed", type=seed_type, default=1000, help=seed)
    p.add_argument("--scales", default=",".join(map(str, DEFAULT_SCALES)), help="comma-separated S to predict")
    cells = "seeds per cell of the verification matrix (default: a power calculation's)"
    p.add_argument("--seeds", type=seed_count, default=None, help=cells)
    ver = "comma-separated S to verify (default: those asked up to the largest efficient one, and one past it)"
    p.add_argument("--verify-scales", default=None, help=ver)
    p.add_argument(
        "--method", action="append", default=[], help="another rule for the verification matrix (repeatable)"
    )
    sharp = "kept checkpoints of the probe at which the loss's sharpness is measured (default: 3; 0: none)"
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


def _probe(args: argparse.Namespace, out: Path, overrides: dict[str, Any]) -> RunSpec:
    """Run (or resume, or find finished) the probe into `out`; its resolved spec."""
    from bench.engine.signals import Interrupted, install_signal_handlers
    from bench.experiments import matrix as matrices
    from bench.run.runner import run_spec

    if args.probe_scale < 2:
        raise UserError("--probe-scale: at least 2 (AdaScale measures the noise from S micro-batches)")
    install_signal_handlers()
    roots = {args.task: args.data_root} if args.data_root else {}
    req = matrices.RunRequest(
        args.task, ADASCALE, args.probe_scale, args.probe_seed, {},
        {"kind": "table2", "pilot_seeds": [args.probe_seed]},
    )  # fmt: skip
    m = matrices.Matrix(out / "verify.yaml", args.preset, [req], roots, overrides)
    if "keep_checkpoints_every" not in overrides and _points(
        args
    ):  # the sharpness's weights (reports.verdicts.ruleadvice)
        overrides["keep_checkpoints_every"] = max(1, math.ceil(m.spec(req).T1 / (args.probe_scale * _points(args))))
        m = matrices.Matrix(out / "verify.yaml", args.preset, [req], roots, overrides)
    print(f"advise: the probe, AdaScale at S = {args.probe_scale} (seed {args.probe_seed}), into {out}")
    spec = m.spec(req)
    try:
        run_spec(spec, out)  # a UserError (a card the task does not meet: bench.run.taskcheck) is advise's one line
    except (UserError, Interrupted):
        raise
    except Exception as e:  # recorded in the probe's error.log; read_probe then says the probe is missing
        print(f"failed: the probe: {type(e).__name__}: {' '.join(str(e).split())[:200]}", file=sys.stderr)
    return spec


def _points(args: argparse.Namespace) -> int:
    """--sharpness-points, or bench.run.sharpness's default."""
    from bench.run.sharpness import POINTS

    return POINTS if args.sharpness_points is None else int(args.sharpness_points)


def _rules(args: argparse.Namespace, spec: RunSpec, probe: Any, rows: list, out: Path) -> tuple[list, list]:
    """The rule advice (reports.verdicts.ruleadvice) for AdaScale, LSW and each --method, from the probe's noise windows
    and the sharpness at its kept weights (bench.run.sharpness; written to sharpness.csv, timed), and its points."""
    import time

    from bench.algo.rules import LSW
    from bench.algo.schedules import lr_schedule
    from bench.run.sharpness import EXAMPLES, kept_checkpoints, sharpness_along
    from reports import advice as A
    from reports.verdicts import ruleadvice as R

    points: list = []
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
    verdicts = R.rule_advice([ADASCALE, LSW, *args.method], [r.scale for r in rows], recipe, probe.noise,
                             probe.folded, curv, T_AS, probe.ran,
                             lambda S: A.low_noise(S, probe.scale))  # fmt: skip
    return verdicts, points


def _verified(args: argparse.Namespace, rows: list, scales: list[int]) -> list[int]:
    """--verify-scales, or the default (reports.advice.verify_scales)."""
    from reports import advice as A

    return _scales(args.verify_scales) if args.verify_scales else A.verify_scales(rows, scales)


def cmd_advise(args: argparse.Namespace) -> int:
    from bench.run.spec import parse_overrides, run_name
    from reports import advice as A
    from reports.verdicts import ruleadvice as R

    scales = _scales(args.scales)
    out = Path(args.out or f"runs/advise-{args.task.replace(':', '.')}")
    if args.probe_scale is None:  # where the decision falls (reports.advice: why)
        args.probe_scale = max(2, scales[-1] // 2)
    overrides = parse_overrides(args.set)
    spec = _probe(args, out, overrides)
    hours = _hours_per_example(args, spec)
    probe = A.read_probe(out, out / run_name(spec))  # by its full resolved spec: never another advise's probe
    rows = A.predict_rows(
        probe.folded, probe.leave_outs, scales, probe.T1, probe.batch_size, probe.late_B, probe.scale,
        hours[0],
    )  # fmt: skip
    verdicts, points = _rules(args, spec, probe, rows, out)
    products = sum(p.products + 1 for p in points)
    half = points[0].examples / 2 if points else 0.0
    cost = A.Cost(probe.iterations, probe.iterations * probe.scale * probe.batch_size, products, half, *hours)
    verified = _verified(args, rows, scales)
    planned = A.planned_seeds(probe)
    n = args.seeds if args.seeds is not None else planned.usable
    seeds = [s for s in range(n + 1) if s != args.probe_seed][:n]
    root = str(Path(spec.data_root).resolve()) if spec.data_root else None
    verify = A.verify_matrix(
        A.Verification(args.task, args.preset, overrides, root, tuple(seeds), args.probe_seed, tuple(verified),
                       tuple(args.method))
    )  # fmt: skip
    submit = (
        f"adascale-bench submit {shlex.quote(str(out / 'verify.yaml'))} --executor local --out {shlex.quote(str(out))}"
    )
    text = A.markdown(args.task, probe, rows, verified, A.seeds_line(planned, n), submit, verdicts, len(points), cost)
    safefs.write_text(out / "verify.yaml", verify)
    from bench.experiments import matrix as matrices

    matrices.load(out / "verify.yaml")  # a rule named by --method that is no rule: one line now, not at submit
    safefs.write_bytes(out / "advice.csv", A.frame(rows).to_csv(index=False, float_format="%.6g").encode())
    safefs.write_text(out / "advice.md", text)
    safefs.write_text(out / "rule_advice.csv", R.csv_text(verdicts))
    safefs.write_bytes(
        out / "advice.png", A.figure(args.task, probe, rows, A.largest_efficient(rows, "efficiency_lo") or 1)
    )
    print(text)
    print(f"advise: {out / 'advice.md'}, advice.csv, advice.png, verify.yaml")
    return 0
