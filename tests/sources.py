"""Datasets in their publishers' own forms, written small, for the tests of `prepare` and the rehearsal.

One home for every source writer the tests share (tests/tasks/test_prepare_*.py, tests/slurm/
test_rehearse_paper.py): the CIFAR-10 python tarball, the ILSVRC2012 train tar of class tars with the
flat val tar and the devkit (and Kaggle's layout), raw WMT-style text, LibriSpeech's openslr tarballs of
FLAC and transcripts, and PASCAL VOC's VOCdevkit (as its three tarballs extract, or the tarballs).
Contents are synthetic but learnable (a class's colour, a word's tones); sizes, names and layouts are the
published ones.
"""

from __future__ import annotations

import io
import pickle
import tarfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.io
import soundfile as sf
from PIL import Image


def tar_add(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    tar.addfile(info, io.BytesIO(payload))


def jpeg(index: int, seed: int, sizes: Sequence[tuple[int, int]] = ((40, 40),)) -> bytes:
    """A JPEG whose colour says its class (so a short run has something to learn), of the size
    sizes[seed % len(sizes)] (width, height)."""
    rng = np.random.default_rng(seed)
    w, h = sizes[seed % len(sizes)]
    base = np.array([(50 * index) % 256, (90 * index + 60) % 256, (170 * index + 30) % 256], dtype=float)
    pixels = np.clip(base + rng.normal(0, 20, (h, w, 3)), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


# --- CIFAR-10 ------------------------------------------------------------------------------------------


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


# --- ILSVRC2012 ----------------------------------------------------------------------------------------

# ILSVRC2012_IDs are not in wnid order in the real devkit either; the last synset is an inner node.
SYNSETS = [(1, "n02119789"), (2, "n01440764"), (3, "n04592741"), (4, "n01443537"), (5, "n03000134")]
TRAIN_PER_CLASS, VAL_PER_CLASS = 8, 3
IMAGENET_SIZES = ((500, 375), (500, 333), (375, 500))  # ILSVRC2012's most common image sizes


def val_truth(n: int = len(SYNSETS) * VAL_PER_CLASS) -> list[int]:
    """ILSVRC2012_ID of validation image 1..n: every class VAL_PER_CLASS times, shuffled."""
    return [int(v) for v in np.random.default_rng(1).permutation([i for i, _ in SYNSETS] * VAL_PER_CLASS)[:n]]


def write_devkit(path: Path, truth: list[int]) -> None:
    """ILSVRC2012_devkit_t12.tar.gz: data/meta.mat (a `synsets` struct array, as the devkit's) and the
    validation ground truth (line i: the ILSVRC2012_ID of ILSVRC2012_val_<i>.JPEG)."""
    fields = ["ILSVRC2012_ID", "WNID", "words", "gloss", "num_children", "children", "wordnet_height"]
    rows = [(i, w, f"class {w}", "", 0, np.zeros(0), 0) for i, w in SYNSETS]
    rows.append((len(SYNSETS) + 1, "n00001740", "entity", "", len(SYNSETS), np.arange(1, len(SYNSETS) + 1), 9))
    mat = io.BytesIO()
    scipy.io.savemat(mat, {"synsets": np.array(rows, dtype=[(f, "O") for f in fields])})
    with tarfile.open(path, "w:gz") as tar:
        tar_add(tar, "ILSVRC2012_devkit_t12/data/meta.mat", mat.getvalue())
        tar_add(
            tar,
            "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt",
            "".join(f"{i}\n" for i in truth).encode(),
        )


def write_imagenet_archives(
    src: Path, per_class: int = TRAIN_PER_CLASS, sizes: Sequence[tuple[int, int]] = ((40, 40),)
) -> list[int]:
    """The three files as published: train tar of per-class tars, flat val tar, devkit. Returns the truth."""
    src.mkdir(parents=True)
    with tarfile.open(src / "ILSVRC2012_img_train.tar", "w") as outer:
        for k, (_, wnid) in enumerate(SYNSETS):
            inner = io.BytesIO()
            with tarfile.open(fileobj=inner, mode="w") as tar:
                for j in range(per_class):
                    tar_add(tar, f"{wnid}_{j + 1}.JPEG", jpeg(k, 100 * k + j, sizes))
            tar_add(outer, f"{wnid}.tar", inner.getvalue())
    truth = val_truth()
    with tarfile.open(src / "ILSVRC2012_img_val.tar", "w") as tar:
        for i, cls in enumerate(truth, start=1):
            tar_add(tar, f"ILSVRC2012_val_{i:08d}.JPEG", jpeg(cls - 1, 10_000 + i, sizes))
    write_devkit(src / "ILSVRC2012_devkit_t12.tar.gz", truth)
    return truth


def write_imagenet_kaggle(src: Path, truth: list[int], classes=SYNSETS) -> None:
    """Kaggle's layout: ILSVRC/Data/CLS-LOC/{train/<wnid>/,val/} and LOC_val_solution.csv."""
    wnid = dict(SYNSETS)
    base = src / "ILSVRC" / "Data" / "CLS-LOC"
    for k, (_, w) in enumerate(classes):
        (base / "train" / w).mkdir(parents=True)
        for j in range(TRAIN_PER_CLASS):
            (base / "train" / w / f"{w}_{j + 1}.JPEG").write_bytes(jpeg(k, 100 * k + j))
    (base / "val").mkdir(parents=True)
    rows = ["ImageId,PredictionString"]
    for i, cls in enumerate(truth, start=1):
        (base / "val" / f"ILSVRC2012_val_{i:08d}.JPEG").write_bytes(jpeg(cls - 1, 10_000 + i))
        rows.append(f"ILSVRC2012_val_{i:08d},{wnid[cls]} 1 2 30 35 {wnid[cls]} 4 4 20 20")
    (src / "LOC_val_solution.csv").write_text("\n".join(rows) + "\n")


# --- WMT -----------------------------------------------------------------------------------------------


def wmt_raw(root: Path) -> None:
    """Raw WMT14-style parallel text (the toy corpus): train.{en,de}, newstest2013.* and newstest2014.*."""
    from tasks.transformer.tiny import tiny_pairs, write_raw

    write_raw(root, tiny_pairs(0))
    for split, name in (("valid", "newstest2013"), ("test", "newstest2014")):
        for lang in ("en", "de"):
            (root / f"{split}.{lang}").rename(root / f"{name}.{lang}")


# --- LibriSpeech ---------------------------------------------------------------------------------------

LIBRI_RATE = 16_000  # LibriSpeech: 16 kHz mono FLAC, 16-bit
LIBRI_WORDS = tuple(
    "AND THE OF TO A IN HE THAT WAS IT HIS I WITH HAD AS YOU FOR HER BUT IS NOT SHE AT ON BE BY HIM WHICH SAID "
    "ALL SO WERE ONE THEY HAVE FROM THIS MY AN THERE OR WHEN WOULD WHAT IF ARE NO THEM COULD MAN DON'T".split()
)
CHARS_PER_S = 15.0  # about LibriSpeech's speaking rate


def _speechlike(seconds: float, rng: np.random.Generator, rate: int) -> np.ndarray:
    """`seconds` of a voiced-sounding signal: a wandering fundamental with harmonics, syllable-rate
    amplitude modulation and background noise, in [-1, 1]."""
    n = round(seconds * rate)
    t = np.arange(n) / rate
    f0 = rng.uniform(90, 220) * (1 + 0.1 * np.sin(2 * np.pi * rng.uniform(0.3, 1.0) * t))
    phase = 2 * np.pi * np.cumsum(f0) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
    syllables = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(3, 5) * t + rng.uniform(0, 2 * np.pi))
    audio = 0.2 * voiced * syllables + rng.normal(0.0, 0.01, n)
    return np.clip(audio, -1.0, 1.0).astype(np.float32)


def _sentence(seconds: float, rng: np.random.Generator) -> str:
    """Words of LIBRI_WORDS adding up to about CHARS_PER_S characters a second (at least one word)."""
    words: list[str] = []
    while not words or len(" ".join(words)) < CHARS_PER_S * seconds - 4:
        words.append(str(rng.choice(LIBRI_WORDS)))
    return " ".join(words)


def write_librispeech_split(
    root: Path, split: str, chapters: Sequence[tuple[int, int]], durations: Sequence[float], seed: int = 0
) -> None:
    """<root>/LibriSpeech/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac (16 kHz mono,
    16-bit) and <speaker>-<chapter>.trans.txt, one utterance per duration (seconds) in every chapter."""
    rng = np.random.default_rng(seed)
    for speaker, chapter in chapters:
        folder = root / "LibriSpeech" / split / str(speaker) / str(chapter)
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for utt, seconds in enumerate(durations):
            uid = f"{speaker}-{chapter}-{utt:04d}"
            sf.write(str(folder / f"{uid}.flac"), _speechlike(seconds, rng, LIBRI_RATE), LIBRI_RATE, subtype="PCM_16")
            lines.append(f"{uid} {_sentence(seconds, rng)}\n")
        (folder / f"{speaker}-{chapter}.trans.txt").write_text("".join(lines), encoding="utf-8")


def librispeech_tarballs(dest: Path, splits: dict[str, tuple[Sequence[tuple[int, int]], Sequence[float]]]) -> Path:
    """openslr's <split>.tar.gz, each holding LibriSpeech/<split>/..., in `dest`; splits maps a split to
    its (speaker, chapter) pairs and its utterances' durations in seconds. Returns `dest`."""
    staging = dest / ".staging"
    dest.mkdir(parents=True, exist_ok=True)
    for seed, (split, (chapters, durations)) in enumerate(splits.items()):
        write_librispeech_split(staging, split, chapters, durations, seed)
        with tarfile.open(dest / f"{split}.tar.gz", "w:gz") as tar:
            tar.add(staging / "LibriSpeech" / split, arcname=f"LibriSpeech/{split}")
    import shutil

    shutil.rmtree(staging)
    return dest


# --- PASCAL VOC ----------------------------------------------------------------------------------------

VOC_CLASSES = {"cat": (200, 60, 40), "dog": (40, 180, 60), "person": (40, 60, 220)}
VOC_SETS = {"2007": {"train": 4, "val": 4, "test": 6}, "2012": {"train": 4, "val": 4}}
VOC_SIZE = (500, 375)  # PASCAL VOC's most common image size (width, height)
# The three archives the VOC2007 + 2012 detection set comes in, and the image sets each holds.
VOC_TARBALLS = {
    "VOCtrainval_06-Nov-2007.tar": ("2007", ("train", "val")),
    "VOCtest_06-Nov-2007.tar": ("2007", ("test",)),
    "VOCtrainval_11-May-2012.tar": ("2012", ("train", "val")),
}


def voc_xml(stem: str, w: int, h: int, objects: list[tuple[str, int, int, int, int, int]]) -> str:
    """A PASCAL VOC annotation; objects are (name, difficult, xmin, ymin, xmax, ymax), 1-based pixels."""
    objs = "".join(
        f"<object><name>{n}</name><pose>Unspecified</pose><truncated>0</truncated><difficult>{d}</difficult>"
        f"<bndbox><xmin>{x0}</xmin><ymin>{y0}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object>"
        for n, d, x0, y0, x1, y1 in objects
    )
    return (
        f"<annotation><folder>VOC</folder><filename>{stem}.jpg</filename>"
        f"<size><width>{w}</width><height>{h}</height><depth>3</depth></size><segmented>0</segmented>{objs}</annotation>"
    )


def write_vocdevkit(
    root: Path, years=("2007", "2012"), size: tuple[int, int] = (64, 48), sets: dict = VOC_SETS
) -> Path:
    """VOCdevkit/VOC<year>/{Annotations,JPEGImages,ImageSets/Main} with coloured boxes on grey JPEGs of
    `size` (width, height); the boxes are laid out on a 64×48 grid scaled to it."""
    rng = np.random.default_rng(0)
    names = list(VOC_CLASSES)
    w, h = size
    sx, sy = w / 64, h / 48
    for year in years:
        voc = root / "VOCdevkit" / f"VOC{year}"
        for sub in ("Annotations", "JPEGImages", "ImageSets/Main"):
            (voc / sub).mkdir(parents=True)
        k = 0
        for image_set, n in sets[year].items():
            ids = []
            for _ in range(n):
                k += 1
                stem = f"{k:06d}" if year == "2007" else f"2008_{k:06d}"
                img = np.full((h, w, 3), 128, dtype=np.uint8)
                objects = []
                for j in range(int(rng.integers(1, 3))):
                    name = names[int(rng.integers(len(names)))]
                    x0, y0 = 1 + 32 * j + int(rng.integers(0, 6)), 1 + int(rng.integers(0, 20))
                    x1, y1 = x0 + int(rng.integers(16, 26)), y0 + int(rng.integers(16, 26))
                    x0, x1 = (1 + round((v - 1) * sx) for v in (x0, x1))
                    y0, y1 = (1 + round((v - 1) * sy) for v in (y0, y1))
                    img[y0 - 1 : y1, x0 - 1 : x1] = VOC_CLASSES[name]
                    objects.append((name, int(k % 5 == 0 and j == 0), x0, y0, x1, y1))
                Image.fromarray(img).save(voc / "JPEGImages" / f"{stem}.jpg", quality=90)
                (voc / "Annotations" / f"{stem}.xml").write_text(voc_xml(stem, w, h, objects))
                ids.append(stem)
            (voc / "ImageSets" / "Main" / f"{image_set}.txt").write_text("".join(i + "\n" for i in ids))
        main = voc / "ImageSets" / "Main"
        (main / "trainval.txt").write_text((main / "train.txt").read_text() + (main / "val.txt").read_text())
    return root / "VOCdevkit"


def voc_tarballs(dest: Path, size: tuple[int, int] = VOC_SIZE, sets: dict = VOC_SETS) -> Path:
    """The three VOC archives (VOC_TARBALLS) in `dest`, each holding VOCdevkit/VOC<year>/ with the
    Annotations, JPEGImages and ImageSets/Main lists of its image sets (trainval.txt in the trainval
    ones), as published. Returns `dest`."""
    import shutil

    staging = dest / ".staging"
    devkit = write_vocdevkit(staging, size=size, sets=sets)
    for name, (year, image_sets) in VOC_TARBALLS.items():
        voc = devkit / f"VOC{year}"
        lists = [*image_sets, "trainval"] if "train" in image_sets else list(image_sets)
        with tarfile.open(dest / name, "w") as tar:
            for image_set in image_sets:
                for stem in (voc / "ImageSets" / "Main" / f"{image_set}.txt").read_text().split():
                    for sub, ext in (("Annotations", "xml"), ("JPEGImages", "jpg")):
                        tar.add(voc / sub / f"{stem}.{ext}", arcname=f"VOCdevkit/VOC{year}/{sub}/{stem}.{ext}")
            for image_set in lists:
                rel = f"ImageSets/Main/{image_set}.txt"
                tar.add(voc / rel, arcname=f"VOCdevkit/VOC{year}/{rel}")
    shutil.rmtree(staging)
    return dest
