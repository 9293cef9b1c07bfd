"""cifar10 task: tiny data in the real pickle format, torchvision's reader, augmentation, model, metric."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from torch import nn

from bench.core.errors import UserError
from tasks.base import seeded
from tasks.cifar10 import CPU_SLICE, Cifar10, data, eval_logits
from tasks.cifar10.model import PreActBlock, PreActResNet18
from tasks.cifar10.tiny import LABEL_NAMES, write_tiny
from tests.helpers import tiny_spec

TASK = Cifar10()
TINY = tiny_spec("cifar10")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("cifar")
    write_tiny(r)
    return r


@pytest.fixture(scope="module")
def train(root: Path) -> data.TrainSet:
    return TASK.train_set(TINY, root)


def test_tiny_round_trips_through_torchvision(root: Path) -> None:
    folder = root / "cifar-10-batches-py"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]
    )
    # The stock class refuses the files only because of the official md5s ...
    with pytest.raises(RuntimeError):
        torchvision.datasets.CIFAR10(str(root), train=True, download=False)
    # ... and the subclass reads them with torchvision's own code.
    tr = data.CIFAR10Pickles(root, train=True, verify_md5=False)
    te = data.CIFAR10Pickles(root, train=False, verify_md5=False)
    assert isinstance(tr, torchvision.datasets.CIFAR10)
    assert tr.data.shape == (1000, 32, 32, 3) and tr.data.dtype == np.uint8
    assert te.data.shape == (300, 32, 32, 3)
    assert tr.classes == LABEL_NAMES == te.classes
    assert np.bincount(tr.targets, minlength=10).tolist() == [100] * 10
    assert np.bincount(te.targets, minlength=10).tolist() == [30] * 10
    # Same bytes as an independent read of the pickle: rows are R, G, B planes of 32x32, row-major.
    with open(folder / "data_batch_2", "rb") as f:
        raw = pickle.load(f, encoding="latin1")
    np.testing.assert_array_equal(tr.data[200:400], raw["data"].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
    assert tr.targets[200:400] == raw["labels"]
    img, label = tr[5]  # torchvision's own __getitem__ still works (PIL image)
    assert img.size == (32, 32) and label == tr.targets[5]


def test_write_tiny_is_deterministic(tmp_path: Path, root: Path) -> None:
    folder = write_tiny(tmp_path)
    for p in folder.iterdir():
        assert p.read_bytes() == (root / "cifar-10-batches-py" / p.name).read_bytes(), p.name
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_accepts_the_batches_folder_itself(root: Path) -> None:
    TASK.check_data(root / "cifar-10-batches-py", TINY)
    assert len(TASK.eval_set(TINY, root / "cifar-10-batches-py")) == 300


def test_missing_root_names_path(tmp_path: Path) -> None:
    with pytest.raises(UserError) as e:
        TASK.check_data(tmp_path / "nowhere", TINY)
    msg = str(e.value)
    assert str(tmp_path / "nowhere") in msg and "data_batch_1" in msg and "batches.meta" in msg
    assert "\n" not in msg


def test_missing_file_names_it(tmp_path: Path) -> None:
    folder = write_tiny(tmp_path)
    (folder / "data_batch_3").unlink()
    with pytest.raises(UserError, match="missing data_batch_3") as e:
        TASK.check_data(tmp_path, TINY)
    assert str(folder) in str(e.value)
    with pytest.raises(UserError):
        TASK.train_set(TINY, tmp_path)


def test_malformed_files_give_user_error(tmp_path: Path) -> None:
    folder = write_tiny(tmp_path)
    blob = (folder / "data_batch_2").read_bytes()
    (folder / "data_batch_2").write_bytes(blob[: len(blob) // 2])  # truncated pickle
    TASK.check_data(tmp_path, TINY)  # presence is fine; reading is not
    with pytest.raises(UserError) as e:
        TASK.train_set(TINY, tmp_path)
    assert str(folder) in str(e.value) and "\n" not in str(e.value)
    TASK.eval_set(TINY, tmp_path)  # the test split is intact
    (folder / "batches.meta").write_bytes(b"not a pickle")
    with pytest.raises(UserError, match="batches.meta"):
        TASK.check_data(tmp_path, TINY)


def test_labels_must_match_meta(tmp_path: Path) -> None:
    folder = write_tiny(tmp_path)
    with open(folder / "test_batch", "rb") as f:
        entry = pickle.load(f, encoding="latin1")
    entry["labels"][0] = 10  # only 10 names in batches.meta
    with open(folder / "test_batch", "wb") as f:
        pickle.dump(entry, f)
    with pytest.raises(UserError, match="labels"):
        TASK.eval_set(TINY, tmp_path)


def test_official_md5_is_checked_when_asked(root: Path) -> None:
    cfg = tiny_spec("cifar10", data={"verify_md5": True})
    with pytest.raises(UserError, match="md5"):
        TASK.check_data(root, cfg)
    assert Cifar10.presets["paper"]["data"]["verify_md5"] is True


def test_augmentation_is_a_function_of_key(train: data.TrainSet) -> None:
    a, la = train[(7, 123)]
    train[(3, 5)]  # other calls in between must not matter
    b, lb = train[(7, 123)]
    assert torch.equal(a, b) and la == lb == int(train.labels[7])
    assert a.dtype == torch.uint8 and a.shape == (3, 32, 32)
    outs = [train[(7, k)][0] for k in range(12)]
    distinct = {tuple(o.flatten().tolist()) for o in outs}
    assert len(distinct) >= 8  # crops/flips really vary with the key
    assert any(not torch.equal(o, train.images[7]) for o in outs)
    # Each output is a crop of the zero-padded original, possibly flipped.
    padded = nn.functional.pad(train.images[7], (4, 4, 4, 4))
    for o in outs[:4]:
        found = any(
            torch.equal(o, cand)
            for i in range(9)
            for j in range(9)
            for cand in (padded[:, i : i + 32, j : j + 32], padded[:, i : i + 32, j : j + 32].flip(-1))
        )
        assert found


def _recipe(image: torch.Tensor, key: int) -> torch.Tensor:
    """torchvision's v2 recipe as the task applied it before `crop_flip`: under `seeded(key)`."""
    with seeded(key):
        return data.RECIPE(image)


def test_crop_flip_is_torchvisions_recipe_bit_for_bit() -> None:
    """Every offset (9 × 9) and both flips, on random images with no zero pixel (a misplaced pad shows)."""
    images = torch.randint(1, 256, (64, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    g = torch.Generator()
    seen: set[tuple[int, bool]] = set()
    padded = nn.functional.pad(images, (4, 4, 4, 4))
    for key in range(3000):
        image = images[key % 64]
        fast = data.crop_flip(image, key, g)
        assert torch.equal(fast, _recipe(image, key)), key
        p = padded[key % 64]
        for i in range(9):
            for j in range(9):
                crop = p[:, i : i + 32, j : j + 32]
                seen.update((i * 9 + j, f) for f, c in ((False, crop), (True, crop.flip(-1))) if torch.equal(fast, c))
    assert len(seen) == 162  # every crop and flip reached: the equality above is no accident of a few offsets


def test_crop_flip_would_catch_a_draw_out_of_order() -> None:
    """The comparison above can fail: the same three draws read left before top differ from torchvision."""
    image = torch.randint(1, 256, (3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))

    def swapped(key: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(key)
        left, top = (int(torch.randint(0, 9, size=(), generator=g)) for _ in range(2))
        flip = not bool(torch.rand(1, generator=g) >= 0.5)
        out = nn.functional.pad(image, (4, 4, 4, 4))[:, top : top + 32, left : left + 32]
        return out.flip(-1) if flip else out

    assert any(not torch.equal(swapped(k), _recipe(image, k)) for k in range(20))
    assert all(torch.equal(data.crop_flip(image, k, torch.Generator()), _recipe(image, k)) for k in range(20))


def test_loader_workers_give_the_same_batches(train: data.TrainSet) -> None:
    """The set's one generator is reseeded per item: DataLoader workers (the paper preset's 4), each with its copy,
    give the batches one process gives."""
    batches = [[(i * 8 + j, 1000 * i + j) for j in range(8)] for i in range(6)]

    def load(workers: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return list(
            torch.utils.data.DataLoader(train, batch_sampler=batches, collate_fn=train.collate, num_workers=workers)
        )

    for (a, la), (b, lb) in zip(load(0), load(2), strict=True):
        assert torch.equal(a, b) and torch.equal(la, lb)


def test_item_leaves_global_rng_alone(train: data.TrainSet) -> None:
    torch.manual_seed(1)
    expected = torch.rand(3)
    torch.manual_seed(1)
    train[(0, 99)]
    assert torch.equal(torch.rand(3), expected)


def test_collate_normalises(train: data.TrainSet) -> None:
    samples = [train[(i, i)] for i in range(5)]
    images, labels = train.collate(samples)
    assert images.shape == (5, 3, 32, 32) and images.dtype == torch.float32
    assert labels.dtype == torch.int64 and labels.tolist() == [s[1] for s in samples]
    raw = torch.stack([s[0] for s in samples]).double() / 255
    mean = torch.tensor([0.4914, 0.4822, 0.4465], dtype=torch.float64).view(1, 3, 1, 1)
    std = torch.tensor([0.2470, 0.2435, 0.2616], dtype=torch.float64).view(1, 3, 1, 1)
    torch.testing.assert_close(images.double(), (raw - mean) / std, atol=1e-5, rtol=0)


def test_model_is_pre_activation() -> None:
    model = PreActResNet18(width=8)
    calls: list[nn.Module] = []
    for m in model.modules():
        if not list(m.children()):
            m.register_forward_hook(lambda mod, i, o: calls.append(mod))
    model(torch.randn(2, 3, 32, 32))
    assert calls[0] is model.stem and isinstance(calls[1], nn.BatchNorm2d)  # no BN/ReLU after the stem
    assert calls[1] is model.layer1[0].bn1
    assert calls[-2] is model.bn and calls[-1] is model.fc  # final BN(-ReLU) before the classifier
    blocks = [m for m in model.modules() if isinstance(m, PreActBlock)]
    assert len(blocks) == 8
    assert [b.conv1.stride[0] for b in blocks] == [1, 1, 2, 1, 2, 1, 2, 1]
    assert [b.shortcut is not None for b in blocks] == [False, False, True, False, True, False, True, False]
    # The residual stream is not activated at a block's output: negative values survive.
    out = model.layer1[0](torch.randn(2, 8, 32, 32))
    assert (out < 0).any()


def test_tiny_model_has_one_block_per_stage() -> None:
    model = TASK.build_model(TINY)  # the tiny preset's ResNet-10 v2 (blocks: 1)
    blocks = [m for m in model.modules() if isinstance(m, PreActBlock)]
    assert [b.conv1.stride[0] for b in blocks] == [1, 2, 2, 2]
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


@pytest.mark.parametrize("width", [64, 8])
def test_model_output_shape(width: int) -> None:
    model = TASK.build_model(tiny_spec("cifar10").replace(model={"width": width, "num_classes": 10}))
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert model.fc.in_features == 8 * width
    if width == 64:  # ResNet-18 on CIFAR: ~11.2 M parameters
        assert 11_100_000 < sum(p.numel() for p in model.parameters()) < 11_250_000


class _FixedLogits(nn.Module):
    """Returns given logits batch by batch, whatever the images."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits, self.pos = logits, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.logits[self.pos : self.pos + len(x)]
        self.pos += len(x)
        return out


def test_top1_and_loss_match_independent_computation() -> None:
    g = torch.Generator().manual_seed(0)
    n = 23
    logits = torch.randn(n, 10, generator=g) * 3
    labels = torch.randint(0, 10, (n,), generator=g)
    labels[:8] = logits[:8].argmax(1)  # make some right for sure
    evalset = data.EvalSet(torch.zeros(n, 3, 32, 32, dtype=torch.uint8), labels, LABEL_NAMES)
    cfg = tiny_spec("cifar10", data={"eval_batch_size": 5})  # several batches, last one partial
    out = TASK.evaluate(_FixedLogits(logits), evalset, cfg, torch.device("cpu"))
    z = logits.double().numpy()
    y = labels.numpy()
    top1 = 100.0 * np.mean(np.argmax(z, axis=1) == y)
    logp = z - z.max(1, keepdims=True) - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True))
    assert out["top1"] == pytest.approx(top1)
    assert out["loss"] == pytest.approx(-logp[np.arange(n), y].mean(), rel=1e-5)
    assert 100 * 8 / n <= out["top1"] < 100


def test_cpu_slices_give_the_batchs_logits_bit_for_bit(root: Path, train: data.TrainSet) -> None:
    """The evaluation forward in CPU_SLICE slices equals one pass over the batch (eval mode: BatchNorm's running
    statistics), so eval_stats' metrics are those of eval_batch_size; in train mode BatchNorm reads each slice's
    own statistics and the same comparison differs: it can fail."""
    torch.manual_seed(0)
    model = TASK.build_model(TINY)
    with torch.no_grad():  # running statistics away from their initial values
        model(train.collate([train[(i, i)] for i in range(64)])[0])
    images = data.normalize(TASK.eval_set(TINY, root).images[:250])
    assert len(images) > 2 * CPU_SLICE  # two full slices and a partial one
    with torch.no_grad():
        model.eval()
        assert torch.equal(eval_logits(model, images), model(images))
        model.train()
        assert not torch.equal(eval_logits(model, images), model(images))


def test_presets_complete() -> None:
    """The common keys are checked for every task in test_presets.py; here, the paper's values."""
    paper, tiny = Cifar10.presets["paper"], Cifar10.presets["tiny"]
    assert (paper["T1"], paper["batch_size"], paper["momentum"]) == (39100, 128, 0.9)
    assert paper["scales"] == [1, 8, 16, 32, 64] and paper["lr_schedule"]["kind"] == "exponential"
    assert paper["elastic"]["up"] == [[0.0, 32], [0.25, 64], [0.5, 128]]
    assert tiny["scales"] == [1, 2, 4, 8] and tiny["batch_size"] == 8 and tiny["num_workers"] == 0
    assert tiny["elastic"]["down"] == [[0.0, 8], [0.25, 4], [0.5, 2]]


def test_few_sgd_steps_lower_the_loss(root: Path, train: data.TrainSet) -> None:
    """A plain SGD loop (test-only: the adapter owns none) on augmented tiny batches."""
    torch.manual_seed(0)
    model = TASK.build_model(TINY)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(0)).tolist()
    losses = []
    for step in range(30):
        idx = order[step * 16 : (step + 1) * 16]
        batch = train.collate([train[(i, 1000 * step + j)] for j, i in enumerate(idx)])
        loss = TASK.loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-10:]) < np.mean(losses[:5]) - 0.2  # ~2.3 (chance) falls to ~1.6-1.9
    model.eval()
    with torch.no_grad():
        out = TASK.evaluate(model, TASK.eval_set(TINY, root), TINY, torch.device("cpu"))
    assert 0.0 <= out["top1"] <= 100.0 and np.isfinite(out["loss"])
