"""`prepare yolo`: PASCAL VOC as published (`VOCdevkit/`) into ultralytics' YOLO layout, offline.

The conversion is the one the download script of ultralytics' packaged `VOC.yaml` runs, minus the
download and without moving the source's images:

    <out>/images/{train2012,val2012,train2007,val2007,test2007}/<id>.jpg   hard-linked from JPEGImages/
    <out>/labels/<same>/<id>.txt   one "class cx cy w h" line per object that is not `difficult`,
                                   cx = ((xmin + xmax) / 2 - 1) / width, w = (xmax - xmin) / width, ...
    <out>/VOC.yaml                 train: VOC2007 + VOC2012 train and val (16 551 images),
                                   val: VOC2007 test (4 952 images), names: ultralytics' 20 VOC classes

(the same folders as ultralytics' own `datasets/VOC`, and a YAML with the same splits and names but no
`path`, so the folder can be moved). `source` is the `VOCdevkit/` folder or the folder holding it, with
the VOC2007 trainval and test archives and the VOC2012 trainval archive extracted into it:
`VOC<year>/{Annotations/<id>.xml, JPEGImages/<id>.jpg, ImageSets/Main/{train,val}.txt}` and VOC2007's
`ImageSets/Main/test.txt`. VOC2007 is always required (it holds the validation split); VOC2012 is
required too unless `years=("2007",)` is asked for (training on VOC2007 alone is not the paper's set).

Where this is stricter than ultralytics' script, which would write a label file regardless: an XML with
no <object> at all, or an object whose class is not one of the 20, is a one-line UserError naming the
file. An image whose objects are all `difficult` gets an empty label file, as under ultralytics (a
background image). A missing <difficult> counts as 0, and a missing or zero <size> is read from the
JPEG (ultralytics' script would crash on both). Every value is checked before the set is called
verified, each refusal one line naming the file: every JPEG decoded whole by PIL (`preparing.check_image`:
its size, header and pixel data), a negative <size> or one that is not the decoded image's, and each box
used, which must lie inside the decoded image and not be empty (0 <= xmin < xmax <= width, the same for y:
a 1e308 or a negative coordinate is refused).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from bench.core import safefs
from bench.core.errors import UserError
from bench.core.yamlsafe import load_yaml
from tasks import preparing
from tasks.preparing import finish, folder_bytes, human_bytes, link_or_copy, prepared, safe_id, staged

from . import offline
from .data import read_spec

TASK = "yolo"
YAML_NAME = "VOC.yaml"  # the paper preset's data.yaml
# (year, image set) in the order of ultralytics' VOC.yaml download script; train + val of each year train.
SETS = [("2012", "train"), ("2012", "val"), ("2007", "train"), ("2007", "val"), ("2007", "test")]


def packaged_spec() -> dict[str, Any]:
    """ultralytics' packaged VOC.yaml: its split folders and its 20 class names, in order."""
    offline.ensure()
    from ultralytics.utils import ROOT

    path = ROOT / "cfg" / "datasets" / YAML_NAME
    return load_yaml(safefs.read_text(path, 4 << 20), str(path))  # YAML 1.2, as every YAML the suite reads


MAX_LIST = 64 << 20  # an image set list or an annotation: kB to a few MB


def voc_names() -> list[str]:
    names = packaged_spec()["names"]
    return [names[i] for i in range(len(names))]


def find_devkit(source: Path, years: tuple[str, ...]) -> Path:
    source = Path(source)
    devkit = (
        source if source.name == "VOCdevkit" or not preparing.exists(source / "VOCdevkit") else source / "VOCdevkit"
    )
    missing = [f"VOC{y}" for y in years if not preparing.exists(devkit / f"VOC{y}")]
    if missing:
        raise UserError(
            f"{devkit}: missing {' and '.join(missing)}/; expected VOCdevkit/ with VOC2007 (trainval and test) "
            "and VOC2012 (trainval) extracted into it"
        )
    return devkit


def _number(node: ET.Element, tag: str, xml: Path, what: str = "") -> float:
    """<tag>'s finite number; `what` (e.g. "object 2 (cat) ") names its object in the message."""
    try:
        value = float(node.findtext(tag))
    except (TypeError, ValueError):
        raise UserError(f"{xml}: {what}missing or non-numeric <{tag}>; expected a PASCAL VOC annotation") from None
    if not math.isfinite(value):
        raise UserError(f"{xml}: {what}<{tag}> is {value}; expected a finite number")
    return value


def _pixels(size: ET.Element | None, tag: str, xml: Path) -> int:
    """<width>/<height> in whole pixels ("500" or "500.0"); 0 when absent (then read from the JPEG)."""
    if size is None or not (size.findtext(tag) or "").strip():
        return 0
    value = _number(size, tag, xml)
    if value != int(value) or value < 0:
        raise UserError(f"{xml}: <{tag}> {value} is not a whole, non-negative number of pixels")
    return int(value)


def _image_size(root: ET.Element, xml: Path, image: tuple[int, int]) -> tuple[int, int]:
    """The image's real size (`image`, from the decoded JPEG: what a run sees), which boxes are checked
    against and normalised by; a <size> that says otherwise is refused (the labels would be scaled by a
    size the image does not have). A missing or zero <size> is taken as the image's."""
    size = root.find("size")
    w, h = _pixels(size, "width", xml), _pixels(size, "height", xml)
    if w > 0 and h > 0 and (w, h) != image:
        raise UserError(
            f"{xml}: <size> {w} × {h}, but its image {image[0]} × {image[1]} pixels decoded; damaged annotation"
        )
    return image


def _box(obj: ET.Element, k: int, name: str, xml: Path, w: int, h: int) -> tuple[float, float, float, float]:
    """(xmin, xmax, ymin, ymax) of object `k` (1-based, as in the file), inside the image and not empty:
    VOC's pixels are 1-based, so 0 <= xmin < xmax <= width (a 0 is taken, as some tools write)."""
    box = obj.find("bndbox")
    if box is None:
        raise UserError(f"{xml}: object {k} ({name}) has no <bndbox>; expected a PASCAL VOC annotation")
    xmin, xmax, ymin, ymax = (_number(box, t, xml, f"object {k} ({name}) ") for t in ("xmin", "xmax", "ymin", "ymax"))
    if not (0 <= xmin < xmax <= w and 0 <= ymin < ymax <= h):
        raise UserError(
            f"{xml}: object {k} ({name}) has <bndbox> xmin {xmin:g} ymin {ymin:g} xmax {xmax:g} ymax {ymax:g}; "
            f"expected 0 <= xmin < xmax <= {w} (width) and 0 <= ymin < ymax <= {h} (height)"
        )
    return xmin, xmax, ymin, ymax


def _difficult(obj: ET.Element, xml: Path) -> bool:
    """<difficult> is 0 or 1 (absent: 0), as VOC writes it."""
    text = (obj.findtext("difficult") or "0").strip()
    if text not in ("0", "1"):
        raise UserError(f"{xml}: <difficult> is {text[:40]!r}; expected 0 or 1")
    return text == "1"


def convert(xml: Path, image: tuple[int, int], names: list[str]) -> tuple[list[str], int]:
    """The YOLO label lines of one VOC annotation (ultralytics' VOC.yaml conversion) for an image of
    (width, height) `image`, as decoded, and how many difficult objects were skipped."""
    try:
        with safefs.open_file(xml, "rb", MAX_LIST) as f:
            root = ET.parse(f).getroot()
    except safefs.Refused:
        raise
    except (OSError, ET.ParseError) as e:
        raise UserError(f"{xml}: unreadable XML ({e.__class__.__name__}); expected a PASCAL VOC annotation") from None
    objects = list(root.iter("object"))
    if not objects:
        raise UserError(f"{xml}: no <object> in the annotation; every VOC image is expected to have one")
    w, h = _image_size(root, xml, image)
    lines, difficult = [], 0
    for k, obj in enumerate(objects, 1):
        name = (obj.findtext("name") or "").strip()
        if name not in names:
            raise UserError(f"{xml}: object class {name!r} is not one of the 20 VOC classes ({', '.join(names)})")
        if _difficult(obj, xml):
            difficult += 1
            continue
        xmin, xmax, ymin, ymax = _box(obj, k, name, xml, w, h)
        dw, dh = 1.0 / w, 1.0 / h  # multiplied, not divided, as ultralytics' script: the same floats
        bb = (((xmin + xmax) / 2 - 1) * dw, ((ymin + ymax) / 2 - 1) * dh, (xmax - xmin) * dw, (ymax - ymin) * dh)
        lines.append(" ".join(str(a) for a in (names.index(name), *bb)))
    return lines, difficult


def write_set(devkit: Path, year: str, image_set: str, stage: Path, names: list[str], show: bool) -> dict:
    voc = devkit / f"VOC{year}"
    listing = voc / "ImageSets" / "Main" / f"{image_set}.txt"
    if not preparing.exists(listing):
        raise UserError(f"{listing}: not found; expected the VOC{year} image set list {image_set}.txt")
    try:
        ids = safefs.read_text(listing, MAX_LIST).split()
    except safefs.Refused:
        raise
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{listing}: unreadable ({e.__class__.__name__})") from None
    if not ids:
        raise UserError(f"{listing}: lists no images")
    for i in ids:
        safe_id(i, listing, "image id")  # it names files under --out
    folder = f"{image_set}{year}"
    images, labels = stage / "images" / folder, stage / "labels" / folder
    safefs.mkdirs(labels)
    placed: Counter = Counter()
    boxes = difficult = empty = 0
    for i in preparing.progress(ids, folder) if show else ids:
        jpg, xml = voc / "JPEGImages" / f"{i}.jpg", voc / "Annotations" / f"{i}.xml"
        for f in (jpg, xml):
            if not preparing.exists(f):
                raise UserError(f"{f}: not found; {listing} lists {i}")
            preparing.regular(f)  # a link is refused, never read or placed
        size = preparing.check_image(jpg)  # decoded whole: never a 1 GB "JPEG" of zeros placed as verified
        lines, skipped = convert(xml, size, names)
        safefs.write_text(labels / f"{i}.txt", "".join(line + "\n" for line in lines))
        placed[link_or_copy(jpg, images / jpg.name)] += 1
        boxes, difficult, empty = boxes + len(lines), difficult + skipped, empty + (not lines)
    return {"folder": folder, "images": len(ids), "boxes": boxes, "difficult": difficult, "empty": empty, **placed}


def _years(value: Any) -> tuple[str, ...]:
    """years as given to --set: 2007, "2007,2012", [2007, 2012] or a tuple of strings."""
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, list | tuple) else [value]
    years = tuple(str(y).strip() for y in items)
    bad = [y for y in years if y not in ("2007", "2012")]
    if bad or not years:
        raise UserError(f"prepare yolo: years={value!r}: expected 2007 and/or 2012 (e.g. --set years=2007,2012)")
    return years


@preparing.confining
def prepare(
    source: Path, out: Path, *, progress: bool = True, years: tuple[str, ...] = ("2007", "2012")
) -> dict[str, Any]:
    """Convert `VOCdevkit/` under `source` into ultralytics' YOLO layout and VOC.yaml under `out`, check it
    with the task's own reader, return the summary (the PREPARED.json record when already prepared)."""
    record = prepared(out, TASK)
    if record is not None:
        return record
    years = _years(years)
    if "2007" not in years:
        raise UserError(f"years={years}: VOC2007 is required (its test set is the validation split)")
    devkit = find_devkit(source, years)
    packaged = packaged_spec()
    names = [packaged["names"][i] for i in range(len(packaged["names"]))]
    with staged(out, TASK, source) as stage:
        done = [write_set(devkit, y, s, stage, names, progress) for y, s in SETS if y in years]
        # ultralytics' own split lists (train2012, train2007, val2012, val2007 / test2007), less absent years
        spec = {split: [f for f in packaged[split] if (stage / f).is_dir()] for split in ("train", "val", "test")}
        spec["names"] = dict(enumerate(names))
        safefs.write_text(stage / YAML_NAME, yaml.safe_dump(spec, sort_keys=False))
        read_spec(stage, YAML_NAME, nc=len(names))  # the task's own check of the written layout
        placed = Counter()
        for d in done:
            placed.update({k: d[k] for k in ("hardlink", "symlink", "copy", "exists") if k in d})
        size = folder_bytes(stage)
        summary = {
            "images": {
                "train": sum(d["images"] for d in done if d["folder"] != "test2007"),
                "val": sum(d["images"] for d in done if d["folder"] == "test2007"),
            },
            "folders": {d["folder"]: d["images"] for d in done},
            "boxes": sum(d["boxes"] for d in done),
            "difficult_skipped": sum(d["difficult"] for d in done),
            "background_images": sum(d["empty"] for d in done),
            "classes": len(names),
            "years": list(years),
            "bytes": size,
            "size": human_bytes(size),
            "placed": dict(placed),
            "yaml": YAML_NAME,
            "layout": "images/<set><year>/*.jpg, labels/<set><year>/*.txt, VOC.yaml (ultralytics YOLO)",
        }
        finish(stage, TASK, devkit, summary)
    return prepared(out) or summary
