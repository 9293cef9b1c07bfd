"""logreg's recorded sweep target is what the textbook recipe computes (docs/design.md §1)."""

from __future__ import annotations

import pytest

from tasks.logreg import compute_target_loss
from tasks.presets.logreg import TARGET_LOSS


@pytest.mark.slow
def test_recorded_target_loss_is_the_recomputed_one() -> None:
    assert compute_target_loss() == pytest.approx(TARGET_LOSS, rel=1e-12, abs=0)
