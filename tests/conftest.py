"""Shared fixtures: tiny datasets go to a per-session temporary folder, never to the user's cache."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _tiny_data_root(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["ADASCALE_BENCH_DATA"] = str(tmp_path_factory.mktemp("tiny-data"))
