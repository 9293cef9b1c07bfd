"""The overhead benchmark compares like with like, and the hot-path shortcuts it led to keep the numbers.

No timings are asserted: the machine is shared. What is asserted is that the three variants of
`adascale-bench perf` do the same arithmetic (so their time ratios mean something), that perf.csv has
its columns, and that the faster statistics, data stream and metrics log give the same values as the
straightforward versions they replaced.
"""

from __future__ import annotations

import copy
import csv
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from bench.core.engine.accumulate import accumulate
from bench.core.engine.data import ItemStream
from bench.core.engine.distributed import Dist
from bench.core.engine.gradstats import SquaredNormHooks
from bench.core.engine.reduction import PairwiseGrads
from bench.core.engine.seeding import mix, mix_array
from bench.core.files import MetricsLog, read_jsonl
from bench.experiments import perf
from tasks import get_task
from tasks import synthetic as synthetic_task
from tests.helpers import spec_for, train


def perf_rows(out: Path, tasks: list[str], scales: str, **options: object) -> list[dict[str, str]]:
    """Run `adascale-bench perf` (CPU, tiny, 2 repeats) as the CLI would and return perf.csv's rows."""
    args = perf.PerfOptions(
        **{"task": tasks, "device": "cpu", "preset": "tiny", "scales": scales, "repeats": 2, "data_root": None}
        | {"out": str(out), **options}
    )
    assert perf.perf(args) == 0
    with open(out / "perf.csv") as f:
        return list(csv.DictReader(f))


def _weights(module: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def _run(setup: perf.Setup, variants: tuple[str, ...], iterations: int) -> None:
    for i in range(iterations):
        for v in variants:
            setup.step(v, i)


@pytest.mark.parametrize(("task", "scale"), [("logreg", 2), ("transformer", 2), ("cifar10", 2)])
def test_identity_engine_and_bare_loop_end_with_the_same_weights(tmp_path: Path, task: str, scale: int) -> None:
    """Same data, dropout seeds, accumulation, division, lr, momentum and weight decay: bit for bit
    (transformer: dropout; cifar10: BatchNorm, weight decay)."""
    setup = perf.build(get_task(task), scale, "tiny", None, Dist(), tmp_path)
    before = _weights(setup.loops["bare"].model)
    _run(setup, ("identity", "bare"), 3)
    engine, bare = _weights(setup.loops["identity"].model), _weights(setup.loops["bare"].model)
    assert any(not torch.equal(a, b) for a, b in zip(before, bare, strict=True))  # it did train
    for a, b in zip(engine, bare, strict=True):
        assert torch.equal(a, b)
    setup.close()


@pytest.mark.parametrize("task", ["transformer", "cifar10"])
def test_under_adamw_the_identity_engine_and_bare_adamw_end_with_the_same_weights(tmp_path: Path, task: str) -> None:
    """perf --optimizer adamw: the engine's functional AdamW step (bench.core.engine.adamwstep) and torch.optim.AdamW in
    the bare loop, with the card's AdamW setting, bit for bit at S = 2; the `adascale` variant runs AdamScale."""
    setup = perf.build(get_task(task), 2, "tiny", None, Dist(), tmp_path, optimizer="adamw")
    assert isinstance(setup.loops["bare"].optimizer, torch.optim.AdamW)
    assert setup.loops["adascale"].engine.spec.method == "adamscale"
    assert setup.loops["identity"].engine.spec.optimizer == "adamw"
    before = _weights(setup.loops["bare"].model)
    _run(setup, ("identity", "bare"), 3)
    engine, bare = _weights(setup.loops["identity"].model), _weights(setup.loops["bare"].model)
    assert any(not torch.equal(a, b) for a, b in zip(before, bare, strict=True))
    for a, b in zip(engine, bare, strict=True):
        assert torch.equal(a, b)
    setup.close()


def test_at_larger_scales_only_the_summation_order_differs(tmp_path: Path) -> None:
    """S = 4: the engine's pairwise reduction adds the micro-batch gradients as a tree, the bare loop
    in autograd's order; the weights agree to rounding."""
    setup = perf.build(get_task("transformer"), 4, "tiny", None, Dist(), tmp_path)
    _run(setup, ("identity", "bare"), 2)
    for a, b in zip(_weights(setup.loops["identity"].model), _weights(setup.loops["bare"].model), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    setup.close()


@pytest.mark.parametrize("task", ["logreg", "transformer"])
def test_adascale_at_scale_one_is_the_identity_engine(tmp_path: Path, task: str) -> None:
    setup = perf.build(get_task(task), 1, "tiny", None, Dist(), tmp_path)
    _run(setup, ("adascale", "identity"), 3)
    for a, b in zip(_weights(setup.loops["adascale"].model), _weights(setup.loops["identity"].model), strict=True):
        assert torch.equal(a, b)
    setup.close()


def test_perf_writes_the_table_and_perf_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = perf.PerfOptions(
        task=["logreg"], device="cpu", preset="tiny", scales="1,2", repeats=2, data_root=None, out=str(tmp_path)
    )
    assert perf.perf(args) == 0
    with open(tmp_path / "perf.csv") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == perf.COLUMNS
        rows = list(reader)
    assert [(r["task"], r["scale"]) for r in rows] == [("logreg", "1"), ("logreg", "2")]
    for r in rows:
        for v in perf.VARIANTS:
            assert float(r[f"ms_{v}"]) > 0 and float(r[f"examples_per_s_{v}"]) > 0
        assert float(r["adascale_over_identity"]) > 0 and float(r["engine_over_bare"]) > 0
        assert math.isnan(float(r["engine_over_bare_low"]))  # 2 rounds: too few for a 95 % interval
        assert math.isnan(float(r["adascale_over_bare_high"])) and float(r["adascale_over_bare"]) > 0
        assert int(r["examples_per_iteration"]) == 32 * int(r["scale"])
    out = capsys.readouterr().out
    assert "as/identity" in out and "engine/bare" in out and "as/bare (95 %)" in out and "perf.csv" in out
    assert [p.name for p in tmp_path.iterdir()] == ["perf.csv"]  # the engines' run folders are gone


def test_the_ratio_interval_is_the_median_s_order_statistics() -> None:
    xs = [float(x) for x in range(30, 0, -1)]  # 30 rounds, in any order
    assert perf.median_interval(xs) == (10.0, 21.0)  # the 10th and 21st of 30 (binomial tables)
    assert perf.median_interval(list(range(1, 11))) == (2, 9)  # n = 10: P(B <= 1) = 0.011, P(B <= 2) = 0.055
    low, high = perf.median_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert math.isnan(low) and math.isnan(high)  # n = 5: even min..max covers only 94 %
    low, high = perf.median_interval([1.0] * 6)
    assert low == high == 1.0


def _carryover(orders: list[list[int]]) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """(how often variant y directly follows x within a round, how often v takes place k)."""
    follows: dict[tuple[int, int], int] = {}
    places: dict[tuple[int, int], int] = {}
    for order in orders:
        for x, y in zip(order[:-1], order[1:], strict=True):
            follows[x, y] = follows.get((x, y), 0) + 1
        for k, v in enumerate(order):
            places[v, k] = places.get((v, k), 0) + 1
    return follows, places


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_round_orders_balance_places_and_predecessors(n: int) -> None:
    """Over a cycle of rounds every variant comes after every other equally often (a big batch's cache
    misses are nobody's in particular) and takes every place equally often; a rotation fails the first."""
    cycle = n if n % 2 == 0 else 2 * n
    orders = [perf.round_order(n, r) for r in range(cycle)]
    assert all(sorted(o) == list(range(n)) for o in orders)
    follows, places = _carryover(orders)
    assert set(follows) == {(x, y) for x in range(n) for y in range(n) if x != y}
    assert len(set(follows.values())) == 1 and len(set(places.values())) == 1
    assert perf.round_order(n, cycle + 1) == orders[1]
    rotation = [[(k + j) % n for j in range(n)] for k in range(cycle)]
    with pytest.raises(ValueError):
        perf.round_order(0, 0)
    if n > 2:  # (for n = 2 a rotation is the Williams square)
        rotated, _ = _carryover(rotation)
        assert not (set(rotated) == set(follows) and len(set(rotated.values())) == 1)


def test_bad_scales_are_a_user_error() -> None:
    from bench.core.errors import UserError

    with pytest.raises(UserError, match="--scales"):
        perf.parse_scales("1,x")
    with pytest.raises(UserError, match="--scales"):
        perf.parse_scales("0")


# -- the statistics: every path of the hooks against brute force ------------------------------------------


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.relu(self.conv(x)).mean((2, 3)))


class CE:
    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(model(batch[0]), batch[1])


@pytest.mark.parametrize("reduction", ["native", "pairwise"])
@pytest.mark.parametrize("small_model", [0, 1 << 30], ids=["per-pass", "keep-all"])
def test_hooks_see_every_microbatch_gradient(reduction: str, small_model: int) -> None:
    """Kept or aliased, under autograd's accumulation or the pairwise tree (which takes every gradient
    out of .grad and adds into it in place): Σ||g_i||² and ḡ as computed one micro-batch at a time."""
    S = 4
    torch.manual_seed(0)
    model = Net()
    brute = copy.deepcopy(model)
    g = torch.Generator().manual_seed(1)
    mbs = [(torch.randn(6, 3, 8, 8, generator=g), torch.randint(0, 5, (6,), generator=g)) for _ in range(S)]
    params = list(model.parameters())
    pairwise = PairwiseGrads(params) if reduction == "pairwise" else None
    hooks = SquaredNormHooks(params, small_model=small_model)
    for _ in range(2):  # a second iteration: nothing left over from the first
        for p in params:
            p.grad = None
        if pairwise is not None:
            pairwise.begin(S)
        _, sum_sq, mean_sq = accumulate(model, CE(), iter(mbs), [0] * S, params, hooks, S, Dist())
        if pairwise is not None:
            pairwise.end()
    grads = []
    for x, y in mbs:
        brute.zero_grad()
        F.cross_entropy(brute(x), y).backward()
        grads.append(torch.cat([p.grad.flatten() for p in brute.parameters()]).double())
    gbar = torch.stack(grads).mean(0)
    assert sum_sq == pytest.approx(sum(float(v.square().sum()) for v in grads), rel=1e-6)
    assert mean_sq == pytest.approx(float(gbar.square().sum()), rel=1e-6)
    got = torch.cat([p.grad.flatten() for p in params]).double()
    assert float((got - gbar).norm() / gbar.norm()) < 1e-6
    hooks.remove()


def test_hooks_do_not_make_autograd_copy_gradients() -> None:
    """Larger models: when autograd adopts the gradient as .grad, it gets an alias, not a copy."""
    torch.manual_seed(0)
    model = Net()
    params = list(model.parameters())
    hooks = SquaredNormHooks(params, small_model=0)
    seen: dict[nn.Parameter, int] = {}
    probes = [p.register_hook(lambda grad, p=p: seen.__setitem__(p, grad.untyped_storage().data_ptr())) for p in params]
    F.cross_entropy(model(torch.randn(4, 3, 8, 8)), torch.tensor([0, 1, 2, 3])).backward()
    assert all(p.grad.untyped_storage().data_ptr() == seen[p] for p in params)
    hooks.end_backward()
    for h in probes:
        h.remove()
    hooks.remove()


# -- the data stream's keys, the seeds, the metrics log ------------------------------------------------------


def test_vectorised_mix_is_mix() -> None:
    pos = np.array([0, 1, 2, 77, 2**31, 2**40 + 3, 2**63 - 1, -1], dtype=np.int64)
    for seed in (0, 1, 7, 2**62 + 5):
        assert mix_array(seed, pos).tolist() == [mix(seed, int(p)) for p in pos]
        assert mix_array(seed, pos, 0x0D20).tolist() == [mix(seed, int(p), 0x0D20) for p in pos]


@pytest.mark.parametrize(("n", "k"), [(100, 7), (10, 32), (5, 5), (20_000, 32)])
def test_stream_items_and_keys_are_the_per_example_ones(n: int, k: int) -> None:
    """Micro-batch j holds positions j·k … (j+1)·k − 1: item = the epoch's permutation at the offset,
    key = mix(seed, position), across epoch boundaries and for micro-batches larger than an epoch."""
    stream, ref = ItemStream(n, k, 3), ItemStream(n, k, 3)
    for j in [*range(40), 999]:
        want = []
        for pos in range(j * k, (j + 1) * k):
            epoch, offset = divmod(pos, n)
            want.append((int(ref.permutation(epoch)[offset]), mix(3, pos)))
        assert stream.microbatch(j) == want


def test_metrics_log_buffers_and_writes_non_finite_numbers_as_null(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / "metrics.jsonl")
    record = {"iteration": 0, "loss": float("nan"), "gain": 1.5, "sum_sq": float("inf")}
    log.append(record)
    record["gain"] = 99.0  # the log kept its own copy
    log.append({"iteration": 1, "loss": 0.25, "note": "NaN is a fine string"})
    assert log.pending() == 2 and not (tmp_path / "metrics.jsonl").exists()
    log.flush()
    assert read_jsonl(tmp_path / "metrics.jsonl") == [
        {"iteration": 0, "loss": None, "gain": 1.5, "sum_sq": None},
        {"iteration": 1, "loss": 0.25, "note": "NaN is a fine string"},
    ]
    assert all(json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines())


FAULTS_SNIPPET = """
import resource, torch

def faults():
    for _ in range(8):  # the heap grows to hold them (a few rounds)
        torch.empty(1 << 20).fill_(1.0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        torch.empty(1 << 20).fill_(1.0)  # 4 MiB, written so that its pages are touched
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
"""
FEW_FAULTS = 50 * 1024 // 10  # at most 5 of the 50 tensors on fresh pages; each fresh one is 1024 faults


def _faults_of_repeated_large_tensors() -> int:
    scope: dict = {}
    exec(FAULTS_SNIPPET, scope)
    return scope["faults"]()


def _linux_only() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's mallopt: Linux only")


def test_retained_memory_makes_no_page_faults_for_repeated_large_tensors() -> None:
    """With large blocks mmap-ed every 4 MiB tensor would be fresh pages: 1024 page faults each."""
    from bench.core.engine.allocator import retain_freed_memory

    _linux_only()
    assert retain_freed_memory()
    assert _faults_of_repeated_large_tensors() < FEW_FAULTS  # not 50 × 1024


def test_with_large_blocks_returned_every_large_tensor_is_fresh_pages() -> None:
    """The failing side of the bar above, in a fresh process (whose heap holds no free 4 MiB yet):
    what profiling asks for (large_blocks_returned) hands back each tensor's pages and faults them in again."""
    _linux_only()
    code = FAULTS_SNIPPET + textwrap.dedent("""
        from bench.core.engine.allocator import large_blocks_returned
        with large_blocks_returned():
            print(faults())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert int(out.stdout.split()[-1]) > 40 * 1024


def test_counting_host_syncs_leaves_the_process_retaining_its_memory() -> None:
    """count_host_syncs profiles with large blocks mmap-ed; a run after it in the same process (perf, the
    smoke's sync count, a test suite) gets its retained heap back. Before the fix: 50 × 1024 faults."""
    from bench.core.engine.allocator import retain_freed_memory
    from bench.experiments.syncs import count_host_syncs

    _linux_only()
    assert retain_freed_memory()
    count_host_syncs(lambda: torch.ones(3).sum().item())
    assert _faults_of_repeated_large_tensors() < FEW_FAULTS


# -- synthetic data, extra variants, memory, AMP (CPU plumbing; the CUDA figures are measured on a GPU) -----
def test_synthetic_tiny_shapes_and_the_batched_and_bf16_variants(tmp_path: Path) -> None:
    (row,) = perf_rows(tmp_path, ["cifar10"], "2", synthetic=True, microbatch_mode="both", amp="both")
    assert row["synthetic"] == "True" and row["peak_memory_kind"] == "cpu_maxrss_process"
    assert float(row["peak_memory_mb"]) > 0 and row["device_name"]
    for v in ("batched", "bf16"):
        assert float(row[f"examples_per_s_{v}"]) > 0 and float(row[f"{v}_over_adascale"]) > 0
    fake = synthetic_task.SyntheticData(get_task("imagenet"))
    batch = fake.train_set(spec_for("imagenet"), Path()).collate([(5)] * 3)
    assert batch[0].shape == (3, 3, 32, 32) and batch[1].shape == (3,)


def test_synthetic_data_names_the_tasks_it_cannot_make() -> None:
    from types import SimpleNamespace

    from bench.core.errors import UserError

    with pytest.raises(UserError, match="no synthetic data for nope"):
        synthetic_task.SyntheticData(SimpleNamespace(name="nope", needs_data=True))


@pytest.mark.parametrize("task", ["speech", "transformer", "yolo"])
def test_synthetic_perf_runs_the_batch_level_tasks(tmp_path: Path, task: str) -> None:
    """perf --synthetic --preset tiny --task T --scales 2 --repeats 2 through the CLI: no data root, the row
    filled (yolo's items are images, so it also gets `big`; speech's and transformer's are whole batches)."""
    from bench.cli import main

    argv = ["perf", "--synthetic", "--preset", "tiny", "--task", task, "--scales", "2", "--repeats", "2"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    with open(tmp_path / "perf.csv") as f:
        (row,) = list(csv.DictReader(f))
    assert row["task"] == task and row["scale"] == "2" and row["synthetic"] == "True"
    for v in perf.VARIANTS:
        assert float(row[f"examples_per_s_{v}"]) > 0 and float(row[f"ms_{v}"]) > 0
    assert float(row["adascale_over_identity"]) > 0 and float(row["engine_over_bare"]) > 0
    assert (row["simulated_over_big_batch"] != "") == (task == "yolo")


def _structure(batch: object) -> object:
    """Keys, tensor dtypes and ranks, and the types of everything else, of a (nested) batch."""
    if isinstance(batch, dict):
        return {k: _structure(v) for k, v in batch.items()}
    if isinstance(batch, torch.Tensor):
        return (batch.dtype, batch.dim())
    return type(batch).__name__


@pytest.mark.parametrize("task", ["speech", "transformer", "yolo"])
def test_a_synthetic_batch_is_the_real_collates_and_trains(task: str) -> None:
    """The tiny preset: a synthetic micro-batch has the real tiny collate's keys, dtypes and ranks (and
    the preset's sizes), and goes through the task's loss and backward with a finite loss."""
    from bench.run.dataroot import prepare_data

    real_task, spec = get_task(task), spec_for(task)
    fake = synthetic_task.SyntheticData(real_task)
    train_set = fake.train_set(spec, Path())
    n = real_task.items_per_microbatch(spec)
    batch = train_set.collate([train_set[(i, 7 + i)] for i in range(n)])
    real_set = real_task.train_set(spec, prepare_data(real_task, spec, Dist()))
    real = real_set.collate([real_set[(i, i)] for i in range(n)])
    assert _structure(batch) == _structure(real)
    b = int(spec.batch_size)
    if task == "speech":
        from tasks.speech.data import ctc_feasible
        from tasks.speech.model import output_frames

        assert batch["features"].shape[:2] == (b, spec.data["n_mels"])
        targets = batch["targets"].split(batch["target_lengths"].tolist())
        for t, frames in zip(targets, batch["feature_lengths"].tolist(), strict=True):
            assert ctc_feasible(t.tolist(), output_frames(frames, spec.model))
    elif task == "transformer":
        from tasks.transformer.data import load_vocab
        from tasks.transformer.synthetic import vocab_size

        assert int(batch["target"].ne(batch["pad"]).sum()) == batch["ntokens"] <= b
        tiny_vocab = len(load_vocab(Path(spec.data_root), spec.data).src)
        assert int(batch["src_tokens"].max()) < vocab_size(spec) == tiny_vocab  # the toy corpus's dictionary
    else:
        size = spec.data["imgsz"]
        assert batch["img"].shape == (b, 3, size, size) and int(batch["cls"].max()) < spec.model["nc"]
        assert set(batch["batch_idx"].long().tolist()) == set(range(b))
    torch.manual_seed(0)
    model = fake.build_model(spec)
    model.train()
    loss = fake.loss(model, batch)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_bf16_autocast_is_a_spec_option(tmp_path: Path) -> None:
    from bench.core.errors import UserError

    summary, engine = train(spec_for("cifar10", "adascale", 2, T1=4, amp="bf16"), tmp_path / "bf16")
    assert summary["status"] == "completed" and type(engine.loss_task).__name__ == "AutocastLoss"
    assert all(p.dtype == torch.float32 for p in engine.module.parameters())
    _, plain = train(spec_for("cifar10", "adascale", 2, T1=4), tmp_path / "fp32")
    assert plain.loss_task is plain.task
    with pytest.raises(UserError, match="amp"):
        spec_for("cifar10", amp="fp8")  # the schema's values


@pytest.mark.gpu
def test_cuda_knobs_channels_last_and_bf16(tmp_path: Path) -> None:  # pragma: no cover - needs a GPU
    summary, engine = train(spec_for("cifar10", "adascale", 2, T1=4, amp="bf16", device="cuda"), tmp_path)
    assert summary["status"] == "completed" and torch.backends.cudnn.benchmark
    conv = next(m for m in engine.module.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)


# -- the goal metric: the engine against one batch of S·b -------------------------------------------------
def test_simulated_over_big_batch_is_filled_for_example_level_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """S = 4, tiny cifar10 (synthetic images) and logreg: `big` is timed with the others and the ratio
    columns are filled and positive (their values are the machine's business, not the test's)."""
    rows = perf_rows(tmp_path, ["cifar10", "logreg"], "4", synthetic=True, microbatch_mode="both", amp="none")
    assert [r["task"] for r in rows] == ["cifar10", "logreg"]
    for r in rows:
        assert float(r["examples_per_s_big"]) > 0 and float(r["ms_big"]) > 0
        assert float(r["simulated_over_big_batch"]) > 0 and float(r["batched_over_big_batch"]) > 0
    assert "sim/big" in capsys.readouterr().out


def test_the_big_batch_is_the_engines_micro_batches_in_one(tmp_path: Path) -> None:
    """Real tiny cifar10 data: the big batch holds exactly the S micro-batches' examples, in order, with
    the same augmentation; `big` trains from the engine's initial weights."""
    scale = 4
    setup = perf.build(get_task("cifar10"), scale, "tiny", None, Dist(), tmp_path)
    assert len(setup.big) == len(setup.iterations)
    for (big,), micro in zip(setup.big, setup.iterations, strict=True):
        assert big[0].shape[0] == setup.examples
        assert torch.equal(big[0], torch.cat([m[0] for m in micro])) and torch.equal(
            big[1], torch.cat([m[1] for m in micro])
        )
    for a, b in zip(_weights(setup.loops["big"].model), _weights(setup.loops["identity"].model), strict=True):
        assert torch.equal(a, b)
    _run(setup, ("big",), 2)  # one forward and backward per iteration, and it trains
    assert any(
        not torch.equal(a, b)
        for a, b in zip(_weights(setup.loops["big"].model), _weights(setup.loops["bare"].model), strict=True)
    )
    setup.close()


def test_tasks_whose_items_are_batches_have_no_big_variant(tmp_path: Path) -> None:
    setup = perf.build(get_task("transformer"), 2, "tiny", None, Dist(), tmp_path)
    assert "big" not in setup.loops and setup.big == []
    (notice,) = setup.notices
    assert "transformer" in notice and "simulated_over_big_batch left empty" in notice
    row = perf.measure(setup, 1, torch.device("cpu"))
    assert "simulated_over_big_batch" not in row and "batched_over_big_batch" not in row
    setup.close()


def test_a_big_batch_that_does_not_fit_is_dropped_with_a_notice(tmp_path: Path) -> None:
    setup = perf.build(get_task("logreg"), 2, "tiny", None, Dist(), tmp_path)

    def out_of_memory(micro: list) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    setup.loops["big"].step = out_of_memory  # type: ignore[method-assign]
    row = perf.measure(setup, 2, torch.device("cpu"))
    assert "big" not in setup.loops and "simulated_over_big_batch" not in row
    assert float(row["engine_over_bare"]) > 0 and "does not fit" in setup.notices[-1]
    setup.close()
