"""Data parallelism over torch.distributed (gloo on CPU): S = W × A gives the same run, bit for bit, for
every split (BatchNorm tasks included: their evaluation loss too), elastic runs change W through a
checkpoint, and a rank that dies fails the job in bounded time.

Run the slow ones with `pytest tests/engine/test_distributed.py -m slow -s` to see the equivalence table."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from bench.core.engine.distributed import TIMEOUT_ENV, Dist, ranks_for, timeout_s
from bench.core.engine.loop import Engine
from bench.core.engine.reduction import PairwiseGrads, TreeSum
from bench.core.engine.signals import RanksChange
from bench.core.errors import UserError
from bench.core.files import CHECKPOINT, METRICS, SUMMARY, read_json, read_jsonl, write_json
from bench.run.launch import initial_ranks
from bench.run.runner import check_same, run_dir_of
from bench.run.spec import read_spec
from tasks import get_task
from tests.helpers import run_ranks, spec_for


# -- pairwise accumulation: .grad is the binary tree over the micro-batches, bit for bit ------------------
def _grads(model: nn.Module, mbs: list[torch.Tensor]) -> list[torch.Tensor]:
    out = []
    for x in mbs:
        model.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        out.append(model.weight.grad.clone())
    return out


def _pairwise_sum(model: nn.Module, mbs: list[torch.Tensor], how: str) -> None:
    """Leave the pairwise sum of the micro-batches' gradients in .grad, the way `how` makes it: hooks
    (PairwiseGrads, as under DDP) or between passes (TreeSum, one process, with or without statistics)."""
    params, accum = list(model.parameters()), len(mbs)
    summer = PairwiseGrads(params) if how == "hooks" else TreeSum(params, accum, track=how == "tree+stats")
    if isinstance(summer, PairwiseGrads):
        summer.begin(accum)
    for x in mbs:
        model(x).square().mean().backward()
        if isinstance(summer, TreeSum):
            summer.end_backward()
    if isinstance(summer, PairwiseGrads):
        summer.end()
        summer.remove()
    else:
        summer.take()


@pytest.mark.parametrize("how", ["hooks", "tree", "tree+stats"])
@pytest.mark.parametrize("accum", [2, 3, 4, 5, 8])
def test_pairwise_grads_sum_the_microbatches_as_a_balanced_tree(accum: int, how: str) -> None:
    torch.manual_seed(0)
    model = nn.Linear(50, 7)
    mbs = [torch.randn(5, 50) * 10 ** (i % 3) for i in range(accum)]
    g = _grads(model, mbs)
    model.zero_grad(set_to_none=True)
    _pairwise_sum(model, mbs, how)
    tree = {
        2: lambda: g[0] + g[1],
        3: lambda: (g[0] + g[1]) + g[2],
        4: lambda: (g[0] + g[1]) + (g[2] + g[3]),
        5: lambda: ((g[0] + g[1]) + (g[2] + g[3])) + g[4],
        8: lambda: ((g[0] + g[1]) + (g[2] + g[3])) + ((g[4] + g[5]) + (g[6] + g[7])),
    }
    assert torch.equal(model.weight.grad, tree[accum]())
    if accum == 8:  # and the tree is not what autograd's running sum gives (so the test can fail)
        running = g[0].clone()
        for x in g[1:]:
            running += x
        assert not torch.equal(running, tree[8]())


@pytest.mark.parametrize("keep_budget", [0, 1 << 30], ids=["per-pass", "keep-all"])
@pytest.mark.parametrize("accum", [2, 3, 4])
def test_tree_sum_observes_each_microbatch_gradient(accum: int, keep_budget: int) -> None:
    """Normed after each pass or kept to the end (and then left untouched by the merges and by the
    division of .grad that follows), the observed g_i are each micro-batch's gradient alone."""
    torch.manual_seed(0)
    model = nn.Linear(20, 3)
    mbs = [torch.randn(4, 20) for _ in range(accum)]
    g = _grads(model, mbs)
    model.zero_grad(set_to_none=True)
    tree = TreeSum(list(model.parameters()), accum, track=True, keep_budget=keep_budget)
    for _ in range(2):  # a second iteration starts afresh
        for x in mbs:
            model(x).square().mean().backward()
            tree.end_backward()
        kept, norms = tree.take()
        model.weight.grad.div_(accum)
        assert len(kept) + len(norms) == 2 * accum and (kept == [] or norms == [])  # weight and bias each
        observed = [float(n) for n in (norms or torch._foreach_norm(kept))]
        assert observed[0::2] == pytest.approx([float(x.norm()) for x in g], rel=1e-6)
        model.zero_grad(set_to_none=True)


@pytest.mark.parametrize("how", ["hooks", "tree+stats"])
def test_pairwise_grads_refuse_a_parameter_missing_from_a_microbatch(how: str) -> None:
    model = nn.ModuleDict({"a": nn.Linear(3, 1), "b": nn.Linear(3, 1)})
    params = list(model.parameters())
    summer = PairwiseGrads(params) if how == "hooks" else TreeSum(params, 3, track=True)
    with pytest.raises(RuntimeError, match="micro-batch"):
        if isinstance(summer, PairwiseGrads):
            summer.begin(3)
        for i in range(3):
            x = torch.randn(2, 3)
            loss = model["a"](x).sum() + (model["b"](x).sum() if i != 1 else 0)
            loss.backward()
            if isinstance(summer, TreeSum):
                summer.end_backward()
        if isinstance(summer, PairwiseGrads):
            summer.end()


def test_one_process_sums_without_hooks_and_observes_only_when_asked() -> None:
    """W = 1: TreeSum for the pairwise sum (A ≥ 3, or A = 2 with statistics), SquaredNormHooks for
    statistics under the native sum, nothing when autograd's own sum will do."""
    from bench.core.engine.gradstats import SquaredNormHooks
    from bench.core.engine.reduction import SplitInvariance

    model = nn.Linear(3, 1)
    params = list(model.parameters())
    pairwise = SplitInvariance(model, model, params, Dist(), "pairwise")
    native = SplitInvariance(model, model, params, Dist(), "native")
    assert pairwise.grads is None  # no PairwiseGrads hooks in one process
    assert isinstance(pairwise.observer(4, track=False), TreeSum)
    assert isinstance(pairwise.observer(2, track=True), TreeSum)
    assert pairwise.observer(2, track=False) is None and pairwise.observer(1, track=True) is None
    assert isinstance(native.observer(4, track=True), SquaredNormHooks)
    assert native.observer(4, track=False) is None


# -- spec keys, ranks, timeouts ------------------------------------------------------------------------
def test_ranks_follow_the_accumulation_or_stay_fixed() -> None:
    assert ranks_for(spec_for("logreg").accumulation, 8, 2) == 2
    assert ranks_for(spec_for("logreg", accumulation=2).accumulation, 8, 1) == 4
    with pytest.raises(UserError, match="not a multiple of 3 ranks"):
        ranks_for(spec_for("logreg").accumulation, 8, 3)
    with pytest.raises(UserError, match="not a multiple of accumulation 4"):
        ranks_for(spec_for("logreg", accumulation=4).accumulation, 2, 1)
    for bad in (0, -1, 1.5, "2", True):  # the schema's check, before anything is built
        with pytest.raises(UserError, match="accumulation"):
            spec_for("logreg", accumulation=bad)


def test_process_group_timeout_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    assert timeout_s() == 300
    monkeypatch.setenv(TIMEOUT_ENV, "7.5")
    assert timeout_s() == 7.5
    for bad in ("soon", "0", "-3"):
        monkeypatch.setenv(TIMEOUT_ENV, bad)
        with pytest.raises(UserError, match=TIMEOUT_ENV):
            timeout_s()


def test_the_spec_sizes_the_collective_timeout_and_the_environment_overrides_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    spec = spec_for("logreg")
    assert spec.collective_timeout_s == 1800 and timeout_s(spec.collective_timeout_s) == 1800
    assert timeout_s(spec_for("logreg", collective_timeout_s=60).collective_timeout_s) == 60
    monkeypatch.setenv(TIMEOUT_ENV, "20")  # an operator's (or a test's) override for one job
    assert timeout_s(1800) == 20
    monkeypatch.delenv(TIMEOUT_ENV)
    with pytest.raises(UserError, match="collective_timeout_s"):
        timeout_s("soon")
    write_json(tmp_path / "spec.json", spec.to_json())
    check_same(tmp_path, spec.replace(collective_timeout_s=60))  # not part of a run's identity


def test_the_number_of_ranks_is_not_part_of_a_runs_identity(tmp_path: Path) -> None:
    one = spec_for("logreg", "adascale", 4, T1=40)
    write_json(tmp_path / "spec.json", one.to_json())
    check_same(tmp_path, one.replace(ranks=4))  # the same run on 4 ranks: accepted
    with pytest.raises(UserError, match="accumulation"):
        check_same(tmp_path, one.replace(accumulation=2))


def test_ranks_change_survives_pickling() -> None:
    """It crosses process boundaries (smoke's worker pool) with its number of ranks."""
    import pickle

    again = pickle.loads(pickle.dumps(RanksChange(4, "needs 4 ranks")))
    assert isinstance(again, RanksChange) and again.ranks == 4 and str(again) == "needs 4 ranks"


def test_a_scale_that_needs_more_ranks_checkpoints_and_raises_ranks_change(tmp_path: Path) -> None:
    spec = spec_for("logreg", "adascale", "elastic-up", T1=200, accumulation=2)  # S = 2, 4, 8: W = 1, 2, 4
    assert initial_ranks(spec, tmp_path) == 1
    with pytest.raises(RanksChange, match="needs 2 ranks") as info:
        Engine(spec, get_task(spec.task), tmp_path, progress=False).run()
    assert info.value.ranks == 2
    ckpt = torch.load(tmp_path / CHECKPOINT, weights_only=True)
    assert ckpt["state"]["tau"] >= 0.25 * 200 and not (tmp_path / SUMMARY).exists()
    assert initial_ranks(spec, tmp_path) == 2  # where the launcher restarts it


# -- real processes: the launcher, gloo, DDP ----------------------------------------------------------
def cli_run(out: Path, task: str, scale: str, ranks: int | None, *sets: str) -> list[str]:
    args = [sys.executable, "-m", "bench", "run", "--task", task, "--method", "adascale", "--scale", scale]
    args += ["--seed", "0", "--out", str(out)] + (["--ranks", str(ranks)] if ranks else [])
    for s in sets:
        args += ["--set", s]
    return args


ENV = {**os.environ, TIMEOUT_ENV: "20", "PYTHONUNBUFFERED": "1"}
SETS = {"logreg": ("T1=400",), "cifar10": ("T1=40",), "imagenet": ("T1=24", "eval_every=12")}


def _records(run_dir: Path) -> tuple[list[dict], list[dict]]:
    recs = read_jsonl(run_dir / METRICS)
    return [r for r in recs if not r.get("eval")], [r for r in recs if r.get("eval")]


def _compare(ref_dir: Path, run_dir: Path) -> dict[str, Any]:
    """Same iterations and every number the same bits (float ==); returns the table row."""
    (ref, ref_eval), (got, got_eval) = _records(ref_dir), _records(run_dir)
    a, b = read_json(ref_dir / SUMMARY), read_json(run_dir / SUMMARY)
    assert b["status"] == "completed" and b["iterations"] == a["iterations"] == len(got) == len(ref)
    assert len(got_eval) == len(ref_eval) >= 1
    for x, y in zip(ref + ref_eval, got + got_eval, strict=True):
        assert x.keys() == y.keys()
        for key, value in x.items():
            if key != "wall_time_s":  # an evaluation's wall-clock time: not a result
                assert y[key] == value, (x["iteration"], key, value, y[key])
    for key in ("train_loss", "val_metric", "tau"):
        assert b[key] == a[key], key
    return {"iterations": b["iterations"], "train_loss": b["train_loss"], "eval_loss": got_eval[-1].get("loss")}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The W = 1, A = 4 runs (one process, no process group)."""
    out = tmp_path_factory.mktemp("w1")
    dirs = {}
    for task, sets in SETS.items():
        res = subprocess.run(cli_run(out, task, "4", None, *sets), env=ENV, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        dirs[task] = next((out / task).glob("*/*/*"))
    return dirs


@pytest.mark.long  # 9 runs over process groups of 1, 2 and 4 ranks (AdamW's split: tests/engine/test_adamw.py)
@pytest.mark.parametrize("task", ["logreg", "cifar10", "imagenet"])
def test_any_split_of_S_gives_the_same_run(tmp_path: Path, reference: dict[str, Path], task: str) -> None:
    """Every record of metrics.jsonl (loss, gain, statistics, evaluation metrics and loss) and the summary the
    same bits at W = 2 and 4 as at W = 1 (cifar10, imagenet: BatchNorm, bench.core.engine.batchnorm)."""
    rows = [f"\n{task}, S = 4: W  A  iterations  final train loss  last evaluation loss (all records equal)"]
    ref_eval = _records(reference[task])[1][-1].get("loss")
    ref = read_json(reference[task] / SUMMARY)
    rows.append(f"  1  4  {ref['iterations']}  {ref['train_loss']!r}  {ref_eval!r}")
    for world in (2, 4):
        out = tmp_path / f"w{world}"
        res = subprocess.run(cli_run(out, task, "4", world, *SETS[task]), env=ENV, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        row = _compare(reference[task], run_dir_of(out, read_spec(next(out.glob("*/*/*/*/spec.json")).parent)))
        rows.append(f"  {world}  {4 // world}  {row['iterations']}  {row['train_loss']!r}  {row['eval_loss']!r}")
    print("\n".join(rows))


@pytest.mark.long  # two runs over a process group of 2 and 4 ranks
@pytest.mark.slow
def test_elastic_up_changes_the_number_of_ranks_and_matches_accumulation(tmp_path: Path) -> None:
    sets = ("T1=40", "elastic.up=[[0, 2], [0.5, 4]]")
    res = subprocess.run(
        cli_run(tmp_path / "acc", "cifar10", "elastic-up", None, *sets), env=ENV, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    res = subprocess.run(
        cli_run(tmp_path / "ranks", "cifar10", "elastic-up", 2, *sets, "accumulation=2"),
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert "needs 2 ranks (accumulation 2): restarting on 2 ranks" in res.stderr
    ref, run = next((tmp_path / "acc").glob("*/*/*/*")), next((tmp_path / "ranks").glob("*/*/*/*"))
    row = _compare(ref, run)
    scales = [r["scale"] for r in _records(run)[0]]
    assert scales[0] == 2 and scales[-1] == 4
    assert read_json(run / "spec.json")["ranks"] == 2  # the last launch ran on two processes
    print(f"\nelastic-up cifar10 W 1 -> 2 vs W = 1: {row}")


def _rank_pid(root: int, rank: int, world: int) -> int | None:
    """The pid of local rank `rank` under the launcher `root`: torch's agent starts the W workers in rank
    order from its forkserver (a child of `root`), so they are its children ordered by start time.
    (/proc/<pid>/environ cannot tell: RANK is set after the fork.)"""
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                stats[int(entry.name)] = (int(fields[1]), int(fields[19]))  # parent, start time
            except (OSError, IndexError, ValueError):
                continue
    for server in (pid for pid, (parent, _) in stats.items() if parent == root):
        workers = sorted((start, pid) for pid, (parent, start) in stats.items() if parent == server)
        if len(workers) == world:
            return workers[rank][1]
    return None


def _start_and_wait_for_checkpoint(out: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    args = cli_run(out, "cifar10", "4", 2, *SETS["cifar10"], "checkpoint_every=1", *extra)
    proc = subprocess.Popen(args, env=ENV, stderr=subprocess.PIPE, text=True)
    run_dir = out / "cifar10/adascale/s4/seed0,T1=40,checkpoint_every=1"
    deadline = time.time() + 240
    while not (run_dir / CHECKPOINT).exists():
        assert proc.poll() is None and time.time() < deadline, "no checkpoint appeared"
        time.sleep(0.02)
    return proc, run_dir


def _resume_and_compare(out: Path, run_dir: Path, reference: dict[str, Path]) -> None:
    """The same command again: it resumes, and ends as the uninterrupted W = 1 run."""
    again = subprocess.run(
        cli_run(out, "cifar10", "4", 2, *SETS["cifar10"], "checkpoint_every=1"), env=ENV, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr
    _compare(reference["cifar10"], run_dir)


@pytest.mark.long  # a 2-rank run killed and resumed
@pytest.mark.slow
def test_a_dead_rank_fails_the_job_quickly_and_the_same_command_resumes(
    tmp_path: Path, reference: dict[str, Path]
) -> None:
    proc, run_dir = _start_and_wait_for_checkpoint(tmp_path)
    victim = _rank_pid(proc.pid, 1, 2)
    assert victim is not None
    os.kill(victim, signal.SIGKILL)  # a node that dies mid-run
    killed = time.time()
    _, err = proc.communicate(timeout=120)
    elapsed = time.time() - killed
    assert proc.returncode == 1, err
    assert elapsed < 40, elapsed  # bounded: the agent notices within 0.1 s, gloo times out in 20 s at worst
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"rank 1 (pid {victim}) was killed by SIGKILL" in lines[0] and "resumes" in lines[0]
    summary = read_json(run_dir / SUMMARY)
    assert summary["status"] == "failed" and "SIGKILL" in summary["error"]
    ckpt = torch.load(run_dir / CHECKPOINT, weights_only=True)
    assert ckpt["state"]["iteration"] >= 1
    _resume_and_compare(tmp_path, run_dir, reference)
    assert not (run_dir / CHECKPOINT).exists()
    print(f"\nrank 1 killed at iteration >= {ckpt['state']['iteration']}: job failed after {elapsed:.1f} s")


@pytest.mark.long  # a 2-rank run cut and resumed
@pytest.mark.slow
def test_sigterm_stops_every_rank_at_the_same_iteration_and_resumes(tmp_path: Path, reference: dict[str, Path]) -> None:
    proc, run_dir = _start_and_wait_for_checkpoint(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert "resume" in err and not (run_dir / SUMMARY).exists()
    _resume_and_compare(tmp_path, run_dir, reference)
    assert math.isfinite(read_json(run_dir / SUMMARY)["train_loss"])


# -- shutdown: the group's threads end before the interpreter does ------------------------------------------
GLOO_WORKER = "pt_gloo_runloop"  # the name torch gives ProcessGroupGloo's worker threads


def _threads_named(name: str) -> int:
    return sum((t / "comm").read_text().strip() == name for t in Path("/proc/self/task").iterdir())


def _end_group(rank: int, world: int, port: int, case: str, out: str) -> None:
    """One rank: a DDP step, the wrapper left reachable only from a garbage cycle (as the frames of an
    exception caught under a run leave it), then the group ended; records the gloo workers left."""
    import gc

    from bench.core.engine.distributed import from_env, shutdown

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    gc.disable()  # the collector must not run by chance between here and the count
    if case == "torch's own init":
        torch.distributed.init_process_group("gloo")
    else:
        from_env("cpu")
    ddp = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))  # imports torch.distributed.nn
    ddp(torch.randn(3, 4)).sum().backward()
    cycle: dict[str, Any] = {"ddp": ddp}
    cycle["self"] = cycle
    del ddp, cycle
    before = _threads_named(GLOO_WORKER)
    if case == "destroy only":
        torch.distributed.destroy_process_group()
    else:
        shutdown()
    Path(out, f"rank{rank}.json").write_text(json.dumps([before, _threads_named(GLOO_WORKER)]))


@pytest.mark.parametrize("case", ["shutdown", "destroy only", "torch's own init"])
def test_shutdown_ends_the_groups_threads(tmp_path: Path, case: str) -> None:
    """A group alive into finalization aborted a finished SLURM rank at exit (see shutdown()). Its threads
    end in shutdown, and not without either half of the fix: destroy_process_group alone leaves them while
    a garbage cycle holds DDP; a group started before torch.distributed.nn's import is held by its defaults."""
    run_ranks(_end_group, case, str(tmp_path))
    counts = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert all(before > 0 for before, _ in counts), counts  # the workers are there to be ended
    left = [after for _, after in counts]
    assert left == ([0, 0] if case == "shutdown" else [before for before, _ in counts]), counts
