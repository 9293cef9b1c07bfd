"""Writer of the tiny CIFAR-10: a small, learnable data set in the real `cifar-10-batches-py` format.

Each class is a template — its own colour and its own low-frequency grating (orientation and spatial
frequency) — drawn with a random phase (random placement), random contrast, colour jitter and pixel
noise. A small CNN separates the classes within ~100 iterations, but not at once: colours overlap and
noise is strong, so the loss falls gradually and the gradient has real noise (what AdaScale measures).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from bench.core import safefs
from bench.core.errors import UserError
from bench.core.files import read_json_object, write_json

from .data import BASE_FOLDER, META_FILE, TEST_FILES, TRAIN_FILES

TINY_MARK = "tiny.json"  # beside the CIFAR folder: the settings a tiny set was written with
# The real CIFAR-10 class names, so reports read the same for tiny and paper runs.
LABEL_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
TRAIN_SIZE = 1000  # 200 in each of the 5 data_batch files; data.tiny_train_size writes another (a multiple of 50)
TRAIN_PER_BATCH = TRAIN_SIZE // 5
TEST_SIZE = 300  # the default tiny set's; data.tiny_test_size writes another (the positive control's is larger)
MAX_TEST_SIZE = 50_000  # 150 MB of pixels at most
SIZE = 32


def _images(rng: np.random.Generator, labels: np.ndarray, colours: np.ndarray, noise: float = 1.0) -> np.ndarray:
    """(N, 3, 32, 32) uint8 images for `labels`, drawn from the class templates; `noise` multiplies the
    colour jitter and the pixel noise (the same random draws, so noise = 1 is the default set bit for bit)."""
    n = len(labels)
    k = len(colours)
    yy, xx = np.meshgrid(np.arange(SIZE), np.arange(SIZE), indexing="ij")
    angle = np.pi * labels / k  # orientation: one per class, spread over half a turn
    freq = 2 * np.pi * (1.5 + (labels % 3)) / SIZE  # 1.5, 2.5 or 3.5 periods across the image
    phase = rng.uniform(0, 2 * np.pi, n)  # random placement of the pattern
    proj = np.cos(angle)[:, None, None] * xx + np.sin(angle)[:, None, None] * yy
    grating = np.sin(freq[:, None, None] * proj + phase[:, None, None])  # (N, 32, 32) in [-1, 1]
    contrast = rng.uniform(40, 80, n)[:, None, None, None]
    colour = colours[labels] + rng.normal(0, 25 * noise, (n, 3))  # class colour with jitter
    tint = np.array([1.0, 0.8, 0.6])[None, :, None, None]  # the pattern is strongest in red
    img = colour[:, :, None, None] + contrast * grating[:, None] * tint
    img += rng.normal(0, 30 * noise, img.shape)  # pixel noise
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def _dump(obj: dict, path: Path) -> None:
    """Pickle atomically (protocol 2, as the official Python 2 files) through bench.core.safefs: concurrent
    writers are safe, and a link planted at the path is replaced, not followed."""
    safefs.write_bytes(path, pickle.dumps(obj, protocol=2))


def write_tiny(root: Path, noise: float = 1.0, test_size: int = TEST_SIZE, train_size: int = TRAIN_SIZE) -> Path:
    """Write `root/cifar-10-batches-py/` (data_batch_1..5, test_batch, batches.meta); return the folder.

    Deterministic (numpy default_rng(0)): 10 classes, `train_size` (1000) training and `test_size` (300) test
    images, balanced. `noise` (the spec's data.tiny_noise) scales the colour jitter and pixel noise: the
    difficulty knob of the positive control, which needs a set that S = 1 does not saturate. `train_size`
    (data.tiny_train_size): 1000 images, seen 16 times by a T1 = 2000, b = 8 run, are learnt by heart in its
    last quarter, and its test score then swings by points from seed to seed (tiny_noise 2: 95.98 → 94.16 and
    95.28 → 92.00 from τ = 1500 to 2000). `test_size` (data.tiny_test_size) is how finely the test split
    resolves top-1: one model's score on n images has a sampling error of 100·sqrt(p(1 − p)/n) points (1.7 at
    p = 0.9, n = 300), which a non-inferiority margin must exceed twice over (docs/design.md §5). The test
    images are drawn after the training ones, so the training set is the same bytes whatever the test size."""
    rng = np.random.default_rng(0)
    k = len(LABEL_NAMES)
    colours = rng.uniform(70, 185, (k, 3))
    folder = Path(root) / BASE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for key, value, least in (("tiny_train_size", train_size, 50), ("tiny_test_size", test_size, 10)):
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_TEST_SIZE:
            raise UserError(f"data.{key} = {value!r}: expected a whole number of images, {least} … {MAX_TEST_SIZE}")
    if train_size % 50:
        raise UserError(f"data.tiny_train_size = {train_size}: expected a multiple of 50 (5 batches × 10 classes)")
    per_batch = train_size // len(TRAIN_FILES)
    splits = [(name, per_batch, f"training batch {i + 1} of {len(TRAIN_FILES)}") for i, name in enumerate(TRAIN_FILES)]
    splits += [(TEST_FILES[0], test_size, "testing batch 1 of 1")]
    for name, n, batch_label in splits:
        labels = rng.permutation(np.arange(n) % k)
        data = _images(rng, labels, colours, noise).reshape(n, 3 * SIZE * SIZE)  # R, G, B planes, row-major
        entry = {
            "batch_label": batch_label,
            "labels": [int(v) for v in labels],
            "data": data,
            "filenames": [f"tiny_{LABEL_NAMES[v]}_{name}_{i:04d}.png" for i, v in enumerate(labels)],
        }
        _dump(entry, folder / name)
    _dump(
        {"label_names": LABEL_NAMES, "num_cases_per_batch": per_batch, "num_vis": 3 * SIZE * SIZE},
        folder / META_FILE,
    )
    write_json(
        Path(root) / TINY_MARK, {"tiny_noise": noise, "tiny_test_size": test_size, "tiny_train_size": train_size}
    )
    return folder


# data key -> its value in a set without the mark
TINY_KEYS = {"tiny_noise": 1.0, "tiny_test_size": TEST_SIZE, "tiny_train_size": TRAIN_SIZE}


def check_tiny(root: Path, data: dict) -> None:
    """A tiny set written with other settings (data.tiny_noise, tiny_test_size, tiny_train_size) than the spec's
    is another data set: refuse it. A root without the mark (the real CIFAR-10, or a tiny set written before the knobs)
    is the default set; a key the spec does not carry (a paper preset, an older spec) is not checked."""
    keys = {k: data[k] for k in TINY_KEYS if data.get(k) is not None}
    if not keys:
        return
    path = root / TINY_MARK
    mark = read_json_object(path) if path.exists() else {}
    for key, wanted in keys.items():
        written = (mark or {}).get(key, TINY_KEYS[key]) if mark is not None else None
        if isinstance(written, bool) or not isinstance(written, int | float):
            raise UserError(f'{path}: damaged (expected {{"{key}": <number>}}); delete the data root to rewrite it')
        if written != float(wanted):
            raise UserError(
                f"{root} holds tiny CIFAR-10 data written with {key} = {written:g}, the run asks for {wanted:g}: "
                "use another data root (the default one is per setting)"
            )
