"""How the ranks of a SLURM job meet (slurm/procgroup.py), without SLURM: the ranks are threads of this
process and the job folder a temporary one. A port in use is skipped, the user's port in use is named, a
rank that never comes is named with its node after the join timeout (not the collective timeout), a master
name that does not resolve is named, and a job submitted from inside another starts without its variables."""

from __future__ import annotations

import os
import socket
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from slurm import procgroup
from slurm.procgroup import GroupFailed, Member, candidate_ports, join


def member(rank: int, world: int, job_id: str, nodes: tuple[str, ...] = ("localhost",), per_node: int = 0) -> Member:
    per_node = per_node or world
    return Member(rank, world, nodes[rank // per_node], "localhost", job_id, 0, per_node)


def free_candidate() -> tuple[str, socket.socket]:
    """A job id whose first candidate port this test holds (listening), so that it is in use."""
    for offset in range(0, procgroup.PORT_SPAN, 97):
        sock = socket.socket()
        try:
            sock.bind(("", procgroup.PORT_LOW + offset))
        except OSError:
            sock.close()
            continue
        sock.listen()
        return str(offset), sock
    raise AssertionError("no free port in the candidate range")


def in_threads(*calls: Any) -> list[Any]:
    """Run each call on its own thread; their results (or the exception each raised), in order."""
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            out[i] = calls[i]()
        except Exception as e:  # handed back to the test
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_ports_of_nearby_jobs_differ_and_stay_below_the_ephemeral_range() -> None:
    first = [candidate_ports(str(1_000_000 + k))[0] for k in range(procgroup.PORT_SPAN)]
    assert len(set(first)) == procgroup.PORT_SPAN  # no two jobs fewer than PORT_SPAN ids apart collide
    assert candidate_ports("12345")[0] != candidate_ports("32345")[0]  # 20 000 apart (the old rule collided)
    assert all(10000 <= p < 32768 for k in (0, 7, 123456789) for p in candidate_ports(str(k)))
    assert len(set(candidate_ports("42"))) == procgroup.PORT_TRIES


def test_rank_0_skips_a_port_in_use_and_every_rank_joins_its_store(tmp_path: Path) -> None:
    job_id, held = free_candidate()
    try:
        stores = in_threads(
            lambda: join(member(0, 2, job_id), tmp_path, 30, 7, None, ["localhost"]),
            lambda: join(member(1, 2, job_id), tmp_path, 30, 7, None, ["localhost"]),
        )
    finally:
        held.close()
    assert not [s for s in stores if isinstance(s, Exception)], stores
    assert stores[0].port == candidate_ports(job_id)[1]  # the first candidate was taken: the second one
    assert stores[1].get("rank/0") == b"localhost"
    assert stores[0].timeout == timedelta(seconds=7)  # after the join: the collective timeout
    assert not procgroup.announcement(tmp_path, member(0, 2, job_id)).exists()  # read by all: removed


def test_the_users_port_in_use_is_named_and_the_other_ranks_learn_it_at_once(tmp_path: Path) -> None:
    job_id, held = free_candidate()
    port = candidate_ports(job_id)[0]
    recorded: list[GroupFailed] = []
    try:
        errors = in_threads(
            lambda: join(member(0, 2, job_id), tmp_path, 30, 7, port, ["localhost"], recorded.append),
            lambda: join(member(1, 2, job_id), tmp_path, 30, 7, port, ["localhost"]),
        )
    finally:
        held.close()
    assert isinstance(errors[0], GroupFailed) and not errors[0].relayed
    assert f"MASTER_PORT {port} (exported when submitting) is in use on localhost: address in use" in str(errors[0])
    assert recorded == [errors[0]]  # recorded before the other ranks were told
    assert isinstance(errors[1], GroupFailed) and errors[1].relayed and "address in use" in str(errors[1])


def test_a_rank_that_never_comes_is_named_with_its_node_after_the_join_timeout(tmp_path: Path) -> None:
    nodes = ("n1", "n2")
    errors = in_threads(
        lambda: join(member(0, 4, "77", nodes, 2), tmp_path, 3, 1800, None, list(nodes)),
        lambda: join(member(1, 4, "77", nodes, 2), tmp_path, 3, 1800, None, list(nodes)),
        lambda: join(member(2, 4, "77", nodes, 2), tmp_path, 3, 1800, None, list(nodes)),
    )  # rank 3 (on n2) never starts
    assert isinstance(errors[0], GroupFailed)
    assert str(errors[0]) == "rank 0 on n1: rank 3 on n2 did not join within the join timeout (3 s)"
    assert all(isinstance(e, GroupFailed) for e in errors[1:])


def test_a_master_name_that_does_not_resolve_is_named(tmp_path: Path) -> None:
    me = Member(1, 2, "n2", "no-such-node.invalid", "78", 0, 1)
    procgroup.write_json(procgroup.announcement(tmp_path, me), {"job_id": "78", "attempt": 0, "port": 12345})
    with pytest.raises(GroupFailed, match=r"^rank 1 on n2: the master's name 'no-such-node.invalid' does not resolve"):
        join(me, tmp_path, 5, 5, None, ["no-such-node.invalid", "n2"])


def test_an_earlier_attempts_announcement_is_not_read(tmp_path: Path) -> None:
    me = Member(1, 2, "n2", "localhost", "79", 1, 1)  # the requeued job's second attempt
    procgroup.write_json(tmp_path / "79.attempt0.rendezvous.json", {"job_id": "79", "attempt": 0, "port": 1})
    with pytest.raises(GroupFailed, match="did not announce its store within the join timeout"):
        join(me, tmp_path, 1, 5, None, ["n1", "n2"])


def test_clean_environment_drops_every_inherited_variable_and_puts_it_back(monkeypatch: pytest.MonkeyPatch) -> None:
    inherited = {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "n1",
        "MASTER_PORT": "23456",
        "GROUP_RANK": "0",
        "TORCHELASTIC_RUN_ID": "x",
        "SLURM_JOB_ID": "5",
        "SLURMD_NODENAME": "n1",
        "SUBMITIT_EXECUTOR": "slurm",
        "CUDA_VISIBLE_DEVICES": "0,1",
    }
    for k, v in inherited.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    with procgroup.clean_environment():
        assert not [k for k in inherited if k in os.environ]
        assert os.environ["PYTHONPATH"] == "/somewhere"
    assert all(os.environ[k] == v for k, v in inherited.items())


SRUN_LOG = """\
[rank0]: RuntimeError: [../gloo/transport/tcp/pair.cc:538] Read error [127.0.0.1]:7902: Connection reset by peer
srun: error: n2: task 3: Killed
srun: launch/slurm: _step_signal: Terminating StepId=4.0
srun: error: n1: tasks 0-1: Terminated
srun: error: n2: task 2: Terminated
"""


def test_srun_names_the_rank_that_ended_first() -> None:
    assert procgroup.first_bad_task(SRUN_LOG) == ("3", "n2", "Killed")
    assert procgroup.describe_bad_task(SRUN_LOG) == "rank 3 on n2 ended first (Killed, says srun)"
    assert procgroup.describe_bad_task("srun: error: n1: tasks 0-1: Terminated\n").startswith("ranks 0-1 on n1")
    assert procgroup.describe_bad_task("training...\nslurmstepd: error: *** JOB 7 CANCELLED ***\n") is None
