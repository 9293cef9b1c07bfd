"""Nothing changed, nothing done (reports.rundata.memo), and the seal's key kept out of the folder it protects:
a second `report` of an unchanged folder reads no metrics file and says what the first said; a same-size
edit with its mtime put back, a deleted output or a racily clean record builds again; the key lives in
the user's own config folder (0700/0600), a key copied into the shared folder seals nothing, and the
figure index is sealed and read through bench.core.safefs (a FIFO there does not hang, deep nesting is no
traceback, an edited caption is not printed)."""

from __future__ import annotations

import hmac
import json
import os
import stat
import threading
import time
import warnings
from pathlib import Path

import pytest

from bench.cli import main
from bench.core import safefs
from bench.core.files import METRICS
from reports.rundata import memo, runcache
from reports.rundata.fakeruns import write_run

RUN = ("cifar10", "adascale", 2, 0)


def _folder(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    write_run(out, *RUN, 300, eval_every=100)
    write_run(out, "cifar10", "adascale", 1, 0, 300, eval_every=100)
    time.sleep(2 * memo.RACY_NS / 1e9)  # written a while before the report: not racily clean
    return out


def _report(out: Path, capsys) -> tuple[int, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = main(["report", str(out), "--format", "csv,txt"])
    return rc, capsys.readouterr().out


def _no_metrics_read(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a metrics file was read")

    monkeypatch.setattr(runcache, "summarize", refuse)
    monkeypatch.setattr(runcache, "_load", refuse)


def test_an_unchanged_folder_is_reported_without_reading_a_metrics_file(tmp_path: Path, capsys, monkeypatch) -> None:
    out = _folder(tmp_path)
    rc, first = _report(out, capsys)
    assert rc == 0 and "report:" in first
    table = (out / "report" / "table2.csv").stat()
    with monkeypatch.context() as m:
        _no_metrics_read(m)
        rc, second = _report(out, capsys)
    assert rc == 0 and second == first
    assert (out / "report" / "table2.csv").stat().st_mtime_ns == table.st_mtime_ns  # nothing written


def test_a_same_size_edit_with_its_mtime_put_back_is_reported_again(tmp_path: Path, capsys, monkeypatch) -> None:
    out = _folder(tmp_path)
    _report(out, capsys)
    path = out / "cifar10" / "adascale" / "s2" / "seed0" / METRICS
    st = path.stat()
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"loss": 2', b'"loss": 3', 1))  # the same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # touch -r
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    time.sleep(2 * memo.RACY_NS / 1e9)
    calls = []
    real = runcache.summarize
    monkeypatch.setattr(runcache, "summarize", lambda p: calls.append(p) or real(p))
    _report(out, capsys)
    assert path in calls  # read again: its ctime tells the edit


def test_a_deleted_output_or_a_racily_clean_record_builds_again(tmp_path: Path, capsys, monkeypatch) -> None:
    out = _folder(tmp_path)
    _report(out, capsys)
    (out / "report" / "table2.csv").unlink()
    _report(out, capsys)
    assert (out / "report" / "table2.csv").is_file()
    inputs = memo.fingerprint(out, ["csv", "txt"], False)
    assert memo.replay(out, inputs) is not None
    inputs["taken_ns"] = max(max(e[3], e[4]) for e in inputs["files"])  # stat taken in the tick of a change
    seal = memo.seal_of(out / "report" / "cache")
    record = json.loads(bytes(seal.open((out / "report" / "cache" / memo.RECORD).read_bytes())))
    memo.write_sealed_json(out / "report" / "cache" / memo.RECORD, seal, record | {"inputs": inputs})
    assert memo.replay(out, inputs) is None  # racily clean: the stats cannot vouch for the contents


def test_a_forged_or_fifo_record_is_a_warning_and_the_report_is_built(tmp_path: Path, capsys) -> None:
    out = _folder(tmp_path)
    _report(out, capsys)
    record = out / "report" / "cache" / memo.RECORD
    record.write_bytes(b"x" * 32 + json.dumps({"inputs": {}, "outputs": {}, "printed": {"stdout": "FORGED"}}).encode())
    with pytest.warns(memo.ReportWarning, match="damaged report record"):
        assert main(["report", str(out), "--format", "csv,txt"]) == 0
    assert "FORGED" not in capsys.readouterr().out
    record.unlink()
    os.mkfifo(record)
    with pytest.warns(memo.ReportWarning, match="FIFO"):
        assert main(["report", str(out), "--format", "csv,txt"]) == 0
    assert record.is_file()  # the FIFO replaced by the new record, never opened


def test_the_seal_key_lives_in_the_users_config_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    seal = safefs.Seal(tmp_path / "shared" / "report" / "cache")
    folder, key = tmp_path / "config" / "adascale-bench", tmp_path / "config" / "adascale-bench" / "seal-key"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert not (tmp_path / "shared").exists()  # nothing written into the folder the seal protects
    again = safefs.Seal(tmp_path / "shared" / "report" / "cache")
    assert again.open(seal.seal(b"x")) == b"x"  # the same key next time
    elsewhere = safefs.Seal(tmp_path / "other" / "report" / "cache")
    assert elsewhere.open(seal.seal(b"x")) is None  # a sealed file copied into another folder does not pass
    folder.chmod(0o777)  # a key folder others can write is nobody's secret
    with pytest.raises(OSError):
        safefs.Seal(tmp_path / "shared")


def test_a_cache_sealed_with_a_key_copied_from_the_shared_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_dir = write_run(out, *RUN, 300, eval_every=100)
    cache = out / "report" / "cache"
    runcache.frames(run_dir / METRICS, cache)
    target = runcache.cache_file(cache, run_dir)
    body = target.read_bytes()[32:]
    planted = b"k" * 32  # the key a colleague ships in the folder (where the key used to live)
    (cache / f".seal-{os.geteuid()}").write_bytes(planted)
    target.write_bytes(hmac.digest(planted, body, "sha256") + body)
    warned: list[str] = []
    runcache.frames(run_dir / METRICS, cache, warned.append)
    assert len(warned) == 1 and "not sealed by this user's report" in warned[0]


def _index(out: Path) -> Path:
    return out / "report" / "cache" / "figures.json"


def _build(out: Path) -> str:
    from reports.build import build_report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_report(out).read_text()


def test_the_figure_index_is_sealed_a_fifo_or_deep_nesting_is_a_warning(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, *RUN, 300, eval_every=100)
    _build(out)
    sealed = _index(out).read_bytes()
    index = json.loads(sealed[32:])
    name = next(n for n in index["figures"] if n.startswith("curves_"))
    index["figures"][name]["caption"] = "FORGED CAPTION"  # the digests kept
    _index(out).write_bytes(sealed[:32] + json.dumps(index).encode())
    html = _build(out)
    assert "FORGED CAPTION" not in html and "damaged figure index" in html
    _index(out).write_bytes(b"[" * 200_000 + b"]" * 200_000)
    assert "damaged figure index" in _build(out)
    _index(out).unlink()
    os.mkfifo(_index(out))
    done = threading.Event()
    worker = threading.Thread(target=lambda: (_build(out), done.set()), daemon=True)
    worker.start()
    worker.join(120)
    assert done.is_set(), "a FIFO at the figure index hung the report"


def test_a_figures_inputs_change_with_a_same_size_edit_its_mtime_put_back(tmp_path: Path) -> None:
    import pandas as pd

    from reports.figures.render import _inputs

    run_dir = write_run(tmp_path / "out", *RUN, 50, eval_every=10)
    g = pd.DataFrame({"run_dir": [str(run_dir)]})
    before = _inputs("curves", g)
    path = run_dir / METRICS
    st = path.stat()
    path.write_bytes(path.read_bytes().replace(b'"loss": 2', b'"loss": 3', 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _inputs("curves", g) != before


def test_the_record_is_bounded_and_refused_unsealed(tmp_path: Path) -> None:
    seal = safefs.Seal(tmp_path)
    path = tmp_path / "r.json"
    memo.write_sealed_json(path, seal, {"a": 1})
    assert memo.read_sealed_json(path, seal, 1 << 20) == ({"a": 1}, None)
    path.write_bytes(b"x" * 40)
    got, why = memo.read_sealed_json(path, seal, 1 << 20)
    assert got is None and "not sealed" in why
    assert memo.read_sealed_json(path, seal, 10)[1].startswith("TooLarge")


def test_a_change_to_any_module_the_report_imports_builds_again(tmp_path: Path, capsys, monkeypatch) -> None:
    """The code identity is what the report's process imported, not a list: a module of the project outside the
    old hand-kept list (reports/, bench/core/algo, ...) that the report imports counts (bench.core.usercode, the CLI),
    and an edit to a module the report imports, wherever it lies, is a change: the next `report` builds again."""
    out = _folder(tmp_path)
    assert _report(out, capsys)[0] == 0
    record = json.loads(
        bytes(memo.seal_of(out / "report" / "cache").open((out / "report/cache/report.json").read_bytes()))
    )
    assert {"bench/core/usercode.py", "bench/cli/commands.py", "reports/rundata/runcache.py"} <= set(
        record["code"]["files"]
    )
    root = tmp_path / "project"  # a project of one module the report imports, edited between two reports
    (root / "reports").mkdir(parents=True)
    extra = root / "reports" / "extra.py"
    extra.write_text("X = 1\n")
    module = type(os)("reports.extra")
    module.__file__ = str(extra)
    monkeypatch.setitem(__import__("sys").modules, "reports.extra", module)
    monkeypatch.setattr(memo, "ROOT", root)
    monkeypatch.setattr(memo.code_identity, "__defaults__", (root,))
    monkeypatch.setattr(memo.code_files, "__defaults__", (root,))
    rc, first = _report(out, capsys)
    with monkeypatch.context() as m:
        _no_metrics_read(m)
        assert _report(out, capsys) == (0, first)  # unchanged: replayed
    extra.write_text("X = 2\n")
    built = []
    real = runcache.frames
    monkeypatch.setattr(runcache, "frames", lambda *a, **k: built.append(1) or real(*a, **k))
    assert _report(out, capsys) == (0, first) and built  # the module changed: built again, not replayed


def test_the_code_identity_covers_every_package_of_the_distribution() -> None:
    """memo.PACKAGES is what pyproject ships (its packages.find include): a package added there counts."""
    import tomllib

    pyproject = tomllib.loads((memo.ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(p.rstrip("*") for p in include) == sorted(memo.PACKAGES)
