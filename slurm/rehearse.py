"""`adascale-bench submit MATRIX --rehearse [--iterations K]`: every distinct configuration of a matrix run
for a few iterations on the real executor, before the matrix is paid for (docs/design.md §4, `submit --rehearse`).

A configuration is (task, preset, S, W × A, method, micro-batch): seeds, and the heat map's learning rates,
change nothing that can break or that costs, so each configuration runs once; an elastic run is rehearsed
at each of its scales. One job per configuration, of the shape the real run gets (the same executor,
ranks, GPUs, sbatch options), runs in a scratch folder under OUT/rehearsal/ (never in a run's folder):

1. the engine's set-up (model, data as prepared on disk, the sample lists broadcast), then K iterations
   of the real loop (Engine.step on the data loader's micro-batches); the first is warm-up, the others are
   timed: s/iteration and examples/s (S · b per iteration, b in the task's unit);
2. the host synchronisations of one iteration (bench.experiments.syncs) and the FLOPs of one iteration,
   counted by torch.utils.flop_counter.FlopCounterMode on the first (warm-up) iteration's real micro-batches
   (matmuls, convolutions, attention of forward and backward, on every rank: W × this rank's);
3. one evaluation on a slice (the first `--eval-batches` evaluation batches: every task's whole
   evaluation code path, mAP, WER, BLEU with beam search, top-1);
4. SIGTERM: the engine's stop flag is raised by the real handler, every rank agrees (Dist.any) and the
   checkpoint is written, as Engine.run does; two more iterations run on; a fresh engine on the same folder
   resumes from the checkpoint and runs the same two: `resume` is `exact` when their losses and the final
   weights are bit-identical, else the largest difference;
5. peak memory (the CUDA allocator's on a GPU, else the process's peak RSS), the device.

Rank 0 returns the row; the submitter prints the table, writes OUT/rehearsal/rehearsal.csv and removes the
scratch folders. `--write-throughput CSV`: the examples/s of the S = 1 rows, per task, into the table `plan`
reads (measured on this executor's device, so only meaningful on the GPUs the matrix will use).
"""

from __future__ import annotations

import math
import os
import signal
import statistics
import time
from pathlib import Path
from typing import Any

import submitit

from bench.core import safefs
from bench.core.errors import UserError
from bench.core.files import write_csv_rows
from bench.core.methods import method
from bench.core.runspec import RunSpec
from bench.experiments import matrix as matrices
from bench.experiments.plancells import _unit

from .executors import Resources, make_executor, ranks_to_start, run_scales, sbatch_reason, shape_for
from .job import start_group
from .records import quiet_submitit

REHEARSAL = "rehearsal"
RESUMED = 2  # iterations run after the checkpoint, and again after the resume
COLUMNS = [
    "task",
    "method",
    "scale",
    "ranks",
    "accumulation",
    "batch_size",
    "amp",
    "paper_batch_size",
    "unit",
    "iterations",
    "s_per_iteration",
    "examples_per_s",
    "host_syncs_per_iteration",
    "host_syncs",
    "flops_per_iteration",
    "eval_s",
    "eval_metric",
    "resume",
    "peak_memory_mb",
    "peak_memory_kind",
    "device",
    "device_type",
    "setup_s",
    "wall_s",
]


def configurations(m: matrices.Matrix, res: Resources) -> list[RunSpec]:
    """One resolved spec per distinct configuration (see the module docstring), with its ranks."""

    seen: dict[tuple, RunSpec] = {}
    for req in m.runs:
        base = m.spec(req)
        for s in run_scales(base):
            spec = base.replace(scale=s)
            if method(spec.method).needs:  # its length comes from other runs (the method table): any will do here
                spec = spec.replace(T_AS=spec.T_AS or float(spec.T1), T=spec.T or float(spec.T1))
            spec = spec.replace(ranks=ranks_to_start(spec, Path("/nonexistent"), res))
            key = (spec.task, spec.method, s, spec.ranks, spec.batch_size, spec.preset)
            seen.setdefault(key, spec)
    return list(seen.values())


class RehearseJob:
    """One configuration's rehearsal on every rank of its job (see the module docstring)."""

    def __init__(self, spec: RunSpec, scratch: str, iterations: int, eval_batches: int) -> None:
        self.spec, self.scratch, self.iterations, self.eval_batches = spec, scratch, iterations, eval_batches

    def __call__(self) -> dict[str, Any] | None:
        env = submitit.JobEnvironment()
        from bench.core.engine.distributed import shutdown

        dist = start_group(env, self.spec, Path(os.environ.get("SUBMITIT_FOLDER") or self.scratch), None)
        try:
            with safefs.confined(Path(self.scratch).parent.parent.parent):  # OUT, as the submitter's
                return rehearse_one(self.spec, Path(self.scratch), self.iterations, self.eval_batches, dist)
        finally:
            shutdown()


def _digest(engine: Any) -> list[Any]:
    import torch

    return [p.detach().to("cpu", torch.float64).clone() for p in engine.module.parameters()]


class Loop:
    """The real loop's iterations on one engine, from its data loader, one at a time."""

    def __init__(self, engine: Any, state: Any, scale: int) -> None:
        self.engine, self.state, self.scale = engine, state, scale
        self.batches = engine.batches(state, scale)
        self.observer = engine.split.observer(scale, bool(engine.spec.track_stats))
        self.losses: list[float] = []

    def fetch(self) -> list[Any]:
        """The next iteration's micro-batches of this rank, loaded (not timed with the step)."""
        return [next(self.batches) for _ in range(self.scale // self.engine.dist.world)]

    def step(self, micro: list[Any] | None = None) -> float:
        """One iteration; its seconds (to the device's end of work)."""
        micro = self.fetch() if micro is None else micro
        start = time.perf_counter()
        stepped = self.engine.step(self.state, self.scale, iter(micro), self.observer)
        if stepped is None:
            raise UserError(f"{self.engine.spec.task} diverged during the rehearsal")
        _sync(self.engine.dist.device)
        self.losses.append(stepped.loss)
        return time.perf_counter() - start

    def close(self) -> None:
        if self.observer is not None:
            self.observer.remove()
        self.batches = None


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _sigterm_checkpoint(engine: Any, state: Any, dist: Any) -> None:
    """SIGTERM through the real handler; every rank agrees, then the checkpoint, as Engine.run does."""
    from bench.core.engine import signals

    previous = signal.getsignal(signal.SIGTERM)
    signals.install_signal_handlers()
    try:
        if dist.is_main:
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 10
            while not signals.stop_requested() and time.monotonic() < deadline:
                time.sleep(0.01)
        if not dist.any(signals.stop_requested()):
            raise UserError("SIGTERM did not raise the engine's stop flag")
        engine.checkpoint(state)
    finally:
        signals.clear_stop()
        signal.signal(signal.SIGTERM, previous)


def _continued(engine: Any, state: Any, scale: int) -> tuple[list[float], list[Any]]:
    """RESUMED iterations on from the checkpoint's cursor in this engine, as the resumed run will take them:
    their losses and the weights after them."""
    loop = Loop(engine, state, scale)
    for _ in range(RESUMED):
        loop.step()
    expected, weights = loop.losses, _digest(engine)
    loop.close()
    engine.metrics.flush()
    return expected, weights


def _resumed_differences(
    spec: RunSpec, task: Any, scratch: Path, root: Path, dist: Any, expected: list[float], weights: list[Any]
) -> list[float]:
    """The same RESUMED iterations from a new engine resumed from the checkpoint: how far its losses and weights
    are from `expected` and `weights` (all 0.0: the resume is exact)."""
    from bench.core.engine.loop import Engine

    again = Engine(spec, task, scratch, root, dist=dist, progress=False)
    resumed_loop = Loop(again, again.setup(), int(spec.scale))
    again.model.train()
    for _ in range(RESUMED):
        resumed_loop.step()
    diffs = [abs(a - b) for a, b in zip(expected, resumed_loop.losses, strict=True)]
    diffs += [float((a - b).abs().max()) for a, b in zip(weights, _digest(again), strict=True)]
    resumed_loop.close()
    again.metrics.flush()
    return diffs


def _row(
    spec: RunSpec, task: Any, dist: Any, state: Any, m: dict[str, Any], setup_s: float, started: float
) -> dict[str, Any]:
    """Rank 0's row of the rehearsal table from what `rehearse_one` measured (`m`)."""
    from bench.experiments.perf import device_name, peak_memory

    scale = int(spec.scale)
    mem, kind = peak_memory(dist.device)
    b = int(spec.batch_size)
    times, syncs, by_op = m["times"], m["syncs"], m["by_op"]
    per_iteration = statistics.median(times) if times else math.nan
    last = state.last_eval or {}
    return {
        "task": spec.task,
        "method": spec.method,
        "scale": scale,
        "ranks": dist.world,
        "accumulation": scale // dist.world,
        "batch_size": b,
        "amp": str(spec.amp),
        "iterations": len(times) + 1,
        "s_per_iteration": per_iteration,
        "examples_per_s": scale * b / per_iteration,
        "host_syncs_per_iteration": syncs,
        "host_syncs": ";".join(f"{k}={v}" for k, v in sorted(by_op.items())),
        "flops_per_iteration": float(m["flops"]),
        "eval_s": m["eval_s"],
        "eval_metric": last.get(task.metric, math.nan),
        "resume": "exact" if max(m["diffs"], default=0.0) == 0.0 else f"differs by {max(m['diffs']):.3g}",
        "peak_memory_mb": mem,
        "peak_memory_kind": kind,
        "device": device_name(dist.device),
        "device_type": dist.device.type,
        "setup_s": setup_s,
        "wall_s": time.perf_counter() - started,
    }


def rehearse_one(spec: RunSpec, scratch: Path, iterations: int, eval_batches: int, dist: Any) -> dict | None:
    """The rehearsal of one configuration on this rank; rank 0's row (None on the others)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from bench.core.engine.evaluation import sliced
    from bench.core.engine.loop import Engine
    from bench.experiments.syncs import count_host_syncs
    from bench.run.dataroot import prepare_data
    from tasks import get_task

    task = get_task(spec.task)
    scale, started = int(spec.scale), time.perf_counter()
    if dist.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dist.device)
    root = prepare_data(task, spec, dist)
    engine = Engine(spec, task, scratch, root, dist=dist, progress=False)
    state = engine.setup()
    engine.model.train()
    setup_s = time.perf_counter() - started
    loop = Loop(engine, state, scale)
    counter = FlopCounterMode(display=False)
    with counter:  # warm-up (lazy allocations, loader workers, first-call caches), its FLOPs counted
        loop.step()
    flops = dist.world * counter.get_total_flops()  # every rank does the same work on its A micro-batches
    micro = loop.fetch()  # loaded before counting: the step's syncs, not the data pipeline's
    times: list[float] = []
    syncs, by_op = count_host_syncs(lambda first=loop: times.append(first.step(micro)))
    times += [loop.step() for _ in range(iterations - 2)]
    start = time.perf_counter()
    with sliced(eval_batches):
        engine.evaluate(state)
    eval_s = time.perf_counter() - start
    engine.model.train()
    _sigterm_checkpoint(engine, state, dist)
    loop.close()
    expected, weights = _continued(engine, state, scale)
    del engine, loop  # one engine at a time: a paper model's memory, not twice it
    diffs = _resumed_differences(spec, task, scratch, root, dist, expected, weights)
    if not dist.is_main:
        return None
    measured = {"times": times, "syncs": syncs, "by_op": by_op, "flops": flops, "eval_s": eval_s, "diffs": diffs}
    return _row(spec, task, dist, state, measured, setup_s, started)


def _refused(res: Resources, shape: Any, name: str) -> str | None:
    """sbatch --test-only's reason for refusing the job (None: it would run, or not SLURM)."""
    if res.executor != "slurm":
        return None
    import subprocess

    from .executors import sbatch_options

    try:
        answer = subprocess.run(
            ["sbatch", "--test-only", *sbatch_options(res, shape, name), "--wrap=true"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    return sbatch_reason(answer.stderr or answer.stdout) if answer.returncode else None


def _paper_batch(task: str, preset: str) -> int:
    from tasks import card_of

    return int(card_of(task).presets[preset]["batch_size"])


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'task':<12}{'method':<10}{'S':>4}{'W×A':>6}{'b':>6}{'s/it':>9}{'ex/s':>10}{'syncs/it':>9}"
        f"{'FLOPs/it':>10}{'eval s':>8}  {'resume':<20}{'peak MiB':>8}  device"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        b = f"{r['batch_size']}" + ("*" if r["batch_size"] != r["paper_batch_size"] else "")
        flops = f"{r['flops_per_iteration'] / 1e12:.2f}T" if math.isfinite(r["flops_per_iteration"]) else "-"
        lines.append(
            f"{r['task']:<12}{r['method']:<10}{r['scale']:>4}{r['ranks']:>3}×{r['accumulation']:<2}{b:>6}"
            f"{r['s_per_iteration']:>9.3f}{r['examples_per_s']:>10.1f}{r['host_syncs_per_iteration']:>9.0f}"
            f"{flops:>10}{r['eval_s']:>8.1f}  {r['resume']:<20}{r['peak_memory_mb']:>8.0f}  {r['device']}"
        )
    return "\n".join(lines)


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    write_csv_rows(path, COLUMNS, rows)


def rehearse(args: Any, m: matrices.Matrix, res: Resources, out: Path) -> int:
    """Submit one rehearsal job per configuration, wait for them, print and write the table."""
    iterations = int(args.iterations)
    if iterations < 2:
        raise UserError(f"--iterations {iterations}: the rehearsal needs at least 2 (a warm-up and a timed one)")
    specs = configurations(m, res)
    home = out / REHEARSAL
    print(f"rehearsal of {m.path} ({m.preset}): {len(specs)} configurations × {iterations} iterations ({res.executor})")
    if args.dry_run:
        for spec in specs:
            print(f"  {spec.task} {spec.method} S={spec.scale} W={spec.ranks} b={spec.batch_size}")
        return 0
    safefs.mkdirs(home / "submitit")  # a link planted at rehearsal/ or submitit/ is refused (bench.core.safefs)
    rows, failed, started = [], [], time.perf_counter()
    for i, spec in enumerate(specs, 1):  # one after the other: each job times itself on the whole machine
        name = f"{spec.task}-{spec.method}-s{spec.scale}-w{spec.ranks}-b{spec.batch_size}"
        scratch = home / "scratch" / name
        safefs.rmtree(scratch)
        shape = shape_for(spec, spec.ranks, res)
        refused = _refused(res, shape, f"rehearse-{name}")
        if refused:  # a request SLURM would leave pending forever
            failed.append(f"{name}: sbatch refused it: {refused}")
            print(f"  [{i}/{len(specs)}] failed   {failed[-1]}", flush=True)
            continue
        ex = make_executor(res, shape, home / "submitit", name=f"rehearse-{name}")
        with quiet_submitit():
            job = ex.submit(RehearseJob(spec, str(scratch), iterations, int(args.eval_batches)))
        try:
            row = job.results()[0]
        except Exception as e:  # the job's own error, on one line, and the matrix goes on
            failed.append(f"{name}: {str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}")
            print(f"  [{i}/{len(specs)}] failed   {name}: {failed[-1]}", flush=True)
            continue
        finally:
            safefs.rmtree(scratch)
        row["unit"] = _unit(spec.task)
        row["paper_batch_size"] = _paper_batch(spec.task, m.preset)
        rows.append(row)
        print(f"  [{i}/{len(specs)}] {row['resume']:8s} {name}  ({row['wall_s']:.0f} s)", flush=True)
    safefs.rmtree(home / "scratch")
    path = home / "rehearsal.csv"
    write_rows(path, rows)
    print(table(rows))
    if any(r["batch_size"] != r["paper_batch_size"] for r in rows):
        print("* micro-batch smaller than the preset's (the matrix's `set`): shapes per example stay real")
    print(f"rehearsal: {len(rows)} of {len(specs)} configurations in {time.perf_counter() - started:.0f} s; {path}")
    if args.write_throughput:
        _write_throughput(Path(args.write_throughput), rows, m.preset)
    for line in failed:
        print(f"adascale-bench: error: rehearsal {line}")
    bad = [r for r in rows if r["resume"] != "exact" and r["device_type"] == "cpu"]  # a GPU may round differently
    return 1 if failed or bad else 0


def _write_throughput(path: Path, rows: list[dict[str, Any]], preset: str) -> None:
    """examples/s per GPU at S = 1 with the preset's micro-batch, per task, into plan's table."""
    from bench.experiments.costtables import write_throughput

    measured = {
        (r["task"], preset): (r["examples_per_s"] / r["ranks"], r["device"], r["amp"])
        for r in rows
        if r["scale"] == 1 and r["batch_size"] == r["paper_batch_size"]
    }
    if not measured:
        print(f"--write-throughput: no S = 1 row with the preset's micro-batch; {path} left as it was")
        return
    write_throughput(path, measured)
    devices = ", ".join(sorted({d for _, d in measured.values()}))
    print(f"throughput (examples/s at S = 1, rehearsal, {devices}): {path}")
