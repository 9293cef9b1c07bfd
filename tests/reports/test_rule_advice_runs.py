"""advise's rule advice against real runs (the CLI end to end: advise, then submit its verify.yaml): on logreg at
lr0 = 1, where LSW loses S = 1's quality advise has called it unsafe or at risk, naming the mechanism; where LSW
keeps it, not unsafe. And the cost of the advice stated, GPU-hours from --throughput or --flops."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from bench.cli import main
from tasks.presets.logreg import LOSS_MARGIN, OPTIMUM

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(900), pytest.mark.long]  # CI stage 2
ARGS = ["--task", "logreg", "--scales", "1,2,32", "--probe-scale", "16", "--seeds", "1", "--set", "lr_schedule.lr0=1"]


@pytest.fixture(scope="module")
def steep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """advise on logreg at lr0 = 1 (S·lr0 past 2/λ_max at S = 32), its verification at S = 1, 2, 32 run."""
    out = tmp_path_factory.mktemp("steep") / "out"
    assert main(["advise", *ARGS, "--verify-scales", "1,2,32", "--out", str(out)]) == 0
    assert main(["submit", str(out / "verify.yaml"), "--executor", "local", "--out", str(out)]) == 0
    return out


def final_losses(out: Path) -> dict[tuple[str, int], float]:
    """(rule, S) -> the final full loss of the verification's seed-0 runs (S = 1: the shared AdaScale run)."""
    losses = {}
    for path in out.glob("logreg/*/s*/seed0,*/summary.json"):
        s = json.loads(path.read_text())
        losses[(s["method"], int(s["scale"]))] = float(s["val_metric"])
    return losses


def keeps_quality(loss: float, base: float) -> bool:
    """The card's margin (tasks.presets.logreg.LOSS_MARGIN): excess loss over the optimum at most (1 + δ) times
    S = 1's."""
    return loss - OPTIMUM <= (1 + LOSS_MARGIN) * (base - OPTIMUM)


def test_lsw_flagged_where_it_loses_quality_and_not_unsafe_where_it_keeps_it(steep: Path) -> None:
    losses = final_losses(steep)
    verdicts = pd.read_csv(steep / "rule_advice.csv").set_index(["rule", "scale"])
    base = losses[("adascale", 1)]
    for S in (2, 32):
        v = verdicts.loc[("lsw", S)]
        if keeps_quality(losses[("lsw", S)], base):
            assert v["verdict"] != "unsafe", (S, losses[("lsw", S)], base, v["mechanism"])
        else:
            assert v["verdict"] in ("unsafe", "at risk"), (S, losses[("lsw", S)], base, v["mechanism"])
            assert v["mechanism"].startswith(("stability", "noise scale"))
    # both sides occur here: the test can fail either way
    assert keeps_quality(losses[("lsw", 2)], base) and not keeps_quality(losses[("lsw", 32)], base), losses
    assert verdicts.loc[("lsw", 32), "verdict"] == "unsafe"
    assert verdicts.loc[("lsw", 32), "mechanism"].startswith("stability")
    text = (steep / "advice.md").read_text()
    assert "## Rule advice" in text and "| lsw | 32 | **unsafe** | stability: lr 32" in text
    sharp = pd.read_csv(steep / "sharpness.csv")
    assert sharp["iteration"].iloc[0] == 0 and len(sharp) >= 3
    assert (sharp["sharpness_lo"] <= sharp["sharpness"]).all()


def test_the_cost_is_stated_and_priced_where_a_rate_is_given(steep: Path, tmp_path: Path) -> None:
    """Without a rate for tiny logreg the cost says so and GPU-hours are '–'; --throughput prices the probe at
    its examples ÷ the rate, --flops at the counted FLOPs × the assumed share of the peak."""
    text = (steep / "advice.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("Cost of this advice"))
    its = {
        (S, seed): json.loads(next(steep.glob(f"logreg/adascale/s{S}/seed{seed},*/summary.json")).read_text())[
            "iterations"
        ]
        for S in (16, 4, 2)
        for seed in (1000, 1001)
    }  # the probes: S = 16, 16/4 and 16/16 → 2 (bench.core.algo.transfer.probe_scales), seeds 1000 and 1001
    high, mid, low = (its[S, 1000] + its[S, 1001] for S in (16, 4, 2))
    examples = (high * 16 + mid * 4 + low * 2) * 32
    want = (
        f"the probes, {high + mid + low:,} iterations ({high:,} at S = 16 over 2 seeds, {mid:,} at S = 4 over 2 seeds, "
        f"{low:,} at S = 2 over 2 seeds), "
    )
    assert want + f"{examples:,} examples (GPU-hours –)" in line, line
    assert "no rate known for logreg (tiny)" in line and "Hessian-vector products" in line
    rate = tmp_path / "throughput.csv"
    rate.write_text("task,preset,examples_per_s,device,measured\nlogreg,tiny,1000,my GPU,today\n")
    assert main(["advise", *ARGS, "--out", str(steep), "--throughput", str(rate)]) == 0
    line = next(x for x in (steep / "advice.md").read_text().splitlines() if x.startswith("Cost of this advice"))
    assert f"{examples:,} examples ({examples / 1000 / 3600:.3g} GPU-hours)" in line, line
    table = pd.read_csv(steep / "advice.csv")
    assert table["gpu_hours"].notna().all()
    flops = tmp_path / "flops.csv"
    flops.write_text("task,preset,batch_size,flops_per_microbatch\nlogreg,tiny,32,3840\n")
    assert main(["advise", *ARGS, "--out", str(steep), "--flops", str(flops)]) == 0
    assert pd.read_csv(steep / "advice.csv")["gpu_hours"].notna().all()
    assert math.isfinite(float(pd.read_csv(steep / "advice.csv")["gpu_hours"].iloc[-1]))
