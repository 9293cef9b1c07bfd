"""`prepare` for cifar10, imagenet and yolo: tiny inputs in each publisher's own format (archives, devkit,
VOCdevkit) -> the layout the task reads, checked, idempotent, trainable; bad sources -> one-line UserErrors
that leave nothing behind."""

from __future__ import annotations

import hashlib
import os
import tarfile
from pathlib import Path

import pytest
import yaml
from torchvision.datasets import CIFAR10

from bench.core.errors import UserError
from bench.run.runner import run_spec
from bench.run.spec import resolve
from tasks import get_task
from tasks.cifar10.prepare import prepare as prepare_cifar10
from tasks.cifar10.tiny import write_tiny as write_tiny_cifar
from tasks.imagenet.prepare import prepare as prepare_imagenet
from tasks.preparing import SOURCE
from tasks.yolo.prepare import prepare as prepare_yolo
from tests.sources import (
    SYNSETS,
    TRAIN_PER_CLASS,
    VOC_SETS,
    jpeg,
    val_truth,
    voc_xml,
    write_devkit,
    write_imagenet_archives,
    write_imagenet_kaggle,
    write_vocdevkit,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def fails(fn, *args, **kwargs) -> str:
    """The message of the UserError `fn` raises: one line."""
    with pytest.raises(UserError) as e:
        fn(*args, **kwargs)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


def nothing_left(out: Path) -> None:
    assert not out.exists()
    assert not (out.parent / f".{out.name}.partial").exists()


def snapshot(root: Path) -> dict[str, int]:
    """Every file under `root` with its modification time in ns: a re-run must leave all untouched."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))}


def idempotent(prepare, source: Path, out: Path, first: dict, **kwargs) -> None:
    before = snapshot(out)
    assert prepare(source, out, progress=False, **kwargs) == first
    assert snapshot(out) == before
    assert not (out.parent / f".{out.name}.partial").exists()


def short_run(task: str, data_root: Path, runs: Path, **overrides) -> dict:
    """A few iterations of the task's tiny preset through the engine, reading `data_root`."""
    spec = resolve(get_task(task), "adascale", 2, 0, "tiny", data_root=data_root, overrides=overrides)
    summary = run_spec(spec, runs, progress=False)
    assert summary["status"] == "completed", summary
    return summary


# --- cifar10 -------------------------------------------------------------------------------------------


def cifar_archive(tmp: Path, drop: str | None = None) -> Path:
    """A cifar-10-python.tar.gz of the tiny pickles (optionally without one file), as the official one."""
    folder = write_tiny_cifar(tmp / "pickles")
    archive = tmp / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for f in sorted(folder.iterdir()):
            if f.name != drop:
                tar.add(f, arcname=f"cifar-10-batches-py/{f.name}")
    return archive


def test_cifar10_from_archive_is_torchvision_layout_idempotent_and_trains(tmp_path: Path) -> None:
    archive = cifar_archive(tmp_path)
    out = tmp_path / "out"
    summary = prepare_cifar10(archive, out, progress=False, verify_md5=False)
    assert summary["images"] == {"train": 1000, "test": 300} and summary["classes"] == 10
    assert summary["placed"] == {"extracted": 7} and summary["task"] == "cifar10"
    assert summary["bytes"] > 1000 * 3072
    folder = out / "cifar-10-batches-py"
    assert sorted(p.name for p in out.iterdir()) == ["PREPARED.json", "cifar-10-batches-py"]
    for f in (tmp_path / "pickles" / "cifar-10-batches-py").iterdir():
        assert (folder / f.name).read_bytes() == f.read_bytes()
    idempotent(prepare_cifar10, archive, out, summary, verify_md5=False)
    short_run("cifar10", out, tmp_path / "runs", T1=8, eval_every=4, checkpoint_every=8)


@pytest.mark.parametrize("level", ["parent", "folder"])
def test_cifar10_from_folder_links_the_pickles(tmp_path: Path, level: str) -> None:
    folder = write_tiny_cifar(tmp_path / "src")
    out = tmp_path / "out"
    summary = prepare_cifar10(folder.parent if level == "parent" else folder, out, progress=False, verify_md5=False)
    assert summary["placed"] == {"hardlink": 7}
    assert summary["images"] == {"train": 1000, "test": 300}
    assert (out / "cifar-10-batches-py" / "data_batch_1").samefile(folder / "data_batch_1")


def test_cifar10_official_md5s_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With verify_md5 on, the archive and the pickles must have torchvision's md5s: here torchvision's
    tables are pointed at the tiny files' md5s, so the check passes; the stock tables then refuse them."""
    archive = cifar_archive(tmp_path)
    folder = tmp_path / "pickles" / "cifar-10-batches-py"
    md5 = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in [archive, *folder.iterdir()]}
    with monkeypatch.context() as m:
        m.setattr(CIFAR10, "tgz_md5", md5[archive.name])
        m.setattr(CIFAR10, "train_list", [[n, md5[n]] for n, _ in CIFAR10.train_list])
        m.setattr(CIFAR10, "test_list", [[n, md5[n]] for n, _ in CIFAR10.test_list])
        m.setattr(CIFAR10, "meta", {**CIFAR10.meta, "md5": md5["batches.meta"]})
        assert prepare_cifar10(archive, tmp_path / "ok", progress=False)["verified_md5"] is True
    out = tmp_path / "out"
    msg = fails(prepare_cifar10, archive, out, progress=False)
    assert msg.startswith(str(archive)) and "md5" in msg and CIFAR10.tgz_md5 in msg
    nothing_left(out)
    msg = fails(prepare_cifar10, folder, out, progress=False)
    assert msg.startswith(str(folder / "data_batch_1")) and "md5" in msg
    nothing_left(out)


def test_cifar10_bad_sources(tmp_path: Path) -> None:
    out = tmp_path / "out"
    archive = cifar_archive(tmp_path, drop="test_batch")
    msg = fails(prepare_cifar10, archive, out, progress=False, verify_md5=False)
    assert msg.startswith(str(archive)) and "test_batch" in msg
    nothing_left(out)
    msg = fails(prepare_cifar10, tmp_path / "nowhere", out, progress=False)
    assert str(tmp_path / "nowhere") in msg and "cifar-10-python.tar.gz" in msg
    nothing_left(out)
    junk = tmp_path / "junk" / "cifar-10-python.tar.gz"
    junk.parent.mkdir()
    junk.write_bytes(b"not a tar")
    assert fails(prepare_cifar10, junk.parent, out, progress=False, verify_md5=False).startswith(str(junk))
    nothing_left(out)
    (folder := tmp_path / "src" / "cifar-10-batches-py").mkdir(parents=True)
    (folder / "data_batch_1").write_bytes(b"")
    msg = fails(prepare_cifar10, folder.parent, out, progress=False, verify_md5=False)
    assert str(folder) in msg and "data_batch_2" in msg
    nothing_left(out)


# --- imagenet (sources: tests/sources.py) --------------------------------------------------------------


def check_imagenet_out(out: Path, truth: list[int]) -> None:
    wnids = sorted(w for _, w in SYNSETS)
    wnid = dict(SYNSETS)
    assert sorted(p.name for p in out.iterdir()) == ["PREPARED.json", "index.csv", "train", "val"]
    assert sorted(p.name for p in (out / "train").iterdir()) == wnids == sorted(p.name for p in (out / "val").iterdir())
    for i, cls in enumerate(truth, start=1):
        assert (out / "val" / wnid[cls] / f"ILSVRC2012_val_{i:08d}.JPEG").is_file()
    for w in wnids:
        assert len(list((out / "train" / w).iterdir())) == TRAIN_PER_CLASS
    # index.csv is ImageFolder's own listing (same order, same class indices)
    from torchvision.datasets import ImageFolder

    rows = [line.split(",") for line in (out / "index.csv").read_text().splitlines()]
    assert rows[0] == ["split", "path", "class_index"]
    for split in ("train", "val"):
        folder = ImageFolder(str(out / split))
        listed = [(str(out / p), int(c)) for s, p, c in rows[1:] if s == split]
        assert listed == folder.samples


def test_imagenet_from_published_archives_matches_torchvision_and_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    truth = write_imagenet_archives(src)
    summary = prepare_imagenet(src, out, progress=False, expect_classes=5, expect_val=15)
    n_train, n_val = len(SYNSETS) * TRAIN_PER_CLASS, len(truth)
    assert summary["images"] == {"train": n_train, "val": n_val} and summary["classes"] == len(SYNSETS)
    assert summary["placed"] == {"extracted": n_train + n_val}
    assert summary["labels"] == "ILSVRC2012_devkit_t12.tar.gz" and summary["task"] == "imagenet"
    check_imagenet_out(out, truth)
    # torchvision's own parsers (md5 checks off for these tiny archives) sort the val images the same way
    import torchvision.datasets.imagenet as tvi

    ref = tmp_path / "ref"
    ref.mkdir()
    for name in ("ILSVRC2012_devkit_t12.tar.gz", "ILSVRC2012_img_val.tar"):
        os.link(src / name, ref / name)
    monkeypatch.setitem(tvi.ARCHIVE_META, "devkit", (tvi.ARCHIVE_META["devkit"][0], None))
    monkeypatch.setitem(tvi.ARCHIVE_META, "val", (tvi.ARCHIVE_META["val"][0], None))
    tvi.parse_devkit_archive(str(ref))
    tvi.parse_val_archive(str(ref))
    assert snapshot_names(ref / "val") == snapshot_names(out / "val")
    idempotent(prepare_imagenet, src, out, summary)
    short_run("imagenet", out, tmp_path / "runs", T1=8, eval_every=4, checkpoint_every=8)


def snapshot_names(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_imagenet_from_kaggle_folders_links_the_images(tmp_path: Path) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    truth = val_truth()
    write_imagenet_kaggle(src, truth)
    summary = prepare_imagenet(src, out, progress=False)
    assert summary["placed"] == {"hardlink": len(SYNSETS) * TRAIN_PER_CLASS + len(truth)}
    assert summary["labels"] == "LOC_val_solution.csv"
    check_imagenet_out(out, truth)
    first = f"ILSVRC2012_val_{1:08d}.JPEG"
    val_src = src / "ILSVRC" / "Data" / "CLS-LOC" / "val" / first
    assert (out / "val" / dict(SYNSETS)[truth[0]] / first).samefile(val_src)
    idempotent(prepare_imagenet, src, out, summary)
    # the task's train and eval sets read index.csv instead of scanning: the same samples, order, classes
    from torchvision.datasets import ImageFolder

    from tasks.imagenet.data import image_folder

    for split in ("train", "val"):
        scanned, indexed = ImageFolder(str(out / split)), image_folder(out / split)
        assert indexed.samples == scanned.samples and indexed.targets == scanned.targets
        assert indexed.classes == scanned.classes and indexed.class_to_idx == scanned.class_to_idx
        image, label = indexed[len(indexed) - 1]
        assert label == scanned[len(scanned) - 1][1] and image.size == scanned[len(scanned) - 1][0].size
    (out / "index.csv").rename(out / "index.off")
    assert image_folder(out / "train").samples == ImageFolder(str(out / "train")).samples  # no index: a scan


def test_imagenet_bad_sources(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # nothing there: the three missing parts are named, by their published names
    (empty := tmp_path / "empty").mkdir()
    msg = fails(prepare_imagenet, empty, out, progress=False)
    assert all(n in msg for n in ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar", "LOC_val_solution.csv"))
    nothing_left(out)
    # a class with training images but no validation image
    truth = [i for i in val_truth() if i != 3]
    write_imagenet_kaggle(src := tmp_path / "noval", truth)
    msg = fails(prepare_imagenet, src, out, progress=False)
    assert msg.startswith(str(src / "LOC_val_solution.csv")) and "n04592741" in msg
    nothing_left(out)
    # a class with validation images but no training images
    write_imagenet_kaggle(src := tmp_path / "notrain", val_truth(), classes=SYNSETS[:-1])
    msg = fails(prepare_imagenet, src, out, progress=False)
    assert "n03000134" in msg and "train" in msg
    nothing_left(out)
    # a labelled validation image that is not there, and an image without a label
    src = tmp_path / "archives"
    write_imagenet_archives(src)
    write_devkit(src / "ILSVRC2012_devkit_t12.tar.gz", val_truth() + [1])
    msg = fails(prepare_imagenet, src, out, progress=False)
    assert msg.startswith(str(src / "ILSVRC2012_img_val.tar")) and "ILSVRC2012_val_00000016.JPEG" in msg
    nothing_left(out)
    write_devkit(src / "ILSVRC2012_devkit_t12.tar.gz", val_truth()[:-1])
    msg = fails(prepare_imagenet, src, out, progress=False)
    assert "no label for ILSVRC2012_val_00000015.JPEG" in msg
    nothing_left(out)
    # counts that are not the expected ones
    write_devkit(src / "ILSVRC2012_devkit_t12.tar.gz", val_truth())
    msg = fails(prepare_imagenet, src, out, progress=False, expect_train=1281167)
    assert msg.startswith(str(src / "ILSVRC2012_img_train.tar")) and "1281167" in msg
    nothing_left(out)


# --- yolo (sources: tests/sources.py) ------------------------------------------------------------------


def ultralytics_convert_label():
    """`convert_label` from the download script of ultralytics' packaged VOC.yaml (its own code, run here
    offline: only the part before the download)."""
    from tasks.yolo import offline

    offline.ensure()
    from ultralytics.utils import ROOT

    spec = yaml.safe_load((ROOT / "cfg" / "datasets" / "VOC.yaml").read_text())
    scope = {"yaml": spec}
    exec(spec["download"].split("# Download")[0], scope)
    return scope["convert_label"]


def test_yolo_from_vocdevkit_is_ultralytics_voc_conversion_and_trains(tmp_path: Path) -> None:
    devkit = write_vocdevkit(tmp_path / "src")
    out = tmp_path / "out"
    summary = prepare_yolo(tmp_path / "src", out, progress=False)
    assert summary["images"] == {"train": 16, "val": 6} and summary["classes"] == 20
    assert summary["folders"] == {"train2012": 4, "val2012": 4, "train2007": 4, "val2007": 4, "test2007": 6}
    assert summary["placed"] == {"hardlink": 22} and summary["difficult_skipped"] >= 1
    assert summary["years"] == ["2007", "2012"] and summary["task"] == "yolo"
    spec = yaml.safe_load((out / "VOC.yaml").read_text())
    assert spec["train"] == ["images/train2012", "images/train2007", "images/val2012", "images/val2007"]
    assert spec["val"] == ["images/test2007"] and len(spec["names"]) == 20 and spec["names"][14] == "person"
    assert "path" not in spec  # the folder can move
    # every label file is byte-identical to what ultralytics' own VOC.yaml script writes
    convert_label = ultralytics_convert_label()
    for year, sets in VOC_SETS.items():
        for image_set in sets:
            ids = (devkit / f"VOC{year}" / "ImageSets" / "Main" / f"{image_set}.txt").read_text().split()
            for i in ids:
                ref = tmp_path / "ref.txt"
                convert_label(devkit, ref, year, i)
                assert (out / "labels" / f"{image_set}{year}" / f"{i}.txt").read_text() == ref.read_text()
                image = out / "images" / f"{image_set}{year}" / f"{i}.jpg"
                assert image.samefile(devkit / f"VOC{year}" / "JPEGImages" / f"{i}.jpg")
    assert summary["background_images"] == sum(1 for p in (out / "labels").rglob("*.txt") if not p.read_text())
    idempotent(prepare_yolo, tmp_path / "src", out, summary)
    short_run(
        "yolo",
        out,
        tmp_path / "runs",
        T1=4,
        eval_every=4,
        checkpoint_every=4,
        **{"data.yaml": "VOC.yaml", "model.nc": 20},
    )


def test_yolo_box_conversion_by_hand(tmp_path: Path) -> None:
    """One box worked out independently: cx = ((xmin + xmax) / 2 - 1) / width, w = (xmax - xmin) / width."""
    from tasks.yolo.prepare import convert, voc_names

    xml = tmp_path / "a.xml"
    xml.write_text(voc_xml("a", 64, 48, [("person", 0, 11, 6, 30, 25), ("cat", 1, 1, 1, 9, 9)]))
    lines, difficult = convert(xml, (64, 48), voc_names())
    assert len(lines) == 1 and difficult == 1
    cls, *box = lines[0].split()
    assert cls == "14" and [float(v) for v in box] == pytest.approx([19.5 / 64, 14.5 / 48, 19 / 64, 19 / 48])


def test_yolo_bad_sources(tmp_path: Path) -> None:
    out = tmp_path / "out"
    devkit = write_vocdevkit(tmp_path / "src")
    # an annotation without any object
    xml = devkit / "VOC2012" / "Annotations" / "2008_000003.xml"
    good = xml.read_text()
    xml.write_text(voc_xml("2008_000003", 64, 48, []))
    msg = fails(prepare_yolo, devkit, out, progress=False)
    assert msg.startswith(str(xml)) and "no <object>" in msg
    nothing_left(out)
    # a class that is not one of the 20
    xml.write_text(voc_xml("2008_000003", 64, 48, [("unicorn", 0, 1, 1, 9, 9)]))
    msg = fails(prepare_yolo, devkit, out, progress=False)
    assert msg.startswith(str(xml)) and "unicorn" in msg
    nothing_left(out)
    xml.write_text(good)
    # an image the list names but that is not there
    jpg = devkit / "VOC2007" / "JPEGImages" / "000009.jpg"
    jpg.rename(jpg.with_suffix(".bak"))
    msg = fails(prepare_yolo, devkit, out, progress=False)
    assert msg.startswith(str(jpg)) and "000009" in msg
    nothing_left(out)
    jpg.with_suffix(".bak").rename(jpg)
    # VOC2007's test list missing
    test = devkit / "VOC2007" / "ImageSets" / "Main" / "test.txt"
    test.rename(test.with_suffix(".bak"))
    assert fails(prepare_yolo, devkit, out, progress=False).startswith(str(test))
    nothing_left(out)
    # a year missing: VOC2012 is required unless years=("2007",) is asked for
    only07 = write_vocdevkit(tmp_path / "only07", years=("2007",))
    msg = fails(prepare_yolo, only07.parent, out, progress=False)
    assert msg.startswith(str(only07)) and "VOC2012" in msg
    nothing_left(out)
    summary = prepare_yolo(only07.parent, out, progress=False, years=("2007",))
    assert summary["images"] == {"train": 8, "val": 6} and summary["years"] == ["2007"]
    assert yaml.safe_load((out / "VOC.yaml").read_text())["train"] == ["images/train2007", "images/val2007"]


def test_imagenet_resumes_an_interrupted_run(tmp_path: Path) -> None:
    """An interrupted run leaves `.out.partial/`; the next run keeps its finished class folders."""
    src, out = tmp_path / "src", tmp_path / "out"
    write_imagenet_archives(src)
    done = tmp_path / ".out.partial" / "train" / "n01440764"
    done.mkdir(parents=True)
    for j in range(TRAIN_PER_CLASS):
        (done / f"kept_{j}.JPEG").write_bytes(jpeg(1, j))
    (tmp_path / ".out.partial" / "train" / ".n01443537.partial").mkdir()  # a class cut off mid-way
    (tmp_path / ".out.partial" / SOURCE).write_text(f"imagenet {src.resolve()}")  # what the cut-off run recorded
    (tmp_path / ".out.partial").chmod(0o700)  # as the user's prepare makes it: private
    summary = prepare_imagenet(src, out, progress=False)
    assert summary["placed"] == {"extracted": (len(SYNSETS) - 1) * TRAIN_PER_CLASS + len(val_truth())}
    assert sorted(p.name for p in (out / "train" / "n01440764").iterdir())[0] == "kept_0.JPEG"
    assert not list((out / "train").glob(".*")) and (out / "train" / "n01443537").is_dir()
    assert not (tmp_path / ".out.partial").exists()
