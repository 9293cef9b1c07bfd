"""What a byte of a run file costs `report` (issue 59): a colleague's metrics.jsonl made of newlines, of the
letter `v`, of one-letter lines, of evaluation records or of one endless line costs the report what it keeps (a
block, a bounded number of offsets and records), not ~8 bytes a byte (an int64 offset per newline and per
candidate `v`, kept for the whole file: 3.85 GB and an ArrayMemoryError traceback for 600 MB); a file shrunk
under the reader (a resumed run truncating its log) is skipped with one warning, not a SIGBUS; a record whose
key is spelled with an escape (`"ev\\u0061l"`) is the same evaluation in a small file and a large one. Each
through the real `report`, the bounds lowered so that a few MB show what GB would."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
import warnings
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.files import METRICS, SPEC
from reports import figures
from reports.rundata import collect, runcache
from tests.helpers import finished_results

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(120)]
MB = 1 << 20
HOSTILE = {
    "newlines": b"\n" * (8 * MB),
    "vees": b"v" * (8 * MB),  # one line, never ended
    "v lines": b"v\n" * (4 * MB),
    "eval lines": b'{"eval":1}\n' * (8 * MB // 11),
    "one long evaluation": b'{"eval": true, "x": "' + b"a" * (8 * MB) + b'"}\n',
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return finished_results(tmp_path_factory.mktemp("bytes") / "out")


@pytest.fixture
def results(finished: Path, tmp_path: Path, monkeypatch) -> Path:
    import shutil

    monkeypatch.setattr(figures, "KINDS", {})
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    return out


def metrics_of(out: Path) -> Path:
    (spec,) = out.rglob(SPEC)
    return spec.parent / METRICS


def report(out: Path, capsys) -> tuple[int, list[str], int]:
    """`report` of `out` in this process: (exit status, its warnings, the peak of what Python and numpy held)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        tracemalloc.start()
        try:
            rc = main(["report", str(out), "--format", "md"])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert "Traceback" not in capsys.readouterr().err
    return rc, [str(w.message) for w in record], peak


@pytest.fixture(scope="module")
def control(finished: Path, tmp_path_factory: pytest.TempPathFactory) -> int:
    """The peak of `report` over the intact folder (its libraries imported before)."""
    import shutil

    out = tmp_path_factory.mktemp("control") / "out"
    shutil.copytree(finished, out)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(figures, "KINDS", {})
        for _ in range(2):
            shutil.rmtree(out / "report", ignore_errors=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tracemalloc.start()
                try:
                    assert main(["report", str(out), "--format", "md"]) == 0
                    peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
    return peak


@pytest.mark.parametrize("content", list(HOSTILE))
def test_a_hostile_metrics_file_costs_what_the_report_keeps_not_its_bytes(
    results: Path, control: int, capsys, monkeypatch, content: str
) -> None:
    monkeypatch.setattr(
        runcache, "BLOCK_BYTES", 1 << 16, raising=False
    )  # a block's offsets: ~40 bytes a byte of a block
    monkeypatch.setattr(runcache, "KEEP_LINES", 10_000, raising=False)  # past it: counted, found again in a second pass
    monkeypatch.setattr(runcache, "MAX_EVAL_RECORDS", 1_000, raising=False)
    path = metrics_of(results)
    path.write_bytes(HOSTILE[content])
    rc, warned, peak = report(results, capsys)
    assert rc == 0 and any(str(path) in w for w in warned), warned  # skipped or partly read, in one line
    assert peak < control + 4 * MB, (peak, control, len(HOSTILE[content]))  # ~8 bytes a byte before: ≥ 64 MB
    if content == "eval lines":
        assert any("evaluation records" in w for w in warned), warned


SHRINK = """
import os, sys, warnings
import numpy as np
from bench.cli import main

path, real, calls = sys.argv[2], np.frombuffer, []


def frombuffer(*args, **kwargs):  # the scan's size check made, its buffer or map made: the file truncated
    if sys._getframe(1).f_globals.get("__name__") == "reports.rundata.runcache" and not calls:
        calls.append(os.getpid())
        os.truncate(path, 100)
    return real(*args, **kwargs)


np.frombuffer = frombuffer  # forked workers (the scan's, with html) inherit it
warnings.simplefilter("always")
sys.exit(main(["report", sys.argv[1], "--format", sys.argv[3]]))
"""


@pytest.mark.parametrize("workers", [False, True])
def test_a_metrics_file_truncated_under_the_report_is_skipped_not_a_sigbus(
    finished: Path, tmp_path: Path, workers: bool
) -> None:
    """A resumed run truncates its log to its checkpoint while `report` reads it: between the report's size check
    and its read. A mapped reader died of SIGBUS (in the scan's workers: BrokenProcessPool); read with pread, the
    file reads short and is skipped in one line naming it (the report's own read, where a worker's failed, finds
    it truncated). In a process of its own: a SIGBUS would kill the test's."""
    import shutil

    from reports.rundata.fakeruns import write_run

    out = tmp_path / "out"
    if workers:  # two runs and html: the scan in 2 worker processes
        path = write_run(out, "cifar10", "adascale", 2, 0, 8000, eval_every=100) / METRICS
        write_run(out, "cifar10", "adascale", 1, 0, 8000, eval_every=100)
    else:
        shutil.copytree(finished, out)
        path = metrics_of(out)
        path.write_bytes(path.read_bytes() * (2 * MB // path.stat().st_size + 1))  # past SMALL_BYTES: the scan
    fmt = "html" if workers else "md"
    got = subprocess.run([sys.executable, "-c", SHRINK, str(out), str(path), fmt], capture_output=True, text=True)
    assert got.returncode == 0, (got.returncode, got.stderr[-2000:])
    assert "Traceback" not in got.stderr and "BrokenProcessPool" not in got.stderr
    said = "no records" if workers else "cannot read (shrank"
    assert f"skipped {path}: {said}" in got.stderr, got.stderr[-2000:]


@pytest.mark.parametrize("large", [False, True])
def test_an_eval_key_spelled_with_an_escape_is_an_evaluation_in_a_small_and_a_large_file(
    results: Path, capsys, monkeypatch, large: bool
) -> None:
    """`"ev\\u0061l"` is the key `eval` to a JSON reader: the small-file path read such a record as an evaluation,
    the large-file scan (looking for the bytes `"eval"`) left it out of both. Both read it now."""
    if large:
        monkeypatch.setattr(runcache, "SMALL_BYTES", 100)
    path = metrics_of(results)
    lines = path.read_bytes().splitlines(keepends=True)
    escaped = [line.replace(b'"eval"', b'"ev\\u0061l"') for line in lines]
    assert escaped != lines
    path.write_bytes(b"".join(escaped))
    rc, warned, _ = report(results, capsys)
    assert rc == 0 and not [w for w in warned if str(path) in w], warned
    res = collect.load(results)
    _, evals = res.metrics(str(path.parent))
    assert len(evals) == sum(b'"eval"' in line for line in lines) > 0


@pytest.mark.parametrize("large", [False, True])
def test_a_blank_line_counts_alike_in_a_small_and_a_large_file(results: Path, capsys, monkeypatch, large: bool) -> None:
    """A line of spaces and tabs is no JSON: the large-file scan counted it an undecodable line, the small-file path
    dropped it without a word. Both count it one now (an empty line is no line in either), the same warning."""
    if large:
        monkeypatch.setattr(runcache, "SMALL_BYTES", 100)
    path = metrics_of(results)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([lines[0], b"  \t \n", b"\n", *lines[1:3], b" \n", *lines[3:]]))
    rc, warned, _ = report(results, capsys)
    assert rc == 0 and [w for w in warned if f"{path}: 2 undecodable line(s) skipped" in w], warned
    train, _ = collect.load(results).metrics(str(path.parent))
    assert train.attrs["records"] == sum(b'"eval"' not in line for line in lines)


def test_the_run_side_readers_of_a_metrics_file_hold_a_record_at_a_time(tmp_path: Path) -> None:
    """`gain`'s online gains (bench.core.files.iter_jsonl) read a record at a time, no line held past
    MAX_RECORD_LINE: records after an 8 MB line of `v`s are not read, and the line is never held whole (it
    was, and every record of the file as a list before the gains were taken from it)."""
    from bench.core import files
    from bench.run.offline_gain import online_gains

    limit = getattr(files, "MAX_RECORD_LINE", MB)

    path = tmp_path / METRICS
    good = b"".join(b'{"iteration": %d, "gain": 1.5}\n' % i for i in range(100))
    path.write_bytes(good + b"v" * (8 * MB) + b"\n" + good)
    tracemalloc.start()
    try:
        gains = online_gains(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert gains == {i: 1.5 for i in range(100)} and peak < 2 * limit + MB, peak
    assert len(files.read_jsonl(path)) == 100
    if hasattr(files, "MAX_RECORD_LINE"):  # the summary's tail read: no further back than a line past the bound
        keep = files.tail_records(path, 1000, lambda r: True, block=1 << 16)
        assert [r["iteration"] for r in keep] == list(range(100))
