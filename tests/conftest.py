"""Shared fixtures: tiny datasets go to a per-session temporary folder, never to the user's cache."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _tiny_data_root(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["ADASCALE_BENCH_DATA"] = str(tmp_path_factory.mktemp("tiny-data"))


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """One intra-op thread for a module of tiny models (`pytestmark = pytest.mark.usefixtures("one_thread")`):
    the numbers do not depend on it, and on a loaded 2-core box a 2-thread pool spins and slows small ops ~10x."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
