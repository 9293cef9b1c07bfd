"""Data-set pickles are data, never code: CIFAR-10 batches (and ultralytics' label caches) are read by
bench.core.safepickle, which builds numpy arrays and plain containers only. The published format loads (the
tiny writer's Python 3 pickles and a Python 2 style one, as the official files are); a batch whose
__reduce__ would create a marker file is refused in one line naming the file and the global, by the task,
by `prepare cifar10` from a crafted archive, and by `check` of the data; the marker is never written."""

from __future__ import annotations

import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main
from bench.core import safepickle
from bench.core.errors import UserError
from tasks.cifar10 import Cifar10, data
from tasks.cifar10.prepare import prepare as prepare_cifar10
from tasks.cifar10.tiny import write_tiny
from tests.helpers import tiny_spec

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = tiny_spec("cifar10")


class Payload:
    """What an attacker puts in a batch: unpickling it calls open(marker, "w"), creating the marker."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


class Shell:
    """The same through os.system."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def crafted_batch(path: Path, payload: object) -> None:
    """Overwrite a batch with a real-looking one (its own data and labels) carrying the payload."""
    with open(path, "rb") as f:
        entry = safepickle.load(f.read(), what="CIFAR-10 batch", name=path)
    entry["batch_label"] = payload
    path.write_bytes(pickle.dumps(entry, protocol=2))


class _Py2Pickler(pickle._Pickler):
    """Writes what Python 2's cPickle wrote for the published batches: str and bytes as py2 `str`
    (SHORT_BINSTRING / BINSTRING) and numpy's functions under `numpy.core.multiarray`."""

    def save_bytes(self, obj: bytes) -> None:
        n = len(obj)
        if n < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([n]) + obj)
        else:
            self.write(pickle.BINSTRING + n.to_bytes(4, "little") + obj)
        self.memoize(obj)

    def save_str(self, obj: str) -> None:
        self.save_bytes(obj.encode("latin1"))

    def save_global(self, obj, name=None) -> None:
        module = obj.__module__.replace("numpy._core", "numpy.core")
        self.write(pickle.GLOBAL + f"{module}\n{name or obj.__qualname__}\n".encode())
        self.memoize(obj)

    dispatch = dict(pickle._Pickler.dispatch)
    dispatch[bytes] = save_bytes
    dispatch[str] = save_str


def py2_pickle(obj: object) -> bytes:
    buf = io.BytesIO()
    _Py2Pickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


def test_the_payloads_would_run_under_a_plain_unpickle(tmp_path: Path) -> None:
    """The control: torchvision's own read (pickle.load) of a crafted batch writes the marker, so the
    refusals below are the reader's doing, not a dud payload's."""
    for cls, marker in ((Payload, tmp_path / "m1"), (Shell, tmp_path / "m2")):
        folder = write_tiny(tmp_path)
        crafted_batch(folder / "test_batch", cls(marker))
        with open(folder / "test_batch", "rb") as f:
            pickle.load(f, encoding="latin1")
        assert marker.exists()


def test_python2_published_format_loads_bit_for_bit(tmp_path: Path) -> None:
    folder = write_tiny(tmp_path)
    want = data.CIFAR10Pickles(tmp_path, train=True, verify_md5=False)
    for f in folder.iterdir():
        if f.name != "tiny.json":
            entry = safepickle.load(f, what="CIFAR-10 batch")
            f.write_bytes(py2_pickle(entry))
    raw = (folder / "data_batch_1").read_bytes()
    assert b"numpy.core.multiarray\n_reconstruct" in raw and b"_codecs" not in raw  # the py2 shape
    got = data.CIFAR10Pickles(tmp_path, train=True, verify_md5=False)
    np.testing.assert_array_equal(got.data, want.data)
    assert got.targets == want.targets and got.classes == want.classes
    for protocol in range(6):  # and every protocol a re-pickled copy may use
        blob = pickle.dumps({"data": want.data[:3].reshape(3, -1), "labels": [1, 2, 3]}, protocol=protocol)
        back = safepickle.load(blob, what="CIFAR-10 batch", name="b")
        np.testing.assert_array_equal(back["data"], want.data[:3].reshape(3, -1))


@pytest.mark.parametrize("payload", [Payload, Shell])
@pytest.mark.parametrize("where", ["test_batch", "batches.meta"])
def test_crafted_batch_is_refused_by_the_task_and_runs_nothing(tmp_path: Path, payload, where: str) -> None:
    folder = write_tiny(tmp_path)
    marker = tmp_path / "marker"
    crafted_batch(folder / where, payload(marker))
    with pytest.raises(safepickle.PickleRefused) as e:
        Cifar10().eval_set(TINY, tmp_path)
    msg = str(e.value)
    assert msg.startswith(str(folder / where)) and "refused" in msg and "\n" not in msg
    assert ("open" if payload is Payload else "system") in msg
    assert not marker.exists()
    assert data.paper_problems(tmp_path) or where == "batches.meta"  # reported, not run, there too
    assert not marker.exists()


def test_crafted_archive_is_refused_by_prepare_and_runs_nothing(tmp_path: Path, capsys) -> None:
    folder = write_tiny(tmp_path / "src")
    marker = tmp_path / "marker"
    crafted_batch(folder / "data_batch_3", Shell(marker))
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for f in sorted(folder.iterdir()):
            tar.add(f, arcname=f"cifar-10-batches-py/{f.name}")
    out = tmp_path / "out"
    with pytest.raises(UserError, match="refused"):
        prepare_cifar10(archive, out, progress=False, verify_md5=False)
    assert not marker.exists() and not out.exists()
    args = ["prepare", "cifar10", "--source", str(archive), "--out", str(out), "--set", "verify_md5=false"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "data_batch_3" in err and "system" in err and "Traceback" not in err, err
    assert not marker.exists()


def test_odd_shapes_are_one_line_errors(tmp_path: Path) -> None:
    """Not code, but not a batch either: object arrays, numpy scalars, a list for data, garbage."""
    folder = write_tiny(tmp_path)
    good = (folder / "test_batch").read_bytes()
    for body in (
        pickle.dumps({"data": np.zeros((300, 3072), dtype=object), "labels": [0] * 300}),
        pickle.dumps({"data": np.zeros((300, 3072), np.uint8), "labels": [np.int64(0)] * 300}),
        pickle.dumps({"data": [0] * 3072, "labels": [0]}),
        pickle.dumps({"data": np.zeros((300, 3072), np.uint8), "labels": ["0"] * 300}),
        pickle.dumps([1, 2, 3]),
        good[: len(good) // 3],
        b"\x80\x05garbage",
    ):
        (folder / "test_batch").write_bytes(body)
        with pytest.raises(UserError) as e:
            Cifar10().eval_set(TINY, tmp_path)
        assert str(folder) in str(e.value) and "\n" not in str(e.value), str(e.value)


# --- ultralytics' label cache ----------------------------------------------------------------------------


def test_yolo_label_cache_is_read_without_running_it(tmp_path: Path, capsys) -> None:
    """ultralytics writes labels/<split>.cache with np.save and reads it with np.load(allow_pickle=True).
    The suite's reader loads the real cache (the second build uses it, no rescan), refuses one carrying a
    payload with a warning naming it (ultralytics rescans and rewrites it), and never writes the marker;
    the control shows ultralytics' own reader would have."""
    from tasks.yolo.data import build_dataset, load_cache, read_spec
    from tasks.yolo.tiny import YAML_NAME
    from tasks.yolo.tiny import write_tiny as write_tiny_yolo

    cfg = {"imgsz": 64, "augment": {}}
    write_tiny_yolo(tmp_path)
    spec = read_spec(tmp_path, YAML_NAME, nc=3)
    build_dataset(spec, cfg, "val", batch=4)
    cache_file = tmp_path / "labels" / "val.cache"
    real = np.load(cache_file, allow_pickle=True).item()
    mine = load_cache(cache_file)
    assert mine.keys() == real.keys() and mine["hash"] == real["hash"] and len(mine["labels"]) == len(real["labels"])
    np.testing.assert_array_equal(mine["labels"][0]["bboxes"], real["labels"][0]["bboxes"])
    before = cache_file.stat().st_mtime_ns
    build_dataset(spec, cfg, "val", batch=4)
    assert cache_file.stat().st_mtime_ns == before  # the cache was used, not rebuilt

    marker = tmp_path / "marker"
    real["msgs"] = [Shell(marker)]
    with open(cache_file, "wb") as f:
        np.save(f, real, allow_pickle=True)
    crafted = cache_file.read_bytes()
    capsys.readouterr()
    ds = build_dataset(spec, cfg, "val", batch=4)
    assert len(ds) > 0 and not marker.exists()
    err = capsys.readouterr().err
    assert f"{cache_file}: refused" in err and "system" in err, err
    assert load_cache(cache_file)["hash"] == real["hash"]  # rewritten by the rescan, readable again
    with pytest.raises(safepickle.PickleRefused):
        load_cache(_write(tmp_path / "copy.cache", crafted))
    assert not marker.exists()

    from ultralytics.data.utils import load_dataset_cache_file  # the control: ultralytics' reader runs it

    load_dataset_cache_file(tmp_path / "copy.cache")
    assert marker.exists()


def _write(path: Path, body: bytes) -> Path:
    path.write_bytes(body)
    return path
