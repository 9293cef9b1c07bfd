"""Every file the CLI touches in a results folder, tried as a careless or hostile colleague sharing it
would (bench.core.safefs): at each place a symbolic link to a private file (or folder), a FIFO, and a file
past its size bound (a deflate bomb for a checkpoint) are planted, and the command that touches it is run.

Each case gives ok: nothing is read or written through the link (an inotify watch on its target sees no
event, and the target is unchanged), nothing waits on the FIFO (the test's timeout), nothing inflates
(peak RSS), no traceback; and the command either names the planted path (a warning, or a one-line
error: `refuse`), or replaces it by the file it writes (`replace`), or goes on without it (`survive`).
The planted-free folder is the control: every command succeeds on it without a word about its files."""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import shutil
import struct
import subprocess
import sys
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.files import CHECKPOINT, KEPT, LOCK, METRICS, OFFLINE_GAIN, SPEC, SUMMARY, kept_name
from bench.run.runner import run_dir_of
from reports import build
from reports.rundata import runcache
from slurm.records import JOB
from slurm.status import MANIFEST
from tests.helpers import spec_for
from tests.run.test_reliability import stopped_run

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(180)]
FINISHED = {"T1": 40, "eval_every": 10, "checkpoint_every": 10, "keep_checkpoints_every": 10}
STOPPED = {"T1": 100}
BOMB = 1536 << 20  # a 1.5 GB tensor of zeros, deflated to ~1.5 MB
MATRIX = "preset: tiny\nseeds: [0]\nexperiments:\n  - table2: {tasks: [logreg], methods: [adascale], scales: [2]}\n"


def _args(sets: dict) -> list[str]:
    out = ["--task", "logreg", "--method", "adascale", "--scale", "2"]
    for k, v in sets.items():
        out += ["--set", f"{k}={v}"]
    return out


def finished_dir(out: Path) -> Path:
    return run_dir_of(out, spec_for("logreg", "adascale", 2, **FINISHED))


def stopped_dir(out: Path) -> Path:
    return run_dir_of(out, spec_for("logreg", "adascale", 2, **STOPPED))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder: a finished run with kept weights, its offline gain, job.json and the folder's
    matrix.json; a run stopped after its first checkpoint; a report built once (its cache, its key)."""
    import json

    out = tmp_path_factory.mktemp("shared") / "out"
    assert main(["run", *_args(FINISHED), "--out", str(out)]) == 0
    run = finished_dir(out)
    assert main(["gain", str(run), "--batches", "4"]) == 0
    (run / JOB).write_text(json.dumps({"executor": "debug", "job_id": "7", "submitted_at": 0, "stderr": None}))
    name = run.relative_to(out).as_posix()
    (out / MANIFEST).write_text(json.dumps({"matrices": ["m.yaml"], "runs": {name: {"preset": "tiny"}}}))
    stopped_run(stopped_dir(out))  # T1 = 100 (STOPPED)
    (out.parent / "m.yaml").write_text(MATRIX)
    build.build_report(out, ["md", "csv", "html"])  # its figures too: a site plants at one
    return out


def bomb(real: Path, dest: Path) -> None:
    """`real` (a torch zip checkpoint) with its largest tensor record swapped for BOMB bytes of zeros,
    deflated: a file of ~1.5 MB that inflates to 1.5 GB."""
    with zipfile.ZipFile(real) as src, zipfile.ZipFile(dest, "w") as z:
        big = max((i for i in src.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
        for info in src.infolist():
            if info is big:
                deflated = zipfile.ZipInfo(info.filename)
                deflated.compress_type = zipfile.ZIP_DEFLATED
                with z.open(deflated, "w", force_zip64=True) as f:
                    chunk = bytes(16 << 20)
                    for _ in range(BOMB // len(chunk)):
                        f.write(chunk)
            else:
                z.writestr(info.filename, src.read(info), compress_type=zipfile.ZIP_STORED)


class Watch:
    """inotify on a file or folder: every open, read, write, creation or deletion in or of it."""

    MASK = 0x1 | 0x2 | 0x8 | 0x20 | 0x40 | 0x80 | 0x100 | 0x200  # ACCESS MODIFY CLOSE_WRITE OPEN MOVED_* CREATE DELETE

    def __init__(self, path: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0 and libc.inotify_add_watch(self.fd, os.fsencode(path), self.MASK) >= 0

    def events(self) -> list[int]:
        masks = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            i = 0
            while i < len(data):
                _, mask, _, length = struct.unpack_from("iIII", data, i)
                masks.append(mask)
                i += 16 + length
        os.close(self.fd)
        return masks


def digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in [path] if path.is_file() else sorted(path.rglob("*")):
        h.update(str(p.relative_to(path.parent)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


@dataclass
class Site:
    name: str
    where: Callable[[Path], Path]  # the planted path, from OUT
    command: Callable[[Path], list[str] | Callable[[], int]]  # from OUT: the CLI's argv, or a call, touching it
    plants: tuple[str, ...]
    expect: str | dict[str, str]  # refuse | replace | survive, or one per plant
    limit: int = 0  # the size bound a `big` plant passes (0: a bomb, for checkpoints)


def report(out: Path) -> list[str]:
    return ["report", str(out), "--format", "md,csv,html"]


def run_stopped(out: Path) -> list[str]:
    return ["run", *_args(STOPPED), "--out", str(out)]


def gain(out: Path) -> list[str]:
    return ["gain", str(finished_dir(out)), "--batches", "4"]


def status(out: Path) -> list[str]:
    return ["status", str(out)]


def rehearse(out: Path) -> list[str]:
    return ["submit", str(out.parent / "m.yaml"), "--executor", "debug", "--rehearse", "--iterations", "3",
            "--out", str(out)]  # fmt: skip


def figure(out: Path) -> Path:
    """A figure the report draws (curves_<task>_<preset>_<variant>_<method>.png), as the base drew it."""
    return sorted((out / "report").glob("curves_*.png"))[0]


def report_afresh(out: Path) -> Callable[[], int]:
    """`report` after its cache is deleted (the issue's reproduction: every figure is drawn again)."""

    def call() -> int:
        shutil.rmtree(out / "report" / "cache")
        return main(report(out))

    return call


def run_tensorboard(out: Path) -> list[str]:
    return [*run_stopped(out), "--set", "tensorboard=true"]  # not part of the identity: it resumes


def submit_debug(out: Path) -> list[str]:
    return ["submit", str(out.parent / "m.yaml"), "--executor", "debug", "--out", str(out)]


def status_json(out: Path) -> list[str]:
    return ["status", str(out), "--json"]


def failure_log(out: Path) -> Callable[[], int]:
    from bench.core import safefs
    from bench.run.summary import record_failure

    def call() -> int:
        with safefs.confined(out):
            record_failure(spec_for("logreg", "adascale", 2, **FINISHED), finished_dir(out), "boom", "trace\n")
        return 0

    return call


def label_cache(out: Path) -> Callable[[], int]:
    from tasks.yolo.data import load_cache

    def call() -> int:
        with pytest.raises(Exception) as e:  # raises, so ultralytics rescans and rewrites it
            load_cache(out / "labels" / "train.cache")
        print(f"error: {e.value}", file=__import__("sys").stderr)
        return 2

    return call


R, S = finished_dir, stopped_dir
LINK_FIFO_BIG = ("link", "fifo", "big")
SITES = [
    # report: reads
    Site("report:spec.json", lambda o: R(o) / SPEC, report, LINK_FIFO_BIG, "refuse", 64 << 20),
    Site("report:summary.json", lambda o: R(o) / SUMMARY, report, LINK_FIFO_BIG, "refuse", 64 << 20),
    Site("report:metrics.jsonl", lambda o: R(o) / METRICS, report, LINK_FIFO_BIG, "refuse", 16 << 30),
    Site(
        "report:cache.npz",
        lambda o: runcache.cache_file(o / "report" / "cache", R(o)),
        report,
        LINK_FIFO_BIG,
        "refuse",
        256 << 20,
    ),  # fmt: skip
    Site(
        "report:old cache key",  # the key lives in the user's config folder now: this path is never touched
        lambda o: o / "report" / "cache" / f".seal-{os.geteuid()}",
        report,
        LINK_FIFO_BIG,
        "survive",
        32,
    ),  # fmt: skip
    Site("report:report/", lambda o: o / "report", report, ("link", "fifo"), "refuse"),
    Site(
        "report:report/cache/",
        lambda o: o / "report" / "cache",
        report,
        ("link", "fifo"),
        {"link": "refuse", "fifo": "survive"},
    ),  # fmt: skip
    # report: writes
    Site("report:table2.csv", lambda o: o / "report" / "table2.csv", report, ("link", "fifo"), "replace"),
    Site("report:figure", figure, report_afresh, ("link", "fifo"), "replace"),  # matplotlib draws to memory
    # damaged files: each command says one line (or goes on), never a traceback
    Site("report:spec.json damaged", lambda o: R(o) / SPEC, report, ("damaged",), "survive"),
    Site("report:summary.json damaged", lambda o: R(o) / SUMMARY, report, ("damaged",), "survive"),
    Site("report:metrics.jsonl damaged", lambda o: R(o) / METRICS, report, ("damaged",), "survive"),
    Site("report:offline_gain.csv", lambda o: R(o) / OFFLINE_GAIN, report, ("link", "fifo", "damaged"), "survive"),
    Site("status:summary.json damaged", lambda o: R(o) / SUMMARY, status_json, ("damaged",), "survive"),
    Site("status:job.json damaged", lambda o: R(o) / JOB, status_json, ("damaged",), "survive"),
    Site("run:checkpoint.pt damaged", lambda o: S(o) / CHECKPOINT, run_stopped, ("damaged",), "survive"),
    Site("gain:kept weights damaged", lambda o: R(o) / KEPT / kept_name(10), gain, ("damaged",), "survive"),
    # run resuming with TensorBoard on: its events folder
    Site("run:tensorboard/", lambda o: S(o) / "tensorboard", run_tensorboard, ("link", "fifo"), "refuse"),
    # submit on an existing --out: submitit's folder
    Site("submit:.submitit/", lambda o: o / ".submitit", submit_debug, ("link", "fifo"), "refuse"),
    # status
    Site("status:job.json", lambda o: R(o) / JOB, status, LINK_FIFO_BIG, "survive", 64 << 20),
    Site("status:matrix.json", lambda o: o / MANIFEST, status, LINK_FIFO_BIG, "survive", 64 << 20),
    Site("status:.lock", lambda o: S(o) / LOCK, status, ("link", "fifo"), "survive"),
    # run, resuming the stopped run
    Site("run:checkpoint.pt", lambda o: S(o) / CHECKPOINT, run_stopped, LINK_FIFO_BIG, "refuse"),
    Site("run:metrics.jsonl", lambda o: S(o) / METRICS, run_stopped, ("link", "fifo"), "refuse"),
    Site("run:spec.json", lambda o: S(o) / SPEC, run_stopped, LINK_FIFO_BIG, "refuse", 64 << 20),
    Site("run:.lock", lambda o: S(o) / LOCK, run_stopped, ("link", "fifo"), "refuse"),
    Site("run:summary.json", lambda o: S(o) / SUMMARY, run_stopped, ("link", "fifo"), "replace"),
    Site("run:checkpoints/", lambda o: S(o) / KEPT, run_stopped, ("link",), "refuse"),
    Site("run:error.log", lambda o: R(o) / "error.log", failure_log, ("link", "fifo"), "replace"),
    # gain on kept weights
    Site("gain:kept weights", lambda o: R(o) / KEPT / kept_name(10), gain, LINK_FIFO_BIG, "refuse"),
    Site("gain:spec.json", lambda o: R(o) / SPEC, gain, LINK_FIFO_BIG, "refuse", 64 << 20),
    Site("gain:metrics.jsonl", lambda o: R(o) / METRICS, gain, ("link", "fifo"), "refuse"),
    Site("gain:checkpoints/", lambda o: R(o) / KEPT, gain, ("link", "fifo"), "refuse"),
    Site("gain:offline_gain.csv", lambda o: R(o) / OFFLINE_GAIN, gain, ("link", "fifo"), "replace"),
    # the rehearsal folder
    Site("rehearse:rehearsal/", lambda o: o / "rehearsal", rehearse, ("link", "fifo"), "refuse"),
    Site("rehearse:submitit/", lambda o: o / "rehearsal" / "submitit", rehearse, ("link",), "refuse"),
    # ultralytics' label cache (in a data root)
    Site("yolo:labels cache", lambda o: o / "labels" / "train.cache", label_cache, LINK_FIFO_BIG, "refuse", 2 << 30),
]
CASES = [
    pytest.param(site, plant, id=f"{site.name}-{plant}")
    for site in SITES
    for plant in site.plants
]  # fmt: skip


def plant(path: Path, how: str, limit: int, private: Path, stopped_checkpoint: Path) -> Path | None:
    """Plant `how` at `path`; the link's target (watched), else None."""
    private.mkdir()
    target = private / (path.name or "x")
    if how == "link":
        if path.exists() or path.is_symlink():
            shutil.move(path, target)
        else:
            target.write_text("private\n")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target, target_is_directory=target.is_dir())
        return target
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "fifo":
        os.mkfifo(path)
    elif how == "damaged":  # cut short, with bytes that are no JSON, CSV, zip or UTF-8
        path.write_bytes(b'{"status": "completed", "iterations": [1, 2\x00\xff\xfe,,PK\x03\x04')
    elif limit:
        with open(path, "wb") as f:
            f.truncate(limit + 1)  # sparse: no disk
    else:
        bomb(stopped_checkpoint, path)
    return None


@pytest.fixture(scope="module")
def checkpoint_copy(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("ckpt") / CHECKPOINT
    shutil.copy2(stopped_dir(base) / CHECKPOINT, copy)
    return copy


def run_case(command: list[str] | Callable[[], int], capsys) -> tuple[int, str]:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        rc = main(command) if isinstance(command, list) else command()
    err = capsys.readouterr().err + "".join(f"\n{w.message}" for w in record)
    return rc, err


# The command's own peak: VmHWM of its address space (new at exec). ru_maxrss is not: Linux keeps it across
# execve, so a child forked from a pytest process that once held 1.7 GB reported 1.7 GB whatever it did.
PEAK = "import re, sys\nfrom bench.cli import main\nrc = main(sys.argv[1:])\n"
PEAK += "kb = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
PEAK += "print(f'peak-rss-mb {kb / 1024:.0f}', file=sys.stderr)\nsys.exit(rc)\n"


def run_isolated(argv: list[str]) -> tuple[int, str, float]:
    """The command in a process of its own: (exit code, stderr, its peak RSS in MB)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", PEAK, *argv], capture_output=True, text=True, env=env, timeout=170)
    peak = [float(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("peak-rss-mb")]
    err = "\n".join(line for line in proc.stderr.splitlines() if not line.startswith("peak-rss-mb")) + "\n"
    return proc.returncode, err, peak[0] if peak else math.inf


def test_the_untouched_folder_is_the_control(base: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    shutil.copytree(base, out, symlinks=True)
    (tmp_path / "m.yaml").write_text(MATRIX)
    for site in SITES:
        if site.command in (label_cache, failure_log):
            continue
        rc, err = run_case(site.command(out), capsys)
        assert rc == 0 and "Traceback" not in err, (site.name, err[-2000:])
        assert "symbolic link" not in err and "FIFO" not in err, (site.name, err[-2000:])


@pytest.mark.parametrize(("site", "how"), CASES)
def test_a_planted_link_fifo_or_huge_file(base: Path, checkpoint_copy: Path, tmp_path: Path, capsys, site, how) -> None:
    out = tmp_path / "out"
    shutil.copytree(base, out, symlinks=True)
    (tmp_path / "m.yaml").write_text(MATRIX)
    path = site.where(out)
    target = plant(path, how, site.limit, tmp_path / "private", checkpoint_copy)
    before = digest(target) if target is not None else None
    outside = {p: digest(p) for p in tmp_path.rglob("*") if p.is_file() and out not in p.parents}
    watch = Watch(target) if target is not None else None  # (after the digests: they read the target)
    command = site.command(out)
    if how == "big" and not site.limit:  # a deflate bomb: in a process of its own, to see its peak RSS
        rc, err, peak_mb = run_isolated(command)
        assert peak_mb < 1200, f"peak RSS {peak_mb:.0f} MB: the bomb was inflated"  # torch alone ~0.5 GB
    else:
        rc, err = run_case(command, capsys)
    assert "Traceback" not in err, err[-3000:]
    if watch is not None:
        assert watch.events() == [], "the link's target was opened, read or written"
        assert digest(target) == before
    now = {p: digest(p) for p in tmp_path.rglob("*") if p.is_file() and out not in p.parents}
    assert now == outside, "a file outside --out changed"
    expect = site.expect if isinstance(site.expect, str) else site.expect[how]
    if how == "damaged":  # a one-line cause, or the command goes on (a warning)
        assert rc in (0, 1, 2), err[-3000:]
        if rc == 2:
            assert len([line for line in err.splitlines() if "error:" in line]) == 1, err[-3000:]
        return
    if expect == "refuse":
        assert str(path) in err, err[-3000:]
        if rc:
            lines = [line for line in err.splitlines() if "error:" in line]
            assert len(lines) == 1, err[-3000:]
    elif expect == "replace":
        assert rc == 0, err[-3000:]
        assert path.is_file() and not path.is_symlink()
    else:
        assert rc in (0, 1), err[-3000:]


# -- sweep: its own results folder (the critical-batch sweep's 24 logreg runs), run once ------------------------
@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "out"
    assert main(["sweep", "--out", str(out), "--jobs", "2"]) == 0
    return out


def sweep_run(out: Path) -> Path:
    """The sweep's first run folder (sorted): one whose files a colleague damages."""
    return sorted(p.parent for p in out.rglob(SUMMARY))[0]


SWEEP_SITES = [
    Site("sweep:sweep.csv", lambda o: o / "sweep.csv", lambda o: [], ("link", "fifo"), "replace"),
    Site("sweep:figure", lambda o: o / "sweep_logreg.png", lambda o: [], ("link", "fifo"), "replace"),
    Site("sweep:summary.json", lambda o: sweep_run(o) / SUMMARY, lambda o: [], ("link", "fifo", "damaged"), "survive"),
    Site("sweep:metrics.jsonl", lambda o: sweep_run(o) / METRICS, lambda o: [], ("link", "fifo", "damaged"), "survive"),
]


@pytest.mark.long  # a critical-batch sweep run first (its fixture), then each plant
@pytest.mark.parametrize(
    ("site", "how"), [pytest.param(s, h, id=f"{s.name}-{h}") for s in SWEEP_SITES for h in s.plants]
)
def test_sweep_over_a_planted_link_fifo_or_damaged_file(
    swept: Path, tmp_path: Path, capsys, site: Site, how: str
) -> None:
    """`sweep` again on a finished sweep's folder that a colleague shares: its table and figure are written
    afresh in place of a link or FIFO (never through them), a damaged or linked run file is named or the
    run is redone, never followed, nothing outside --out changes, no traceback, no hang."""
    out = tmp_path / "out"
    shutil.copytree(swept, out, symlinks=True)
    rerun_over_a_plant(out, tmp_path, site, how, ["sweep", "--out", str(out), "--jobs", "1"], capsys)


def rerun_over_a_plant(out: Path, tmp_path: Path, site: Site, how: str, argv: list[str], capsys) -> None:
    """A command again on its own results folder `out` with `how` planted at the site: written afresh in place of a
    link or FIFO (never through them), a damaged or linked run file named or redone, never followed; nothing
    outside --out changes; no traceback, no hang; an error is one line."""
    path = site.where(out)
    target = plant(path, how, site.limit, tmp_path / "private", tmp_path / "no-checkpoint")
    before = digest(target) if target is not None else None
    outside = {p: digest(p) for p in tmp_path.rglob("*") if p.is_file() and out not in p.parents}
    watch = Watch(target) if target is not None else None
    rc, err = run_case(argv, capsys)
    assert "Traceback" not in err, err[-3000:]
    if watch is not None:
        assert watch.events() == [], "the link's target was opened, read or written"
        assert digest(target) == before
    assert {p: digest(p) for p in tmp_path.rglob("*") if p.is_file() and out not in p.parents} == outside
    assert rc in (0, 1, 2), err[-3000:]
    if rc == 2:
        assert len([line for line in err.splitlines() if "error:" in line]) == 1, err[-3000:]
    if site.expect == "replace":
        assert rc == 0, err[-3000:]
        assert path.is_file() and not path.is_symlink()


def test_sweep_on_the_untouched_folder_is_the_control(swept: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    shutil.copytree(swept, out, symlinks=True)
    rc, err = run_case(["sweep", "--out", str(out), "--jobs", "1"], capsys)
    assert rc == 0 and not err.strip(), err[-2000:]


# -- advise: its own results folder (the probe, then advice.md/.csv/.png and verify.yaml), run once -------------
ADVISE = ["advise", "--task", "logreg", "--scales", "1,2,4,8"]
LINK_FIFO_DAMAGED = ("link", "fifo", "damaged")


@pytest.fixture(scope="module")
def advised(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("advise") / "out"
    assert main([*ADVISE, "--out", str(out)]) == 0
    return out


def probe_run(out: Path) -> Path:
    return next(p.parent for p in out.rglob(SUMMARY))


ADVISE_SITES = [
    *(
        Site(f"advise:{name}", lambda o, n=name: o / n, lambda o: [], ("link", "fifo"), "replace")
        for name in ("advice.md", "advice.csv", "advice.png", "verify.yaml")
    ),
    Site("advise:summary.json", lambda o: probe_run(o) / SUMMARY, lambda o: [], LINK_FIFO_DAMAGED, "survive"),
    Site("advise:metrics.jsonl", lambda o: probe_run(o) / METRICS, lambda o: [], LINK_FIFO_DAMAGED, "survive"),
]


@pytest.mark.parametrize(
    ("site", "how"), [pytest.param(s, h, id=f"{s.name}-{h}") for s in ADVISE_SITES for h in s.plants]
)
def test_advise_over_a_planted_link_fifo_or_damaged_file(
    advised: Path, tmp_path: Path, capsys, site: Site, how: str
) -> None:
    """`advise` again on a folder a colleague shares: its outputs are written afresh in place of a link or FIFO
    (never through them), a damaged or linked probe file is named or the probe redone, never followed, nothing
    outside --out changes, no traceback, no hang."""
    out = tmp_path / "out"
    shutil.copytree(advised, out, symlinks=True)
    rerun_over_a_plant(out, tmp_path, site, how, [*ADVISE, "--out", str(out)], capsys)


def test_advise_on_the_untouched_folder_is_the_control(advised: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    shutil.copytree(advised, out, symlinks=True)
    rc, err = run_case([*ADVISE, "--out", str(out)], capsys)
    assert rc == 0 and not err.strip(), err[-2000:]
