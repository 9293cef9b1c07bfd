"""The multi-node path on two SLURM nodes (CI starts them with slurm/local/two_nodes.sh: n1 and n2 on this
machine, each with its own slurmd and two fake GPUs): S = 4 as 2 nodes × 2 ranks and as 2 × 1 gives the
metrics of one rank, record for record; a requeue mid-run resumes exactly on both nodes; elastic runs whose
W follows S (accumulation fixed at 2) move across nodes and back down to one rank, and equal the local
executor's runs. sacct must show the jobs on n[1-2].

Never skipped: without the two nodes every test fails and says how to start them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.files import CHECKPOINT, METRICS, SUMMARY, read_json, read_jsonl
from slurm.job import ATTEMPTS, JOB
from tests.slurm.test_slurm_cluster import SLURM, job_id, sacct_states, strip, wait_for, write

pytestmark = pytest.mark.slurm

S4 = """\
preset: tiny
seeds: [3]
set: {T1: 3000, checkpoint_every: CHECKPOINTS}
experiments:
  - table2: {tasks: [logreg], methods: [adascale], scales: [4]}
"""
S4_RUN = "logreg/adascale/s4/seed3,T1=3000,checkpoint_every=CHECKPOINTS"
ELASTIC = """\
preset: tiny
seeds: [0]
set: {T1: 200}
experiments:
  - elastic: {tasks: [logreg], methods: [adascale], schedules: [elastic-up, elastic-down]}
"""
TWO_NODES = [*SLURM, "--gpus-per-node", "2", "--max-nodes", "2"]


@pytest.fixture(scope="module", autouse=True)
def two_nodes() -> None:
    if shutil.which("sinfo") is None:
        pytest.fail("no SLURM here: start two nodes with `sudo bash slurm/local/two_nodes.sh`")
    res = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True)
    up = {
        line.split()[0] for line in res.stdout.splitlines() if line.split()[1:2] in (["idle"], ["mixed"], ["allocated"])
    }
    if not {"n1", "n2"} <= up:
        pytest.fail(
            f"nodes n1 and n2 are not up ({res.stdout.strip() or res.stderr.strip()}): slurm/local/two_nodes.sh"
        )


def nodes_of(jid: str, requeued: bool = False) -> list[tuple[str, str, str]]:
    """(state, nnodes, nodelist) of a job's allocation, each record of it with `requeued` (sacct -D)."""
    res = subprocess.run(
        ["sacct", "-n", "-X", "-P", *(["-D"] if requeued else []), "-j", jid, "-o", "State,NNodes,NodeList"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [tuple(line.split("|")) for line in res.stdout.splitlines() if line]  # type: ignore[misc]


def metrics(run_dir: Path) -> list[dict]:
    return [strip(r) for r in read_jsonl(run_dir / METRICS)]


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """S = 4 on one rank (A = 4), in this process."""
    tmp = tmp_path_factory.mktemp("one")
    path = write(tmp, S4.replace("CHECKPOINTS", "0"))
    assert main(["submit", str(path), "--executor", "debug", "--out", str(tmp / "out")]) == 0
    return tmp / "out" / S4_RUN.replace("CHECKPOINTS", "0")


@pytest.mark.parametrize(
    ("accumulation", "options", "shape"), [(1, TWO_NODES, (2, 2)), (2, [*SLURM, "--max-nodes", "2"], (2, 1))]
)
def test_s4_split_over_two_nodes_equals_one_rank(
    tmp_path: Path, one_rank: Path, accumulation: int, options: list[str], shape: tuple[int, int]
) -> None:
    """W = S/A ranks as nodes × ranks per node (fake GPUs: 2 per node; none: 1 per node)."""
    body = S4.replace("CHECKPOINTS", "0").replace(
        "checkpoint_every: 0}", f"checkpoint_every: 0, accumulation: {accumulation}}}"
    )
    out = tmp_path / "out"
    assert main(["submit", str(write(tmp_path, body)), *options, "--out", str(out), "--wait"]) == 0
    (run_dir,) = [p.parent for p in out.rglob(JOB)]
    job = read_json(run_dir / JOB)
    assert (job["nodes"], job["tasks_per_node"]) == shape
    assert nodes_of(job["job_id"]) == [("COMPLETED", "2", "n[1-2]")]
    assert metrics(run_dir) == metrics(one_rank)
    assert strip(read_json(run_dir / SUMMARY)) == strip(read_json(one_rank / SUMMARY))


def test_a_requeue_on_two_nodes_resumes_exactly(tmp_path: Path, one_rank: Path) -> None:
    body = S4.replace("CHECKPOINTS", "5").replace("checkpoint_every: 5}", "checkpoint_every: 5, accumulation: 1}")
    out = tmp_path / "out"
    assert main(["submit", str(write(tmp_path, body)), *TWO_NODES, "--out", str(out)]) == 0
    wait_for(lambda: list(out.rglob(JOB)), "the job record")
    (run_dir,) = [p.parent for p in out.rglob(JOB)]
    wait_for(lambda: (run_dir / CHECKPOINT).exists(), "the first checkpoint", timeout=600)
    jid = job_id(run_dir)
    subprocess.run(["scontrol", "requeue", jid], check=True)
    wait_for(lambda: (run_dir / SUMMARY).exists(), "the resumed run to finish", timeout=900)
    wait_for(lambda: sacct_states([jid])[jid] == "COMPLETED", "sacct to say COMPLETED", timeout=120)
    records = nodes_of(jid, requeued=True)
    assert [r[0] for r in records] == ["REQUEUED", "COMPLETED"] and {r[2] for r in records} == {"n[1-2]"}, records
    assert [a["tasks"] for a in read_json(run_dir / ATTEMPTS)] == [4, 4]
    assert metrics(run_dir) == metrics(one_rank)  # checkpoints change no number
    assert strip(read_json(run_dir / SUMMARY)) == strip(read_json(one_rank / SUMMARY))


@pytest.fixture(scope="module")
def elastic_local(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both elastic schedules on the local executor (one rank each: logreg's card caps it; A = S)."""
    tmp = tmp_path_factory.mktemp("elastic-local")
    assert main(["submit", str(write(tmp, ELASTIC)), "--executor", "local", "--out", str(tmp / "out")]) == 0
    return tmp / "out"


@pytest.mark.parametrize(("schedule", "tasks"), [("elastic-up", [1, 2, 4]), ("elastic-down", [4, 2, 1])])
def test_elastic_runs_cross_the_nodes_and_equal_the_local_executor(
    tmp_path: Path, elastic_local: Path, schedule: str, tasks: list[int]
) -> None:
    """accumulation 2: W = S/2 follows the schedule (tiny: S 2 -> 4 -> 8, or back), one job per W, each
    submitted by the one before; W = 4 spans both nodes, and the last elastic-down job runs one rank."""
    body = ELASTIC.replace("{T1: 200}", "{T1: 200, accumulation: 2}").replace("elastic-up, elastic-down", schedule)
    out = tmp_path / "out"
    assert main(["submit", str(write(tmp_path, body)), *TWO_NODES, "--out", str(out), "--wait"]) == 0
    (run_dir,) = [p.parent for p in out.rglob(JOB)]
    attempts = read_json(run_dir / ATTEMPTS)
    assert [a["tasks"] for a in attempts] == tasks
    ids = [a["job_id"] for a in attempts]
    assert set(sacct_states(ids).values()) == {"COMPLETED"}
    spans = {a["tasks"]: nodes_of(a["job_id"])[0] for a in attempts}
    assert spans[4][1:] == ("2", "n[1-2]") and spans[1][1] == "1", spans
    want = elastic_local / f"logreg/adascale/{schedule}/seed0,T1=200"
    assert metrics(run_dir) == metrics(want)
    assert strip(read_json(run_dir / SUMMARY)) == strip(read_json(want / SUMMARY))
