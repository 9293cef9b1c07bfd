"""The rehearsal of the paper presets from data in each task's published form at real per-example sizes,
`prepare`d, then `submit --rehearse` at S = 2 on W = 2 gloo ranks through the real local SLURM (CI's cluster
stage): the paper's models, input pipelines, evaluation code and checkpointing, end to end.

Data: a CIFAR-10 python tarball (32×32 images, as published; 2 000 instead of 60 000), an ILSVRC2012 train
tar of class tars plus the flat val tar and the devkit, with JPEGs of typical ImageNet sizes (500×375 and
500×333; 5 classes), raw WMT-style parallel text (the toy corpus). Micro-batches are the largest that keep
this stage within CI's budget on 2 cores and say so in the table (`*`); per-example shapes stay the paper's
(224×224 crops, 32×32 images, d = 512 6+6-layer transformer). Not covered here yet: speech (LibriSpeech flac
of real lengths through DS2 takes minutes per iteration on 2 cores) and yolo (not written yet; its loss no
longer syncs per micro-batch: tests/experiments/test_syncs.py).
"""

from __future__ import annotations

import csv
import io
import pickle
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench.cli import main
from tests.tasks.test_prepare_images import SYNSETS, tar_add, val_truth, write_devkit

pytestmark = pytest.mark.slurm
# 2 tasks on the node's 2 CPUs (its two fake GPUs), gloo; one CPU each (the paper presets' loader workers
# would ask for more than the node has)
SLURM = ["--executor", "slurm", "--gpus-per-node", "2", "--cpus-per-task", "1", "--cpu-only"]
SIZES = [(500, 375), (500, 333), (375, 500)]  # ILSVRC2012's most common sizes


def cifar_tarball(path: Path, train: int = 2000, test: int = 500) -> None:
    """cifar-10-python.tar.gz as published: data_batch_1..5 and test_batch pickles of 32×32×3 uint8 rows."""
    rng = np.random.default_rng(0)

    def batch(n: int) -> bytes:
        labels = rng.integers(0, 10, n)
        data = np.clip(labels[:, None] * 25 + rng.normal(0, 30, (n, 3072)), 0, 255).astype(np.uint8)
        return pickle.dumps({"batch_label": "x", "labels": labels.tolist(), "data": data, "filenames": []})

    with tarfile.open(path, "w:gz") as tar:
        for i in range(1, 6):
            tar_add(tar, f"cifar-10-batches-py/data_batch_{i}", batch(train // 5))
        tar_add(tar, "cifar-10-batches-py/test_batch", batch(test))
        meta = {"label_names": [f"c{i}" for i in range(10)], "num_cases_per_batch": train // 5}
        tar_add(tar, "cifar-10-batches-py/batches.meta", pickle.dumps(meta))


def jpeg(k: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    w, h = SIZES[seed % len(SIZES)]
    base = np.array([(50 * k) % 256, (90 * k + 60) % 256, (170 * k + 30) % 256], dtype=float)
    pixels = np.clip(base + rng.normal(0, 20, (h, w, 3)), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def imagenet_archives(src: Path, per_class: int = 12) -> None:
    src.mkdir(parents=True)
    with tarfile.open(src / "ILSVRC2012_img_train.tar", "w") as outer:
        for k, (_, wnid) in enumerate(SYNSETS):
            inner = io.BytesIO()
            with tarfile.open(fileobj=inner, mode="w") as tar:
                for j in range(per_class):
                    tar_add(tar, f"{wnid}_{j + 1}.JPEG", jpeg(k, 100 * k + j))
            tar_add(outer, f"{wnid}.tar", inner.getvalue())
    truth = val_truth()
    with tarfile.open(src / "ILSVRC2012_img_val.tar", "w") as tar:
        for i, cls in enumerate(truth, start=1):
            tar_add(tar, f"ILSVRC2012_val_{i:08d}.JPEG", jpeg(cls - 1, 10_000 + i))
    write_devkit(src / "ILSVRC2012_devkit_t12.tar.gz", truth)


def wmt_raw(root: Path) -> None:
    from tasks.transformer.tiny import tiny_pairs, write_raw

    write_raw(root, tiny_pairs(0))
    for split, name in (("valid", "newstest2013"), ("test", "newstest2014")):
        for lang in ("en", "de"):
            (root / f"{split}.{lang}").rename(root / f"{name}.{lang}")


MATRIX = """preset: paper
seeds: [0]
data_roots: {{cifar10: {root}/cifar10, imagenet: {root}/imagenet, transformer: {root}/wmt}}
experiments:
  - table2: {{tasks: [cifar10], methods: [adascale], scales: [2],
             set: {{batch_size: 32, num_workers: 1, data.verify_md5: false}}}}
  - table2: {{tasks: [imagenet], methods: [adascale], scales: [2],
             set: {{batch_size: 4, num_workers: 1, model.num_classes: 5, data.eval_batch_size: 8}}}}
  - table2: {{tasks: [transformer], methods: [adascale], scales: [2], set: {{batch_size: 512, num_workers: 1}}}}
"""


@pytest.mark.timeout(2400)
def test_paper_presets_rehearse_from_published_data_through_slurm(tmp_path: Path, capsys) -> None:
    src, root = tmp_path / "src", tmp_path / "data"
    src.mkdir()
    cifar_tarball(src / "cifar-10-python.tar.gz")
    imagenet_archives(src / "ilsvrc")
    wmt_raw(src / "wmt")
    for task, source, out, extra in (
        ("cifar10", src / "cifar-10-python.tar.gz", root / "cifar10", ["--set", "verify_md5=false"]),
        ("imagenet", src / "ilsvrc", root / "imagenet", []),
        ("transformer", src / "wmt", root / "wmt", ["--set", "vocab_size=64", "--set", "hard_vocab_limit=false"]),
    ):
        assert main(["prepare", task, "--source", str(source), "--out", str(out), *extra]) == 0
    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX.format(root=root))
    out = tmp_path / "runs"
    capsys.readouterr()
    started = time.perf_counter()
    rc = main(["submit", str(matrix), *SLURM, "--rehearse", "--iterations", "2", "--out", str(out)])
    printed = capsys.readouterr().out
    print(printed, f"rehearsal wall time {time.perf_counter() - started:.0f} s")
    assert rc == 0, printed
    rows = list(csv.DictReader((out / "rehearsal" / "rehearsal.csv").open()))
    assert sorted(r["task"] for r in rows) == ["cifar10", "imagenet", "transformer"]
    for r in rows:
        assert (r["scale"], r["ranks"], r["accumulation"]) == ("2", "2", "1"), r
        assert r["resume"] == "exact", r
        # Known gap at W > 1 (measured 2 for cifar10 and imagenet, 1 for the transformer): BatchNorm's running
        # statistics merge (bench.engine.batchnorm.RunningStatsMerge.end) reads the ranks' update counts on the
        # host once per iteration, besides accumulate's one transfer. Equality, so that the fix shows here.
        assert float(r["host_syncs_per_iteration"]) == (2 if r["task"] in ("cifar10", "imagenet") else 1), r
        assert float(r["flops_per_iteration"]) > 0 and float(r["examples_per_s"]) > 0, r
    assert sorted(p.name for p in out.iterdir()) == ["rehearsal"]  # nothing in the real run folders
    assert sorted(p.name for p in (out / "rehearsal").iterdir()) == ["rehearsal.csv", "submitit"]
