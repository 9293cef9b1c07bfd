"""`submit` and `status` without SLURM: the mapping of S to ranks, the debug executor (in this process) and
the local executor (jobs on this machine), dependencies between runs, and the states status reports."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.cli import main
from bench.core import safefs
from bench.core.files import CHECKPOINT, SUMMARY, read_json, write_json
from slurm.executors import Resources, accumulation, choose_ranks, shape_for
from slurm.job import ATTEMPTS, JOB, RunJob, dist_environment, start_group
from slurm.status import add_to_manifest, collect, last_line, run_state, table
from tests.helpers import spec_for


def matrix(tmp_path: Path, body: str, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


LOGREG = """\
preset: tiny
seeds: [0]
set: {T1: 40}
experiments:
  - table2: {tasks: [logreg], methods: [adascale, lsw, lsw+], scales: [1, 2]}
"""


# -- S -> W ranks × A micro-batches -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scales", "gpus", "nodes", "ranks"),
    [
        ([16], 4, 2, 8),  # 2 nodes × 4 GPUs, A = 2
        ([128], 8, 4, 32),
        ([2, 4, 8], 4, 1, 2),  # elastic: W must divide every S
        ([12], 4, 2, 4),  # 8 does not divide 12, 6 does not fill whole 4-GPU nodes
        ([6], 4, 1, 3),
        ([1], 8, 1, 1),
        ([8], 0, 1, 1),  # CPU-only: one rank per node
        ([8], 0, 4, 4),
    ],
)
def test_ranks_are_the_most_that_divide_every_scale_and_fill_whole_nodes(
    scales: list[int], gpus: int, nodes: int, ranks: int
) -> None:
    res = Resources(executor="slurm", gpus_per_node=gpus, max_nodes=nodes)
    assert choose_ranks(scales, res) == ranks


def test_shape_spreads_ranks_over_nodes_and_asks_a_gpu_per_rank() -> None:
    res = Resources(executor="slurm", gpus_per_node=4, max_nodes=2)
    spec = spec_for("logreg", "adascale", 16, num_workers=3)
    shape = shape_for(spec, choose_ranks([16], res), res)
    assert (shape.ranks, shape.nodes, shape.tasks_per_node, shape.gpus_per_node, shape.cpus_per_task) == (8, 2, 4, 4, 4)
    assert accumulation(spec, shape.ranks) == {16: 2}
    elastic = spec_for("logreg", "adascale", "elastic-up", elastic={"up": [[0.0, 2], [0.25, 4], [0.5, 8]]})
    assert accumulation(elastic, 2) == {2: 1, 4: 2, 8: 4}
    cpu = Resources(executor="slurm", gpus_per_node=0, max_nodes=1, cpus_per_task=2)
    four = spec_for("logreg", "adascale", 4)
    assert shape_for(four, 1, cpu).gpus_per_node == 0 and shape_for(four, 1, cpu).cpus_per_task == 2


def test_job_names_say_which_methods_an_array_runs() -> None:
    from bench.experiments.matrix import RunRequest
    from slurm.submit import Planned, job_name

    shape = shape_for(spec_for("logreg", "adascale", 4), 1, Resources(executor="slurm", gpus_per_node=0))
    runs = [
        Planned(RunRequest("cifar10", m, 4, k), spec_for("cifar10", m, 4, k), f"r{m}{k}", shape)
        for m in ("adascale", "lsw", "lsw")
        for k in (0, 1)
    ]
    assert job_name(runs, 2) == "adascale-bench-adascale+lsw-W2"
    assert job_name(runs[-1:], 1) == "adascale-bench-lsw-W1"


def test_multi_task_jobs_get_torch_distributed_variables() -> None:
    class Env:
        num_tasks, num_nodes, global_rank, local_rank, hostnames, raw_job_id = 8, 2, 5, 1, ["node3", "node4"], "12345"

    env = dist_environment(Env())
    assert env == {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",  # 8 ranks on 2 nodes
        "MASTER_ADDR": "node3",  # MASTER_PORT: the port the ranks' store got (slurm/procgroup.py)
    }
    Env.num_tasks = 1
    assert dist_environment(Env()) == {}


class OneTask:
    num_tasks, num_nodes, global_rank, local_rank, node, hostnames, raw_job_id = 1, 1, 0, 0, 0, ["localhost"], "9"


def test_a_one_task_job_ignores_the_group_variables_it_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    """A W = 1 continuation of a W = 2 job once inherited WORLD_SIZE=2 and waited for a second rank."""
    import socket

    from bench.core.engine.distributed import shutdown

    with socket.socket() as s:  # a port nobody listens on: a rank that tried to join would time out
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "old")
    monkeypatch.setenv("ADASCALE_BENCH_DIST_TIMEOUT", "5")
    dist = start_group(OneTask(), spec_for("logreg", device="cpu"), Path("."), None)
    shutdown()
    assert (dist.rank, dist.world) == (0, 1)
    assert not [k for k in ("RANK", "WORLD_SIZE", "MASTER_PORT", "TORCHELASTIC_RUN_ID") if k in os.environ]


def test_a_continuation_is_submitted_without_this_jobs_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """submit_continuation runs inside a job (rank 0 of W = 2): what sbatch exports to the next job
    carries neither this job's allocation nor its place in this job's group, and the port is not kept."""
    import slurm.job as job_module

    seen: list[dict[str, str]] = []

    class Executor:
        def submit(self, job: RunJob) -> object:
            seen.append(dict(os.environ))
            return type("Job", (), {"job_id": "101"})()

    monkeypatch.setattr(job_module, "make_executor", lambda *a, **k: Executor())
    monkeypatch.setattr(job_module, "record_job", lambda *a, **k: None)
    here = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "n1"}
    here |= {"MASTER_PORT": "21234", "SLURM_JOB_ID": "100", "SLURM_NTASKS": "2", "SUBMITIT_EXECUTOR": "slurm"}
    for k, v in here.items():
        monkeypatch.setenv(k, v)
    spec = spec_for("logreg", "adascale", "elastic-down", T1=40, accumulation=2)
    res = Resources(executor="slurm", gpus_per_node=2, max_nodes=1)
    assert job_module.submit_continuation(RunJob(spec, tmp_path, resources=res), 1) == "101"
    (env,) = seen
    assert not [k for k in here if k in env], [k for k in here if k in env]
    assert all(os.environ[k] == v for k, v in here.items())  # this process keeps its own


def test_dry_run_prints_the_arrays_without_slurm_or_submitting(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A paper-preset matrix before its data is prepared: the data root's problem is a warning, and the
    arrays are printed with their W and A."""
    body = LOGREG.replace("tiny", "paper").replace("[logreg]", "[cifar10]").replace("scales: [1, 2]", "scales: [1, 16]")
    path = matrix(tmp_path, f"data_roots: {{cifar10: {tmp_path / 'not-prepared'}}}\n{body}")
    out = tmp_path / "out"
    rc = main(["submit", str(path), "--executor", "slurm", "--gpus-per-node", "4", "--max-nodes", "2"]
              + ["--out", str(out), "--dry-run"])  # fmt: skip
    captured = capsys.readouterr()
    text = captured.out
    assert rc == 0 and not out.exists()
    assert captured.err.startswith("adascale-bench: warning: cifar10 data root") and "not-prepared" in captured.err
    assert "4 to submit" in text  # S = 1: one adascale run stands for lsw and lsw+
    assert "W=8 (2 nodes × 4 tasks, 4 GPUs/node" in text and "S→A: 16→2" in text
    assert "array 3 after the runs they need" in text and "lsw+" in text.splitlines()[-1]


@pytest.mark.parametrize(
    ("preset", "task", "ranks"), [("tiny", "logreg", 1), ("paper", "logreg", 1), ("tiny", "cifar10", 1)]
)
def test_cheap_runs_are_not_spread_over_nodes(preset: str, task: str, ranks: int) -> None:
    """The task card's max_ranks: a tiny run (seconds) and a logreg run train on one rank whatever the
    resources; a paper cifar10 run gets them all (the control), and a fixed accumulation is not capped."""
    from bench.run.spec import resolve
    from slurm.executors import ranks_to_start
    from tasks import get_task

    res = Resources(executor="slurm", gpus_per_node=8, max_nodes=2)
    spec = resolve(get_task(task), "adascale", 16, 0, preset, "/nonexistent")
    assert ranks_to_start(spec, Path("/nonexistent"), res) == ranks
    paper = resolve(get_task("cifar10"), "adascale", 16, 0, "paper", "/nonexistent")
    assert ranks_to_start(paper, Path("/nonexistent"), res) == 16


def test_submit_smoke_dry_run_gives_every_run_one_rank(capsys: pytest.CaptureFixture) -> None:
    assert (
        main(["submit", "smoke", "--executor", "slurm", "--gpus-per-node", "8", "--max-nodes", "2", "--dry-run"]) == 0
    )
    arrays = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  array")]
    assert arrays and all("W=1 (1 node × 1 task" in line for line in arrays), arrays


def test_slurm_executor_without_slurm_is_one_line(tmp_path: Path) -> None:
    path = matrix(tmp_path, LOGREG)
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    res = subprocess.run(
        [sys.executable, "-m", "bench", "submit", str(path), "--executor", "slurm", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "no SLURM on this machine" in res.stderr and "Traceback" not in res.stderr


# -- the debug executor: every run in this process ----------------------------------------------------------------
def test_debug_executor_runs_the_matrix_in_order_then_submits_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path, out = matrix(tmp_path, LOGREG), tmp_path / "out"
    assert main(["submit", str(path), "--executor", "debug", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "4 runs: 4 done" in text  # S = 1: one adascale run stands for lsw and lsw+
    for method, scale in (("adascale", 1), ("adascale", 2), ("lsw", 2), ("lsw+", 2)):
        run_dir = out / f"logreg/{method}/s{scale}/seed0,T1=40"
        assert read_json(run_dir / SUMMARY)["status"] == "completed"
        job = read_json(run_dir / JOB)
        assert job["executor"] == "debug" and job["job_id"] and job["ranks"] == 1
        assert len(read_json(run_dir / ATTEMPTS)) == 1
    assert not (out / "logreg/lsw/s1").exists() and not (out / "logreg/lsw+/s1").exists()
    lsw_plus = read_json(out / "logreg/lsw+/s2/seed0,T1=40" / JOB)
    assert lsw_plus["needs"] == ["logreg/adascale/s2/seed0,T1=40"]
    twin = read_json(out / "logreg/adascale/s2/seed0,T1=40" / SUMMARY)
    assert read_json(out / "logreg/lsw+/s2/seed0,T1=40" / SUMMARY)["iterations"] == twin["iterations"]

    assert main(["submit", str(path), "--executor", "debug", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "4 complete" in text and "nothing to submit" in text
    assert main(["status", str(out)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"logreg +lsw\+ +2 +T1 40 +0 +done", text) and "4 runs: 4 done" in text
    assert re.search(r"logreg +adascale\* +1 ", text) and "* shared: AS = LSW = LSW+ at S = 1" in text  # as plan


def test_lsw_plus_fails_with_the_reason_when_its_adascale_run_diverged(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    body = """\
preset: tiny
seeds: [0]
set: {T1: 6, lr_schedule.lr0: 1.0e+12}
experiments:
  - table2: {tasks: [cifar10], methods: [adascale, lsw+], scales: [2]}
"""
    out = tmp_path / "out"
    assert main(["submit", str(matrix(tmp_path, body)), "--executor", "debug", "--out", str(out)]) == 1
    capsys.readouterr()
    assert main(["status", str(out)]) == 1
    text = capsys.readouterr().out
    assert "cifar10  adascale" in text and "diverged" in text
    unwrapped = text.replace("\n    ", " ")  # status wraps a long reason at 160 characters
    failed = [line for line in unwrapped.splitlines() if line.startswith("  cifar10/lsw+/s2/")]
    assert len(failed) == 1 and "AdaScale run" in failed[0] and "'diverged'" in failed[0], text
    summary = read_json(next((out / "cifar10/lsw+/s2").iterdir()) / SUMMARY)
    assert summary["status"] == "failed" and "diverged" in summary["error"]


def test_a_need_without_summary_fails_the_dependent_run(tmp_path: Path) -> None:

    spec = spec_for("logreg", "lsw+", 2, T1=40)
    job = RunJob(spec, tmp_path, needs=["logreg/adascale/s2/seed0,T1=40"], raise_on_failure=False)
    os.environ["SUBMITIT_DEBUG_JOB_ID"] = "DEBUG_test"
    try:
        summary = job()
    finally:
        del os.environ["SUBMITIT_DEBUG_JOB_ID"]
    assert summary["status"] == "failed" and "did not finish" in summary["error"]
    assert "logreg/adascale/s2/seed0,T1=40" in (job.run_dir / "error.log").read_text()


# -- status -------------------------------------------------------------------------------------------------------
def test_status_states_from_files_and_scheduler(tmp_path: Path) -> None:
    name = "logreg/adascale/s4/seed0"
    run_dir = tmp_path / name
    run_dir.mkdir(parents=True)
    log = tmp_path / "job.err"
    log.write_text("starting\nprogress 10%\rprogress 50%\r\nslurmstepd: error: *** JOB 7 CANCELLED ***\n\n")
    job = {"executor": "slurm", "job_id": "7_1", "stderr": str(log), "submitted_at": time.time() - 3600}
    with safefs.confined(tmp_path):  # a log named in job.json is read only inside the results folder
        assert last_line(log) == "slurmstepd: error: *** JOB 7 CANCELLED ***"
    assert last_line(log) is None and last_line("/etc/passwd") is None

    st = run_state(tmp_path, name, job, "CANCELLED")
    assert st.state == "failed" and "CANCELLED" in st.detail and "JOB 7 CANCELLED" in st.detail
    (run_dir / CHECKPOINT).write_bytes(b"")  # cancelled or out of time after a checkpoint: resumable, not broken
    for scheduler in ("CANCELLED", "TIMEOUT"):
        st = run_state(tmp_path, name, job, scheduler)
        assert st.state == "stopped" and "submit again to resume" in st.detail
    for scheduler in ("NODE_FAIL", "OUT_OF_MEMORY", "FAILED"):
        st = run_state(tmp_path, name, job, scheduler)
        assert st.state == "failed" and "JOB 7 CANCELLED" in st.detail  # the log's last line, to investigate
    (run_dir / CHECKPOINT).unlink()
    assert run_state(tmp_path, name, job, "PENDING").state == "queued"
    assert run_state(tmp_path, name, job, "RUNNING").state == "running"
    assert run_state(tmp_path, name, None, None).state == "missing"

    write_json(run_dir / SUMMARY, {"status": "failed", "error": "RuntimeError: boom"})
    (run_dir / "error.log").write_text("Traceback (most recent call last):\n  ...\nRuntimeError: boom\n")
    assert run_state(tmp_path, name, job, "FAILED").detail == "RuntimeError: boom"
    assert run_state(tmp_path, name, job, "REQUEUED").state == "queued"  # a new attempt is under way
    write_json(run_dir / SUMMARY, {"status": "diverged"})
    assert run_state(tmp_path, name, job, "COMPLETED").state == "diverged"
    write_json(run_dir / SUMMARY, {"status": "completed"})
    assert run_state(tmp_path, name, job, "COMPLETED").state == "done"


def test_status_table_groups_seeds_and_names_missing_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    add_to_manifest(
        tmp_path,
        {f"cifar10/lsw/s8/seed{k}": {"task": "cifar10", "method": "lsw", "scale": 8, "seed": k} for k in (0, 1)},
        "m.yaml",
    )
    write_json(tmp_path / "cifar10/lsw/s8/seed0" / SUMMARY, {"status": "completed"})
    runs = collect(tmp_path)
    assert [(r.name, r.state) for r in runs] == [("cifar10/lsw/s8/seed0", "done"), ("cifar10/lsw/s8/seed1", "missing")]
    assert "cifar10  lsw     8      -        0,1    1 done, 1 missing" in table(runs)
    assert main(["status", str(tmp_path)]) == 0  # missing is not a failure
    assert "2 runs: 1 done, 1 missing" in capsys.readouterr().out


def test_status_of_an_empty_folder_is_a_one_line_error(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "bench", "status", str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "submit a matrix" in res.stderr


# -- the local executor: jobs are processes on this machine --------------------------------------------------------
@pytest.mark.slow
def test_local_executor_starts_lsw_plus_after_its_adascale_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    body = LOGREG.replace("methods: [adascale, lsw, lsw+], scales: [1, 2]", "methods: [adascale, lsw+], scales: [2]")
    out = tmp_path / "out"
    rc = main(["submit", str(matrix(tmp_path, body)), "--executor", "local", "--array-parallelism", "2"]
              + ["--out", str(out)])  # fmt: skip
    assert rc == 0, capsys.readouterr().out
    ada, plus = out / "logreg/adascale/s2/seed0,T1=40", out / "logreg/lsw+/s2/seed0,T1=40"
    job = read_json(plus / JOB)
    assert job["executor"] == "local" and re.fullmatch(r"\d+\.2", job["job_id"]) and job["started"] is True
    assert job["pid"] == os.getpid() and job["stderr"] is None  # this process's pool ran it
    # two slots, but LSW+ waited for its AdaScale run to end before its job started
    assert (plus / ATTEMPTS).stat().st_mtime >= (ada / SUMMARY).stat().st_mtime
    assert read_json(plus / SUMMARY)["iterations"] == read_json(ada / SUMMARY)["iterations"]
    assert "2 runs: 2 done" in capsys.readouterr().out


@pytest.mark.slow
def test_local_executor_moves_a_run_to_fewer_ranks_and_equals_one_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """accumulation 2, S = 4 -> 2: two local ranks (torch's elastic launcher, from a worker of the pool), then
    the driver starts the run again on one; the records equal one rank's (A = S), bit for bit."""
    from bench.core.files import METRICS, read_jsonl

    body = """\
preset: tiny
seeds: [0]
set: {T1: 100, elastic.down: [[0.0, 4], [0.5, 2]]}
experiments:
  - elastic: {tasks: [logreg], methods: [adascale], schedules: [elastic-down]}
"""
    ref, out = tmp_path / "ref", tmp_path / "out"
    assert main(["submit", str(matrix(tmp_path, body)), "--executor", "debug", "--out", str(ref)]) == 0
    fixed = matrix(tmp_path, body.replace("{T1: 100,", "{T1: 100, accumulation: 2,"), "fixed.yaml")
    assert main(["submit", str(fixed), "--executor", "local", "--gpus-per-node", "2", "--out", str(out)]) == 0
    assert "1 runs: 1 done" in capsys.readouterr().out
    (run_dir,) = [p.parent for p in out.rglob(JOB)]
    assert [a["tasks"] for a in read_json(run_dir / ATTEMPTS)] == [2, 1]
    (want,) = [p.parent for p in ref.rglob(JOB)]

    def strip(records: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "wall_time_s"} for r in records]

    assert strip(read_jsonl(run_dir / METRICS)) == strip(read_jsonl(want / METRICS))


def test_submit_paper_dry_run_before_any_data_root_is_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    """`submit paper --dry-run` on a fresh machine (ADASCALE_BENCH_DATASETS unset): one warning per task's
    root, and the plan of every run is still printed (a data root is not part of a run's identity). SLURM's
    commands are stand-ins on PATH that fail if called (this machine need not have SLURM: nothing may be
    submitted here), so the refusal below is the data root's, wherever the test runs."""
    for name in ("sbatch", "srun", "sacct"):
        stub = tmp_path / name
        stub.write_text("#!/bin/sh\necho called >&2\nexit 99\n")
        stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("ADASCALE_BENCH_DATASETS", raising=False)
    assert main(["submit", "paper", "--dry-run", "--executor", "slurm", "--gpus-per-node", "8"]) == 0
    captured = capsys.readouterr()
    warnings = captured.err.splitlines()
    assert len(warnings) == 5 and all(w.startswith("adascale-bench: warning: ") for w in warnings)
    assert "1045 to submit" in captured.out and "array 7" in captured.out
    # the same command without --dry-run refuses, naming the variable
    assert main(["submit", "paper", "--executor", "slurm", "--gpus-per-node", "8"]) == 1
    assert "ADASCALE_BENCH_DATASETS" in capsys.readouterr().err


def fake_slurm(bin_dir: Path) -> None:
    """sbatch, srun, sacct and squeue stand-ins on PATH: sbatch answers as SLURM does (a fresh job id each
    call) and runs nothing; the others know no job."""
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        '#!/bin/sh\nn=$(cat "$0.count" 2>/dev/null || echo 100); n=$((n + 1)); echo $n > "$0.count"\n'
        'echo "Submitted batch job $n"\n'
    )
    for name in ("srun", "sacct", "squeue"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)


def test_submit_to_slurm_keeps_the_links_submitit_leaves_and_refuses_a_planted_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    """submitit leaves `.submission_file_<uuid>.sh` -> `<job>_submission.sh` in its folder after each sbatch.
    A matrix of two arrays (lsw+ after the others) submits both, and a later submit to the same --out still
    works; a link of that name naming a file outside the folder is refused in one line, and nothing is
    written through it (CI's SLURM stage failed on the first array's link at 1776b77)."""
    fake_slurm(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    path, out = matrix(tmp_path, LOGREG), tmp_path / "out"
    submit = ["submit", str(path), "--executor", "slurm", "--time", "60", "--out", str(out)]
    assert main(submit) == 0
    assert "submitted array 2" in capsys.readouterr().out
    links = [p for p in (out / ".submitit").iterdir() if p.is_symlink()]
    assert len(links) == 2 and all(re.fullmatch(r"\.submission_file_[0-9a-f]{32}\.sh", p.name) for p in links)
    assert main([*submit, "--set", "T1=80"]) == 0
    assert "submitted array" in capsys.readouterr().out

    private = tmp_path / "private.sh"
    private.write_text("mine\n")
    planted = tmp_path / "planted"
    (planted / ".submitit").mkdir(parents=True)
    (planted / ".submitit" / f".submission_file_{'a' * 32}.sh").symlink_to(private)
    assert main([*submit[:-1], str(planted)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is a symbolic link or not a regular file; not followed" in err, err
    assert private.read_text() == "mine\n" and not (planted / ".submitit" / "101_submission.sh").exists()
