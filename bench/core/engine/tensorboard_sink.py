"""An optional TensorBoard sink: the scalars a run already logs to metrics.jsonl, as TensorBoard events.

Enabled by the run setting `tensorboard: true` (not part of the run's identity); needs the optional
dependency `tensorboard` (`pip install 'adascale-bench[tensorboard]'`), written through PyTorch's own
`torch.utils.tensorboard.SummaryWriter`. Rank 0 writes `RUN_DIR/tensorboard/`: every number of every
training record as `train/<key>` (loss, gain, lr, tau, scale, sum_sq, mean_sq, progress, warmup and the
estimator's averages of var and sqr) and of every evaluation record as `eval/<key>` (the task's metrics,
epochs), at global step = the iteration. metrics.jsonl stays the record of the run; the events are a view
of it. A resumed run purges the events past its checkpoint's iteration (SummaryWriter's `purge_step`), as
metrics.jsonl is truncated there, so nothing is shown twice. Without the package, asking for it prints one
line and the run goes on without it.

The run folder may be shared, so the events never go through a link (docs/design.md §4): the folder is
made and opened through bench.core.safefs (a link or file planted at `RUN_DIR/tensorboard`, also between a
SIGTERM and the resume, is refused in one line), the writer is handed that open folder
(`/proc/self/fd/N`, so swapping the path afterwards changes nothing), and the events file's name ends in
random bytes, so no link can wait under it.

The events are a view, so a disk that fills (or any write error of the events file) costs the view, not the
run: one warning naming the folder, and the run goes on with metrics.jsonl only. TensorBoard writes on a
thread of its own, which re-raises its OSError to Python's thread hook (a traceback on stderr) and again on
the writer's next call; the hook installed here leaves those to the sink, which says them in one line.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import sys
import threading
from pathlib import Path
from typing import Any

from bench.core import safefs
from bench.core.runspec import RunSpec

DIRNAME = "tensorboard"
_SKIP = ("iteration", "eval", "diverged")  # the step, and flags


class TensorBoardSink:
    """Scalars of metrics records to a SummaryWriter (see the module docstring)."""

    def __init__(self, writer: Any, dir_fd: int | None = None, folder: Path | None = None) -> None:
        self.writer: Any = writer  # None once a write failed (said once): the run goes on without events
        self._dir_fd = dir_fd  # the events' folder, held open while the writer writes into it
        self.folder = folder

    @classmethod
    def for_run(cls, spec: RunSpec, run_dir: Path, is_main: bool, first_step: int) -> TensorBoardSink | None:
        """The run's sink, or None: not asked for, not rank 0, or TensorBoard not installed (one line said)."""
        if not spec.tensorboard or not is_main:
            return None
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            print(
                "adascale-bench: tensorboard=true, but the tensorboard package is not installed "
                "(pip install 'adascale-bench[tensorboard]'); the run goes on with metrics.jsonl only",
                file=sys.stderr,
                flush=True,
            )
            return None
        folder = Path(run_dir) / DIRNAME
        fd = _events_folder(folder)
        _quiet_writer_threads()
        try:
            writer = SummaryWriter(
                log_dir=f"/proc/self/fd/{fd}", purge_step=first_step or None, filename_suffix=f".{secrets.token_hex(8)}"
            )
        except OSError as e:  # a full disk at the first event: no view, the run goes on
            os.close(fd)
            _cannot_write(folder, e)
            return None
        except BaseException:
            os.close(fd)
            raise
        return cls(writer, fd, folder)

    def write(self, record: dict[str, Any]) -> None:
        if self.writer is None:
            return
        step = int(record.get("iteration", 0))
        prefix = "eval" if record.get("eval") else "train"
        try:
            for key, value in record.items():
                if key in _SKIP or isinstance(value, bool) or not isinstance(value, int | float):
                    continue
                if math.isfinite(value):
                    self.writer.add_scalar(f"{prefix}/{key}", value, global_step=step)
        except OSError as e:  # the writer thread's, surfaced here: said once, the events given up
            self._give_up(e)

    def close(self) -> None:
        try:
            if self.writer is not None:
                self.writer.close()
        except OSError as e:
            self._give_up(e)
        finally:
            if self._dir_fd is not None:
                os.close(self._dir_fd)
                self._dir_fd = None

    def _give_up(self, e: OSError) -> None:
        writer, self.writer = self.writer, None
        _cannot_write(self.folder, e)
        with contextlib.suppress(Exception):  # its thread has ended; what is left to flush cannot be written
            writer.close()


def _cannot_write(folder: Path | None, e: OSError) -> None:
    why = e.strerror or type(e).__name__
    print(
        f"adascale-bench: warning: {folder}: cannot write the TensorBoard events ({why}); "
        "the run goes on with metrics.jsonl only",
        file=sys.stderr,
        flush=True,
    )


_hook_installed = False


def _quiet_writer_threads() -> None:
    """Python's thread hook, less the traceback of an OSError in TensorBoard's writer thread: the writer
    raises it again on its next call from the run's thread, where TensorBoardSink says it in one line."""
    global _hook_installed
    if _hook_installed:
        return
    previous = threading.excepthook

    def hook(args: Any) -> None:
        thread = type(args.thread)
        if (
            isinstance(args.exc_value, OSError)
            and thread.__name__ == "_AsyncWriterThread"
            and thread.__module__.startswith("tensorboard.")
        ):
            return
        previous(args)

    threading.excepthook = hook
    _hook_installed = True


def _events_folder(path: Path) -> int:
    """An fd of the folder `path`, made if missing, reached without following a link (safefs.Refused, one
    line, when a link, FIFO or file is there)."""
    safefs.mkdirs(path)
    with safefs.folder(path) as fd:
        return os.dup(fd)
