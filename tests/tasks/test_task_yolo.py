"""yolo task: tiny shapes set in ultralytics' layout, read by YOLODataset; ultralytics' model and mAP, the
task's sync-free loss equal to ultralytics' on real collated batches; offline and contained."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.core.errors import UserError
from tasks.yolo import Yolo, evaluate_map
from tasks.yolo.data import build_dataset, read_spec
from tasks.yolo.tiny import CLASSES, IMAGE_SIZE, SPLITS, YAML_NAME, make_image, write_tiny
from tests.helpers import tiny_spec

REPO = Path(__file__).resolve().parents[2]
TASK = Yolo()
TINY = tiny_spec("yolo")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("shapes")
    write_tiny(r)
    return r


@pytest.fixture(scope="module")
def train(root: Path):
    return TASK.train_set(TINY, root)


@pytest.fixture(scope="module")
def evalset(root: Path):
    return TASK.eval_set(TINY, root)


def written_boxes(split: str) -> list[list[tuple[int, float, float, float, float]]]:
    """Replay the writer's generator: the boxes it drew, per image of `split`, in file order."""
    rng = np.random.default_rng(0)
    out: dict[str, list] = {}
    for s, count in SPLITS.items():
        out[s] = [make_image(rng)[1] for _ in range(count)]
    return out[split]


def test_presets_complete_and_paper_values() -> None:
    for preset in Yolo.presets.values():  # (the common keys: test_presets.py)
        assert preset["lr_schedule"]["kind"] == "step"
    paper = Yolo.presets["paper"]
    assert (paper["T1"], paper["batch_size"], paper["momentum"]) == (207_000, 16, 0.9)
    assert paper["scales"] == [1, 16, 32, 64, 128]
    assert paper["model"]["yaml"] == "yolov3.yaml" and paper["data"]["yaml"] == "VOC.yaml"
    assert Yolo.presets["tiny"]["scales"] == [1, 2, 4, 8]
    assert (TASK.metric, TASK.metric_label, TASK.higher_is_better) == ("map50", "mAP@0.5 %", True)


def test_tiny_set_loads_through_ultralytics_dataset(root: Path, evalset) -> None:
    spec = read_spec(root, YAML_NAME, nc=3)
    assert spec.names == dict(enumerate(CLASSES))
    for split in SPLITS:
        ds = build_dataset(spec, TINY.data, split, batch=8)  # "train" augments, "val" letterboxes
        assert len(ds) == SPLITS[split]
        assert [Path(f).name for f in ds.im_files] == [f"{split}_{i:04d}.jpg" for i in range(SPLITS[split])]
        for label, boxes in zip(ds.labels, written_boxes(split), strict=True):
            assert label["cls"][:, 0].tolist() == [b[0] for b in boxes]
            np.testing.assert_allclose(label["bboxes"], np.array([b[1:] for b in boxes]), atol=1e-5)
    assert (root / "labels" / "train.cache").is_file()  # ultralytics' label cache, inside the data root
    # Val items: RGB CHW uint8, letterboxed as ultralytics' validator does (rect batches, half a stride of
    # padding: 64 -> 96). A shape's inner pixel is its class colour, and the classes are red, green, blue
    # in that order, i.e. the argmax channel is the class.
    for i in range(10):
        item = evalset.dataset[i]
        assert item["img"].shape == (3, 96, 96) and item["img"].dtype == torch.uint8
        size = item["img"].shape[1]
        for c, (cx, cy, _w, h) in zip(item["cls"][:, 0].tolist(), item["bboxes"].tolist(), strict=True):
            # triangles are solid in their lower part: probe below the box centre
            x, y = int(cx * size), int((cy + (h / 4 if c == 2 else 0)) * size)
            pixel = item["img"][:, y, x].tolist()
            assert int(np.argmax(pixel)) == int(c), (i, c, pixel)


def test_train_items_are_pure_functions_of_key(root: Path, train) -> None:
    a = train[(5, 1234)]
    for i in range(8):  # loading other items must not change what (5, 1234) gives
        train[(i, 99 + i)]
    b = train[(5, 1234)]
    assert torch.equal(a["img"], b["img"]) and torch.equal(a["bboxes"], b["bboxes"])
    c = train[(5, 4321)]
    assert not torch.equal(a["img"], c["img"])
    # With ultralytics' default mosaic (partners normally drawn from a load-history buffer) too.
    spec = read_spec(root, YAML_NAME)
    mosaic = {**TINY.data, "augment": {**TINY.data["augment"], "mosaic": 1.0}}
    from tasks.yolo.data import YoloTrainSet

    ts = YoloTrainSet(build_dataset(spec, mosaic, "train", batch=8))
    first = ts[(3, 77)]
    for i in range(20):
        ts[(i, i)]
    again = ts[(3, 77)]
    assert torch.equal(first["img"], again["img"]) and torch.equal(first["bboxes"], again["bboxes"])
    # The global RNGs are left as they were.
    states = random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state()
    ts[(1, 2)]
    assert random.getstate() == states[0]
    assert np.array_equal(np.random.get_state()[1], states[1])
    assert torch.equal(torch.get_rng_state(), states[2])


def test_loss_is_ultralytics_sum_over_batch_size(train) -> None:
    torch.manual_seed(0)
    model = TASK.build_model(TINY)
    assert model.args.box == 7.5 and model.args.cls == 0.5 and model.args.dfl == 1.5  # ultralytics' gains
    assert model.model[-1].nc == 3 and model.model[-1].reg_max == 4
    batch = train.collate([train[(i, i)] for i in range(8)])
    assert batch["img"].dtype == torch.uint8 and batch["img"].shape == (8, 3, IMAGE_SIZE, IMAGE_SIZE)
    loss = TASK.loss(model, batch)
    total, items = model({**batch, "img": batch["img"].float() / 255})
    assert loss.ndim == 0 and torch.isfinite(loss)
    assert loss.item() == pytest.approx(total.sum().item() / 8, rel=1e-5)
    assert loss.item() == pytest.approx(sum(v.item() for v in items.values()), rel=1e-5)


def test_a_few_sgd_steps_lower_the_loss(train) -> None:
    torch.manual_seed(0)
    model = TASK.build_model(TINY)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)  # test-only loop
    batch = train.collate([train[(i, i)] for i in range(8)])
    losses = []
    for _ in range(12):
        loss = TASK.loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


class GroundTruthModel:
    """Stands in for the network at evaluation: returns, batch by batch, raw predictions in the
    inference layout of ultralytics' Detect head, (B, 4 + nc, anchors) with xywh boxes in pixels of the
    letterboxed input, built from the validation items' own boxes (optionally shifted right by a
    fraction of each box's width)."""

    def __init__(self, dataset, batch_size: int, nc: int, shift: float = 0.0) -> None:
        self.dataset, self.b, self.nc, self.shift, self.calls = dataset, batch_size, nc, shift, 0

    def __call__(self, img: torch.Tensor):
        start, n = self.calls * self.b, img.shape[0]
        self.calls += 1
        h, w = img.shape[2:]
        items = [self.dataset[start + i] for i in range(n)]
        out = torch.zeros(n, 4 + self.nc, max(len(it["cls"]) for it in items))
        for i, it in enumerate(items):
            for j, (c, box) in enumerate(zip(it["cls"][:, 0], it["bboxes"], strict=True)):
                cx, cy, bw, bh = box.tolist()
                out[i, :4, j] = torch.tensor([(cx + self.shift * bw) * w, cy * h, bw * w, bh * h])
                out[i, 4 + int(c), j] = 0.9
        return out, {}

    def detection_loss(self, preds, targets, target_mask):  # what tasks.yolo.loss.criterion(model) finds
        return torch.zeros(3)


# Perfect boxes score 99.5, not 100: ultralytics' compute_ap closes the precision envelope with a
# (recall 1, precision 0) sentinel, and its 101-point trapezoid loses half of the last 0.01 of recall.
# A box shifted by 0.6 of its width has IoU 0.4 / 1.6 = 0.25 < 0.5: no detection counts at any threshold.
@pytest.mark.parametrize(("shift", "expected"), [(0.0, 99.5), (0.6, 0.0)])
def test_map_on_constructed_predictions(evalset, shift: float, expected: float) -> None:
    model = GroundTruthModel(evalset.dataset, evalset.batch_size, nc=3, shift=shift)
    result = evaluate_map(model, evalset, torch.device("cpu"))
    assert result["map50"] == pytest.approx(expected, abs=1e-6)
    assert result["map50_95"] == pytest.approx(expected, abs=1e-6)


def test_evaluate_real_model_returns_percentages(evalset) -> None:
    torch.manual_seed(0)
    model = TASK.build_model(TINY).eval()
    with torch.no_grad():
        result = TASK.evaluate(model, evalset, TINY, torch.device("cpu"))
    assert set(result) == {"map50", "map50_95", "loss"}
    assert 0.0 <= result["map50_95"] <= result["map50"] <= 100.0
    assert np.isfinite(result["loss"]) and result["loss"] > 0


def test_bad_layouts_raise_one_line_user_errors(tmp_path: Path, root: Path) -> None:
    def error(r: Path, cfg: dict = TINY) -> str:
        with pytest.raises(UserError) as e:
            TASK.check_data(r, cfg)
        assert "\n" not in str(e.value)
        return str(e.value)

    assert str(tmp_path / "nope") in error(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert str(empty / YAML_NAME) in error(empty)
    broken = tmp_path / "broken"
    write_tiny(broken)
    for f in (broken / "labels" / "val").iterdir():
        f.unlink()
    (broken / "labels" / "val").rmdir()
    assert str(broken / "labels" / "val") in error(broken)
    (broken / YAML_NAME).write_text("train: images/train\nnames: [a, b, c]\n")
    assert "'val'" in error(broken) and str(broken / YAML_NAME) in error(broken)
    assert "model.nc" in error(root, tiny_spec("yolo", model={"nc": 20}))
    TASK.check_data(root, TINY)  # the good one passes


def test_voc_layout_uses_ultralytics_voc_yaml(tmp_path: Path) -> None:
    """A root laid out as ultralytics' VOC download (no YAML of its own) resolves through the packaged
    VOC.yaml: train = VOC2007+2012 trainval, val = VOC2007 test, 20 classes."""
    for split in ("train2012", "train2007", "val2012", "val2007", "test2007"):
        (tmp_path / "images" / split).mkdir(parents=True)
        (tmp_path / "labels" / split).mkdir(parents=True)
        (tmp_path / "images" / split / "x.jpg").write_bytes(b"")
    spec = read_spec(tmp_path, "VOC.yaml", nc=20)
    assert len(spec.names) == 20 and spec.names[14] == "person"
    assert [Path(p).name for p in spec.train] == ["train2012", "train2007", "val2012", "val2007"]
    assert [Path(p).name for p in spec.val] == ["test2007"]


NO_NETWORK_SCRIPT = textwrap.dedent(
    """
    import json, socket, sys
    from pathlib import Path
    attempts = []
    def refuse(name):
        def f(*a, **k):
            attempts.append(name)
            raise OSError("network disabled by the test")
        return f
    socket.socket.connect = refuse("connect")
    socket.socket.connect_ex = refuse("connect_ex")
    socket.create_connection = refuse("create_connection")
    socket.getaddrinfo = refuse("getaddrinfo")
    import torch
    torch.set_num_threads(1)
    from tasks.yolo import Yolo
    from tests.helpers import tiny_spec
    task, root = Yolo(), Path(sys.argv[1])
    cfg = tiny_spec("yolo")
    task.write_tiny(root)
    task.check_data(root, cfg)
    torch.manual_seed(0)
    model = task.build_model(cfg)
    train = task.train_set(cfg, root)
    loss = task.loss(model, train.collate([train[(i, i)] for i in range(8)]))
    loss.backward()
    model.eval()
    with torch.no_grad():
        result = task.evaluate(model, task.eval_set(cfg, root), cfg, torch.device("cpu"))
    import ultralytics.utils as u
    print(json.dumps({"attempts": attempts, "loss": loss.item(), "map50": result["map50"],
                      "online": u.ONLINE, "sync": u.SETTINGS["sync"], "config": str(u.USER_CONFIG_DIR)}))
    """
)


def test_no_network_and_nothing_written_outside(tmp_path: Path) -> None:
    home, cwd, tmp, data = (tmp_path / d for d in ("home", "cwd", "tmp", "data"))
    for d in (home, cwd, tmp):
        d.mkdir()
    repo_before = sorted(p.name for p in REPO.iterdir())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("YOLO_", "XDG_"))}
    env.update(HOME=str(home), TMPDIR=str(tmp), PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-c", NO_NETWORK_SCRIPT, str(data)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["attempts"] == []  # not even a DNS lookup
    assert out["online"] is False and out["sync"] is False
    assert out["config"].startswith(str(tmp))  # ultralytics' settings dir was the private temp dir
    assert np.isfinite(out["loss"])
    assert list(home.iterdir()) == []  # no ~/.config/Ultralytics, no ~/.cache
    assert list(cwd.iterdir()) == []  # no runs/ or weights/ next to the working directory
    assert list(tmp.iterdir()) == []  # the private dir is removed at exit
    assert sorted(p.name for p in REPO.iterdir()) == repo_before
    written = {p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file()}
    assert {w for w in written if not w.startswith(("images/", "labels/"))} == {YAML_NAME}
    assert {w for w in written if w.endswith(".cache")} == {"labels/train.cache", "labels/val.cache"}
