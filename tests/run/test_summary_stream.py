"""The end-of-run summary comes from running aggregates and the metrics file's tail, not a re-read of the
whole file: the same numbers, bit for bit, as the whole file gives; the tail reader against read_jsonl."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from bench.core.algo.gain import b_simple_average
from bench.core.files import METRICS, read_jsonl, tail_records
from tests.helpers import spec_for, train

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("trial", range(40))
def test_tail_records_is_the_end_of_read_jsonl(tmp_path: Path, trial: int) -> None:
    rng = random.Random(trial)
    recs = [{"i": i, "eval": rng.random() < 0.2, "pad": "x" * rng.randint(0, 60)} for i in range(rng.randint(0, 80))]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + rng.choice(["", '{"i": 999', "{"]))
    n = rng.randint(1, 90)
    want = [r for r in read_jsonl(path) if not r.get("eval")][-n:]
    assert tail_records(path, n, lambda r: not r.get("eval"), block=rng.randint(1, 300)) == want


def test_summary_numbers_are_those_of_the_whole_file(tmp_path: Path) -> None:
    spec = spec_for("logreg", "adascale", 4, T1=300, eval_every=50)
    summary, _ = train(spec, tmp_path)
    records = [r for r in read_jsonl(tmp_path / METRICS) if not r.get("eval")]
    window = max(1, math.ceil(spec.train_loss_window * len(records)))
    losses = [r["loss"] for r in records[-window:]]
    gains = [r["gain"] for r in records]
    assert summary["train_loss"] == sum(losses) / len(losses)  # bit for bit
    assert summary["mean_gain"] == sum(gains) / len(gains)
    assert summary["iterations"] == len(records)
    stats = [(r["sum_sq"], r["mean_sq"], r["scale"]) for r in records]
    assert summary["B_simple"] == b_simple_average(stats, spec.batch_size)
