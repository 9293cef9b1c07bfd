"""Shared fixtures: tiny datasets go to a per-session temporary folder, never to the user's cache."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _tiny_data_root(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["ADASCALE_BENCH_DATA"] = str(tmp_path_factory.mktemp("tiny-data"))


@pytest.fixture(scope="session", autouse=True)
def _own_config_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The report's seal key (bench.core.safefs.Seal) goes to a per-session config folder, never the user's."""
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("config"))


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """One intra-op thread for a module of tiny models (`pytestmark = pytest.mark.usefixtures("one_thread")`):
    the numbers do not depend on it, and on a loaded 2-core box a 2-thread pool spins and slows small ops ~10x."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def smoke_gain_results(tmp_path_factory: pytest.TempPathFactory):
    """A results folder holding the smoke's Figure 2 run on logreg (AdaScale S = 8, tiny preset: 423
    iterations, weights kept every 50) with `gain` measured at its initial weights and 8 kept checkpoints
    as the smoke measures it (256 micro-batches): (results folder, run folder). ~10 s, once per session."""
    from bench.run.offline_gain import BATCHES, offline_gains
    from bench.run.spec import run_name
    from tests.helpers import spec_for, train

    out = tmp_path_factory.mktemp("smoke-gain")
    spec = spec_for("logreg", "adascale", 8, keep_checkpoints_every=50)
    run_dir = out / run_name(spec)
    train(spec, run_dir)
    offline_gains(run_dir, batches=BATCHES["tiny"], progress=False)
    return out, run_dir
