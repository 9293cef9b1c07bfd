"""The report's per-run metrics summary (reports.rundata.runcache): the same records as reading every line for a
small file, a faithful sample and every evaluation for a large one, reused while the file is unchanged,
recomputed when it changes or the cache file is damaged, and never a traceback on a damaged metrics file."""

from __future__ import annotations

import io
import json
import math
import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.core.files import METRICS
from reports.rundata import runcache
from reports.rundata.collect import read_metrics
from reports.rundata.fakeruns import write_run


def run_with(tmp_path: Path, records: int) -> Path:
    return write_run(tmp_path / "out", "cifar10", "adascale", 8, 0, records, eval_every=100)


def test_a_small_file_is_every_record(tmp_path: Path) -> None:
    run_dir = run_with(tmp_path, 3000)
    train, evals, meta = runcache.frames(run_dir / METRICS, tmp_path / "cache")
    want_train, want_evals, problem = read_metrics(run_dir / METRICS)
    assert problem is None and not meta["sampled"] and meta["records"] == 3000
    pd.testing.assert_frame_equal(train.reset_index(drop=True), want_train.reset_index(drop=True), check_dtype=False)
    pd.testing.assert_frame_equal(evals.reset_index(drop=True), want_evals.reset_index(drop=True))


def test_a_large_file_is_a_sample_of_its_records_and_every_eval(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(runcache, "SMALL_BYTES", 10_000)
    monkeypatch.setattr(runcache, "POINTS", 500)
    run_dir = run_with(tmp_path, 20_000)
    train, evals, meta = runcache.frames(run_dir / METRICS, None)
    full, full_evals, _ = read_metrics(run_dir / METRICS)
    assert meta["sampled"] and meta["records"] == 20_000 == train.attrs["records"]
    assert 450 <= len(train) <= 501
    pd.testing.assert_frame_equal(evals.reset_index(drop=True), full_evals.reset_index(drop=True))
    by_iteration = full.set_index("iteration")
    picked = by_iteration.loc[train["iteration"].astype(int)]
    np.testing.assert_array_equal(picked["loss"].to_numpy(), train["loss"].to_numpy())  # real records, exact
    assert train["iteration"].iloc[0] == 0 and train["iteration"].iloc[-1] == 19_999  # both ends
    gaps = np.diff(train["iteration"].to_numpy())
    assert gaps.max() <= 2 * gaps.mean() + 2  # evenly spread
    assert abs(train["gain"].mean() - full["gain"].mean()) < 0.02 * full["gain"].mean()


def test_the_cache_is_reused_until_the_file_changes(tmp_path: Path, monkeypatch) -> None:
    run_dir, cache = run_with(tmp_path, 500), tmp_path / "cache"
    time.sleep(2 * runcache.RACY_NS / 1e9)  # written a while before it is read: not racily clean
    runcache.frames(run_dir / METRICS, cache)
    (target,) = cache.glob("*.npz")
    calls = []
    real = runcache.summarize
    monkeypatch.setattr(runcache, "summarize", lambda p: calls.append(p) or real(p))
    runcache.frames(run_dir / METRICS, cache)
    assert calls == []  # unchanged: from the cache
    with open(run_dir / METRICS, "a") as f:
        f.write(json.dumps({"iteration": 500, "tau": 1e9, "loss": 0.5}) + "\n")
    train, _, _ = runcache.frames(run_dir / METRICS, cache)
    assert len(calls) == 1 and train["tau"].iloc[-1] == 1e9  # grown: read again
    target.write_bytes(b"PK\x03\x04 not a zip")
    train, _, _ = runcache.frames(run_dir / METRICS, cache)
    assert len(calls) == 2 and len(train) == 501  # damaged cache: recomputed
    st = (run_dir / METRICS).stat()
    os.utime(run_dir / METRICS, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    runcache.frames(run_dir / METRICS, cache)
    assert len(calls) == 3  # touched: read again


@pytest.mark.parametrize("small", [True, False])
def test_damaged_lines_are_counted_not_fatal(tmp_path: Path, monkeypatch, small: bool) -> None:
    if not small:
        monkeypatch.setattr(runcache, "SMALL_BYTES", 100)
    path = tmp_path / METRICS
    good = [json.dumps({"iteration": i, "tau": float(i), "loss": 1.0}) for i in range(50)]
    path.write_bytes(("\n".join(good[:20]) + "\n").encode() + b'{"iteration": \xff\xfe}\n[1, 2]\n' + (
        "\n".join(good[20:]) + "\n" + '{"eval": true, "tau": 9.0, "metric": 1}\n{"torn'
    ).encode())  # fmt: skip
    train, evals, meta = runcache.frames(path, None)
    assert len(evals) == 1 and train["loss"].eq(1.0).all()
    if small:
        assert meta["bad"] == 2 and len(train) == 50


def _hostile(target: Path, meta: dict, how: str) -> None:
    """A cache file made current for the metrics file (its stamp) but damaged as `how` says."""
    meta = meta | {"columns": ["tau", "loss"]}
    good = {"meta": np.array(json.dumps(meta)), "evals": np.array("[]"), "train": np.ones((2, 3))}
    if how == "truncated":
        buf = io.BytesIO()
        np.savez(buf, **good)
        target.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
        return
    arrays = dict(good)
    if how == "pickle":  # an object array: loading it would run pickle
        arrays["train"] = np.array([[Marker(), 1, 2], [1, 2, 3]], dtype=object)
    elif how == "one-d":
        arrays["train"] = np.ones(6)
    elif how == "columns":  # fewer rows than named columns
        arrays["train"] = np.ones((1, 3))
    elif how == "names":
        arrays["meta"] = np.array(json.dumps(meta | {"columns": ["tau", 7]}))
    elif how == "dtype":
        arrays["train"] = np.array([["a", "b", "c"], ["d", "e", "f"]])
    elif how == "meta-dtype":
        arrays["meta"] = np.array([1, 2, 3])
    elif how == "meta-counts":
        arrays["meta"] = np.array(json.dumps(meta | {"records": "many"}))
    elif how == "evals":
        arrays["evals"] = np.array('{"not": "a list"}')
    elif how == "bomb":  # a small file that inflates past any summary's size
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
            for key, value in good.items():
                with zf.open(key + ".npy", "w") as f:
                    np.lib.format.write_array(f, value)
            with zf.open("more.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.zeros(runcache.MAX_CACHE_BYTES // 8 + 1))
        return
    np.savez(target, **arrays)


class Marker:
    """Unpickling this writes a marker file: proof that a cache was trusted."""

    path: Path | None = None

    def __reduce__(self):
        return (Path.write_text, (Marker.path, "ran"))


@pytest.mark.parametrize(
    "how", ["truncated", "pickle", "one-d", "columns", "names", "dtype", "meta-dtype", "meta-counts", "evals", "bomb"]
)
def test_a_hostile_cache_is_ignored_with_a_warning_and_rebuilt(tmp_path: Path, how: str) -> None:
    run_dir, cache = run_with(tmp_path, 300), tmp_path / "cache"
    want_train, want_evals, want_meta = runcache.frames(run_dir / METRICS, cache)
    (target,) = cache.glob("*.npz")
    Marker.path = tmp_path / "marker"
    _hostile(target, {k: want_meta[k] for k in ("version", "stamp", "records", "sampled", "bad")}, how)
    # sealed with this user's own key: the checks behind the seal hold even for a file that passes it
    target.write_bytes(runcache.seal_of(cache).seal(target.read_bytes()))
    warned: list[str] = []
    train, evals, _ = runcache.frames(run_dir / METRICS, cache, warned.append)
    assert not Marker.path.exists()  # nothing in the cache ran
    assert len(warned) == 1 and str(target) in warned[0] and "\n" not in warned[0]  # one line naming it
    pd.testing.assert_frame_equal(train, want_train)  # the records, not the cache's
    pd.testing.assert_frame_equal(evals, want_evals)
    again: list[str] = []
    runcache.frames(run_dir / METRICS, cache, again.append)
    assert again == []  # rebuilt: the next report reads it without a word


LINES = [
    b'{"iteration": 1, "tau": 1.0}',
    b'{"eval": true, "bleu_counts": [[1, 2], [3, 4]]}',  # a list of lists: `],[` in a line
    b'{"c": [[{"d": 1}',  # with the next line, one object when joined by `],[`
    b'{"e": 1}]]}',
    b'{"a": 1}],[{"b": 2}',  # two items when joined: the pair above and this keep the count
    b"[1, 2]",
    b"not json",
    b'{"x": "\xff"}',
    b"\xef\xbb\xbf{}",
    b"NaN",
    b"[" * 100_000,
    b'{"y": NaN, "z": -Infinity}',
]


def _as_json_reads(line: bytes) -> object:
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return rec if isinstance(rec, dict) else None


@pytest.mark.parametrize("line", [*LINES, b'{"big": 1e400}', b'{"a": 1, "a": 2}', b'{"s": "\\ud800"}'])
def test_a_record_decodes_as_json_loads_reads_it(line: bytes) -> None:
    """The fast decoder (orjson, json.loads where orjson refuses) reads every line as json.loads does, hostile
    ones included: NaN and Infinity literals, a float past its range, duplicate keys, deep nesting, bad UTF-8."""
    assert json.dumps(runcache._decode(line)) == json.dumps(_as_json_reads(line))  # NaN != NaN: as JSON text


def test_warming_in_processes_gives_the_one_at_a_time_read_and_its_warnings(tmp_path: Path) -> None:
    """`warm` (the first report's scan in 2 processes) leaves the cache that the one-at-a-time read writes:
    the frames read after it equal those read without it; a damaged cache it replaces is named once, in
    the parent; a second warm does nothing. A warm that skipped a file would leave it to be read alone."""
    runs = [write_run(tmp_path / "out", "cifar10", "adascale", s, 0, 400, eval_every=100) for s in (2, 4, 8)]
    paths = [r / METRICS for r in runs]
    alone = [runcache.frames(p, None) for p in paths]
    cache = tmp_path / "cache"
    runcache.frames(paths[0], cache)
    runcache.cache_file(cache, runs[0]).write_bytes(b"PK\x03\x04 not a zip")
    warned: list[str] = []
    runcache.warm(paths, cache, 2, warned.append)
    assert len(warned) == 1 and str(runcache.cache_file(cache, runs[0])) in warned[0]
    for p, (train, evals, meta) in zip(paths, alone, strict=True):
        got = runcache.refresh(p, cache)  # current: nothing to do
        assert got is None
        train2, evals2, meta2 = runcache.frames(p, cache, warned.append)
        pd.testing.assert_frame_equal(train2, train)
        pd.testing.assert_frame_equal(evals2, evals)
        assert {k: v for k, v in meta2.items() if k not in ("columns", "read_ns")} == {
            k: v for k, v in meta.items() if k != "read_ns"
        }
    assert len(warned) == 1
    (runs[1] / METRICS).write_bytes((runs[1] / METRICS).read_bytes() + b'{"iteration": 400, "tau": 1e9}\n')
    assert runcache._load(runcache.cache_file(cache, runs[1]), paths[1]) is None  # stale now
    runcache.warm(paths, cache, 2, warned.append)
    assert runcache._load(runcache.cache_file(cache, runs[1]), paths[1]) is not None  # brought up to date


@pytest.mark.parametrize(
    "records",
    [
        [{"tau": 0.0, "loss": 1.5, "gain": None}, {"tau": 1.0, "loss": True, "gain": 2}],  # uniform: one 2-D read
        [{"tau": 0.0, "n": 2**53 + 1, "ok": True}, {"tau": -0.0, "n": 2**70, "ok": False}],  # no null: float() each
        [{"tau": math.inf, "x": math.nan}, {"tau": 1e308, "x": -5}],  # ±inf, NaN, ints among floats
        [{"tau": 0.0, "loss": 1.5}, {"loss": 2.5, "tau": 1.0}],  # the same keys in another order
        [{"tau": 0.0}, {"tau": 1.0, "extra": 3.0}],  # a key only some records have
        [{"tau": 0.0, "note": "x"}, {"tau": 1.0, "note": "y"}],  # a string column: dropped
        [{"tau": 0.0, "big": 10**400}, {"tau": 1.0, "big": 1}],  # an integer past float's range: NaN
        [{"tau": 0.0, "bad": [1, 2]}, {"tau": 1.0, "bad": {}}],  # lists and objects: dropped
        [],
    ],
)
def test_uniform_records_give_the_columns_a_column_at_a_time_read_gives(
    records: list[dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_columns`' fast path for records that all have the same keys, in order, and only numbers (what the engine
    writes) gives the columns the general path gives, key for key and bit for bit; anything else takes the general
    path."""
    fast, fast_odd = runcache._columns(records)
    monkeypatch.setattr(runcache, "_uniform", lambda records: None)
    slow, slow_odd = runcache._columns(records)
    assert list(fast) == list(slow) and fast_odd == slow_odd
    for key in fast:
        assert np.array_equal(fast[key], slow[key], equal_nan=True) and fast[key].dtype == slow[key].dtype


@pytest.mark.parametrize("block", [1, 5, 64, 1 << 20])
def test_the_scan_finds_every_line_and_every_eval_word_as_a_byte_search_does(tmp_path: Path, block: int) -> None:
    """The scan (numpy, a block at a time, the word found from its `v`s) finds what a plain byte search finds:
    every line, and every `"eval"` and backslash, overlapping ones, ones across a block's edge and ones at either
    end of the file included."""
    import re

    data = b'"eval"eval"\n{"tau": 1, "var": 2}\nvv"ev\nal"\n{"eval": true}"eval"\n{"x": "ev\\u0061l"}\n"eval"'
    path = tmp_path / "m.jsonl"
    path.write_bytes(data)
    starts, ends, at, lines = [], [], [], runcache._Lines()
    with open(path, "rb") as f:
        for lo, part, own, raw in runcache._blocks(f.fileno(), len(data), block):
            s, e = lines.of(lo, part[:own])
            starts += s.tolist()
            ends += e.tolist()
            at += runcache._candidates(lo, part, own, raw).tolist()
    assert ends == [m.start() for m in re.finditer(b"\n", data)]
    assert starts == [0] + [e + 1 for e in ends[:-1]]
    assert at == [m.start() for m in re.finditer(b'(?="eval")|\\\\', data)] == [0, 5, 44, 57, 73, 83]


def test_a_line_with_the_eval_word_is_an_evaluation_only_where_its_record_says_so(tmp_path: Path, monkeypatch) -> None:
    """A training record with `"eval"` in a string, one with `"eval": false`, and a line that is no JSON are
    training lines, counted (the undecodable one as bad where sampled); only `"eval": true` is an evaluation."""
    monkeypatch.setattr(runcache, "SMALL_BYTES", 10)
    lines = [b'{"tau": 0.0, "note": "eval"}', b'{"eval": false, "tau": 1.0}', b'"eval" no json',
             b'{"eval": true, "tau": 2.0, "metric": 5}', b'{"tau": 3.0}']  # fmt: skip
    path = tmp_path / METRICS
    path.write_bytes(b"\n".join(lines) + b"\n")
    columns, evals, meta = runcache.summarize(path)
    assert evals == [{"eval": True, "tau": 2.0, "metric": 5}]
    assert list(columns["tau"]) == [0.0, 1.0, 3.0] and meta["records"] == 3 and meta["bad"] == 1


def _folder_with_bad_values(tmp_path: Path) -> Path:
    """Three runs, one with a negative gain and a torn last line (guards' and the torn-line warnings)."""
    out = tmp_path / "out"
    runs = [write_run(out, "cifar10", "adascale", s, 0, 400, eval_every=100) for s in (2, 4, 8)]
    bad = runs[1] / METRICS
    bad.write_bytes(bad.read_bytes().replace(b'"gain": ', b'"gain": -', 3) + b'{"iteration": 9')
    return out


def test_the_frames_warm_hands_back_are_the_ones_the_report_reads_with_the_same_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Results.warm_metrics` has each worker hand back the run's frames (`_read_warmed`): the report then
    loads no summary back from the cache, and gets the frames and the warnings, in the same order, that
    reading each run alone gives."""
    from reports.rundata.collect import load

    out = _folder_with_bad_values(tmp_path)
    alone = load(out)
    alone.cache_dir = None  # every run read from its metrics file, one at a time
    want = {d: alone.metrics(d) for d in alone.runs["run_dir"]}
    res = load(out)
    res.warm_metrics(2)
    assert len(res._warmed) == 3
    monkeypatch.setattr(runcache, "_load", lambda *a: pytest.fail("a warmed run loaded from the cache"))
    for d in res.runs["run_dir"]:
        train, evals = res.metrics(d)
        pd.testing.assert_frame_equal(train, want[d][0])
        pd.testing.assert_frame_equal(evals, want[d][1])
        assert train.attrs == want[d][0].attrs
    assert res.warnings == alone.warnings and any("'gain'" in w for w in res.warnings)


def test_warming_scans_while_the_caller_goes_on_and_a_failure_there_takes_nothing(tmp_path: Path) -> None:
    """`Results.warming` starts the workers and runs its body meanwhile (the report imports its libraries there);
    the frames are taken at the end. A body that fails stops the workers and takes none: the report reads each
    run itself, as without a warm."""
    from reports.rundata.collect import load

    out = _folder_with_bad_values(tmp_path)
    res = load(out)
    with res.warming(2):
        assert res._warmed == {}  # not taken yet: the workers are scanning
    assert len(res._warmed) == 3
    failed = load(out)
    with pytest.raises(KeyboardInterrupt), failed.warming(2):
        raise KeyboardInterrupt
    assert failed._warmed == {}
    train, _ = failed.metrics(failed.runs["run_dir"].iloc[0])  # read as it is, not from a worker
    assert len(train) and train.attrs["records"] == len(train)


@pytest.mark.parametrize("change", ["append", "same size", "link"])
def test_a_metrics_file_changed_after_warm_is_read_again_not_taken_from_the_worker(tmp_path: Path, change: str) -> None:
    """A frame a worker handed back is used only while the file has the stamp it was read with (size, mtime,
    ctime, inode): a file appended to, edited in place with its size and mtime put back, or replaced by a
    link after the warm is read as it is now (the link refused, as the report refuses links)."""
    from reports.rundata.collect import load

    out = tmp_path / "out"
    runs = [write_run(out, "cifar10", "adascale", s, 0, 400, eval_every=100) for s in (2, 4)]
    res = load(out)
    res.warm_metrics(2)
    path = runs[0] / METRICS
    if change == "append":
        path.write_bytes(path.read_bytes() + b'{"iteration": 400, "tau": 1e9, "loss": 7.0}\n')
    elif change == "same size":
        st, data = path.stat(), path.read_bytes()
        path.write_bytes(data.replace(b'"loss": ', b'"loss":-', 1))  # one byte for another
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    else:
        target = tmp_path / "elsewhere.jsonl"
        target.write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(target)
    train, _ = res.metrics(str(runs[0]))
    if change == "append":
        assert train["tau"].iloc[-1] == 1e9
    elif change == "same size":
        assert (train["loss"] < 0).any()
    else:
        assert train.empty and any("cannot read" in w for w in res.warnings)


def test_lines_decode_as_one_at_a_time_whether_or_not_orjson_reads_them_all() -> None:
    """decode_lines (orjson over all the lines where it reads each) gives what _decode gives line by line: where
    orjson reads every line, and where one line needs json.loads (NaN) or is no JSON, the others unchanged."""
    good = [b'{"tau": 1.0, "loss": 2.5}', b"[1, 2]", b'"text"', b'{"eval": true, "metric": 90}']
    for lines in (good, [*good, b'{"tau": NaN}'], [*good, b"{not json"]):
        got, want = runcache.decode_lines(lines), [runcache._decode(line) for line in lines]
        assert json.dumps(got) == json.dumps(want)
        assert got[1] is None and got[2] is None  # a list and a string are not records


def test_cache_entries_skip_the_fsync_and_one_a_crash_left_empty_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache is written without an fsync (bench.core.safefs.write_bytes durable=False), report files with one;
    what a crash can then leave (an empty entry) is refused with one line naming it and rebuilt."""
    import os

    from bench.core import safefs

    synced: list[str] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    run_dir, cache = run_with(tmp_path, 300), tmp_path / "cache"
    want_train, _, _ = runcache.frames(run_dir / METRICS, cache)
    (target,) = cache.glob("*.npz")
    assert not [p for p in synced if p.startswith(str(cache))]  # no fsync for the cache entry
    safefs.write_bytes(tmp_path / "table.csv", b"a\n")
    assert [p for p in synced if ".table.csv." in p]  # an ordinary atomic write still syncs
    target.write_bytes(b"")  # what a crash between the rename and the data's writeback may leave
    warned: list[str] = []
    train, _, _ = runcache.frames(run_dir / METRICS, cache, warned.append)
    assert len(warned) == 1 and str(target) in warned[0]
    pd.testing.assert_frame_equal(train, want_train)
    again: list[str] = []
    runcache.frames(run_dir / METRICS, cache, again.append)
    assert again == []


@pytest.mark.parametrize(("block", "keep"), [(1 << 12, 10), (777, 1 << 30), (64, 0)])
def test_the_scan_reads_the_same_summary_whatever_its_block_and_whether_it_keeps_the_offsets(
    tmp_path: Path, monkeypatch, block: int, keep: int
) -> None:
    """Blocks of any size (lines and words across their edges) and the second pass (past KEEP_LINES training lines,
    offsets not kept) give the summary of one pass with the offsets kept, on a file with damaged, empty and escaped
    lines and a torn end."""
    monkeypatch.setattr(runcache, "SMALL_BYTES", 10_000)
    run_dir = run_with(tmp_path, 3000)
    path = run_dir / METRICS
    lines = path.read_bytes().split(b"\n")
    lines[10], lines[500], lines[900] = b"not json", b"", b'{"ev\\u0061l": true, "tau": 3, "note": "a\\\\b"}'
    path.write_bytes(b"\n".join(lines) + b'{"torn')
    want = runcache.summarize(path)
    monkeypatch.setattr(runcache, "BLOCK_BYTES", block)
    monkeypatch.setattr(runcache, "KEEP_LINES", keep)
    got = runcache.summarize(path)
    assert list(got[0]) == list(want[0]) and all(np.array_equal(got[0][k], want[0][k], equal_nan=True) for k in want[0])
    assert got[1] == want[1] and any(e.get("tau") == 3 for e in got[1])
    assert {k: got[2][k] for k in ("records", "bad", "sampled")} == {
        k: want[2][k] for k in ("records", "bad", "sampled")
    }


def test_a_racily_clean_file_shrunk_while_checked_is_read_again_not_a_traceback(tmp_path: Path, monkeypatch) -> None:
    """The check of a racily clean summary reads the file again; shrunk meanwhile (runcache.Shrunk), the summary
    is not trusted (one warning) and the file read anew, in the report and in its scan's workers alike."""
    run_dir, cache = run_with(tmp_path, 500), tmp_path / "cache"
    monkeypatch.setattr(runcache, "RACY_NS", 10**18)  # every summary racily clean
    runcache.frames(run_dir / METRICS, cache)
    real, calls, warned = runcache.summarize, [], []

    def shrinking(path: Path):
        calls.append(path)
        if len(calls) == 1:
            raise runcache.Shrunk("shrank to 100 bytes while read")
        return real(path)

    monkeypatch.setattr(runcache, "summarize", shrinking)
    train, _, _ = runcache.frames(run_dir / METRICS, cache, warned.append)
    assert len(train) == 500 and len(calls) == 2 and any("not readable again" in w for w in warned), warned
