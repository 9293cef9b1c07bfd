"""Writer of the tiny ImageNet-style dataset: real JPEG files in ImageFolder's `train/` `val/` layout.

Each class has its own colour (the whole image is tinted, so even a small RandomResizedCrop keeps
the cue) and its own pattern drawn at a random position or phase (disk, square, horizontal stripes,
vertical stripes, checkerboard), with per-image colour jitter and pixel noise. A tiny ResNet learns it
well above chance (20 %) within ~100 iterations of 16 images, so the tiny run's metric moves.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from bench.core import safefs

CLASSES = ("checker", "disk", "hstripes", "square", "vstripes")  # sorted: ImageFolder's label order
TRAIN_PER_CLASS = 60
VAL_PER_CLASS = 20
IMAGE_SIZE = 40

# Strong class colours (RGB) for the pattern; the background is a faded version of the same colour.
_COLOURS = {
    "checker": (200, 60, 200),
    "disk": (220, 50, 40),
    "hstripes": (40, 90, 220),
    "square": (40, 190, 60),
    "vstripes": (220, 200, 40),
}


def _pattern(name: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """Boolean (n, n) mask of the class's shape or texture, at a random position / phase / scale."""
    yy, xx = np.mgrid[0:n, 0:n]
    if name == "disk":
        r = rng.uniform(9, 15)
        cy, cx = rng.uniform(r, n - r, size=2)
        return (yy - cy) ** 2 + (xx - cx) ** 2 <= r**2
    if name == "square":
        side = int(rng.integers(14, 26))
        y0, x0 = rng.integers(0, n - side + 1, size=2)
        return (yy >= y0) & (yy < y0 + side) & (xx >= x0) & (xx < x0 + side)
    if name in ("hstripes", "vstripes"):
        period = int(rng.integers(6, 11))
        coord = yy if name == "hstripes" else xx
        return ((coord + int(rng.integers(0, period))) % period) < period // 2
    if name == "checker":
        cell = int(rng.integers(4, 8))
        oy, ox = rng.integers(0, cell, size=2)
        return (((yy + oy) // cell + (xx + ox) // cell) % 2) == 0
    raise ValueError(f"unknown tiny class {name!r}")


def _image(name: str, rng: np.random.Generator) -> Image.Image:
    colour = np.clip(np.array(_COLOURS[name], dtype=np.float64) + rng.normal(0, 50, size=3), 0, 255)
    background = 0.2 * colour + 0.8 * rng.uniform(60, 190)
    img = np.empty((IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.float64)
    img[:] = background
    img[_pattern(name, rng, IMAGE_SIZE)] = colour
    img += rng.normal(0, 20, size=img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), mode="RGB")


def write_tiny(root: Path) -> None:
    """Write `root/{train,val}/<class>/<class>_<i>.JPEG`, deterministically (numpy default_rng(0))."""
    root = Path(root)
    rng = np.random.default_rng(0)
    for split, count in (("train", TRAIN_PER_CLASS), ("val", VAL_PER_CLASS)):
        for name in CLASSES:
            folder = root / split / name
            for i in range(count):
                # ".JPEG" as in ImageNet's own file names; ImageFolder matches extensions case-blind.
                buf = io.BytesIO()
                _image(name, rng).save(buf, format="JPEG", quality=90)
                safefs.write_bytes(folder / f"{name}_{i:04d}.JPEG", buf.getbuffer())  # no link followed
