"""The paper's findings as checks, on synthetic folders where each holds and where it does not."""

from __future__ import annotations

import pytest

from reports.findings import FAILS, HOLDS, NOT_RUN, SEEDS, findings, text

from .test_reports import quiet_load, seeds, write_run


def status(tmp_path, check: str) -> tuple[str, str]:
    f = findings(quiet_load(tmp_path))
    r = f[f["check"] == check].iloc[0]
    return r["status"], r["detail"]


@pytest.fixture
def paperlike(tmp_path):
    """AdaScale keeps S = 1's accuracy, LSW loses it at S = 8; iterations within [T1/S, T1]; gain rises."""
    seeds(tmp_path, "cifar10", "adascale", 1, [74.0, 74.4, 73.6], iterations=100)
    seeds(tmp_path, "cifar10", "adascale", 8, [74.1, 73.5, 74.3], iterations=20, T1=100)
    seeds(tmp_path, "cifar10", "lsw", 1, [74.0, 74.4, 73.6], iterations=100)
    seeds(tmp_path, "cifar10", "lsw", 8, [60.3, 61.5, 59.1], iterations=13, T1=100)
    seeds(tmp_path, "cifar10", "adascale", "elastic-up", [74.0, 73.8], iterations=30, T1=100)
    return tmp_path


def test_checks_hold_on_a_paperlike_folder(paperlike):
    assert status(paperlike, "i")[0] == HOLDS
    st, detail = status(paperlike, "ii")
    assert st == HOLDS and "S=8: 60.30 ± 1.20 (n=3) vs 74.00 ± 0.40 (n=3), p = " in detail
    st, detail = status(paperlike, "iii")
    assert st == HOLDS and "S=8: 20 in [13, 100]" in detail
    assert status(paperlike, "iv")[0] == HOLDS
    st, detail = status(paperlike, "v")  # the elastic schedule's largest S is 4: no fixed S=4 run, so S = 1
    assert st == HOLDS and "vs S=1" in detail
    assert "AdaScale within noise" in text(findings(quiet_load(paperlike)))


def test_checks_fail_where_the_paper_does_not_hold(tmp_path):
    seeds(tmp_path, "cifar10", "adascale", 1, [74.0, 74.4, 73.6], iterations=100)
    seeds(tmp_path, "cifar10", "adascale", 4, [60.0, 61.0, 59.0], iterations=120, T1=100, gain_rises=False)
    seeds(tmp_path, "cifar10", "adascale", "elastic-up", [50.0, 51.0], iterations=30, T1=100)
    seeds(tmp_path, "cifar10", "lsw", 1, [74.0, 74.4, 73.6], iterations=100)
    seeds(tmp_path, "cifar10", "lsw", 4, [74.2, 74.0, 74.4], iterations=25, T1=100)
    st, detail = status(tmp_path, "i")
    assert st == FAILS and "S=4: 60.00 ± 1.00 (n=3) vs 74.00 ± 0.40 (n=3)" in detail
    assert status(tmp_path, "ii")[0] == FAILS  # LSW kept its accuracy
    st, detail = status(tmp_path, "iii")
    assert st == FAILS and "S=4: 120 in [25, 100] (3 outside)" in detail  # more than T1 iterations
    assert status(tmp_path, "iv")[0] == FAILS  # the gain falls
    st, detail = status(tmp_path, "v")  # elastic-up (largest S 4) far below the fixed S = 4 runs
    assert st == FAILS and "elastic-up vs S=4" in detail


def test_one_seed_is_not_enough_but_hard_checks_still_run(tmp_path):
    write_run(tmp_path, "cifar10", "adascale", 1, 0, val=74.0, iterations=100)
    write_run(tmp_path, "cifar10", "adascale", 8, 0, val=60.0, iterations=20, T1=100)
    write_run(tmp_path, "cifar10", "lsw", 1, 0, val=74.0, iterations=100)
    write_run(tmp_path, "cifar10", "lsw", 8, 0, status="diverged", iterations=5, T1=100)
    assert status(tmp_path, "i")[0] == SEEDS
    st, detail = status(tmp_path, "ii")  # a diverged LSW seed is LSW degrading, whatever the seed count
    assert st == HOLDS and "diverged" in detail
    assert status(tmp_path, "iii")[0] == HOLDS
    assert status(tmp_path, "v")[0] == NOT_RUN


def test_the_shared_scale_one_run_is_lsws_baseline(tmp_path):
    """A matrix runs S = 1 once, as adascale: LSW's check compares its largest S with that run."""
    seeds(tmp_path, "cifar10", "adascale", 1, [74.0, 74.4, 73.6], iterations=100)
    seeds(tmp_path, "cifar10", "lsw", 8, [60.2, 60.4, 60.3], iterations=13, T1=100)
    st, detail = status(tmp_path, "ii")
    assert st == HOLDS and "S=8: 60.30" in detail and "vs 74.00" in detail
