"""How the ranks of one SLURM job find each other, and what a job submitted from inside another inherits.

torch's `env://` rendezvous takes MASTER_ADDR:MASTER_PORT on faith: every rank dials it, rank 0 binds it,
and a problem (the port taken, the name not resolving on a node, a rank that never started) surfaces as a
timeout after the collective timeout, with no word on which rank or node. Here, as torchrun does with its
own join timeout, the group is formed in two steps before torch.distributed sees it:

1. rank 0 binds the store (torch's TCPStore) on the first free port of a list derived from the job id (the
   user's MASTER_PORT only, when one was exported at submit) and announces it in a small file in the job
   folder that every node shares (submitit's folder: its pickles are read there already), per attempt of
   the job (a requeued job has the same id: SLURM_RESTART_COUNT tells the attempts apart);
2. every other rank reads the announcement, checks that the master's name resolves, joins the store and
   checks in; rank 0 waits for all of them at most the join timeout and names those that did not come.

Any failure raises GroupFailed naming the rank, its node and the cause; the job records it in the run
folder, where `status` and `report` show it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.core.files import read_json_object, write_json

# What one process of a job is told about its place in it: torchrun's variables (RANK ... MASTER_PORT, its
# GROUP_/ROLE_/TORCHELASTIC_ family), the scheduler's and submitit's, and the devices the allocation gave.
# A job submitted from inside another (an elastic continuation) must start without any of them: sbatch
# exports the whole environment, and a W = 1 job that inherits WORLD_SIZE=2 waits for a second rank.
DIST_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
)
INHERITED_PREFIXES = ("SLURM_", "SLURMD_", "SBATCH_", "SRUN_", "SUBMITIT_", "TORCHELASTIC_", "GROUP_", "ROLE_")

# Ports derived from a job id: [10000, 32768), below Linux's ephemeral range (32768-60999), where the
# kernel picks the ports of outgoing connections. Two jobs fewer than PORT_SPAN ids apart never start on
# the same port; a port in use is skipped (PORT_TRIES candidates, PORT_STEP apart).
PORT_LOW, PORT_SPAN, PORT_STEP, PORT_TRIES = 10000, 22768, 4099, 8
DEFAULT_JOIN_TIMEOUT_MIN = 10.0  # torchrun's c10d rendezvous waits 600 s for its peers by default
_POLL_S = 0.2


def inherited(name: str) -> bool:
    """Whether an environment variable belongs to the running job or process group (see DIST_VARIABLES)."""
    return name in DIST_VARIABLES or name.startswith(INHERITED_PREFIXES)


@contextlib.contextmanager
def clean_environment() -> Iterator[None]:
    """Within the block, os.environ has no inherited variable (what sbatch exports to the job it submits);
    they are put back after."""
    saved = {k: v for k, v in os.environ.items() if inherited(k)}
    for key in saved:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.update(saved)


def user_port(value: str | None) -> int | None:
    """The MASTER_PORT exported when submitting (a cluster that opens only some ports), as a port number."""
    if value is None or value.strip() == "":
        return None
    text = value.strip()
    if not text.isdigit() or not 0 < int(text) < 65536:
        from bench.core.errors import UserError

        raise UserError(f"MASTER_PORT={value!r} is not a port number (1-65535)")
    return int(text)


def candidate_ports(job_id: str) -> list[int]:
    """The ports rank 0 tries, in order, for the job `job_id` (SLURM_JOB_ID: unique per array task too)."""
    digits = "".join(c for c in str(job_id) if c.isdigit()) or "0"
    n = int(digits)
    return [PORT_LOW + (n + k * PORT_STEP) % PORT_SPAN for k in range(PORT_TRIES)]


class GroupFailed(RuntimeError):
    """The process group did not start; the message names the rank, its node and the cause."""

    def __init__(self, rank: int, node: str, cause: str, relayed: bool = False) -> None:
        super().__init__(f"rank {rank} on {node}: {cause}")
        self.rank, self.node, self.cause = rank, node, cause
        self.relayed = relayed  # another rank's failure, which that rank records


@dataclass(frozen=True)
class Member:
    """One rank of a job as the scheduler placed it."""

    rank: int
    world: int
    node: str  # the SLURM node name of this rank
    master: str  # the first node's name: where rank 0 runs and binds the store
    job_id: str  # SLURM_JOB_ID
    attempt: int  # SLURM_RESTART_COUNT: 0, then one more for each requeue
    tasks_per_node: int

    def node_of(self, rank: int, nodes: list[str]) -> str:
        """The node SLURM's default (block) distribution puts `rank` on."""
        index = rank // max(1, self.tasks_per_node)
        return nodes[index] if index < len(nodes) else "?"


def announcement(folder: Path, member: Member) -> Path:
    return Path(folder) / f"{member.job_id}.attempt{member.attempt}.rendezvous.json"


def _in_use(error: BaseException) -> bool:
    text = str(error)
    return (
        "EADDRINUSE" in text
        or "address already in use" in text.lower()
        or getattr(error, "errno", 0) == errno.EADDRINUSE
    )


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def _ranks(ranks: list[int], member: Member, nodes: list[str]) -> str:
    by_node: dict[str, list[int]] = {}
    for r in ranks:
        by_node.setdefault(member.node_of(r, nodes), []).append(r)
    return "; ".join(f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))} on {n}" for n, rs in by_node.items())


def _bind(member: Member, ports: list[int], join_s: float, fixed: bool) -> Any:
    """Rank 0: the store on the first free port of `ports`."""
    import torch.distributed as dist

    last: BaseException | None = None
    for port in ports:
        try:
            return dist.TCPStore(
                member.master, port, member.world, True, timedelta(seconds=join_s), wait_for_workers=False
            )
        except Exception as e:  # DistNetworkError
            if not _in_use(e):
                raise GroupFailed(0, member.node, f"cannot start the store on {member.master}:{port}: {e}") from None
            last = e
            if fixed:
                raise GroupFailed(
                    0,
                    member.node,
                    f"MASTER_PORT {port} (exported when submitting) is in use on {member.node}: address in use",
                ) from None
    raise GroupFailed(
        0, member.node, f"every port tried ({', '.join(map(str, ports))}) is in use on {member.node}: {last}"
    )


def _read_announcement(path: Path, member: Member, join_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + join_s
    while True:
        told = read_json_object(path)
        if told is not None and told.get("job_id") == member.job_id and told.get("attempt") == member.attempt:
            return told
        if time.monotonic() > deadline:
            raise GroupFailed(
                member.rank,
                member.node,
                f"rank 0 ({member.master}) did not announce its store within the join timeout ({_minutes(join_s)})",
            )
        time.sleep(_POLL_S)


def join(
    member: Member,
    folder: Path,
    join_s: float,
    collective_s: float,
    port: int | None,
    nodes: list[str],
    on_failure: Callable[[GroupFailed], None] = lambda e: None,
) -> Any:
    """The store every rank of the job shares, once all W ranks have checked in (at most `join_s`); its
    timeout is then the collective timeout. Raises GroupFailed naming who failed where, and why; rank 0
    calls `on_failure` (the record) before the other ranks learn of its failure and end."""
    import torch.distributed as dist

    path = announcement(folder, member)
    if member.rank == 0:
        ports = [port] if port else candidate_ports(member.job_id)
        try:
            store = _bind(member, ports, join_s, fixed=port is not None)
        except GroupFailed as e:
            on_failure(e)
            write_json(path, {"job_id": member.job_id, "attempt": member.attempt, "failed": str(e)})
            raise
        write_json(path, {"job_id": member.job_id, "attempt": member.attempt, "port": store.port, "node": member.node})
        store.set("rank/0", member.node)
        others = [f"rank/{r}" for r in range(1, member.world)]
        try:
            store.wait(others, timedelta(seconds=join_s))
        except Exception:
            missing = [r for r in range(1, member.world) if not store.check([f"rank/{r}"])]
            raise GroupFailed(
                0,
                member.node,
                f"{_ranks(missing, member, nodes)} did not join within the join timeout ({_minutes(join_s)})",
            ) from None
        store.set("joined", "1")
        path.unlink(missing_ok=True)
    else:
        told = _read_announcement(path, member, join_s)
        if "failed" in told:
            raise GroupFailed(member.rank, member.node, f"rank 0 could not start: {told['failed']}", relayed=True)
        port = int(told["port"])
        try:
            socket.getaddrinfo(member.master, port, type=socket.SOCK_STREAM)
        except OSError as e:
            raise GroupFailed(
                member.rank, member.node, f"the master's name {member.master!r} does not resolve: {e}"
            ) from None
        try:
            store = dist.TCPStore(member.master, port, member.world, False, timedelta(seconds=join_s))
            store.set(f"rank/{member.rank}", member.node)
            store.wait(["joined"], timedelta(seconds=join_s))
        except Exception as e:
            raise GroupFailed(
                member.rank, member.node, f"cannot join rank 0's store at {member.master}:{port}: {e}"
            ) from None
    store.set_timeout(timedelta(seconds=collective_s))
    return store


# -- srun's word on a task that ended badly ---------------------------------------------------------------------
_SRUN_TASK = re.compile(r"srun: error: (?P<node>\S+): tasks? (?P<tasks>[0-9][0-9,\-]*): (?P<how>.+)")


def first_bad_task(text: str) -> tuple[str, str, str] | None:
    """(tasks, node, how) of srun's first "task N: Killed / Exited with exit code K" line in a job's log:
    the rank that ended first, which the others then lost (task N is the global rank N)."""
    for line in text.splitlines():
        m = _SRUN_TASK.search(line)
        if m:
            return m["tasks"], m["node"], m["how"].strip()
    return None


def describe_bad_task(text: str) -> str | None:
    found = first_bad_task(text)
    if found is None:
        return None
    tasks, node, how = found
    many = "," in tasks or "-" in tasks
    return f"rank{'s' if many else ''} {tasks} on {node} ended first ({how}, says srun)"
