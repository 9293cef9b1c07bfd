"""`submit --executor slurm` against a real SLURM (CI starts one with slurm/local/start.sh): a matrix of
tiny runs completes and sacct says so, a preempted or requeued job resumes exactly, a cancelled job shows
as failed and resumes on the next submit, and sbatch's refusals are one line.

Never skipped: when no cluster answers, every test fails and says how to start one."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import submitit

from bench.cli import main
from bench.core.files import CHECKPOINT, METRICS, SUMMARY, read_json, read_jsonl
from slurm.job import ATTEMPTS, JOB

pytestmark = pytest.mark.slurm

MATRIX = """\
preset: tiny
seeds: [0]
set: {T1: 40, eval_every: 20}
experiments:
  - table2: {tasks: [logreg, cifar10], methods: [adascale, lsw, lsw+], scales: [1, 2]}
"""
# One logreg run long enough (~10 s of training) to be stopped in the middle, checkpointing every 5 iterations.
LONG = """\
preset: tiny
seeds: [3]
set: {T1: 3000, checkpoint_every: 5}
experiments:
  - table2: {tasks: [logreg], methods: [adascale], scales: [4]}
"""
LONG_RUN = "logreg/adascale/s4/seed3,T1=3000,checkpoint_every=5"
# --time 60: submitit counts a USR2 as a time-out, not a preemption, once 80 % of the limit (or all but
# 10 minutes of it) has passed; with a limit of a few minutes every interruption would be a time-out.
SLURM = ["--executor", "slurm", "--time", "60"]


@pytest.fixture(scope="module", autouse=True)
def cluster() -> None:
    missing = [c for c in ("sbatch", "srun", "sacct", "scontrol") if shutil.which(c) is None]
    if missing:
        pytest.fail(f"no SLURM here ({', '.join(missing)} missing): start one with `sudo bash slurm/local/start.sh`")
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    if ping.returncode != 0 or "UP" not in ping.stdout:
        answer = f"{ping.stdout.strip()} {ping.stderr.strip()}".strip()
        pytest.fail(f"slurmctld does not answer ({answer}): start it with slurm/local/start.sh")
    if subprocess.run(["sacct", "-n", "-X", "-S", "now"], capture_output=True).returncode != 0:
        pytest.fail("sacct does not answer: the cluster needs slurmdbd (slurm/local/start.sh starts it)")


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(body)
    return path


def sacct_states(ids: list[str]) -> dict[str, str]:
    res = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-o", "JobID,State", *[f"-j{i.split('_')[0]}" for i in ids]],
        capture_output=True,
        text=True,
        check=True,
    )
    states = dict(line.split("|", 1) for line in res.stdout.splitlines() if "|" in line)
    return {i: states.get(i, "?").split()[0] for i in ids}


def wait_for(predicate, what: str, timeout: float = 180.0, poll: float = 0.2) -> None:  # noqa: ANN001
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(poll)


def job_id(run_dir: Path) -> str:
    return read_json(run_dir / JOB)["job_id"]


def strip(summary: dict) -> dict:
    """A summary (or a metrics record) without what may differ between identical runs: the time they took
    (an evaluation record's wall_time_s too), and the commit when
    someone commits in between (a shared checkout while developing)."""
    return {k: v for k, v in summary.items() if k not in ("wall_time_s", "git_commit")}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The long run, uninterrupted, in this process (debug executor)."""
    tmp = tmp_path_factory.mktemp("reference")
    assert main(["submit", str(write(tmp, LONG)), "--executor", "debug", "--out", str(tmp / "out")]) == 0
    return tmp / "out" / LONG_RUN


def test_matrix_completes_then_a_second_submit_submits_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path, out = write(tmp_path, MATRIX), tmp_path / "out"
    assert main(["submit", str(path), *SLURM, "--out", str(out), "--wait"]) == 0, capsys.readouterr()
    text = capsys.readouterr().out
    # 2 tasks × (S = 1 once, shared by the three methods, + 3 methods at S = 2)
    assert "8 to submit" in text and "8 runs: 8 done" in text
    runs = sorted(p.parent for p in out.rglob(JOB))
    assert len(runs) == 8
    ids = [job_id(r) for r in runs]
    assert set(sacct_states(ids).values()) == {"COMPLETED"}, sacct_states(ids)
    for r in runs:
        assert read_json(r / SUMMARY)["status"] == "completed"
    # the LSW+ runs were held by an afterany dependency on their AdaScale jobs
    plus = read_json(out / "cifar10/lsw+/s2/seed0,T1=40,eval_every=20" / JOB)
    twin = job_id(out / "cifar10/adascale/s2/seed0,T1=40,eval_every=20")
    assert plus["after"] and (twin in plus["after"] or twin.split("_")[0] in plus["after"])
    script = Path(plus["script"]).read_text()  # the sbatch script of its array
    assert "#SBATCH --dependency=afterany:" in script and "#SBATCH --requeue" in script
    assert "#SBATCH --signal=USR2@" in script

    try:
        from reports.build import build_report
    except ImportError:  # the report builder is not there yet: the results must at least collect
        build_report = None
    from reports.rundata.collect import runs as collect_runs

    df = collect_runs(out)
    assert len(df) == 8 and set(df["status"]) == {"completed"}
    assert set(df["task"]) == {"logreg", "cifar10"} and set(df["method"]) == {"adascale", "lsw", "lsw+"}
    if build_report is not None:
        assert Path(build_report(out, ["md", "csv"])).exists()

    capsys.readouterr()
    assert main(["submit", str(path), *SLURM, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "8 complete" in text and "nothing to submit" in text and "submitted" not in text
    assert [job_id(r) for r in runs] == ids


@pytest.mark.parametrize("how", ["submitit-interrupt", "scontrol-requeue"])
def test_preempted_job_resumes_from_its_checkpoint_exactly(tmp_path: Path, reference: Path, how: str) -> None:
    out = tmp_path / "out"
    assert main(["submit", str(write(tmp_path, LONG)), *SLURM, "--out", str(out)]) == 0
    run_dir = out / LONG_RUN
    wait_for(lambda: (run_dir / CHECKPOINT).exists(), "the first checkpoint")
    jid = job_id(run_dir)
    if how == "submitit-interrupt":  # SIGTERM then USR2: submitit calls RunJob.checkpoint() and requeues
        submitit.SlurmJob(out / ".submitit", jid)._interrupt()
    else:  # SLURM's own requeue: SIGTERM, then SIGKILL after KillWait
        subprocess.run(["scontrol", "requeue", jid], check=True)
    wait_for(lambda: (run_dir / SUMMARY).exists(), "the resumed run to finish")
    wait_for(lambda: sacct_states([jid])[jid] == "COMPLETED", "sacct to say COMPLETED", timeout=60)
    attempts = read_json(run_dir / ATTEMPTS)
    assert [a["job_id"] for a in attempts] == [jid, jid]  # the same job, started twice
    assert strip(read_json(run_dir / SUMMARY)) == strip(read_json(reference / SUMMARY))
    assert [strip(r) for r in read_jsonl(run_dir / METRICS)] == [strip(r) for r in read_jsonl(reference / METRICS)]
    assert not (run_dir / CHECKPOINT).exists()


def test_two_ranks_on_two_gpus_stop_together_and_resume(tmp_path: Path, reference: Path) -> None:
    """W = 2 tasks on the cluster's two (fake) GPUs, gloo on the CPU: preempted, both ranks checkpoint in the
    same iteration, the requeued job resumes and ends where one rank would have (up to float rounding).
    (`accumulation: 2` asks for W = S/A = 2: logreg's card caps it at one rank otherwise.)"""
    out = tmp_path / "out"
    body = LONG.replace("checkpoint_every: 5}", "checkpoint_every: 5, accumulation: 2}")
    assert main(["submit", str(write(tmp_path, body)), *SLURM, "--gpus-per-node", "2", "--out", str(out)]) == 0
    (run_dir,) = [p.parent for p in out.rglob(JOB)]
    job = read_json(run_dir / JOB)
    assert (job["ranks"], job["tasks_per_node"], job["gpus_per_node"], job["accumulation"]) == (2, 2, 2, {"4": 2})
    script = Path(job["script"]).read_text()
    assert "#SBATCH --ntasks-per-node=2" in script and "#SBATCH --gpus-per-node=2" in script
    wait_for(lambda: (run_dir / CHECKPOINT).exists(), "the first checkpoint")
    submitit.SlurmJob(out / ".submitit", job["job_id"])._interrupt()
    wait_for(lambda: (run_dir / SUMMARY).exists(), "the resumed run to finish")
    assert [a["tasks"] for a in read_json(run_dir / ATTEMPTS)] == [2, 2]
    got, want = read_json(run_dir / SUMMARY), read_json(reference / SUMMARY)
    assert got["status"] == "completed" and got["iterations"] == want["iterations"]
    for key in ("val_metric", "train_loss", "tau"):
        assert got[key] == pytest.approx(want[key], rel=1e-9)


def test_fixed_accumulation_moves_the_run_to_more_ranks_when_s_grows(tmp_path: Path) -> None:
    """accumulation = 2 and S = 2 -> 4: one rank, then the job checkpoints and submits its continuation on
    two ranks, which resumes and ends where the one-rank run (A = S) ends, up to float rounding."""
    body = """\
preset: tiny
seeds: [0]
set: {T1: 200, elastic.up: [[0.0, 2], [0.5, 4]]}
experiments:
  - elastic: {tasks: [logreg], methods: [adascale], schedules: [elastic-up]}
"""
    ref = tmp_path / "ref"
    assert main(["submit", str(write(tmp_path, body)), "--executor", "debug", "--out", str(ref)]) == 0
    fixed = body.replace("{T1: 200,", "{T1: 200, accumulation: 2,")
    out = tmp_path / "out"
    assert (
        main(["submit", str(write(tmp_path, fixed)), *SLURM, "--gpus-per-node", "2", "--out", str(out), "--wait"]) == 0
    )
    (run_dir,) = [p.parent for p in out.rglob(JOB)]
    attempts = read_json(run_dir / ATTEMPTS)
    assert [a["tasks"] for a in attempts] == [1, 2] and attempts[0]["job_id"] != attempts[1]["job_id"]
    assert job_id(run_dir) == attempts[1]["job_id"]
    assert set(sacct_states([a["job_id"] for a in attempts]).values()) == {"COMPLETED"}
    (want_dir,) = [p.parent for p in ref.rglob(SUMMARY)]
    got, want = read_json(run_dir / SUMMARY), read_json(want_dir / SUMMARY)
    assert got["status"] == "completed" and got["iterations"] == want["iterations"]
    assert got["val_metric"] == pytest.approx(want["val_metric"], rel=1e-9)


def test_cancelled_job_is_stopped_in_status_and_the_next_submit_resumes_it(
    tmp_path: Path, reference: Path, capsys: pytest.CaptureFixture
) -> None:
    path, out = write(tmp_path, LONG), tmp_path / "out"
    assert main(["submit", str(path), *SLURM, "--out", str(out)]) == 0
    run_dir = out / LONG_RUN
    wait_for(lambda: (run_dir / CHECKPOINT).exists(), "the first checkpoint")
    jid = job_id(run_dir)
    subprocess.run(["scancel", jid], check=True)
    wait_for(lambda: sacct_states([jid])[jid] == "CANCELLED", "sacct to say CANCELLED", timeout=60)
    capsys.readouterr()
    assert main(["status", str(out)]) == 0  # stopped from outside with a checkpoint: nothing failed
    text = capsys.readouterr().out
    assert "logreg  adascale  4" in text and "stopped" in text
    assert f"{LONG_RUN} (job {jid}, CANCELLED)" in text and "checkpoint saved" in text

    res = subprocess.run([sys.executable, "-m", "bench", "status", str(out)], capture_output=True, text=True)
    assert res.returncode == 0 and "1 runs: 1 stopped" in res.stdout

    assert main(["submit", str(path), *SLURM, "--out", str(out), "--wait"]) == 0
    assert "1 to submit" in capsys.readouterr().out
    assert job_id(run_dir) != jid and len(read_json(run_dir / ATTEMPTS)) == 2
    assert strip(read_json(run_dir / SUMMARY)) == strip(read_json(reference / SUMMARY))


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        (["--partition", "no-such-partition"], "invalid partition specified: no-such-partition"),
        (["--gpus-per-node", "64"], "Requested node configuration is not available"),  # sbatch refuses
        (["--cpus-per-task", "64"], "Requested node configuration is not available"),  # sbatch would queue it
    ],
)
def test_sbatch_refusals_are_one_line_with_slurms_reason(tmp_path: Path, options: list[str], reason: str) -> None:
    body = MATRIX.replace("scales: [1, 2]", "scales: [64]").replace("[logreg, cifar10]", "[logreg]")
    if "--gpus-per-node" in options:  # accumulation 1: W = S = 64 ranks asked for by the run itself (a tiny
        body = body.replace("eval_every: 20}", "eval_every: 20, accumulation: 1}")  # run is capped at one rank)
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "bench", "submit", str(write(tmp_path, body)), *SLURM, "--out", str(out), *options],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "sbatch refused" in res.stderr and reason in res.stderr and "Traceback" not in res.stderr
    assert not list(out.rglob(JOB))  # nothing left half-submitted
    assert json.loads((out / "matrix.json").read_text())["runs"]  # status still knows what was asked


def test_elastic_down_ending_at_one_rank_completes_and_equals_the_local_executor(tmp_path: Path) -> None:
    """accumulation 2 and S = 4 -> 2: the W = 2 job checkpoints and submits its continuation on W = 1,
    which must not inherit RANK/WORLD_SIZE/MASTER_* from the job that submitted it (it once waited for a
    second rank until the collective timeout). The metrics equal the local executor's, record for record."""
    body = """\
preset: tiny
seeds: [0]
set: {T1: 200, accumulation: 2, elastic.down: [[0.0, 4], [0.5, 2]]}
experiments:
  - elastic: {tasks: [logreg], methods: [adascale], schedules: [elastic-down]}
"""
    path = write(tmp_path, body)
    local, out = tmp_path / "local", tmp_path / "out"
    assert main(["submit", str(path), "--executor", "local", "--gpus-per-node", "2", "--out", str(local)]) == 0
    assert main(["submit", str(path), *SLURM, "--gpus-per-node", "2", "--out", str(out), "--wait"]) == 0
    (run_dir,) = [p.parent for p in out.rglob(JOB)]
    attempts = read_json(run_dir / ATTEMPTS)
    assert [a["tasks"] for a in attempts] == [2, 1]
    assert set(sacct_states([a["job_id"] for a in attempts]).values()) == {"COMPLETED"}
    want = local / run_dir.relative_to(out)
    assert [strip(r) for r in read_jsonl(run_dir / METRICS)] == [strip(r) for r in read_jsonl(want / METRICS)]
    assert strip(read_json(run_dir / SUMMARY)) == strip(read_json(want / SUMMARY))


def test_a_port_in_use_is_the_cause_status_shows(tmp_path: Path) -> None:
    """MASTER_PORT exported at submit is kept for the job's group; 6817 is slurmctld's: rank 0 cannot bind
    it, records why (rank, node, 'address in use') before the other rank learns of it, and both end at
    once (srun --kill-on-bad-exit) instead of waiting for the collective timeout."""
    body = MATRIX.replace("[logreg, cifar10]", "[logreg]").replace("methods: [adascale, lsw, lsw+], scales: [1, 2]",
                                                                  "methods: [adascale], scales: [2]")  # fmt: skip
    body = body.replace("eval_every: 20}", "eval_every: 20, accumulation: 1}")  # W = S/A = 2 ranks
    out = tmp_path / "out"
    submit = [sys.executable, "-m", "bench", "submit", str(write(tmp_path, body)), *SLURM, "--gpus-per-node", "2"]
    env = {**os.environ, "MASTER_PORT": "6817"}
    res = subprocess.run([*submit, "--out", str(out), "--wait"], capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 1, res.stdout + res.stderr
    status = subprocess.run([sys.executable, "-m", "bench", "status", str(out)], capture_output=True, text=True)
    assert status.returncode == 1
    unwrapped = status.stdout.replace("\n    ", " ")  # status wraps a long reason at 160 characters, never cuts it
    line = next(ln for ln in unwrapped.splitlines() if ln.startswith("  logreg/"))
    assert re.search(r"the process group did not start: rank 0 on n?\S+: MASTER_PORT 6817 .* address in use", line), (
        line
    )
    (run_dir,) = [p.parent for p in out.rglob(JOB)]
    assert read_json(run_dir / SUMMARY)["rank"] == 0 and "address in use" in (run_dir / "error.log").read_text()


def _rank_pid(job: str, rank: int) -> int | None:
    for proc in Path("/proc").iterdir():
        try:
            env = dict(v.split("=", 1) for v in (proc / "environ").read_text().split("\0") if "=" in v)
        except (OSError, ValueError):
            continue
        if env.get("SLURM_JOB_ID") == job and env.get("SLURM_PROCID") == str(rank) and "SLURM_STEP_ID" in env:
            if b"submitit" in (proc / "cmdline").read_bytes():
                return int(proc.name)
    return None


def test_a_killed_rank_is_named_with_its_node(tmp_path: Path) -> None:
    """Rank 1 of a W = 2 job is killed mid-run: rank 0 loses it in a collective (gloo: "Connection reset by
    peer", naming neither); status names the rank that ended first and its node, as srun saw it."""
    body = LONG.replace("T1: 3000, checkpoint_every: 5}", "T1: 300000, checkpoint_every: 0, accumulation: 2}")
    out = tmp_path / "out"
    assert main(["submit", str(write(tmp_path, body)), *SLURM, "--gpus-per-node", "2", "--out", str(out)]) == 0
    (run_dir,) = [p.parent for p in out.rglob(JOB)]
    wait_for(lambda: (run_dir / METRICS).exists(), "the first metrics", timeout=600)
    jid = job_id(run_dir)
    wait_for(lambda: _rank_pid(jid, 1) is not None, "rank 1's process")
    os.kill(_rank_pid(jid, 1), 9)
    wait_for(lambda: sacct_states([jid])[jid] not in ("RUNNING", "PENDING", "?"), "the job to end", timeout=300)
    res = subprocess.run([sys.executable, "-m", "bench", "status", str(out)], capture_output=True, text=True)
    assert res.returncode == 1 and "failed" in res.stdout
    assert re.search(r"rank 1 on \S+ ended first \(Killed, says srun\)", res.stdout), res.stdout


def test_a_run_under_slurm_prints_heartbeat_lines_in_its_log(tmp_path: Path) -> None:
    """A SLURM job's stdout is a file, not a terminal: the run prints a heartbeat line every heartbeat_s
    seconds (bench/core/engine/heartbeat.py), with τ/T1 and an ETA, into the log `status` points at; and
    `status --json` gives the run's τ, T1 and progress."""
    body = LONG.replace("checkpoint_every: 5}", "checkpoint_every: 5, heartbeat_s: 1}")
    path, out = write(tmp_path, body), tmp_path / "out"
    assert main(["submit", str(path), *SLURM, "--out", str(out), "--wait"]) == 0
    run = out / LONG_RUN  # heartbeat_s is a run setting, not part of the run's identity (its folder)
    assert read_json(run / SUMMARY)["status"] == "completed"
    log = Path(read_json(run / JOB)["stdout"]).read_text()
    beats = [line for line in log.splitlines() if line.startswith("heartbeat logreg adascale s4 seed3")]
    assert beats, log[-2000:]
    assert all(re.search(r"τ \d+/3000 \([\d.]+%\).* ETA (\d+:\d\d:\d\d|unknown)$", b) for b in beats), beats
    assert any(re.search(r"ETA \d+:\d\d:\d\d$", b) for b in beats), beats
    res = subprocess.run(
        [sys.executable, "-m", "bench", "status", str(out), "--json"], capture_output=True, text=True, timeout=120
    )
    (state,) = [r for r in json.loads(res.stdout)["runs"] if r["name"] == LONG_RUN]
    assert state["state"] == "done" and state["T1"] == 3000 and state["progress"] == pytest.approx(1.0, abs=0.01)
