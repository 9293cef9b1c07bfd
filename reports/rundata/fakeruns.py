"""Fake results folders at the report's scale, and the time and memory `report` takes on them.

    python -m reports.rundata.fakeruns OUT --runs 60 --records 200000      # 60 Table 2 runs × 200 000 records
    python -m reports.rundata.fakeruns OUT --paper                         # the paper matrix's shape (below)
    python -m reports.rundata.fakeruns OUT ... --bench                     # then `report` twice: seconds, peak RSS

A run folder holds what a finished run writes: spec.json, summary.json and metrics.jsonl, the training
records in the engine's own format (json.dumps of the same keys: iteration, tau, scale, gain, lr, loss,
sum_sq, mean_sq, progress, warmup, var, sqr) with an evaluation record every `eval_every` iterations.
The paper shape is ~1 200 runs and ~27.6 M records: one transformer S = 1 run of 1.55 M records and the
rest spread as 1/S over S = 1 … 128 (cifar10, imagenet, speech, transformer, yolo; the paper's methods,
bench.core.algo.rules.paper_methods; seeds). Values are random walks (a seed per run), so no two files are alike.
Nothing here asserts a timing; the numbers are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.core import safefs
from bench.core.algo.rules import ADASCALE, paper_methods
from bench.core.files import METRICS, SPEC, SUMMARY, write_json

TASKS = ("cifar10", "imagenet", "speech", "transformer", "yolo")
METHODS = paper_methods()
SCALES = (1, 2, 4, 8, 16, 32, 64, 128)
PAPER_RUNS, PAPER_RECORDS, PAPER_LARGEST = 1200, 27_600_000, 1_550_000


def write_run(out: Path, task: str, method: str, scale: int, seed: int, records: int, eval_every: int = 1000) -> Path:
    """One finished run folder with `records` training records; returns the folder."""
    run_dir = out / task / method / f"s{scale}" / f"seed{seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([hash(task) % 2**31, len(method), scale, seed])
    gain = np.clip(1 + (scale - 1) * np.cumsum(rng.normal(0, 0.01, records)).clip(0, 1), 1, scale)
    tau = np.concatenate(([0.0], np.cumsum(gain)[:-1]))
    loss = 2.5 * np.exp(-tau / max(tau[-1], 1)) + rng.normal(0, 0.05, records)
    sum_sq, mean_sq = rng.gamma(4, 1, records) * scale, rng.gamma(2, 0.1, records)
    var, sqr = rng.gamma(4, 0.2, records), rng.gamma(2, 0.05, records)
    template = (
        '{"iteration": %d, "tau": %r, "scale": ' + str(scale) + ', "gain": %r, "lr": %r, "loss": %r, "sum_sq": %r, '
        '"mean_sq": %r, "progress": %r, "warmup": 1.0, "var": %r, "sqr": %r}'
    )
    columns = (tau, gain, 0.1 * gain, loss, sum_sq, mean_sq, gain, var, sqr)
    train = [template % row for row in zip(range(records), *(c.tolist() for c in columns), strict=True)]
    lines = []
    for lo in range(0, records, eval_every):  # an evaluation record after every eval_every iterations
        lines += train[lo : lo + eval_every]
        i = min(lo + eval_every, records) - 1
        metric = float(90 * (1 - np.exp(-tau[i] / max(tau[-1] / 4, 1))))
        record = {"eval": True, "iteration": i + 1, "tau": float(tau[i] + gain[i]), "epochs": i / 100}
        lines.append(json.dumps(record | {"metric": metric, "accuracy": metric, "wall_time": i * 0.01}))
    safefs.write_text(run_dir / METRICS, "\n".join(lines) + "\n")
    spec = {"task": task, "method": method, "scale": scale, "seed": seed, "preset": "paper", "T1": float(tau[-1]),
            "batch_size": 128, "lr_schedule": {"kind": "step", "lr0": 0.1, "gamma": 0.1}, "overrides": {},
            "experiment": {"kind": "table2"}}  # fmt: skip
    write_json(run_dir / SPEC, spec)
    summary = {"task": task, "method": method, "scale": scale, "seed": seed, "preset": "paper",
               "status": "completed", "iterations": records, "tau": float(tau[-1] + gain[-1]),
               "epochs": records / 100, "val_metric": metric, "train_loss": float(loss[-50:].mean()),
               "mean_gain": float(gain.mean()), "metric": "accuracy", "metric_label": "top-1 (%)",
               "higher_is_better": True, "wall_time_s": records * 0.01}  # fmt: skip
    write_json(run_dir / SUMMARY, summary)
    return run_dir


def paper_shape(runs: int = PAPER_RUNS, total: int = PAPER_RECORDS, largest: int = PAPER_LARGEST) -> list[tuple]:
    """(task, method, scale, seed, records) of a matrix shaped like the paper's."""
    cells = [(t, m, s) for t in TASKS for m in METHODS for s in SCALES]
    plan = [(*cells[i % len(cells)], i // len(cells)) for i in range(runs - 1)]
    weight = sum(1 / s for _, _, s, _ in plan)
    base = (total - largest) / weight
    rest = [(t, m, s, k, max(10, round(base / s))) for t, m, s, k in plan]
    return [("transformer", ADASCALE, 1, 99, largest), *rest]


def uniform_shape(runs: int, records: int) -> list[tuple]:
    cells = [(t, m, s) for t in TASKS for m in METHODS for s in (1, 2, 4, 8)]
    return [(*cells[i % len(cells)], i // len(cells), records) for i in range(runs)]


def _timed(argv: list[str]) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the child, exit status, stderr) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, proc.returncode, proc.stderr


def bench(out: Path) -> None:
    """`adascale-bench report OUT` twice (a fresh cache, then nothing changed): seconds, CPU seconds and peak
    RSS, each against the same process's baseline: importing the report's libraries (`reports.assemble`),
    which every report pays, measured in the same run (so a load on the machine hits both alike). An
    earlier report folder (its cache, its figures) is removed first, so the first report builds it all."""
    import shutil

    shutil.rmtree(out / "report", ignore_errors=True)
    floor, floor_cpu, _, _ = _timed([sys.executable, "-c", "import reports.assemble"])
    print(f"baseline, importing the report's libraries: {floor:.1f} s ({floor_cpu:.1f} s CPU)")
    for label in ("first report (cache built)", "second report (nothing changed)"):
        seconds, cpu, rc, err = _timed([sys.executable, "-m", "bench", "report", str(out)])
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # MiB, the largest child so far
        print(
            f"{label}: {seconds:.1f} s ({cpu:.1f} s CPU), {seconds / floor:.1f}× the baseline, "
            f"peak RSS {peak:.0f} MiB, exit {rc}"
        )
        if rc:
            print(err[-2000:], file=sys.stderr)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reports.rundata.fakeruns", description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--runs", type=int, default=60)
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--paper", action="store_true", help="the paper matrix's shape (~1 200 runs, ~27.6 M records)")
    p.add_argument("--bench", action="store_true", help="then time `report` on it, twice")
    args = p.parse_args(argv)
    plan = paper_shape() if args.paper else uniform_shape(args.runs, args.records)
    if not any(args.out.rglob(METRICS)):  # generate once; --bench again reuses the folder
        start = time.perf_counter()
        for task, method, scale, seed, records in plan:
            write_run(args.out, task, method, scale, seed, records)
        total = sum(r[-1] for r in plan)
        print(f"wrote {len(plan)} runs, {total} training records, in {time.perf_counter() - start:.0f} s")
    if args.bench:
        bench(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
