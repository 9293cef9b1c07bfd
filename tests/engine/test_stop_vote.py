"""W = 2 gloo ranks: a stop wish rides on the iteration's one gather (bench.core.engine.accumulate.StopVote), so every
rank learns that some rank was signalled with the iteration's single host transfer, and agreeing with a
collective of its own (what the engine did) costs a second one."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from bench.core.engine.accumulate import StopVote, accumulate
from bench.core.engine.distributed import Dist
from bench.experiments.syncs import count_host_syncs
from tests.helpers import run_ranks


class Mean(nn.Module):
    def loss(self, model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        return model(batch).pow(2).mean()


def _rank(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = nn.Linear(3, 1)
        params = list(model.parameters())
        mbs = [torch.randn(4, 3) for _ in range(2)]
        found = []
        for wish in ([False, False], [False, True], [True, True]):
            vote = StopVote(wish[rank])

            def step(vote: StopVote = vote) -> None:
                model.zero_grad()
                accumulate(model, Mean(), iter(mbs), [0, 1], params, None, 2 * world, Dist(rank, world), vote)

            per, _ = count_host_syncs(step)
            found.append([vote.anyone, per])
        own, _ = count_host_syncs(lambda: Dist(rank, world).any(False))  # a collective of its own
        Path(out, f"rank{rank}.json").write_text(json.dumps({"found": found, "own": own}))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_every_rank_learns_a_stop_from_the_one_gather(tmp_path: Path) -> None:
    run_ranks(_rank, str(tmp_path))
    for r in range(2):
        got = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert got["found"] == [[False, 1], [True, 1], [True, 1]]  # rank 1's wish reaches rank 0, one transfer
        assert got["own"] == 1  # agreeing by a separate collective: a second host read per iteration
