"""The report's caches are keyed by what cannot be forged cheaply (reports.rundata.runcache, reports.figures'
index): a metrics.jsonl edited with its size and mtime put back is read again (with a warning naming it);
a cache file holding other numbers under the metrics file's own stamps, not sealed by this user's key, is
refused with a warning and rebuilt; a results folder whose path holds the byte 0xFF has a cache file. The
unchanged file, read twice, is the control (from the cache, without a word)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bench.core.files import METRICS
from reports.rundata import runcache
from reports.rundata.fakeruns import write_run


def run_with(out: Path, records: int = 400) -> Path:
    return write_run(out, "cifar10", "adascale", 8, 0, records, eval_every=100)


def _edit_same_size(data: bytes) -> bytes:
    """The same bytes with one loss's digits changed: same length, other numbers."""
    lines = data.split(b"\n")
    rec = json.loads(lines[5])
    old = json.dumps(rec["loss"]).encode()
    i = old.index(b".") + 1  # the first decimal (the last one may round to the same double)
    new = old[:i] + (b"9" if old[i : i + 1] != b"9" else b"1") + old[i + 1 :]
    lines[5] = lines[5].replace(old, new, 1)
    return b"\n".join(lines)


def _touch_r(path: Path, edited: bytes) -> None:  # edited in place, then `touch -r` of a copy of the old stamps
    ref = path.with_name("ref")
    shutil.copy2(path, ref)
    with open(path, "r+b") as f:
        f.write(edited)
    subprocess.run(["touch", "-r", str(ref), str(path)], check=True)
    ref.unlink()


def _cp_p(path: Path, edited: bytes) -> None:  # an edited copy with the old stamps, `cp -p` over the original
    other = path.with_name("other")
    shutil.copy2(path, other)
    other.write_bytes(edited)
    st = path.stat()
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    subprocess.run(["cp", "-p", str(other), str(path)], check=True)
    other.unlink()


def _rsync_a(path: Path, edited: bytes) -> None:  # what rsync -a does: a temporary with the stamps, renamed over
    st = path.stat()
    tmp = path.with_name(f".{path.name}.rsync")
    tmp.write_bytes(edited)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)


@pytest.mark.parametrize("how", [_touch_r, _cp_p, _rsync_a], ids=["touch -r", "cp -p", "rsync -a"])
def test_an_edit_with_size_and_mtime_put_back_is_read_again(tmp_path: Path, how) -> None:
    run_dir, cache = run_with(tmp_path / "out"), tmp_path / "cache"
    path = run_dir / METRICS
    first, _, _ = runcache.frames(path, cache)
    warned: list[str] = []
    again, _, _ = runcache.frames(path, cache, warned.append)
    assert warned == [] and again.equals(first)  # the control: unchanged, from the cache without a word
    before = path.stat()
    how(path, _edit_same_size(path.read_bytes()))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    train, _, _ = runcache.frames(path, cache, warned.append)
    assert train["loss"].iloc[5] != first["loss"].iloc[5]  # the new number, not the cached one
    assert len(warned) == 1 and str(path) in warned[0] and "re-read" in warned[0], warned


def test_a_cache_with_other_numbers_and_matching_stamps_is_refused(tmp_path: Path) -> None:
    run_dir, cache = run_with(tmp_path / "out"), tmp_path / "cache"
    path = run_dir / METRICS
    train, _, _ = runcache.frames(path, cache)
    target = runcache.cache_file(cache, run_dir)
    blob = target.read_bytes()
    seal = b"" if blob[:2] == b"PK" else blob[:32]  # a bare .npz, or one behind a 32-byte seal
    with np.load(io.BytesIO(blob[len(seal) :]), allow_pickle=False) as z:  # as a colleague would
        arrays = {k: z[k] for k in z.files}
    arrays["train"] = arrays["train"] * 0 + 7.0  # other numbers, the same meta (stamps, counts)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    for forged in (buf.getvalue(), seal + buf.getvalue()):  # bare, or behind the seal of the real one
        target.write_bytes(forged)
        warned: list[str] = []
        got, _, _ = runcache.frames(path, cache, warned.append)
        assert not (got.select_dtypes("number") == 7.0).all().all()
        assert got.equals(train)
        assert len(warned) == 1 and str(target) in warned[0] and "\n" not in warned[0], warned
    warned = []
    runcache.frames(path, cache, warned.append)
    assert warned == []  # rebuilt and sealed again


def test_a_results_path_with_byte_ff_has_a_cache_file(tmp_path: Path) -> None:
    out = tmp_path / os.fsdecode(b"r\xffsults")
    run_dir, cache = run_with(out), out / "report" / "cache"
    target = runcache.cache_file(cache, run_dir)
    assert target.parent == cache and target.suffix == ".npz"
    runcache.frames(run_dir / METRICS, cache)
    assert target.is_file()


def test_an_edit_in_the_same_clock_tick_as_the_read_is_seen(tmp_path: Path, monkeypatch) -> None:
    """File times tick at the kernel's clock (1-10 ms): an edit in the tick of the read that cached the
    summary leaves every stamp as it was (simulated here by a stamp that never changes). As git does with a
    racily clean entry, a summary read within RACY_NS of the file's last change is checked against it."""
    run_dir, cache = run_with(tmp_path / "out"), tmp_path / "cache"
    path = run_dir / METRICS
    frozen = runcache.stamp  # the stamps of the file before the edit, kept through it
    with open(path, "rb") as f:
        before = frozen(f.fileno())
    monkeypatch.setattr(runcache, "stamp", lambda fd: dict(before))
    monkeypatch.setattr(runcache, "RACY_NS", 10**15)  # read "in the same tick", however loaded the machine is
    first, _, _ = runcache.frames(path, cache)
    path.write_bytes(_edit_same_size(path.read_bytes()))
    warned: list[str] = []
    train, _, _ = runcache.frames(path, cache, warned.append)
    assert train["loss"].iloc[5] != first["loss"].iloc[5] and len(warned) == 1 and "re-read" in warned[0]
    # the control: a summary read long after the file's last change is taken from the cache
    monkeypatch.setattr(runcache, "RACY_NS", -(10**18))
    again, _, _ = runcache.frames(path, cache, warned.append)
    assert again["loss"].iloc[5] == train["loss"].iloc[5] and len(warned) == 1
