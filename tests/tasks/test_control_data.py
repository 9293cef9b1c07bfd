"""The positive control's data knobs: logreg's data.conditioning and tiny cifar10's data.tiny_noise leave the
default data untouched, change it when set, and a changed data set never shares a folder with another."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import numpy as np
import pytest

from bench.core.errors import UserError
from bench.run.spec import resolve
from tasks.cifar10 import Cifar10
from tasks.cifar10.tiny import TINY_MARK, write_tiny
from tasks.logreg import LogReg, conditioning_of, dataset
from tasks.presets import card
from tests.helpers import tiny_spec

CIFAR = Cifar10()
TINY = tiny_spec("cifar10")


def test_logreg_default_is_the_textbook_data() -> None:
    x, y = dataset()
    x1, y1 = dataset(1.0)
    assert np.array_equal(x, x1) and np.array_equal(y, y1)
    rng = np.random.default_rng(7)  # the textbook's recipe, drawn again
    assert np.array_equal(x, rng.standard_normal(x.shape))


def test_logreg_conditioning_spreads_feature_scales() -> None:
    x, y = dataset()
    xk, yk = dataset(10.0)
    assert np.array_equal(y, yk)  # labels drawn before the rescaling: the same problem, other units
    scales = xk.std(axis=0) / x.std(axis=0)
    assert scales[0] == pytest.approx(1.0) and scales[-1] == pytest.approx(0.1)
    cond = [np.linalg.cond(a.T @ a) for a in (x, xk)]
    assert cond[1] > 50 * cond[0]  # ~κ² more ill-conditioned
    assert conditioning_of(tiny_spec("logreg").replace(data={})) == 1.0  # a spec from before the knob
    with pytest.raises(UserError, match="conditioning"):
        conditioning_of(tiny_spec("logreg", data={"conditioning": 0.5}))
    assert LogReg().train_set(tiny_spec("logreg", data={"conditioning": 10.0}), Path()).x.shape == xk.shape


def test_cifar10_default_noise_writes_the_same_bytes(tmp_path: Path) -> None:
    folder = write_tiny(tmp_path)
    # data_batch_1 as written before the knob existed
    assert hashlib.md5((folder / "data_batch_1").read_bytes()).hexdigest() == "18c85e7ac815901484c1aaf2ed1a4f63"


def _images(folder: Path) -> tuple[np.ndarray, list[int]]:
    with open(folder / "data_batch_1", "rb") as f:
        entry = pickle.load(f, encoding="latin1")
    return entry["data"].astype(float), entry["labels"]


def test_cifar10_noise_is_another_data_set(tmp_path: Path) -> None:
    a, la = _images(write_tiny(tmp_path / "a"))
    b, lb = _images(write_tiny(tmp_path / "b", 4.0))
    assert la == lb and not np.array_equal(a, b)
    assert np.abs(np.diff(b, axis=1)).mean() > 2 * np.abs(np.diff(a, axis=1)).mean()  # much noisier pixels
    CIFAR.check_data(tmp_path / "b", tiny_spec("cifar10", data={"tiny_noise": 4.0}))
    with pytest.raises(UserError, match="tiny_noise = 4") as e:
        CIFAR.check_data(tmp_path / "b", TINY)  # the default run must not read the harder set
    assert "\n" not in str(e.value)
    (tmp_path / "b" / TINY_MARK).write_text("{not json")
    with pytest.raises(UserError, match="damaged"):
        CIFAR.check_data(tmp_path / "b", TINY)
    (tmp_path / "a" / TINY_MARK).unlink()  # a set without the mark (written before the knob) is the default one
    CIFAR.check_data(tmp_path / "a", TINY)
    with pytest.raises(UserError):
        CIFAR.check_data(tmp_path / "a", tiny_spec("cifar10", data={"tiny_noise": 4.0}))


def test_each_tiny_noise_has_its_own_default_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASCALE_BENCH_DATA", str(tmp_path))
    c = card("cifar10")
    default = resolve(c, "adascale", 1, 0, "tiny").data_root
    harder = resolve(c, "adascale", 1, 0, "tiny", overrides={"data.tiny_noise": 4.0}).data_root
    same = resolve(c, "adascale", 1, 0, "tiny", overrides={"data.tiny_noise": 1.0}).data_root
    assert default == same == str(tmp_path / "cifar10")
    assert harder == str(tmp_path / "cifar10,tiny_noise=4.0")


def test_cifar10_test_size_is_another_data_set_with_the_same_training_bytes(tmp_path: Path) -> None:
    """data.tiny_test_size: the control's larger test split (its margin needs one seed's sampling error below
    half a point); the training batches are drawn first, so they stay the same bytes."""
    small, big = write_tiny(tmp_path / "a"), write_tiny(tmp_path / "b", 1.0, 2000)
    assert (small / "data_batch_1").read_bytes() == (big / "data_batch_1").read_bytes()
    with open(big / "test_batch", "rb") as f:
        assert len(pickle.load(f, encoding="latin1")["labels"]) == 2000
    wants = tiny_spec("cifar10", data={"tiny_test_size": 2000})
    CIFAR.check_data(tmp_path / "b", wants)
    with pytest.raises(UserError, match="tiny_test_size = 300, the run asks for 2000"):
        CIFAR.check_data(tmp_path / "a", wants)
    with pytest.raises(UserError, match="tiny_test_size"):
        write_tiny(tmp_path / "c", 1.0, 5)
    c = card("cifar10")
    root = resolve(c, "adascale", 1, 0, "tiny", overrides={"data.tiny_test_size": 5000}).data_root
    assert root.endswith("cifar10,tiny_test_size=5000")
