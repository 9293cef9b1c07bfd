"""Rank 0 reads a task's sample lists (imagenet: index.csv or the ImageFolder walk) and the other ranks
receive them (bench.core.engine.data.shared_samples): W ranks do not each read 1.28 M entries, and every rank
builds the same sets as one process does."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torchvision.datasets import ImageFolder

from bench.core.engine.data import shared_samples
from bench.core.engine.distributed import Dist
from bench.core.engine.loop import Engine
from bench.core.errors import UserError
from bench.run.spec import resolve
from tasks import get_task
from tasks.imagenet.prepare import write_index

SPLITS = ("train", "val")


@pytest.fixture(scope="module", params=["index", "walk"])
def root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny ImageNet tree, with the index.csv `adascale-bench prepare imagenet` writes, or without."""
    root = tmp_path_factory.mktemp(f"imagenet_{request.param}")
    task = get_task("imagenet")
    task.write_tiny(root)
    if request.param == "index":
        classes = sorted(p.name for p in (root / "train").iterdir())
        write_index(root, classes)
    return root


def _spec(root: Path) -> dict[str, Any]:
    return resolve(get_task("imagenet"), "identity", 2, 0, "tiny", str(root))


def _lists(engine: Engine) -> dict[str, list[list[Any]]]:
    return {"train": [list(s) for s in engine.train.folder.samples], "val": [list(s) for s in engine.evalset.samples]}


def _scanned(root: Path) -> dict[str, list[list[Any]]]:
    """What torchvision's own ImageFolder lists (the samples before index.csv and sharing existed)."""
    return {split: [list(s) for s in ImageFolder(str(root / split)).samples] for split in SPLITS}


def test_one_rank_builds_the_same_sets_as_imagefolder(root: Path, tmp_path: Path) -> None:
    engine = Engine(_spec(root), get_task("imagenet"), tmp_path / "run", root, progress=False)
    engine.setup()
    assert _lists(engine) == _scanned(root)
    assert engine.train.classes == ImageFolder(str(root / "train")).classes
    assert engine.evalset.class_to_idx == ImageFolder(str(root / "val")).class_to_idx


# -- two gloo ranks, one process each ------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spy(root: Path) -> dict[str, list[str]]:
    """Record (Python audit events) every open of index.csv and every listing of a class folder."""
    seen: dict[str, list[str]] = {"index_opens": [], "class_listings": []}
    splits = {os.path.realpath(root / s) for s in SPLITS}

    def hook(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], str | os.PathLike) and str(args[0]).endswith("index.csv"):
            seen["index_opens"].append(str(args[0]))
        elif event == "os.scandir" and args and isinstance(args[0], str | os.PathLike):
            path = os.path.realpath(args[0])
            if os.path.dirname(path) in splits:  # inside train/ or val/: a walk of the images
                seen["class_listings"].append(path)

    sys.addaudithook(hook)  # (the child process ends after the test; hooks cannot be removed)
    return seen


def _engine_rank(rank: int, world: int, port: int, root: str, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        spec = _spec(Path(root))
        seen = _spy(Path(root))
        engine = Engine(spec, get_task("imagenet"), Path(out) / "run", Path(root), Dist(rank, world), progress=False)
        engine.setup()
        Path(out, f"rank{rank}.json").write_text(json.dumps({**seen, **_lists(engine)}))
        del engine
        dist.barrier()  # neither rank tears the group down while the other still uses it
    finally:
        dist.destroy_process_group()


def _start(target: Any, world: int, *args: Any) -> None:
    # spawn, not fork: a fork of the test process (threads of earlier tests) could inherit a held lock
    ctx = multiprocessing.get_context("spawn")
    port = _free_port()
    procs = [ctx.Process(target=target, args=(r, world, port, *args)) for r in range(world)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(180)
        assert [p.exitcode for p in procs] == [0] * world
    finally:
        for p in procs:
            if p.is_alive():  # a rank that hangs does not outlive the test
                p.kill()
                p.join()


def test_rank_one_receives_the_samples_rank_zero_read(root: Path, tmp_path: Path) -> None:
    """W = 2: rank 0 reads index.csv (or walks the class folders when there is none), rank 1 does neither,
    and both build the train and eval sets of one process."""
    _start(_engine_rank, 2, str(root), str(tmp_path))
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    want = _scanned(root)
    for got in ranks:
        assert {split: got[split] for split in ("train", "val")} == want
    assert ranks[1]["index_opens"] == [] and ranks[1]["class_listings"] == []
    if (root / "index.csv").exists():
        assert len(ranks[0]["index_opens"]) == 2 and ranks[0]["class_listings"] == []  # train, then val
    else:
        assert ranks[0]["index_opens"] == [] and ranks[0]["class_listings"]  # the walk, on rank 0 alone


class Failing:
    name = "failing"

    def samples(self, cfg: dict[str, Any], root: Path, split: str) -> list[int]:
        raise UserError("index.csv:3: expected 3 fields")


def _failing_rank(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        try:
            shared_samples(Failing(), {}, Path(), "train", Dist(rank, world))
        except UserError as e:
            Path(out, f"rank{rank}.txt").write_text(str(e))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_when_rank_zero_cannot_read_the_samples_every_rank_stops(tmp_path: Path) -> None:
    """Rank 0's error is its own; the other ranks are told at once instead of waiting in the broadcast."""
    _start(_failing_rank, 2, str(tmp_path))
    assert (tmp_path / "rank0.txt").read_text() == "index.csv:3: expected 3 fields"
    assert (tmp_path / "rank1.txt").read_text() == (
        "rank 0 could not read the train samples of failing: UserError: index.csv:3: expected 3 fields"
    )


def test_speech_sets_from_a_shared_list_are_the_sets_it_reads(tmp_path: Path) -> None:
    """Speech's list (the manifest's or the flac headers' utterances) gives the same batches when handed in."""
    task = get_task("speech")
    task.write_tiny(tmp_path)
    spec = resolve(task, "identity", 1, 0, "tiny", str(tmp_path))
    engine = Engine(spec, task, tmp_path / "run", tmp_path, progress=False)
    engine.setup()
    alone, evalset = task.train_set(spec, tmp_path), task.eval_set(spec, tmp_path)
    assert [[u.uid for u in b] for b in engine.train.batches] == [[u.uid for u in b] for b in alone.batches]
    assert [[u.uid for u in b] for b in engine.evalset.batches] == [[u.uid for u in b] for b in evalset.batches]
