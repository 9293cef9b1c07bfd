"""Writer of the tiny preset's detection set: coloured shapes in ultralytics' YOLO/VOC layout.

Three classes, each a fixed colour AND shape (red square, green circle, blue triangle), one to three
objects per 64 x 64 JPEG at random positions and sizes (18-32 px, so every object covers at least one
cell centre of the stride-16 grid that ultralytics' assigner draws candidates from), on a grey
background with mild noise. Boxes are the shapes' bounding squares, written as ultralytics expects:
`labels/<split>/<stem>.txt` with "class cx cy w h" normalised lines, plus `shapes.yaml`.
Deterministic: numpy.random.default_rng(0) drives everything.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from bench.core import safefs

CLASSES = ("red_square", "green_circle", "blue_triangle")
COLOURS_BGR = ((40, 40, 220), (40, 200, 40), (220, 60, 40))
IMAGE_SIZE = 64
YAML_NAME = "shapes.yaml"
SPLITS = {"train": 100, "val": 30}


def _draw(img: np.ndarray, cls: int, x0: int, y0: int, size: int, colour: tuple[int, ...]) -> None:
    import cv2  # opencv comes with ultralytics (the yolo extra): imported where drawn, not with the package

    x1, y1 = x0 + size - 1, y0 + size - 1
    if cls == 0:
        cv2.rectangle(img, (x0, y0), (x1, y1), colour, thickness=-1)
    elif cls == 1:
        r = (size - 1) / 2
        cv2.circle(img, (round(x0 + r), round(y0 + r)), int(r), colour, thickness=-1, lineType=cv2.LINE_AA)
    else:
        pts = np.array([[x0, y1], [x1, y1], [round(x0 + (size - 1) / 2), y0]], dtype=np.int32)
        cv2.fillPoly(img, [pts], colour, lineType=cv2.LINE_AA)


def _overlaps(box: tuple[int, int, int], placed: list[tuple[int, int, int]]) -> bool:
    x, y, s = box
    for px, py, ps in placed:
        iw = min(x + s, px + ps) - max(x, px)
        ih = min(y + s, py + ps) - max(y, py)
        if iw > 0 and ih > 0 and iw * ih > 0.1 * min(s, ps) ** 2:
            return True
    return False


def make_image(rng: np.random.Generator) -> tuple[np.ndarray, list[tuple[int, float, float, float, float]]]:
    """One image and its boxes as (class, cx, cy, w, h) normalised to the image size."""
    n = IMAGE_SIZE
    img = np.full((n, n, 3), rng.integers(90, 170), dtype=np.int16)
    img += rng.integers(-12, 13, size=(n, n, 3), dtype=np.int16)
    img = img.clip(0, 255).astype(np.uint8)
    placed: list[tuple[int, int, int]] = []
    boxes = []
    for _ in range(int(rng.integers(1, 4))):
        cls = int(rng.integers(len(CLASSES)))
        for _try in range(20):
            size = int(rng.integers(18, 33))
            x0, y0 = (int(v) for v in rng.integers(0, n - size + 1, size=2))
            if not _overlaps((x0, y0, size), placed):
                break
        else:
            continue
        placed.append((x0, y0, size))
        colour = tuple(int(np.clip(c + rng.integers(-25, 26), 0, 255)) for c in COLOURS_BGR[cls])
        _draw(img, cls, x0, y0, size, colour)
        boxes.append((cls, (x0 + size / 2) / n, (y0 + size / 2) / n, size / n, size / n))
    return img, boxes


def write_tiny(root: Path) -> None:
    """Write images/{train,val}, labels/{train,val} and shapes.yaml under `root`."""
    import cv2

    root = Path(root).resolve()
    rng = np.random.default_rng(0)
    for split, count in SPLITS.items():
        images, labels = root / "images" / split, root / "labels" / split
        safefs.mkdirs(images)
        safefs.mkdirs(labels)
        for i in range(count):
            img, boxes = make_image(rng)
            stem = f"{split}_{i:04d}"
            ok, jpg = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 95])
            if not ok:
                raise OSError(f"could not encode {images / f'{stem}.jpg'}")
            safefs.write_bytes(images / f"{stem}.jpg", jpg.tobytes())  # a data root may be shared: no link followed
            lines = "".join(f"{c} {cx:.6f} {cy:.6f} {w:.6f} {h:.6f}\n" for c, cx, cy, w, h in boxes)
            safefs.write_text(labels / f"{stem}.txt", lines)
    # No `path` key: ultralytics then takes the YAML's own folder, so the set stays valid when moved
    # (the engine writes it into a temporary folder and renames that into place).
    spec = {
        "train": "images/train",
        "val": "images/val",
        "names": dict(enumerate(CLASSES)),
    }
    safefs.write_text(root / YAML_NAME, yaml.safe_dump(spec, sort_keys=False))
