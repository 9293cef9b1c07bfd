"""Where figures are drawn: at once, or (inside `rendering`, what `report` uses) deferred, drawn by parallel
processes and skipped when the PNG on disk came from the same plan and the same code (a content-hash index)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from bench.core.files import METRICS
from reports.rundata.memo import PACKAGES, read_sealed_json, seal_of, write_sealed_json
from reports.rundata.workers import pool

ROOT = Path(__file__).resolve().parents[2]  # the repository (or installed packages') root


def code_sources(root: Path = ROOT) -> list[Path]:
    """The sources a figure's identity covers: every .py and .csv of the distribution's packages (memo.PACKAGES,
    held equal to pyproject's by a test), not a hand-kept list of folders: a plan is drawn by whatever module
    its drawing code imports, and a list misses the one nobody added (the replay's class, issue 59)."""
    return [src for package in PACKAGES for src in sorted((root / package).rglob("*")) if src.suffix in (".py", ".csv")]


def _code(root: Path = ROOT) -> str:
    """The identity of the code a figure and its caption come from: every source of the project's packages
    (code_sources) and matplotlib's version. Each source is named by its path under the root."""
    h = hashlib.sha256(matplotlib.__version__.encode())
    for src in code_sources(root):
        h.update(src.relative_to(root).as_posix().encode() + b"\0" + src.read_bytes())
    return h.hexdigest()


# A figure is drawn again when its data or this code changes.
CODE = _code()
INDEX_VERSION = 2  # 2: sealed, each PNG's stat (size, mtime_ns, ctime_ns, inode)
MAX_INDEX_BYTES = 64 << 20  # ~500 B a figure


def digest(obj: object) -> str:
    """A content hash of a figure's plan: plain data (dicts, lists, tuples, strings, numbers, None, numpy
    arrays) fed in a canonical form, with the drawing code's hash."""
    h = hashlib.sha256(CODE.encode())

    def feed(o: object) -> None:
        if isinstance(o, np.ndarray):
            a = np.ascontiguousarray(o)
            h.update(f"a{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        elif isinstance(o, dict):
            h.update(f"d{len(o)}".encode())
            for k, v in o.items():  # in order: a plan's order is part of its drawing
                feed(k)
                feed(v)
        elif isinstance(o, list | tuple):
            h.update(f"l{len(o)}".encode())
            for v in o:
                feed(v)
        elif o is None or isinstance(o, str | bool | int | float | np.generic):
            h.update(f"{type(o).__name__}:{o!r};".encode())
        else:
            raise TypeError(f"not plain data: {type(o).__name__}")

    feed(obj)
    return h.hexdigest()


def _draw_job(job: tuple) -> str | None:
    """Draw one figure (in a worker process or here); the error as one line, or None."""
    draw, plan, path = job
    try:
        draw(plan, path)
    except Exception as e:  # one figure failing must not cost the others
        plt.close("all")
        return f"{type(e).__name__}: {e}"
    return None


class Renderer:
    """Where figures are drawn. Outside a report build (the default): at once. Inside `rendering` (what
    `report` uses): handed to parallel processes as they come (collected by `flush`), and skipped for a
    figure whose PNG on disk was drawn from the same plan by the same code, per an index of content hashes
    (report/cache/figures.json, written atomically and sealed; a damaged or foreign index is ignored with
    a warning and every figure drawn again)."""

    def __init__(self, index_file: Path | None = None, workers: int = 1, warn=None) -> None:
        self.index_file, self.workers, self.warn = index_file, workers, warn or (lambda m: None)
        self.jobs: list[tuple] = []  # to draw here at flush (one worker, or no pool could start)
        self.running: list[tuple] = []  # (job, future) drawing in the pool while the build goes on
        self._pool: ProcessPoolExecutor | None = None
        self.keys: dict[str, str] = {}
        self.index = self._read_index() if index_file is not None else {}
        self.drawn = self.skipped = 0

    def _read_index(self) -> dict:
        """The figures of the last build: from the index behind this user's seal (reports.rundata.memo), read through
        bench.core.safefs with a bound (a link, FIFO or device refused unopened); a damaged, foreign or
        hostile one is named in a warning and every figure drawn again."""
        seal = seal_of(Path(self.index_file).parent)
        if seal is None:
            return {}
        index, why = read_sealed_json(Path(self.index_file), seal, MAX_INDEX_BYTES)
        figs = index.get("figures") if isinstance(index, dict) and index.get("version") == INDEX_VERSION else None
        if why is None and index is None:  # none yet, or from before this key
            return {}
        if not isinstance(figs, dict) or not all(isinstance(e, dict) for e in figs.values()):
            why = why or "not a figure index"
            self.warn(f"ignored damaged figure index {self.index_file} ({why}); figures drawn again")
            return {}
        return figs

    def submit(self, draw, plan: object, path: Path, inputs: str | None = None, caption: str | None = None) -> Path:
        """Draw `plan` into `path` with `draw(plan, path)`, now or at `flush`; not at all when the PNG there
        was drawn from the same plan. `inputs` (a digest of what the plan was computed from) and the
        figure's `caption` are kept in the index, so that the next build can `reuse` the figure without
        computing its plan."""
        if self.index_file is None:
            draw(plan, path)
            return path
        key = digest((draw.__name__, plan))
        self.keys[str(path)] = {"digest": key, "inputs": inputs, "caption": caption}
        if self._current(path, "digest", key):
            self.skipped += 1
        else:
            self._start((draw, plan, path))
        return path

    def _start(self, job: tuple) -> None:
        """Hand `job` to the pool at once (forked at the first figure), so drawing overlaps the rest of the
        build; or keep it for flush, with one worker or where no pool can start."""
        if self.workers > 1 and self._pool is None:
            try:
                self._pool = pool(self.workers)  # forked workers that die with the report (reports.rundata.workers)
            except Exception:  # no fork here: draw in this process
                self.workers = 1
        if self._pool is None:
            self.jobs.append(job)
            return
        try:
            self.running.append((job, self._pool.submit(_draw_job, job)))
        except Exception:  # a broken pool: the rest here
            self.jobs.append(job)

    def reuse(self, path: Path, inputs: str) -> str | None:
        """The caption of the figure at `path` when it was drawn from the same inputs (its PNG unchanged
        since), which then stays as it is; else None (compute the plan and `submit` it)."""
        if self.index_file is None or not self._current(path, "inputs", inputs):
            return None
        entry = self.index[path.name]
        if not isinstance(entry.get("caption"), str):
            return None
        self.keys[str(path)] = {k: entry.get(k) for k in ("digest", "inputs", "caption")}
        self.skipped += 1
        return entry["caption"]

    def _current(self, path: Path, field: str, key: str) -> bool:
        entry = self.index.get(path.name)
        if not isinstance(entry, dict) or entry.get(field) != key:
            return False
        return entry.get("stat") == _stat(path)

    def flush(self) -> dict[Path, str]:
        """Draw what was submitted; the figures that failed, with why. Then write the index."""
        jobs, self.jobs = self.jobs, []
        results = []
        for job, future in self.running:
            try:
                results.append((job, future.result()))
            except Exception:  # a worker died: draw it here
                results.append((job, _draw_job(job)))
        self.running = []
        self.close()
        results += [(job, _draw_job(job)) for job in jobs]
        failed = {job[2]: why for job, why in results if why}
        self.drawn += len(results) - len(failed)
        if self.index_file is not None:
            self._write_index(failed)
        return failed

    def _write_index(self, failed: dict[Path, str]) -> None:
        """The index of the figures on disk now, each with its PNG's stat, sealed (reports.rundata.memo)."""
        figs = {}
        for path_s, entry in self.keys.items():
            path = Path(path_s)
            st = _stat(path)
            if path not in failed and st is not None:
                figs[path.name] = entry | {"stat": st}
        seal = seal_of(Path(self.index_file).parent)
        if seal is not None:
            with contextlib.suppress(OSError):  # a read-only results folder: figures are drawn every time
                write_sealed_json(Path(self.index_file), seal, {"version": INDEX_VERSION, "figures": figs})

    def close(self) -> None:
        """Stop the pool (drawing that has not finished is abandoned: a build that failed before flush)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


_RENDERER = Renderer()


@contextlib.contextmanager
def rendering(index_file: Path, workers: int, warn=None):
    """Figures submitted inside are deferred, content-cached and drawn in parallel (Renderer); the caller
    flushes before it reads any PNG."""
    global _RENDERER
    old, _RENDERER = _RENDERER, Renderer(index_file, workers, warn)
    try:
        yield _RENDERER
    finally:
        _RENDERER.close()
        _RENDERER = old


def current() -> Renderer:
    """The renderer figures are submitted to now (the one of the enclosing `rendering`, else draw at once)."""
    return _RENDERER


def _inputs(kind: str, g: pd.DataFrame) -> str:
    """A digest of what a figure of the runs `g` is computed from: their rows (every column, as CSV: floats
    in full) and each run's metrics file as reports.rundata.runcache tells it unchanged (size, mtime, ctime, inode)."""
    stats = [(str(run_dir), _stat(Path(run_dir) / METRICS)) for run_dir in g["run_dir"]]
    return digest((kind, g.to_csv(index=False), stats))


def _stat(path: Path) -> list[int] | None:
    """A file's size, mtime_ns, ctime_ns and inode (as reports.rundata.runcache stamps a metrics file: a same-size
    edit with its mtime put back changes ctime, which no user can set back), not following a link; None
    when it is not a regular file."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino] if stat.S_ISREG(st.st_mode) else None
