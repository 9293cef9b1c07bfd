"""Sharded evaluation: W ranks each evaluate a block of the evaluation batches, the statistics are
combined on rank 0, and the metrics equal those of one process evaluating everything (counts, word
errors and BLEU exactly, loss means to float rounding)."""

from __future__ import annotations

import json
import math
import multiprocessing
import random
import socket
from pathlib import Path
from typing import Any

import pytest
import sacrebleu
import torch

from bench.core.engine.distributed import Dist
from bench.core.engine.evaluation import Concat, FloatSum, combine, evaluate, evaluate_sharded_locally, shard
from bench.run.dataroot import prepare_data
from bench.run.spec import resolve
from tasks import get_task
from tasks.presets import EVAL_EXAMPLES
from tasks.transformer import bleu_from_statistics, bleu_statistics

pytestmark = pytest.mark.usefixtures("one_thread")
# several evaluation batches, so that W = 2 and 3 ranks all get some (and some batches are uneven)
SMALL_EVAL_BATCHES = {
    "cifar10": {"data.eval_batch_size": 70},
    "transformer": {"data.eval_max_tokens": 160},
    "speech": {"data.eval_batch_size": 3},
}
EXACT = ("top1", "top5", "accuracy", "bleu", "wer", "cer", "word_acc", "map50", "map50_95", EVAL_EXAMPLES)


def test_shards_are_contiguous_blocks_in_rank_order() -> None:
    for n in (0, 1, 5, 17):
        for world in (1, 2, 3, 4):
            blocks = [shard(n, r, world) for r in range(world)]
            assert [i for b in blocks for i in b] == list(range(n))
            assert max(len(b) for b in blocks) - min(len(b) for b in blocks) <= 1


def test_combine_sums_counts_exactly_lists_elementwise_and_concatenates() -> None:
    parts = [
        {"n": 2, "loss": 0.1, "bleu": [1, 2], "recs": Concat(["a"])},
        {"n": 3, "loss": 0.2, "bleu": [3, 4], "recs": Concat(["b", "c"])},
    ]
    out = combine(parts)
    assert out == {"n": 5, "loss": 0.1 + 0.2, "bleu": [4, 6], "recs": ["a", "b", "c"]}
    assert isinstance(out["n"], int) and isinstance(out["recs"], Concat)
    assert combine([{"x": 1e16}, {"x": 1.0}, {"x": -1e16}])["x"] == 1.0  # fsum: exactly rounded
    with pytest.raises(ValueError, match="disagree"):
        combine([{"a": 1}, {"b": 1}])


def test_bleu_statistics_add_up_to_corpus_bleu_over_any_split() -> None:
    rng = random.Random(0)
    words = "the a cat dog sat on mat house red blue runs quickly . ,".split()
    refs = [" ".join(rng.choices(words, k=rng.randint(1, 12))) for _ in range(60)]
    hyps = [" ".join(rng.sample(r.split(), len(r.split())) + rng.choices(words, k=rng.randint(0, 2))) for r in refs]
    whole = sacrebleu.corpus_bleu(hyps, [refs]).score
    assert 0 < whole < 100
    assert bleu_from_statistics(bleu_statistics(hyps, refs)) == whole
    for cut in ((30,), (7, 41), (1, 2, 59)):
        bounds = [0, *cut, len(hyps)]
        parts = [{"s": bleu_statistics(hyps[a:b], refs[a:b])} for a, b in zip(bounds, bounds[1:], strict=False)]
        assert bleu_from_statistics(combine(parts)["s"]) == whole


def _setup(name: str) -> tuple[Any, torch.nn.Module, Any, dict[str, Any]]:
    task = get_task(name)
    spec = resolve(task, "adascale", 1, 0, "tiny", overrides=SMALL_EVAL_BATCHES.get(name))
    root = prepare_data(task, spec, Dist())
    torch.manual_seed(3)
    model = task.build_model(spec)
    with torch.no_grad():  # not the zero/identity initial model: predictions that differ between examples
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.eval()
    evalset = task.eval_set(spec, root)
    if name == "transformer":  # an untrained decoder says </s> at once: make it say something to score
        with torch.no_grad():
            model.tgt_embed.weight[evalset.vocab.tgt.eos_index].zero_()
    return task, model, evalset, spec


def _assert_same(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    for k, v in want.items():
        if k in EXACT:
            assert got[k] == v, k
        else:
            assert got[k] == pytest.approx(v, rel=1e-6, abs=1e-9), k  # float32 logits of other batch shapes


@pytest.mark.parametrize("name", ["logreg", "cifar10", "transformer", "speech"])
def test_shards_evaluated_one_after_another_give_the_one_process_metrics(name: str) -> None:
    task, model, evalset, spec = _setup(name)
    with torch.no_grad():
        want = task.evaluate(model, evalset, spec, torch.device("cpu"))
        if task.card.chance:  # a chance level is judged against the evaluation's size (reports.rundata.failedseeds)
            assert want[EVAL_EXAMPLES] == len(evalset) > 0
        for world in (2, 3):
            _assert_same(evaluate_sharded_locally(task, model, evalset, spec, world), want)


# -- real ranks: gloo, one process per rank ------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, name: str, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        task, model, evalset, spec = _setup(name)
        with torch.no_grad():
            result = evaluate(task, model, evalset, spec, Dist(rank=rank, world=world))
        if rank == 0:
            Path(out).write_text(json.dumps(result))
        else:
            assert result is None
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("name", ["logreg", "cifar10", "transformer"])
def test_gloo_ranks_report_the_rank_zero_metrics(tmp_path: Path, name: str) -> None:
    task, model, evalset, spec = _setup(name)  # (also writes the tiny data before the ranks start)
    with torch.no_grad():
        want = task.evaluate(model, evalset, spec, torch.device("cpu"))
    ctx = multiprocessing.get_context("fork")  # CPU only: nothing to re-initialise in the children
    for world in (2, 3):
        out = tmp_path / f"w{world}.json"
        port = _free_port()
        procs = [ctx.Process(target=_rank, args=(r, world, port, name, str(out))) for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0] * world
        _assert_same(json.loads(out.read_text()), want)


def test_a_float_sum_kept_as_terms_is_the_same_bits_for_every_split() -> None:
    """Per-shard running sums round differently for different splits (the control); FloatSum does not."""
    terms = [0.1 * k + 1e-3 / (k + 1) for k in range(1000)]
    running = {w: combine([{"s": sum(terms[r * 1000 // w : (r + 1) * 1000 // w])} for r in range(w)])["s"]
               for w in (1, 2, 3, 7)}  # fmt: skip
    assert len(set(running.values())) > 1
    exact = {w: combine([{"s": FloatSum(terms[r * 1000 // w : (r + 1) * 1000 // w])} for r in range(w)])["s"]
             for w in (1, 2, 3, 7)}  # fmt: skip
    assert set(exact.values()) == {math.fsum(terms)}


@pytest.mark.parametrize("name", ["logreg", "cifar10", "transformer", "speech"])
def test_every_metric_is_the_same_bits_for_every_number_of_shards(name: str) -> None:
    task, model, evalset, spec = _setup(name)
    with torch.no_grad():
        want = task.evaluate(model, evalset, spec, torch.device("cpu"))
        if task.card.chance:  # a chance level is judged against the evaluation's size (reports.rundata.failedseeds)
            assert want[EVAL_EXAMPLES] == len(evalset) > 0
        for world in (2, 3):
            assert evaluate_sharded_locally(task, model, evalset, spec, world) == want
